// Attachment records: what ADD attached, where (netns) and its result, one small JSON
// file per attachment under <stateDir>/attachments/<network>/. They let the operator CLI
// tell whether an address's owner still exists, give `topocni exec` the prevResult for
// CHECK and DEL (as libcni's cache does), and let GC find leftovers. A record is a
// hint: losing one never breaks DEL.
#pragma once
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "base/flock.h"

namespace cni {

struct Record {
    std::string network, container_id, ifname, netns;
    nlohmann::json result;          ///< the ADD result as printed
    int64_t completed_ns = 0;       ///< CLOCK_BOOTTIME when ADD finished (0: intent only, in flight or died)
    nlohmann::json config;          ///< the network config ADD ran with (record_config()): what `topocni collect` DELs with
    std::string cni_path;           ///< CNI_PATH of the ADD, for the DEL of its IPAM or delegate plugin
    std::string cni_args;           ///< CNI_ARGS of the ADD
    std::string link;               ///< the shared link it uses (master, PF PCI address, bridge): for metrics
};

/// The config as kept in a record: all of it but what belongs to one call (prevResult,
/// GC's list), so that a DEL can be run later without the runtime.
nlohmann::json record_config(const nlohmann::json& raw);

std::string records_dir(const std::string& state_dir, const std::string& network);
/// Written so that a kill leaves the old record or the new one (see records.cc); errors
/// are logged, not thrown.
void write_record(const std::string& state_dir, const Record& r);
/// Unlinks the record; a missing one is fine.
void remove_record(const std::string& state_dir, const std::string& network, const std::string& container_id,
                   const std::string& ifname);
std::optional<Record> read_record(const std::string& state_dir, const std::string& network,
                                  const std::string& container_id, const std::string& ifname);
std::vector<Record> list_records(const std::string& state_dir, const std::string& network);
/// Serialises GC against ADD for one network: every ADD holds it shared for its whole
/// run, GC holds it exclusively, so GC never sees (and never releases) an attachment
/// that is half-way through ADD. Creates the network's records directory when missing.
/// Waits are bounded: LockTimeout (code 11) after `timeout_ms`.
base::DirLock lock_network(const std::string& state_dir, const std::string& network, base::DirLock::Mode mode,
                           int timeout_ms);

}  // namespace cni
