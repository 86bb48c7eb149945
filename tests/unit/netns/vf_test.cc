#include <arpa/inet.h>
#include <doctest/doctest.h>
#include <linux/if_ether.h>
#include <linux/if_link.h>
#include <linux/rtnetlink.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <map>

#include "netns/vf.h"
#include "temp_netns.h"
#include "netns/mnl.h"

using namespace netns::mnl;   // the libmnl-compatible helpers

namespace vf = netns::vf;
using testing::error_of;
using testing::TempNetns;

namespace {

/// Attributes of one nesting level by type (the last one of a type wins).
std::map<int, const nlattr*> attrs_of(const nlattr* nest) {
    std::map<int, const nlattr*> out;
    mnl_attr_parse_nested(nest, [](const nlattr* a, void* data) {
        (*static_cast<std::map<int, const nlattr*>*>(data))[mnl_attr_get_type(a)] = a;
        return MNL_CB_OK;
    }, &out);
    return out;
}

std::map<int, const nlattr*> attrs_of(const nlmsghdr* h) {
    std::map<int, const nlattr*> out;
    mnl_attr_parse(h, sizeof(ifinfomsg), [](const nlattr* a, void* data) {
        (*static_cast<std::map<int, const nlattr*>*>(data))[mnl_attr_get_type(a)] = a;
        return MNL_CB_OK;
    }, &out);
    return out;
}

/// Decodes a set request down to the one attribute inside IFLA_VF_INFO; checks the frame.
const nlattr* vf_setting(const std::vector<uint8_t>& bytes, int want_type, int pf_index = 7) {
    auto* h = reinterpret_cast<const nlmsghdr*>(bytes.data());
    REQUIRE(h->nlmsg_len == bytes.size());
    CHECK(h->nlmsg_type == RTM_SETLINK);
    CHECK((h->nlmsg_flags & (NLM_F_REQUEST | NLM_F_ACK)) == (NLM_F_REQUEST | NLM_F_ACK));
    auto* ifi = static_cast<const ifinfomsg*>(mnl_nlmsg_get_payload(h));
    CHECK(ifi->ifi_index == pf_index);
    auto top = attrs_of(h);
    REQUIRE(top.size() == 1);
    REQUIRE(top.count(IFLA_VFINFO_LIST));
    auto list = attrs_of(top[IFLA_VFINFO_LIST]);
    REQUIRE(list.size() == 1);
    REQUIRE(list.count(IFLA_VF_INFO));
    auto info = attrs_of(list[IFLA_VF_INFO]);
    REQUIRE(info.size() == 1);
    REQUIRE(info.count(want_type));
    return info[want_type];
}

template <class T>
T payload(const nlattr* a) {
    REQUIRE(mnl_attr_get_payload_len(a) == sizeof(T));
    T v;
    std::memcpy(&v, mnl_attr_get_payload(a), sizeof v);
    return v;
}

/// An RTM_NEWLINK reply as the kernel sends it for a PF with two VFs.
std::vector<uint8_t> pf_reply() {
    std::vector<uint8_t> buf(4096);
    auto* h = mnl_nlmsg_put_header(buf.data());
    h->nlmsg_type = RTM_NEWLINK;
    auto* ifi = static_cast<ifinfomsg*>(mnl_nlmsg_put_extra_header(h, sizeof(ifinfomsg)));
    ifi->ifi_index = 7;
    mnl_attr_put_strz(h, IFLA_IFNAME, "enp175s0f1");
    uint8_t pf_mac[6] = {0x02, 0, 0, 0, 0, 0x10};
    mnl_attr_put(h, IFLA_ADDRESS, sizeof pf_mac, pf_mac);
    mnl_attr_put_u32(h, IFLA_NUM_VF, 2);
    auto* list = mnl_attr_nest_start(h, IFLA_VFINFO_LIST);
    for (uint32_t n = 0; n < 2; ++n) {
        auto* info = mnl_attr_nest_start(h, IFLA_VF_INFO);
        ifla_vf_mac mac{};
        mac.vf = n;
        uint8_t m[6] = {0xab, 0xcd, 0xef, 0xab, 0xcd, uint8_t(n + 1)};
        std::memcpy(mac.mac, m, 6);
        mnl_attr_put(h, IFLA_VF_MAC, sizeof mac, &mac);
        ifla_vf_vlan vlan{n, n ? 100u : 0u, n ? 3u : 0u};
        mnl_attr_put(h, IFLA_VF_VLAN, sizeof vlan, &vlan);
        auto* vlans = mnl_attr_nest_start(h, IFLA_VF_VLAN_LIST);
        ifla_vf_vlan_info vi{};
        vi.vf = n;
        vi.vlan = n ? 100 : 0;
        vi.qos = n ? 3 : 0;
        vi.vlan_proto = htons(n ? ETH_P_8021AD : ETH_P_8021Q);
        mnl_attr_put(h, IFLA_VF_VLAN_INFO, sizeof vi, &vi);
        mnl_attr_nest_end(h, vlans);
        ifla_vf_rate rate{n, 0, n ? 1000u : 0u};
        mnl_attr_put(h, IFLA_VF_RATE, sizeof rate, &rate);
        ifla_vf_spoofchk sc{n, n ? 0u : 1u};
        mnl_attr_put(h, IFLA_VF_SPOOFCHK, sizeof sc, &sc);
        ifla_vf_trust tr{n, n ? 1u : UINT32_MAX};   // -1: the driver does not say
        mnl_attr_put(h, IFLA_VF_TRUST, sizeof tr, &tr);
        ifla_vf_link_state ls{n, n ? uint32_t(IFLA_VF_LINK_STATE_DISABLE) : uint32_t(IFLA_VF_LINK_STATE_AUTO)};
        mnl_attr_put(h, IFLA_VF_LINK_STATE, sizeof ls, &ls);
        mnl_attr_nest_end(h, info);
    }
    mnl_attr_nest_end(h, list);
    buf.resize(h->nlmsg_len);
    return buf;
}

}  // namespace

