// Built-in host-local IPAM, on-disk compatible with the reference plugin
// (containernetworking/plugins plugins/ipam/host-local): one file per reserved address
// named by the address, holding "<containerID>\r\n<ifname>"; "last_reserved_ip.<set>"
// cursors; a "lock" file flocked around every operation.
#pragma once
#include <chrono>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "base/result_model.h"
#include "base/ip.h"

namespace ipam {

struct Range {
    base::IpNet subnet;          ///< network address / prefix
    base::IpAddr start, end;     ///< inclusive; defaults: network+1 .. last-1 (v4) / last (v6)
    base::IpAddr gateway;        ///< default: network+1
    bool contains(const base::IpAddr& a) const;   ///< in [start, end]
};
using RangeSet = std::vector<Range>;

struct Config {
    std::vector<RangeSet> ranges;           ///< runtime ipRanges first, then legacy subnet, then ranges
    std::vector<base::Route> routes;
    std::string data_dir = "/var/lib/cni/networks";
    std::optional<std::string> resolv_conf;
    std::chrono::milliseconds lock_timeout{10000};
    bool fsync = false;                     ///< make reservations survive a power loss (see disk_store.cc)
};

/// Parses the "ipam" object of a network config. `whole` is the full config (for
/// runtimeConfig.ipRanges). Every error is ipam::Error Invalid whose message names the key
/// by its path, e.g. "ipam.ranges[0][0].subnet: ...". `cni_version` drives the
/// "at most one v4 and one v6 set before 0.3.0" rule.
Config parse_config(const nlohmann::json& whole, const std::string& cni_version);

/// One reservation on disk.
struct Reservation {
    base::IpAddr ip;
    std::string container_id;
    std::string ifname;     ///< empty for legacy (pre-2018) id-only files
};

/// The attachment that owns addresses.
struct Owner {
    std::string container_id;
    std::string ifname;
    bool operator==(const Owner&) const = default;
};

struct CursorMove;

/// What undo() needs to take an allocation back whole: the owner, the cursors it moved
/// and the directories it created.
struct AllocationUndo {
    Owner owner;
    std::vector<CursorMove> moves;
    std::vector<std::string> created;
};

class HostLocal {
public:
    /// `network` is the config's `name`; it is validated (no '/', not "." or "..").
    HostLocal(Config cfg, std::string network);

    /// One address per range set. Requested IPs (CNI_ARGS IP=, args.cni.ips,
    /// runtimeConfig.ips; prefixes ignored) must each fall in a set. A retried ADD for the
    /// same owner returns the addresses it already holds. Throws code 101 when a set is
    /// full, 102 when a requested address is taken by another owner, 11 on lock timeout.
    /// On failure nothing stays reserved by this call.
    /// `undo`, when given, is filled for undo().
    base::Result allocate(const Owner& owner, const std::vector<base::IpAddr>& requested, AllocationUndo* undo = nullptr);
    /// Takes back an allocation after a later step of ADD failed: releases the owner's
    /// addresses, puts each moved cursor back unless another ADD moved it since, and
    /// removes the directories the allocation created when they are empty again.
    void undo(const AllocationUndo& u);
    /// Code 7 when a requested address is outside every range set or is a gateway;
    /// touches nothing (ADD's checks before any change).
    void check_requested(const std::vector<base::IpAddr>& requested) const;
    /// Releases every address of the owner (also legacy id-only files). Idempotent;
    /// creates nothing when the store does not exist.
    void release(const Owner& owner);
    /// Addresses the owner holds (error code 103 when none).
    std::vector<Reservation> find(const Owner& owner);
    /// Releases every reservation whose owner is not in `valid`. Returns what it released.
    std::vector<Reservation> gc(const std::vector<Owner>& valid);
    /// Throws code 50 naming the reason when a range set is full or the store is not writable.
    void status();
    /// Every reservation of this network (none when the store does not exist).
    std::vector<Reservation> list();

    std::string dir() const;       ///< <dataDir>/<network>
    std::string own_dir() const;   ///< <dataDir>/.topocni/<network>: our index and temp files

private:
    std::vector<std::string> within_data_dir(const std::vector<std::string>& created) const;

    Config cfg_;
    std::string network_;
};

}  // namespace ipam
