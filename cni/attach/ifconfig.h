// Applying an IPAM result inside the pod netns, and verifying it for CHECK. Called with
// the thread already inside the pod netns and a socket opened there.
#pragma once
#include <string>

#include "cni/result.h"
#include "netns/netlink.h"

namespace cni {

enum class Routing {
    PointToPoint,   ///< like ptp: everything, even the subnet, goes via the gateway
    Subnet,         ///< like bridge/macvlan: the subnet is on-link
};

/// Adds addresses (no DAD wait for IPv6: IPAM guarantees uniqueness), brings the link
/// up and adds routes. Each route's gateway defaults to the same-family IP's gateway.
void configure_pod_ips(netns::nl::Socket& s, int ifindex, const std::string& ifname, const Result& r, Routing mode);
/// Throws kCheckFailed naming the first address or route of `r` that is missing.
void check_pod_ips(netns::nl::Socket& s, int ifindex, const std::string& ifname, const Result& r, Routing mode);
/// CHECK: the link `ifname` in the socket's netns, of `kind` ("" = any); kCheckFailed
/// naming the interface when it is missing or of another kind.
netns::nl::Link pod_link(netns::nl::Socket& s, const std::string& ifname, const std::string& kind);
/// Enables IPv6 on lo and the interface when the result has v6 addresses (new netns may
/// start with disable_ipv6=1), and keeps v6 addresses across down/up.
void enable_ipv6_if_needed(const std::string& ifname, const Result& r);

}  // namespace cni