TEST_CASE("vf: a vlan request carries vlan, qos and the protocol in network order in a VLAN list") {
    auto bytes = vf::build_set(7, 3, vf::Setting::Vlan, {.vlan = 1234, .qos = 5, .vlan_proto = ETH_P_8021AD});
    auto* list = vf_setting(bytes, IFLA_VF_VLAN_LIST);
    auto entries = attrs_of(list);
    REQUIRE(entries.count(IFLA_VF_VLAN_INFO));
    auto v = payload<ifla_vf_vlan_info>(entries[IFLA_VF_VLAN_INFO]);
    CHECK(v.vf == 3);
    CHECK(v.vlan == 1234);
    CHECK(v.qos == 5);
    CHECK(v.vlan_proto == htons(0x88a8));

    SUBCASE("qos and protocol default to 0 and 802.1Q, as in sriov-cni") {
        auto d = vf::build_set(7, 0, vf::Setting::Vlan, {.vlan = 0});
        auto dv = payload<ifla_vf_vlan_info>(attrs_of(vf_setting(d, IFLA_VF_VLAN_LIST))[IFLA_VF_VLAN_INFO]);
        CHECK(dv.vlan == 0);
        CHECK(dv.qos == 0);
        CHECK(dv.vlan_proto == htons(0x8100));
    }
}

TEST_CASE("vf: mac, rate, spoofchk, trust and link state requests carry the VF index and value") {
    auto mac = payload<ifla_vf_mac>(vf_setting(vf::build_set(7, 2, vf::Setting::Mac, {.mac = "CA:FE:00:00:00:01"}),
                                               IFLA_VF_MAC));
    CHECK(mac.vf == 2);
    CHECK(std::vector<uint8_t>(mac.mac, mac.mac + 6) == std::vector<uint8_t>{0xca, 0xfe, 0, 0, 0, 1});
    CHECK(std::all_of(mac.mac + 6, mac.mac + 32, [](uint8_t b) { return b == 0; }));

    auto rate = payload<ifla_vf_rate>(
        vf_setting(vf::build_set(7, 2, vf::Setting::Rate, {.min_tx_rate = 100, .max_tx_rate = 2000}), IFLA_VF_RATE));
    CHECK(rate.vf == 2);
    CHECK(rate.min_tx_rate == 100);
    CHECK(rate.max_tx_rate == 2000);
    auto only_max = payload<ifla_vf_rate>(vf_setting(vf::build_set(7, 2, vf::Setting::Rate, {.max_tx_rate = 50}),
                                                     IFLA_VF_RATE));
    CHECK(only_max.min_tx_rate == 0);
    CHECK(only_max.max_tx_rate == 50);

    auto sc = payload<ifla_vf_spoofchk>(vf_setting(vf::build_set(7, 4, vf::Setting::Spoofchk, {.spoofchk = false}),
                                                   IFLA_VF_SPOOFCHK));
    CHECK(sc.vf == 4);
    CHECK(sc.setting == 0);
    auto tr = payload<ifla_vf_trust>(vf_setting(vf::build_set(7, 4, vf::Setting::Trust, {.trust = true}), IFLA_VF_TRUST));
    CHECK(tr.vf == 4);
    CHECK(tr.setting == 1);
    auto ls = payload<ifla_vf_link_state>(
        vf_setting(vf::build_set(7, 5, vf::Setting::LinkState, {.link_state = IFLA_VF_LINK_STATE_DISABLE}),
                   IFLA_VF_LINK_STATE));
    CHECK(ls.vf == 5);
    CHECK(ls.link_state == IFLA_VF_LINK_STATE_DISABLE);
}

