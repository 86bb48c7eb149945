// How full a host-local pool is, per range set: for topology.minFreeAddresses and the
// operator's metrics. Reads only: a pool nobody used yet is not created by looking.
#pragma once
#include <string>
#include <vector>

#include "ipam/host_local.h"

namespace ipam {

struct SetUsage {
    std::string range_set;              ///< "10.0.0.2-10.0.0.254" (the reference's RangeSet.String())
    unsigned __int128 size = 0;         ///< addresses the allocator may hand out (gateways excluded)
    std::vector<Reservation> held;      ///< reservations inside this set
};

std::vector<SetUsage> pool_usage(const Config& cfg, const std::string& network);
/// The same sizes, nothing held, without reading the store: a pool as its config makes it
/// (a facts document judged on another machine has no store here to read).
std::vector<SetUsage> pool_sizes(const Config& cfg);

/// Addresses of a set that nobody holds.
unsigned __int128 free_addresses(unsigned __int128 size, unsigned __int128 held);

/// Free addresses of a set once the attachment (container_id, ifname) has one there: one
/// fewer unless it already holds one (a retried ADD, a CHECK). An empty container_id is
/// nobody yet.
unsigned __int128 free_after_allocation(const SetUsage& u, const std::string& container_id, const std::string& ifname);

/// "12", or "more than 2^62" for pools no label or number should carry in full.
std::string count_text(unsigned __int128 v);

}  // namespace ipam
