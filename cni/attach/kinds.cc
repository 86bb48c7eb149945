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

Network read_network(const std::string& text, const conf::ArgsView& args, conf::Purpose purpose) {
    Network n{conf::parse(text, args, kProtocol, purpose), nullptr};
    n.kind = make_attachment(n.conf, purpose);
    return n;
}

conf::NetConf parse_config(const std::string& text, const conf::ArgsView& args, conf::Purpose purpose) {
    return read_network(text, args, purpose).conf;
}

}  // namespace cni
