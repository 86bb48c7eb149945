// The owner index: "<dir>/.topocni/owners/<name>", one small file per attachment
// listing the addresses it reserved, so ADD retries, CHECK and DEL need not read every
// reservation file. It is only a hint: callers check each listed address's reservation
// file before trusting it. The content never contains "\r", so the reference plugin's
// directory walk (which compares every file to "<id>\r\n<ifname>" or a bare id) can
// never mistake an index file for a reservation.
#pragma once
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "ipam/host_local.h"

namespace ipam {

/// "<cid>_<ifname>" with bytes outside [A-Za-z0-9.-] %-escaped (so distinct owners
/// never share a name, and the name never starts with '.'); "h-<128-bit hash>" when
/// that would be longer than 200 bytes.
std::string index_file_name(const Owner& o);

struct OwnerIndex {
    Owner owner;
    std::vector<base::IpAddr> ips;
};

/// The file's bytes: a header line, "cid=", "ifname=" and one "ip=" line per address.
std::string format_index(const OwnerIndex& idx);
/// nullopt when the bytes are not an index file.
std::optional<OwnerIndex> parse_index(std::string_view content);

}  // namespace ipam
