// macvlan attachment: created straight into the pod netns off a node interface (the
// master), under a temporary name, then renamed to CNI_IFNAME inside the pod so it can
// never collide with a name on the node. Keys and defaults match the reference plugin.
#include <linux/if_addr.h>
#include <linux/if_link.h>
#include <linux/rtnetlink.h>
#include <net/if.h>

#include "cni/attach/attachment.h"
#include "cni/attach/device.h"
#include "base/hash.h"
#include "cni/error.h"
#include "base/failpoint.h"
#include "cni/attach/ifconfig.h"
#include "cni/attach/shaping.h"
#include "cni/pod_netns.h"
#include "conf/fields.h"
#include "netns/netlink.h"
#include "netns/sysctl.h"

namespace cni {

namespace nl = netns::nl;

uint32_t macvlan_mode_value(const std::string& mode) {
    if (mode == "private") return MACVLAN_MODE_PRIVATE;
    if (mode == "vepa") return MACVLAN_MODE_VEPA;
    if (mode == "passthru") return MACVLAN_MODE_PASSTHRU;
    return MACVLAN_MODE_BRIDGE;
}

namespace {

/// The keys of attachment macvlan, with the reference plugin's names and defaults.
struct MacvlanKeys {
    std::optional<std::string> master;    ///< master: default the interface of the node's default route
    std::string mode = "bridge";          ///< mode: bridge, private, vepa, passthru
    bool link_in_container = false;       ///< linkInContainer: look the master up inside the pod netns
};

MacvlanKeys read_macvlan_keys(const conf::NetConf& c) {
    MacvlanKeys k;
    k.master = conf::opt_string(c.raw, "master", "");
    auto mode = conf::opt_string(c.raw, "mode", "");
    k.link_in_container = conf::opt_bool(c.raw, "linkInContainer", "").value_or(false);
    if (k.master)
        if (auto why = base::ifname_problem(*k.master); !why.empty()) conf::bad("master", "'" + *k.master + "' " + why);
    if (mode && !mode->empty()) {
        if (*mode != "bridge" && *mode != "private" && *mode != "vepa" && *mode != "passthru")
            conf::bad("mode", "'" + *mode + "' is not one of bridge, private, vepa, passthru");
        k.mode = *mode;
    }
    // What the pod sends is shaped by a tbf on the macvlan in the pod.
    if (c.bandwidth) conf::require_tbf_rate(*c.bandwidth, c.bandwidth->egress, "egressRate");
    return k;
}

class Macvlan : public Attachment {
public:
    explicit Macvlan(MacvlanKeys keys) : keys_(std::move(keys)) {}

    void preflight(Context& ctx) override {
        find_master(ctx);
    }

    placement::Device device(const conf::NetConf&) const override {
        return master_device(keys_.master, "attachment macvlan", true, keys_.link_in_container, "macvlan");
    }

    // The scheduler side knows the master by name (or that ADD takes the default route's).
    placement::ScheduledDevice scheduled_device(const conf::NetConf&, const std::string&) const override {
        placement::ScheduledDevice d;
        d.kind = placement::ScheduledDevice::Kind::Master;
        d.master = keys_.master;
        d.master_in_pod = keys_.link_in_container;
        return d;
    }

    std::optional<int> add(Context& ctx, const Result& ipam, Result& result, base::Rollback& undo) override {
        const auto& c = ctx.conf;
        const std::string& ifname = ctx.env.ifname;
        std::string tmp = temp_name(ctx.env.container_id, ifname);
        nl::MacvlanSpec spec{.name = tmp, .master_index = master_.index, .mode = macvlan_mode_value(keys_.mode),
                             .mtu = c.mtu, .mac = c.mac, .netns_fd = ctx.pod->fd()};
        if (keys_.link_in_container) {
            spec.netns_fd = -1;
            netns::with(*ctx.pod, [&] { nl::Socket s; s.create_macvlan(spec); });
        } else {
            nl::Socket h;
            h.create_macvlan(spec);
        }
        base::failpoint("after-link-create");
        nl::Link link;
        netns::with(*ctx.pod, [&] {
            nl::Socket s;
            auto l = s.get_link(tmp);
            if (!l) throw Error(kInternal, "macvlan '" + tmp + "' vanished after creation");
            int index = l->index;
            auto pod = ctx.pod;
            undo.add("macvlan " + ifname, [pod, index] {
                netns::with(*pod, [&] { nl::Socket u; u.del_link(index); });
            });
            s.rename(index, ifname);
            base::failpoint("after-move");
            // Announce the address on up and MAC change: neighbours may cache an old MAC.
            netns::sysctl::set("net/ipv4/conf/" + ifname + "/arp_notify", "1");
            if (netns::sysctl::get("net/ipv6/conf/" + ifname + "/ndisc_notify"))
                netns::sysctl::set("net/ipv6/conf/" + ifname + "/ndisc_notify", "1");
            if (ipam.ips.empty()) s.set_up(index);
            else configure_pod_ips(s, index, ifname, ipam, Routing::Subnet);
            base::failpoint("after-addresses");
            link = *s.get_link(index);
        });
        shape_in_pod(ctx, true, undo);
        base::failpoint("after-shaping");
        result.interfaces.push_back({.name = link.name, .mac = link.mac, .mtu = link.mtu, .sandbox = ctx.env.netns});
        return static_cast<int>(result.interfaces.size()) - 1;
    }

