// Host names to addresses without glibc's NSS: a static binary's getaddrinfo would load
// the build machine's NSS modules at run time. c-ares reads the node's /etc/hosts first,
// then asks the DNS servers in its /etc/resolv.conf, as the resolver does.
#pragma once
#include <chrono>
#include <string>
#include <vector>

namespace kube::resolve {

/// The addresses of `host` (an IPv4 or IPv6 literal, brackets allowed, or a name), as
/// text, IPv4 first. Code 11 when DNS does not answer within `timeout`; code 7 when the
/// name exists nowhere.
std::vector<std::string> addresses(const std::string& host, std::chrono::milliseconds timeout);

}  // namespace kube::resolve
