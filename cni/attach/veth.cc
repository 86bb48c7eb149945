// veth attachment: a pair created from inside the pod netns with the peer placed in
// the node netns in the same request. Point-to-point routing like the reference ptp
// plugin, or the host end enslaved to a Linux bridge.
#include <linux/if_addr.h>
#include <linux/rtnetlink.h>
#include <net/if.h>

#include "cni/attach/attachment.h"
#include "cni/error.h"
#include "base/failpoint.h"
#include "cni/attach/host_name.h"
#include "cni/attach/ifconfig.h"
#include "cni/attach/shaping.h"
#include "conf/fields.h"
#include "netns/netlink.h"
#include "netns/sysctl.h"

namespace cni {

namespace nl = netns::nl;

namespace {

Interface describe(const nl::Link& l, const std::string& sandbox) {
    return Interface{.name = l.name, .mac = l.mac, .mtu = l.mtu, .sandbox = sandbox};
}

/// The keys of attachment veth.
struct VethKeys {
    std::optional<std::string> bridge;    ///< bridge: enslave the host end to this bridge
    bool is_gateway = false;              ///< isGateway: gateway addresses on the bridge
};

VethKeys read_veth_keys(const conf::NetConf& c, conf::Purpose purpose) {
    VethKeys k;
    k.bridge = conf::opt_string(c.raw, "bridge", "");
    if (k.bridge)
        if (auto why = base::ifname_problem(*k.bridge); !why.empty()) conf::bad("bridge", "'" + *k.bridge + "' " + why);
    k.is_gateway = conf::opt_bool(c.raw, "isGateway", "").value_or(false);
    if (k.is_gateway && !k.bridge) conf::bad("isGateway", "needs \"bridge\"");
    // What the pod sends is shaped by a tbf on the node's ifb.
    if (c.bandwidth) conf::require_tbf_rate(*c.bandwidth, c.bandwidth->egress, "egressRate");
    if (purpose == conf::Purpose::Setup && !k.bridge && c.ipam_type.empty())
        conf::bad("ipam", "a point-to-point veth needs ipam (or set \"bridge\" for an L2-only port)");
    return k;
}

class Veth : public Attachment {
public:
    explicit Veth(VethKeys keys) : keys_(std::move(keys)) {}

    placement::Device device(const conf::NetConf&) const override {
        placement::Device d;
        d.none_why = "attachment veth has no device";
        return d;
    }
    std::string unshared_link() const override { return keys_.bridge.value_or(""); }

    std::optional<int> add(Context& ctx, const Result& ipam, Result& result, base::Rollback& undo) override {
        const auto& c = ctx.conf;
        std::string host_name = host_link_name(ctx.env.container_id, ctx.env.ifname);
        Routing mode = keys_.bridge ? Routing::Subnet : Routing::PointToPoint;

        // The bridge first: it outlives this attachment, so it is not undone unless we made it.
        std::optional<nl::Link> bridge;
        if (keys_.bridge) bridge = ensure_bridge(ctx, ipam, undo);

        nl::Link pod_link;
        netns::with(*ctx.pod, [&] {
            nl::Socket s;
            s.create_veth({.name = ctx.env.ifname, .peer_name = host_name, .peer_netns_fd = ctx.host.fd(),
                           .mtu = c.mtu, .mac = c.mac});
            // Deleting either end removes both; the host end is found by name without state.
            undo.add("veth " + host_name, [host_name] { nl::Socket h; h.del_link(host_name); });
            base::failpoint("after-link-create");
            pod_link = *s.get_link(ctx.env.ifname);
            // Tell neighbours at once when the address moves to a new MAC (stale ARP, cni#194).
            netns::sysctl::set("net/ipv4/conf/" + ctx.env.ifname + "/arp_notify", "1");
            configure_pod_ips(s, pod_link.index, ctx.env.ifname, ipam, mode);
            base::failpoint("after-addresses");
        });

        nl::Socket h;
        auto host = h.get_link(host_name);
        if (!host) throw Error(kInternal, "host end '" + host_name + "' vanished after creation");
        h.set_alias(host->index, owner_alias(c.name, ctx.env.container_id, ctx.env.ifname));
        if (bridge) h.set_master(host->index, bridge->index);
        h.set_up(host->index);   // routes need the link up
        if (!bridge) configure_host_end(h, *host, ipam);
        base::failpoint("after-host-routes");
        shape_host_end(ctx, host_name, undo);
        base::failpoint("after-shaping");
        enable_forwarding(ipam);

        if (bridge) result.interfaces.push_back(describe(*h.get_link(bridge->index), ""));
        result.interfaces.push_back(describe(*host, ""));
        result.interfaces.push_back(describe(pod_link, ctx.env.netns));
        return static_cast<int>(result.interfaces.size()) - 1;
    }

    void del(Context& ctx) override {
        remove_pair(ctx);
        unshape(ctx, false);   // the node's ifb; the host end's qdiscs go with the veth
    }

