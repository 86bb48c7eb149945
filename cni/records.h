// Attachment records: what ADD attached, where (netns) and its result, one small JSON
// file per attachment under <stateDir>/attachments/<network>/. They let the operator CLI
// tell whether an address's owner still exists, give `topocni exec` the prevResult for
// CHECK and DEL (as libcni's cache does), and let GC find leftovers. A record is a
// hint: losing one never breaks DEL.
#pragma once
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace cni {

struct Record {
    std::string network, container_id, ifname, netns;
    nlohmann::json result;          ///< the ADD result as printed
};

std::string records_dir(const std::string& state_dir, const std::string& network);
/// Written atomically (temp + rename); errors are logged, not thrown.
void write_record(const std::string& state_dir, const Record& r);
void remove_record(const std::string& state_dir, const std::string& network, const std::string& container_id,
                   const std::string& ifname);
std::optional<Record> read_record(const std::string& state_dir, const std::string& network,
                                  const std::string& container_id, const std::string& ifname);
std::vector<Record> list_records(const std::string& state_dir, const std::string& network);
/// True when `path` still names a network namespace.
bool netns_exists(const std::string& path);

}  // namespace cni