    void del(Context& ctx) override {
        // Without the netns, it took the macvlan with it.
        if (ctx.pod) remove_from(*ctx.pod, ctx.env.container_id, ctx.env.ifname);
        unshape(ctx, true);
    }

    void gc(Context& ctx) override {
        // Stale attachments whose netns still exists: remove their macvlan from it.
        if (!ctx.stale) return;
        for (auto& r : *ctx.stale) {
            if (!netns_exists(r.netns)) continue;
            try {
                auto pod = netns::Handle::open(r.netns);
                remove_from(pod, r.container_id, r.ifname);
            } catch (...) {}
            // A pod netns that outlived its attachment keeps the ifb that shaped it in there.
            try { unshape_pod(r.netns, r.container_id, r.ifname); } catch (const base::Error&) {}
        }
    }

    void check(Context& ctx, const Result& prev) override {
        find_master(ctx);   // the master must still exist and fit the MTU
        const Interface& want = expected_pod_interface(prev, ctx.env.ifname, ctx.env.netns);
        netns::with(*ctx.pod, [&] {
            nl::Socket s;
            const nl::Link l = pod_link(s, ctx.env.ifname, "macvlan");
            if (l.macvlan_mode != macvlan_mode_value(keys_.mode))
                throw Error(kCheckFailed, "interface '" + ctx.env.ifname + "' is not in macvlan mode " + keys_.mode);
            if (l.link != master_.index)
                throw Error(kCheckFailed, "interface '" + ctx.env.ifname + "' is not on master '" + master_.name + "'");
            if (!want.mac.empty() && l.mac != want.mac)
                throw Error(kCheckFailed, "interface '" + ctx.env.ifname + "' has MAC " + l.mac +
                                              ", prevResult says " + want.mac);
            if (!prev.ips.empty()) check_pod_ips(s, l.index, ctx.env.ifname, prev, Routing::Subnet);
        });
        check_pod_shaping(ctx, true);
    }

private:
    /// The master, by name or the node's default route, on the node or in the pod; the MTU must fit.
    void find_master(Context& ctx) {
        const auto& c = ctx.conf;
        auto lookup = [&] {
            nl::Socket s;
            std::string name;
            if (keys_.master) name = *keys_.master;
            else if (auto d = nl::default_route_interface(s)) name = *d;
            else throw Error(kInvalidConfig, "master: not set and the node has no default route to take it from");
            auto l = s.get_link(name);
            if (!l) throw Error(kInvalidConfig, "master: interface '" + name + "' not found" +
                                                     (keys_.link_in_container ? " in the pod netns" : " on the node"));
            return *l;
        };
        master_ = keys_.link_in_container ? netns::with(*ctx.pod, lookup) : lookup();
        if (c.mtu && *c.mtu > master_.mtu)
            throw Error(kInvalidConfig, "mtu: " + std::to_string(*c.mtu) + " exceeds the MTU " +
                                            std::to_string(master_.mtu) + " of master '" + master_.name + "'");
    }

    /// Removes the macvlan under its final name, or under its temporary name when ADD
    /// died between creating and renaming it.
    static void remove_from(const netns::Handle& pod, const std::string& cid, const std::string& ifname) {
        netns::with(pod, [&] {
            nl::Socket s;
            for (auto& name : {ifname, temp_name(cid, ifname)})
                if (auto l = s.get_link(name); l && l->kind == "macvlan") s.del_link(l->index);
        });
    }

    static std::string temp_name(const std::string& cid, const std::string& ifname) {
        // Unique per attachment and not a name anyone would pick; 15 bytes.
        uint64_t h = base::fnv1a64(cid + "/" + ifname, base::kNameSeed);
        char buf[16];
        std::snprintf(buf, sizeof buf, "tmv%012llx", static_cast<unsigned long long>(h & 0xffffffffffffull));
        return buf;
    }

    MacvlanKeys keys_;
    nl::Link master_;
};

}  // namespace

std::unique_ptr<Attachment> make_macvlan(conf::NetConf& c, conf::Purpose purpose) {
    return std::make_unique<Macvlan>(read_keys<MacvlanKeys>(c, purpose, [&] { return read_macvlan_keys(c); }));
}

}  // namespace cni
