#include "cni/attach/ifconfig.h"

#include <linux/if_addr.h>
#include <linux/rtnetlink.h>

#include "cni/error.h"
#include "netns/sysctl.h"

namespace cni {

namespace nl = netns::nl;

namespace {

std::optional<base::IpAddr> gateway_for(const Result& r, int family) {
    for (auto& ip : r.ips)
        if (ip.address.addr.family == family && ip.gateway) return ip.gateway;
    return std::nullopt;
}

std::optional<base::IpAddr> source_for(const Result& r, int family) {
    for (auto& ip : r.ips)
        if (ip.address.addr.family == family) return ip.address.addr;
    return std::nullopt;
}

/// The routes a result asks for, with ptp's extra gateway and subnet routes first.
std::vector<nl::RouteSpec> wanted_routes(int ifindex, const Result& r, Routing mode) {
    std::vector<nl::RouteSpec> out;
    if (mode == Routing::PointToPoint) {
        // veth has no IFF_POINTOPOINT: make the gateway on-link and send even the subnet
        // through it, so pods on one node never ARP for each other directly.
        for (auto& ip : r.ips) {
            if (!ip.gateway) continue;
            nl::RouteSpec gw{.dst = base::host_prefix(*ip.gateway), .oif = ifindex, .src = ip.address.addr,
                             .scope = RT_SCOPE_LINK};
            nl::RouteSpec subnet{.dst = ip.address.network(), .gw = ip.gateway, .oif = ifindex, .src = ip.address.addr};
            out.push_back(gw);
            out.push_back(subnet);
        }
    }
    for (auto& rt : r.routes) {
        nl::RouteSpec s{.dst = rt.dst.network(), .gw = rt.gw, .oif = ifindex};
        if (!s.gw) s.gw = gateway_for(r, rt.dst.addr.family);
        if (mode == Routing::PointToPoint) s.src = source_for(r, rt.dst.addr.family);
        if (rt.priority) s.priority = static_cast<uint32_t>(*rt.priority);
        if (rt.table) s.table = static_cast<uint32_t>(*rt.table);
        if (rt.scope) s.scope = static_cast<uint8_t>(*rt.scope);
        if (rt.mtu) s.mtu = static_cast<uint32_t>(*rt.mtu);
        if (rt.advmss) s.advmss = static_cast<uint32_t>(*rt.advmss);
        out.push_back(s);
    }
    return out;
}

}  // namespace

void enable_ipv6_if_needed(const std::string& ifname, const Result& r) {
    bool v6 = false;
    for (auto& ip : r.ips) v6 = v6 || !ip.address.addr.is_v4();
    if (!v6) return;
    netns::sysctl::ensure("net/ipv6/conf/lo/disable_ipv6", "0");
    netns::sysctl::ensure("net/ipv6/conf/" + ifname + "/disable_ipv6", "0");
    netns::sysctl::ensure("net/ipv6/conf/" + ifname + "/keep_addr_on_down", "1");
}

void configure_pod_ips(nl::Socket& s, int ifindex, const std::string& ifname, const Result& r, Routing mode) {
    enable_ipv6_if_needed(ifname, r);
    for (auto& ip : r.ips) {
        // ptp: no kernel prefix route, the subnet goes via the gateway (added below).
        unsigned flags = IFA_F_NODAD;
        if (mode == Routing::PointToPoint) flags |= IFA_F_NOPREFIXROUTE;
        s.add_addr_flags(ifindex, ip.address, flags);
    }
    s.set_up(ifindex);
    for (auto& rt : wanted_routes(ifindex, r, mode)) s.add_route(rt);
    (void)ifname;
}

nl::Link pod_link(nl::Socket& s, const std::string& ifname, const std::string& kind) {
    auto l = s.get_link(ifname);
    if (!l) throw Error(kCheckFailed, "interface '" + ifname + "' is missing in the pod netns");
    if (!kind.empty() && l->kind != kind)
        throw Error(kCheckFailed, "interface '" + ifname + "' is a " + (l->kind.empty() ? "device" : l->kind) +
                                      ", not a " + kind);
    return *l;
}

void check_pod_ips(nl::Socket& s, int ifindex, const std::string& ifname, const Result& r, Routing mode) {
    auto addrs = s.list_addrs(AF_UNSPEC, ifindex);
    for (auto& ip : r.ips) {
        bool found = false;
        for (auto& a : addrs) found = found || (a.net.addr == ip.address.addr && a.net.prefix == ip.address.prefix);
        if (!found)
            throw Error(kCheckFailed, "address " + ip.address.str() + " is missing on '" + ifname + "'");
    }
    for (auto& want : wanted_routes(ifindex, r, mode)) {
        auto have = s.list_routes(want.dst.addr.family, ifindex, want.table);
        bool found = false;
        for (auto& h : have)
            found = found || (h.dst == want.dst && (!want.gw || h.gw == want.gw));
        if (!found)
            throw Error(kCheckFailed, "route to " + want.dst.str() + (want.gw ? " via " + want.gw->str() : "") +
                                          " is missing on '" + ifname + "'");
    }
}

}  // namespace cni
