// sysctl reads and writes under /proc/sys, in the calling thread's netns. Names use
// the slash form ("net/ipv4/conf/eth0/arp_notify") so interface names with dots survive.
#pragma once
#include <optional>
#include <string>

namespace netns::sysctl {

/// Value without the trailing newline; nullopt when the key does not exist.
std::optional<std::string> get(const std::string& name);
/// Throws netns::Error Failed (with errno) on failure.
void set(const std::string& name, const std::string& value);
/// Writes only when the current value differs (avoids needless writes to host-wide keys).
void ensure(const std::string& name, const std::string& value);

}  // namespace netns::sysctl