    void check(Context& ctx, const Result& prev) override {
        std::string host_name = host_link_name(ctx.env.container_id, ctx.env.ifname);
        const Interface& want = expected_pod_interface(prev, ctx.env.ifname, ctx.env.netns);
        Routing mode = keys_.bridge ? Routing::Subnet : Routing::PointToPoint;
        int pod_index = 0;
        netns::with(*ctx.pod, [&] {
            nl::Socket s;
            const nl::Link l = pod_link(s, ctx.env.ifname, "veth");
            if (!want.mac.empty() && l.mac != want.mac)
                throw Error(kCheckFailed, "interface '" + ctx.env.ifname + "' has MAC " + l.mac + ", prevResult says " +
                                              want.mac);
            if (!(l.flags & IFF_UP)) throw Error(kCheckFailed, "interface '" + ctx.env.ifname + "' is down");
            pod_index = l.index;
            check_pod_ips(s, l.index, ctx.env.ifname, prev, mode);
        });
        nl::Socket h;
        auto host = h.get_link(host_name);
        if (!host || host->kind != "veth")
            throw Error(kCheckFailed, "host end '" + host_name + "' of '" + ctx.env.ifname + "' is missing");
        if (host->link != pod_index)
            throw Error(kCheckFailed, "host end '" + host_name + "' is not the peer of '" + ctx.env.ifname + "'");
        if (keys_.bridge) {
            auto br = h.get_link(*keys_.bridge);
            if (!br || br->kind != "bridge") throw Error(kCheckFailed, "bridge '" + *keys_.bridge + "' is missing");
            if (host->master != br->index)
                throw Error(kCheckFailed, "host end '" + host_name + "' is not a port of bridge '" + *keys_.bridge + "'");
        } else {
            for (auto& ip : prev.ips) {
                auto routes = h.list_routes(ip.address.addr.family, host->index);
                bool found = false;
                for (auto& r : routes) found = found || r.dst == base::host_prefix(ip.address.addr);
                if (!found)
                    throw Error(kCheckFailed, "host route to " + ip.address.addr.str() + " via '" + host_name +
                                                  "' is missing");
            }
        }
        check_host_end_shaping(ctx, host_name);
    }

    void gc(Context& ctx) override {
        gc_host_links(ctx, "veth");
        gc_host_links(ctx, "ifb");   // the node-side ifb of a shaped veth
    }

private:
    static void remove_pair(Context& ctx) {
        std::string host_name = host_link_name(ctx.env.container_id, ctx.env.ifname);
        nl::Socket h;
        if (auto l = h.get_link(host_name); l && l->kind == "veth") {
            h.del_link(l->index);
            return;
        }
        // The host end is gone or was renamed; remove the pod end if it is still there and
        // this attachment's record says ADD made it (CNI_IFNAME in a netns may as well be
        // another attachment's, e.g. after an ADD refused because the name was taken).
        if (ctx.pod && read_record(ctx.conf.state_dir, ctx.conf.name, ctx.env.container_id, ctx.env.ifname)) {
            netns::with(*ctx.pod, [&] {
                nl::Socket s;
                if (auto l = s.get_link(ctx.env.ifname); l && l->kind == "veth") s.del_link(l->index);
            });
        }
    }

    nl::Link ensure_bridge(Context& ctx, const Result& ipam, base::Rollback& undo) {
        nl::Socket h;
        // The usual case, a bridge that an earlier ADD made, costs one lookup; anything
        // else (missing, or a non-bridge under that name) goes through ensure_bridge.
        auto found = h.get_link(*keys_.bridge);
        bool existed = found.has_value();
        auto br = found && found->kind == "bridge" ? *found : h.ensure_bridge(*keys_.bridge, ctx.conf.mtu);
        if (!existed) {
            std::string name = br.name;
            undo.add("bridge " + name, [name] {
                // Only if no other attachment joined it meanwhile.
                nl::Socket s;
                auto b = s.get_link(name);
                if (!b) return;
                for (auto& l : s.list_links())
                    if (l.master == b->index) return;
                s.del_link(b->index);
            });
            netns::sysctl::ensure("net/ipv6/conf/" + name + "/accept_ra", "0");
        }
        if (!(br.flags & IFF_UP)) h.set_up(br.index);
        if (keys_.is_gateway) {
            // Gateway addresses live on the bridge with the subnet's prefix; they stay
            // with the bridge (shared by every pod on it), like the reference bridge plugin.
            for (auto& ip : ipam.ips)
                if (ip.gateway)
                    h.add_addr_flags(br.index, base::IpNet{*ip.gateway, ip.address.prefix}, IFA_F_NODAD);
        }
        return br;
    }

    static void configure_host_end(nl::Socket& h, const nl::Link& host, const Result& ipam) {
        // Routers answer for the gateway: the host end holds each gateway as a /32 (/128),
        // and a host route sends each pod address back down this veth.
        netns::sysctl::set("net/ipv6/conf/" + host.name + "/accept_ra", "0");
        for (auto& ip : ipam.ips) {
            if (ip.gateway) h.add_addr_flags(host.index, base::host_prefix(*ip.gateway), IFA_F_NODAD | IFA_F_NOPREFIXROUTE);
            h.add_route({.dst = base::host_prefix(ip.address.addr), .oif = host.index, .scope = RT_SCOPE_LINK});
        }
    }

    static void enable_forwarding(const Result& ipam) {
        for (auto& ip : ipam.ips) {
            if (ip.address.addr.is_v4()) netns::sysctl::ensure("net/ipv4/ip_forward", "1");
            else netns::sysctl::ensure("net/ipv6/conf/all/forwarding", "1");
        }
    }

    VethKeys keys_;
};

}  // namespace

std::unique_ptr<Attachment> make_veth(conf::NetConf& c, conf::Purpose purpose) {
    return std::make_unique<Veth>(read_keys<VethKeys>(c, purpose, [&] { return read_veth_keys(c, purpose); }));
}

}  // namespace cni
