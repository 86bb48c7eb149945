// The table of attachment kinds. Adding a kind is one file and one line here.
#include <string>
#include <vector>

#include "cni/attach/attachment.h"
#include "cni/attach/sriov_state.h"
#include "cni/result.h"
#include "cni/version.h"
#include "conf/fields.h"
#include "netns/netlink.h"
#include "netns/sysfs.h"

namespace cni {

namespace {

struct KindEntry {
    const char* name;   ///< the value of "attachment" ("delegate": the "delegate" key)
    std::unique_ptr<Attachment> (*make)(conf::NetConf&, conf::Purpose);
    /// Top-level keys no other kind may have: a mistake anywhere else. (deviceID and
    /// pciBusID are not among them: Multus injects them into any config.)
    std::vector<const char*> own_keys;
};

const KindEntry kKinds[] = {
    {"veth", make_veth, {"bridge"}},
    {"macvlan", make_macvlan, {"master"}},
    {"sriov", make_sriov, {"vlan", "vlanQoS", "vlanProto", "spoofchk", "trust", "link_state", "min_tx_rate", "max_tx_rate"}},
    {"delegate", make_delegate, {}},
};

/// Code 7 for a key that belongs to another kind than the one the config chose.
void check_foreign_keys(conf::NetConf& c, const KindEntry& chosen, conf::Purpose purpose) {
    for (auto& k : kKinds) {
        if (&k == &chosen) continue;
        for (auto* key : k.own_keys) {
            if (!conf::member(c.raw, key)) continue;
            std::string err = std::string(key) + ": only valid with attachment " + k.name;
            if (purpose != conf::Purpose::Teardown) throw Error(kInvalidConfig, err);
            c.ignored.push_back(err);
        }
    }
}

/// What every kind that runs topocni's IPAM must hold for ADD and CHECK.
void check_ipam_fits(const conf::NetConf& c, const Attachment& kind) {
    if (kind.runs_ipam() && !at_least(c.cni_version, "0.3.0") && c.ipam_type.empty())
        conf::bad("cniVersion", c.cni_version + " cannot express an L2-only result; set ipam or use 0.3.0 or newer");
}

/// topology.minFreeAddresses counts a host-local pool: the kind knows where its IPAM is.
void check_pool_countable(const conf::NetConf& c, const Attachment& kind) {
    if (!c.placement || !c.placement->topology || !c.placement->topology->min_free_addresses) return;
    std::string type;
    if (auto* ipam = kind.ipam_config(c))
        if (auto* t = conf::member(*ipam, "type"); t && t->is_string()) type = t->get<std::string>();
    if (type != "host-local")
        conf::bad("topology.minFreeAddresses", "needs host-local ipam" +
                                                   (kind.ipam_key() == "ipam" ? std::string() : " in " + kind.ipam_key()) +
                                                   " (other IPAM plugins cannot be counted)");
}

}  // namespace

const nlohmann::json* Attachment::ipam_config(const conf::NetConf& c) const { return conf::member(c.raw, "ipam"); }

std::unique_ptr<Attachment> make_attachment(conf::NetConf& c, conf::Purpose purpose) {
    const KindEntry* entry = nullptr;
    for (auto& k : kKinds)
        if (c.kind == k.name) entry = &k;
    if (!entry) {
        std::string err = "attachment: '" + c.kind + "' is not one of veth, macvlan, sriov";
        if (purpose != conf::Purpose::Teardown) throw Error(kInvalidConfig, err);
        c.ignored.push_back(err);
        entry = &kKinds[0];
    }
    check_foreign_keys(c, *entry, purpose);
    auto kind = entry->make(c, purpose);
    if (purpose == conf::Purpose::Setup) {
        check_pool_countable(c, *kind);
        check_ipam_fits(c, *kind);
    }
    return kind;
}

// The verb's part of the result: IPAM's addresses (on the pod interface the kind
// created, when there is one), routes and dns, with the config's dns over IPAM's.
void take_ipam_result(Result& result, const Result& ipam, std::optional<int> pod_interface, const Dns& dns) {
    result.ips = ipam.ips;
    for (auto& ip : result.ips) ip.interface = pod_interface;
    result.routes = ipam.routes;
    result.dns = dns.empty() ? ipam.dns : dns;
}

Network read_network(const std::string& text, const conf::ArgsView& args, conf::Purpose purpose) {
    Network n{conf::parse(text, args, kProtocol, purpose), nullptr};
    n.kind = make_attachment(n.conf, purpose);
    return n;
}

conf::NetConf parse_config(const std::string& text, const conf::ArgsView& args, conf::Purpose purpose) {
    return read_network(text, args, purpose).conf;
}

Subject placement_subject(const conf::NetConf& c, const Attachment& kind) {
    return {[&c, &kind] { return kind.device(c); }, [&c, &kind] { return kind.pool(c); }, kind.unshared_link()};
}

std::optional<std::string> device_id_in(const nlohmann::json& j) {
    auto text = [&](const nlohmann::json* v) -> std::optional<std::string> {
        if (!v || !v->is_string() || v->get<std::string>().empty()) return std::nullopt;
        return v->get<std::string>();
    };
    if (auto v = text(conf::member(j, "deviceID"))) return v;
    if (auto v = text(conf::member(j, "pciBusID"))) return v;
    if (auto* rc = conf::member(j, "runtimeConfig"); rc && rc->is_object()) return text(conf::member_ci(*rc, "deviceID"));
    return std::nullopt;
}

Device pci_device(const std::string& pci, const conf::NetConf& c) {
    const std::string& sysfs = c.sysfs_root;
    Device d;
    if (!netns::sysfs::is_pci_address(pci)) {
        d.none_why = "deviceID '" + pci + "' is not a PCI address";
        return d;
    }
    d.kind = Device::Kind::Pci;
    d.name = pci;
    d.label = (netns::sysfs::Tree(sysfs).physfn(pci) ? "VF " : "PCI device ") + pci;
    // A VF in use has a state record, whichever network attached it.
    d.in_use_on_pf = [state_dir = c.state_dir, sysfs, pci](const std::string& pf) {
        return state::vfs_in_use(state_dir, sysfs, pf, pci);
    };
    return d;
}

Device master_device(std::optional<std::string> master, const std::string& what, bool default_route, bool in_pod,
                     const std::string& link_kind) {
    Device d;
    d.link_kind = link_kind;
    if (!master && default_route) {
        netns::nl::Socket s;
        master = netns::nl::default_route_interface(s);
        if (!master) {
            d.none_why = what + ": no master set and the node has no default route";
            return d;
        }
    }
    if (!master) {
        d.none_why = what + " names no device (no deviceID, pciBusID or master)";
        return d;
    }
    if (in_pod) {
        d.none_why = "master '" + *master + "' is in the pod netns (linkInContainer), out of the node's sysfs";
        return d;
    }
    d.kind = Device::Kind::Master;
    d.name = *master;
    d.label = "master '" + *master + "'";
    return d;
}

const Interface& expected_pod_interface(const Context& ctx, const Result& prev) {
    for (auto& i : prev.interfaces)
        if (i.name == ctx.env.ifname && i.sandbox == ctx.env.netns) return i;
    throw Error(kCheckFailed, "prevResult has no interface '" + ctx.env.ifname + "' in sandbox '" + ctx.env.netns + "'");
}

}  // namespace cni
