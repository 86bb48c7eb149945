// PF-side VF messages and the rtnetlink PfControl. Layout of a set request (as iproute2's
// `ip link set <pf> vf N ...` sends it):
//   ifinfomsg{index = PF}
//   IFLA_VFINFO_LIST
//     IFLA_VF_INFO
//       IFLA_VF_VLAN_LIST > IFLA_VF_VLAN_INFO{vf, vlan, qos, proto (big endian)}
//       | IFLA_VF_MAC{vf, mac[32]} | IFLA_VF_RATE{vf, min, max} | IFLA_VF_SPOOFCHK{vf, on}
//       | IFLA_VF_TRUST{vf, on} | IFLA_VF_LINK_STATE{vf, state}
#include "netns/vf.h"

#include <arpa/inet.h>
#include <linux/if_ether.h>
#include <linux/if_link.h>
#include <linux/rtnetlink.h>

#include <cstdio>
#include <cstring>

#include "netns/error.h"
#include "netns/mnl.h"
#include "netns/nlmsg.h"

using namespace netns::mnl;   // the libmnl-compatible helpers

namespace netns::vf {
namespace {

using nl::Attrs;
using nl::Msg;

/// The kernel reports -1 for spoofchk and trust when the driver does not say.
std::optional<bool> setting_flag(uint32_t v) {
    if (v == UINT32_MAX) return std::nullopt;
    return v != 0;
}

VfConfig parse_vf_info(const nlattr* info, size_t mac_len, int& index) {
    Attrs<IFLA_VF_MAX> tb;
    tb.parse_nested(info);
    VfConfig c;
    index = -1;
    if (auto* m = tb.get<ifla_vf_mac>(IFLA_VF_MAC)) {
        index = int(m->vf);
        c.mac = nl::format_mac(m->mac, std::min(mac_len, sizeof m->mac));
    }
    if (auto* v = tb.get<ifla_vf_vlan>(IFLA_VF_VLAN)) {
        index = int(v->vf);
        c.vlan = int(v->vlan);
        c.qos = int(v->qos);
        c.vlan_proto = ETH_P_8021Q;
    }
    if (tb[IFLA_VF_VLAN_LIST]) {
        // The list has one entry (MAX_VLAN_LIST_LEN); it adds the protocol.
        Attrs<IFLA_VF_VLAN_INFO_MAX> list;
        list.parse_nested(tb[IFLA_VF_VLAN_LIST]);
        if (auto* v = list.get<ifla_vf_vlan_info>(IFLA_VF_VLAN_INFO)) {
            c.vlan = int(v->vlan);
            c.qos = int(v->qos);
            c.vlan_proto = ntohs(v->vlan_proto);
        }
    }
    if (auto* r = tb.get<ifla_vf_rate>(IFLA_VF_RATE)) {
        c.min_tx_rate = r->min_tx_rate;
        c.max_tx_rate = r->max_tx_rate;
    }
    if (auto* s = tb.get<ifla_vf_spoofchk>(IFLA_VF_SPOOFCHK)) c.spoofchk = setting_flag(s->setting);
    if (auto* t = tb.get<ifla_vf_trust>(IFLA_VF_TRUST)) c.trust = setting_flag(t->setting);
    if (auto* l = tb.get<ifla_vf_link_state>(IFLA_VF_LINK_STATE)) c.link_state = l->link_state;
    return c;
}

int pf_index(nl::Socket& s, const std::string& pf) {
    auto l = s.get_link(pf);
    if (!l) throw netns::Error(netns::Error::Kind::Failed, "PF '" + pf + "' not found in the node netns", {}, ENODEV);
    return l->index;
}

class NetlinkPf : public PfControl {
public:
    std::optional<VfConfig> get(const std::string& pf, int vf) override {
        nl::Socket s;
        auto msg = build_get(pf_index(s, pf));
        std::map<int, VfConfig> vfs;
        s.request(reinterpret_cast<nlmsghdr*>(msg.data()), "read the VFs of PF '" + pf + "'",
                  [&](const nlmsghdr* h) { vfs = parse_vfs(h); });
        auto it = vfs.find(vf);
        if (it == vfs.end()) return std::nullopt;
        return it->second;
    }