TEST_CASE("vf: a request without a value for its setting is refused before it is built") {
    CHECK(error_of([] { vf::build_set(7, 0, vf::Setting::Trust, {.spoofchk = true}); }).kind == netns::Error::Kind::Failed);
    CHECK(error_of([] { vf::build_set(7, 0, vf::Setting::Mac, {.mac = "zz"}); }).kind == netns::Error::Kind::Invalid);
}

TEST_CASE("vf: the read request asks for VF info without statistics") {
    auto bytes = vf::build_get(9);
    auto* h = reinterpret_cast<const nlmsghdr*>(bytes.data());
    CHECK(h->nlmsg_type == RTM_GETLINK);
    CHECK((h->nlmsg_flags & NLM_F_DUMP) == 0);
    CHECK(static_cast<const ifinfomsg*>(mnl_nlmsg_get_payload(h))->ifi_index == 9);
    auto top = attrs_of(h);
    REQUIRE(top.count(IFLA_EXT_MASK));
    CHECK(mnl_attr_get_u32(top[IFLA_EXT_MASK]) == (RTEXT_FILTER_VF | RTEXT_FILTER_SKIP_STATS));
}

TEST_CASE("vf: a PF reply gives every VF's settings, the VLAN list winning over the old VLAN attribute") {
    auto bytes = pf_reply();
    auto vfs = vf::parse_vfs(reinterpret_cast<const nlmsghdr*>(bytes.data()));
    REQUIRE(vfs.size() == 2);
    const auto& a = vfs.at(0);
    CHECK(a.mac == "ab:cd:ef:ab:cd:01");
    CHECK(a.vlan == 0);
    CHECK(a.qos == 0);
    CHECK(a.vlan_proto == ETH_P_8021Q);
    CHECK(a.spoofchk == true);
    CHECK_FALSE(a.trust.has_value());
    CHECK(a.link_state == uint32_t(IFLA_VF_LINK_STATE_AUTO));
    CHECK(a.min_tx_rate == 0u);
    CHECK(a.max_tx_rate == 0u);
    const auto& b = vfs.at(1);
    CHECK(b.mac == "ab:cd:ef:ab:cd:02");
    CHECK(b.vlan == 100);
    CHECK(b.qos == 3);
    CHECK(b.vlan_proto == ETH_P_8021AD);
    CHECK(b.spoofchk == false);
    CHECK(b.trust == true);
    CHECK(b.link_state == uint32_t(IFLA_VF_LINK_STATE_DISABLE));
    CHECK(b.max_tx_rate == 1000u);
    CHECK(vf::describe(b, vf::Setting::Vlan) == "vlan 100 (qos 3, proto 802.1ad)");
}

TEST_CASE("vf: names of protocols and link states map both ways") {
    CHECK(vf::vlan_proto_value("802.1q") == ETH_P_8021Q);
    CHECK(vf::vlan_proto_value("802.1ad") == ETH_P_8021AD);
    CHECK_FALSE(vf::vlan_proto_value("802.1x"));
    CHECK(vf::vlan_proto_name(ETH_P_8021AD) == "802.1ad");
    for (auto s : {"auto", "enable", "disable"}) CHECK(vf::link_state_name(*vf::link_state_value(s)) == s);
    CHECK_FALSE(vf::link_state_value("on"));
}

TEST_CASE("vf: a PF without SR-IOV reports no VFs and rejects a setting with a message naming PF, VF and setting") {
    TempNetns ns("tvf1");
    netns::with(ns.handle, [&] {
        netns::nl::Socket s;
        s.create_veth({.name = "fakepf0", .peer_name = "fakepf1"});
        auto pf = vf::netlink_pf();
        CHECK_FALSE(pf->get("fakepf0", 0));
        auto e = error_of([&] { pf->set("fakepf0", 0, vf::Setting::Vlan, {.vlan = 100}); });
        CHECK(e.sys_errno != 0);
        std::string msg = e.what();
        CAPTURE(msg);
        CHECK(msg.find("vlan 100") != std::string::npos);
        CHECK(msg.find("VF 0") != std::string::npos);
        CHECK(msg.find("'fakepf0'") != std::string::npos);
        CHECK(error_of([&] { pf->get("nosuchpf", 0); }).sys_errno == ENODEV);
        auto l = s.get_link("fakepf0");
        REQUIRE(l);
        CHECK_FALSE(vf::parent_device(s, l->index));   // virtual links have no parent device
        CHECK_FALSE(vf::find_by_parent(s, "0000:af:06.0"));
    });
}