    void set(const std::string& pf, int vf, Setting what, const VfConfig& c) override {
        nl::Socket s;
        auto msg = build_set(pf_index(s, pf), vf, what, c);
        s.request(reinterpret_cast<nlmsghdr*>(msg.data()),
                  "set " + describe(c, what) + " of VF " + std::to_string(vf) + " on PF '" + pf + "'");
    }
};

}  // namespace

bool has(const VfConfig& c, Setting s) {
    switch (s) {
        case Setting::Vlan: return c.vlan.has_value();
        case Setting::Mac: return c.mac.has_value();
        case Setting::Rate: return c.min_tx_rate || c.max_tx_rate;
        case Setting::Spoofchk: return c.spoofchk.has_value();
        case Setting::Trust: return c.trust.has_value();
        case Setting::LinkState: return c.link_state.has_value();
    }
    return false;
}

const char* setting_name(Setting s) {
    switch (s) {
        case Setting::Vlan: return "vlan";
        case Setting::Mac: return "mac";
        case Setting::Rate: return "tx rate";
        case Setting::Spoofchk: return "spoofchk";
        case Setting::Trust: return "trust";
        case Setting::LinkState: return "link_state";
    }
    return "?";
}

std::string describe(const VfConfig& c, Setting s) {
    auto on = [](const std::optional<bool>& b) { return b ? (*b ? "on" : "off") : "?"; };
    switch (s) {
        case Setting::Vlan:
            return "vlan " + std::to_string(c.vlan.value_or(0)) + " (qos " + std::to_string(c.qos.value_or(0)) +
                   ", proto " + vlan_proto_name(c.vlan_proto.value_or(ETH_P_8021Q)) + ")";
        case Setting::Mac: return "mac " + c.mac.value_or("?");
        case Setting::Rate:
            return "tx rate (min_tx_rate " + std::to_string(c.min_tx_rate.value_or(0)) + ", max_tx_rate " +
                   std::to_string(c.max_tx_rate.value_or(0)) + " Mbps)";
        case Setting::Spoofchk: return std::string("spoofchk ") + on(c.spoofchk);
        case Setting::Trust: return std::string("trust ") + on(c.trust);
        case Setting::LinkState: return "link_state " + link_state_name(c.link_state.value_or(0));
    }
    return "?";
}

std::optional<uint16_t> vlan_proto_value(const std::string& name) {
    if (name == "802.1q") return ETH_P_8021Q;
    if (name == "802.1ad") return ETH_P_8021AD;
    return std::nullopt;
}

std::string vlan_proto_name(uint16_t proto) {
    if (proto == ETH_P_8021Q) return "802.1q";
    if (proto == ETH_P_8021AD) return "802.1ad";
    char buf[8];
    std::snprintf(buf, sizeof buf, "0x%04x", proto);
    return buf;
}

std::optional<uint32_t> link_state_value(const std::string& name) {
    if (name == "auto") return IFLA_VF_LINK_STATE_AUTO;
    if (name == "enable") return IFLA_VF_LINK_STATE_ENABLE;
    if (name == "disable") return IFLA_VF_LINK_STATE_DISABLE;
    return std::nullopt;
}

std::string link_state_name(uint32_t state) {
    switch (state) {
        case IFLA_VF_LINK_STATE_AUTO: return "auto";
        case IFLA_VF_LINK_STATE_ENABLE: return "enable";
        case IFLA_VF_LINK_STATE_DISABLE: return "disable";
    }
    return std::to_string(state);
}

std::vector<uint8_t> build_set(int pf_index, int vf, Setting s, const VfConfig& c) {
    if (!has(c, s)) netns::fail(std::string("no value for VF setting ") + setting_name(s));
    Msg m(RTM_SETLINK, 0);
    m.header<ifinfomsg>()->ifi_index = pf_index;
    nlattr* list = m.nest_start(IFLA_VFINFO_LIST);
    nlattr* info = m.nest_start(IFLA_VF_INFO);
    uint32_t n = uint32_t(vf);
    switch (s) {
        case Setting::Vlan: {
            nlattr* vlans = m.nest_start(IFLA_VF_VLAN_LIST);
            ifla_vf_vlan_info v{};
            v.vf = n;
            v.vlan = uint32_t(*c.vlan);
            v.qos = uint32_t(c.qos.value_or(0));
            v.vlan_proto = htons(c.vlan_proto.value_or(ETH_P_8021Q));
            m.put(IFLA_VF_VLAN_INFO, v);
            m.nest_end(vlans);
            break;
        }
        case Setting::Mac: {
            auto bytes = nl::parse_mac(*c.mac);
            if (!bytes) netns::fail_invalid("invalid MAC address '" + *c.mac + "'");
            ifla_vf_mac v{};
            v.vf = n;
            std::memcpy(v.mac, bytes->data(), bytes->size());
            m.put(IFLA_VF_MAC, v);
            break;
        }
        case Setting::Rate: m.put(IFLA_VF_RATE, ifla_vf_rate{n, c.min_tx_rate.value_or(0), c.max_tx_rate.value_or(0)}); break;
        case Setting::Spoofchk: m.put(IFLA_VF_SPOOFCHK, ifla_vf_spoofchk{n, *c.spoofchk ? 1u : 0u}); break;
        case Setting::Trust: m.put(IFLA_VF_TRUST, ifla_vf_trust{n, *c.trust ? 1u : 0u}); break;
        case Setting::LinkState: m.put(IFLA_VF_LINK_STATE, ifla_vf_link_state{n, *c.link_state}); break;
    }
    m.nest_end(info);
    m.nest_end(list);
    return m.bytes();
}

std::vector<uint8_t> build_get(int pf_index) {
    Msg m(RTM_GETLINK, 0);
    m.header<ifinfomsg>()->ifi_index = pf_index;
    // Statistics would add ~100 bytes per VF that nobody here reads.
    m.put(IFLA_EXT_MASK, uint32_t(RTEXT_FILTER_VF | RTEXT_FILTER_SKIP_STATS));
    return m.bytes();
}

std::map<int, VfConfig> parse_vfs(const nlmsghdr* h) {
    std::map<int, VfConfig> out;
    if (h->nlmsg_type != RTM_NEWLINK || mnl_nlmsg_get_payload_len(h) < sizeof(ifinfomsg)) return out;
    Attrs<IFLA_MAX> tb;
    tb.parse(h, sizeof(ifinfomsg));
    if (!tb[IFLA_VFINFO_LIST]) return out;
    // The kernel fills ifla_vf_mac.mac up to 32 bytes; the PF's own address tells how many count.
    size_t mac_len = tb[IFLA_ADDRESS] ? mnl_attr_get_payload_len(tb[IFLA_ADDRESS]) : ETH_ALEN;
    const nlattr* list = tb[IFLA_VFINFO_LIST];
    auto* end = static_cast<const char*>(mnl_attr_get_payload(list)) + mnl_attr_get_payload_len(list);
    for (auto* info = static_cast<const nlattr*>(mnl_attr_get_payload(list));
         mnl_attr_ok(info, int(end - reinterpret_cast<const char*>(info))); info = mnl_attr_next(info)) {
        if (mnl_attr_get_type(info) != IFLA_VF_INFO) continue;
        int index;
        VfConfig c = parse_vf_info(info, mac_len, index);
        if (index >= 0) out[index] = c;
    }
    return out;
}

std::optional<std::string> parse_parent_device(const nlmsghdr* h) {
    if (h->nlmsg_type != RTM_NEWLINK || mnl_nlmsg_get_payload_len(h) < sizeof(ifinfomsg)) return std::nullopt;
    Attrs<IFLA_MAX> tb;
    tb.parse(h, sizeof(ifinfomsg));
    const nlattr* a = tb[IFLA_PARENT_DEV_NAME];
    if (!a || mnl_attr_validate(a, MNL_TYPE_NUL_STRING) < 0) return std::nullopt;
    return std::string(mnl_attr_get_str(a));
}

std::unique_ptr<PfControl> netlink_pf() { return std::make_unique<NetlinkPf>(); }

std::optional<std::string> parent_device(nl::Socket& s, int index) {
    Msg m(RTM_GETLINK, 0);
    m.header<ifinfomsg>()->ifi_index = index;
    m.put(IFLA_EXT_MASK, uint32_t(RTEXT_FILTER_SKIP_STATS));
    auto bytes = m.bytes();
    std::optional<std::string> parent;
    s.request(reinterpret_cast<nlmsghdr*>(bytes.data()), "get link #" + std::to_string(index),
              [&](const nlmsghdr* h) { parent = parse_parent_device(h); });
    return parent;
}

std::optional<nl::Link> find_by_parent(nl::Socket& s, const std::string& pci) {
    for (auto& l : s.list_links()) {
        if (!l.kind.empty()) continue;   // virtual links have no PCI parent
        try {
            if (parent_device(s, l.index) == pci) return l;
        } catch (const base::Error&) {
            // the link went away meanwhile
        }
    }
    return std::nullopt;
}

}  // namespace netns::vf
