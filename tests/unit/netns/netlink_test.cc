#include <doctest/doctest.h>
#include <linux/if_addr.h>
#include <linux/if_link.h>
#include <linux/rtnetlink.h>
#include <net/if.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "netns/netlink.h"
#include "temp_netns.h"

using netns::nl::Link;
using netns::nl::RouteSpec;
using netns::nl::Socket;
using testing::error_of;
using testing::TempNetns;

namespace {

base::IpNet net(const char* s) { return *base::IpNet::parse(s); }
base::IpAddr ip(const char* s) { return *base::IpAddr::parse(s); }

Link must_get(Socket& s, const std::string& name) {
    auto l = s.get_link(name);
    REQUIRE_MESSAGE(l, "no link " << name);
    return *l;
}

}  // namespace

TEST_CASE("netlink: parse_mac accepts six colon-separated hex octets in either case") {
    CHECK(netns::nl::parse_mac("02:aB:cd:EF:00:ff") == std::vector<uint8_t>{0x02, 0xab, 0xcd, 0xef, 0x00, 0xff});
    for (const char* bad : {"", "02:ab:cd:ef:00", "02:ab:cd:ef:00:ff:11", "02-ab-cd-ef-00-ff", "2:ab:cd:ef:00:ff0",
                            "02:ab:cd:ef:00:fg", "02:ab:cd:ef:00:f ", "02ab:cd:ef:00:ff:"}) {
        CAPTURE(bad);
        CHECK_FALSE(netns::nl::parse_mac(bad));
    }
}

TEST_CASE("netlink: a veth pair created in one request puts the peer in the other namespace with MAC and MTU") {
    TempNetns a("tnl1a"), b("tnl1b");
    Link local, peer;
    netns::with(a.handle, [&] {
        Socket s;
        s.create_veth({.name = "ve0", .peer_name = "ve0p", .peer_netns_fd = b.handle.fd(), .mtu = 1400,
                       .mac = "02:AA:00:00:00:01", .peer_mac = "02:aa:00:00:00:02"});
        local = must_get(s, "ve0");
        CHECK_FALSE(s.get_link("ve0p"));
    });
    netns::with(b.handle, [&] {
        Socket s;
        peer = must_get(s, "ve0p");
        CHECK_FALSE(s.get_link("ve0"));
    });
    CHECK(local.kind == "veth");
    CHECK(local.mac == "02:aa:00:00:00:01");
    CHECK(local.mtu == 1400);
    CHECK(local.link_netnsid.has_value());   // the peer lives in another namespace
    CHECK(local.link == peer.index);
    CHECK(peer.kind == "veth");
    CHECK(peer.mac == "02:aa:00:00:00:02");
    CHECK(peer.mtu == 1400);
    CHECK(peer.link == local.index);
}

TEST_CASE("netlink: a macvlan is created straight into another namespace off a master in ours") {
    TempNetns a("tnl2a"), b("tnl2b");
    Link lower;
    netns::with(a.handle, [&] {
        Socket s;
        s.create_veth({.name = "lo0", .peer_name = "lo0p"});
        lower = must_get(s, "lo0");
        s.create_macvlan({.name = "mv0", .master_index = lower.index, .mode = MACVLAN_MODE_PRIVATE, .mtu = 1300,
                          .mac = "02:bb:00:00:00:01", .netns_fd = b.handle.fd()});
        CHECK_FALSE(s.get_link("mv0"));
    });
    netns::with(b.handle, [&] {
        Socket s;
        auto mv = must_get(s, "mv0");
        CHECK(mv.kind == "macvlan");
        CHECK(mv.macvlan_mode == MACVLAN_MODE_PRIVATE);
        CHECK(mv.link == lower.index);
        CHECK(mv.link_netnsid.has_value());
        CHECK(mv.mtu == 1300);
        CHECK(mv.mac == "02:bb:00:00:00:01");
    });
}

TEST_CASE("netlink: ensure_bridge creates once, reuses after, and refuses a link of another kind") {
    TempNetns a("tnl3");
    netns::with(a.handle, [&] {
        Socket s;
        auto br = s.ensure_bridge("br0", 1450);
        CHECK(br.kind == "bridge");
        CHECK(br.mtu == 1450);
        CHECK(s.ensure_bridge("br0", std::nullopt).index == br.index);

        s.create_veth({.name = "port0", .peer_name = "port0p"});
        auto e = error_of([&] { s.ensure_bridge("port0", std::nullopt); });
        CHECK(e.kind == netns::Error::Kind::Invalid);
        CHECK(std::string(e.what()) == "'port0' already exists but is not a bridge");

        auto port = must_get(s, "port0");
        s.set_master(port.index, br.index);
        CHECK(must_get(s, "port0").master == br.index);
        s.set_master(port.index, 0);
        CHECK(must_get(s, "port0").master == 0);
    });
}

TEST_CASE("netlink: links can be renamed, reconfigured, moved and deleted by index") {
    TempNetns a("tnl4a"), b("tnl4b");
    netns::with(a.handle, [&] {
        Socket s;
        s.create_veth({.name = "lx0", .peer_name = "lx0p"});
        int idx = must_get(s, "lx0").index;
        int peer = must_get(s, "lx0p").index;

        s.rename(idx, "lx1");
        CHECK_FALSE(s.get_link("lx0"));
        CHECK(s.get_link(idx)->name == "lx1");
        s.set_mac(idx, "02:CC:00:00:00:01");
        s.set_mtu(idx, 1280);
        auto l = *s.get_link(idx);
        CHECK(l.mac == "02:cc:00:00:00:01");
        CHECK(l.mtu == 1280);

        s.set_up(idx);
        CHECK((s.get_link(idx)->flags & IFF_UP));
        s.set_down(idx);
        CHECK_FALSE((s.get_link(idx)->flags & IFF_UP));

        auto links = s.list_links();
        auto has = [&](const char* n) {
            return std::any_of(links.begin(), links.end(), [&](const Link& x) { return x.name == n; });
        };
        CHECK(has("lo"));
        CHECK(has("lx1"));
        CHECK(has("lx0p"));

        s.set_netns(peer, b.handle.fd());
        CHECK_FALSE(s.get_link("lx0p"));
        netns::with(b.handle, [] { CHECK(Socket().get_link("lx0p")); });

        CHECK(s.del_link("lx1"));
        CHECK_FALSE(s.get_link(idx));
        CHECK_FALSE(s.del_link("lx1"));
        CHECK_FALSE(s.del_link(idx));
        CHECK_FALSE(s.get_link(99999));
        CHECK_FALSE(s.get_link(0));
        CHECK_FALSE(s.get_link(""));
        netns::with(b.handle, [] { CHECK_FALSE(Socket().get_link("lx0p")); });   // veth ends die together
    });
}

TEST_CASE("netlink: addresses are added idempotently, nodad skips DAD, and deletes tolerate absence") {
    TempNetns a("tnl5");
    netns::with(a.handle, [&] {
        Socket s;
        s.create_veth({.name = "ad0", .peer_name = "ad0p"});
        int idx = must_get(s, "ad0").index;
        s.set_up(idx);
        s.set_up(must_get(s, "ad0p").index);

        s.add_addr(idx, net("10.1.2.3/24"));
        s.add_addr(idx, net("10.1.2.3/24"));   // EEXIST is fine
        s.add_addr(idx, net("fd00:1::5/64"), true);
        s.add_addr(idx, net("fd00:2::5/64"));

        auto v4 = s.list_addrs(AF_INET, idx);
        REQUIRE(v4.size() == 1);
        CHECK(v4[0].net == net("10.1.2.3/24"));
        CHECK(v4[0].index == idx);
        CHECK(v4[0].scope == RT_SCOPE_UNIVERSE);

        auto v6 = s.list_addrs(AF_INET6, idx);
        auto find = [&](const char* a) {
            auto it = std::find_if(v6.begin(), v6.end(), [&](auto& x) { return x.net == net(a); });
            REQUIRE_MESSAGE(it != v6.end(), "missing " << a);
            return *it;
        };
        auto nodad = find("fd00:1::5/64");
        CHECK((nodad.flags & IFA_F_NODAD));
        CHECK_FALSE((nodad.flags & IFA_F_TENTATIVE));
        CHECK((find("fd00:2::5/64").flags & IFA_F_TENTATIVE));   // DAD still running

        CHECK(s.list_addrs(AF_INET, 0).size() >= v4.size());
        s.del_addr(idx, net("10.1.2.3/24"));
        CHECK(s.list_addrs(AF_INET, idx).empty());
        s.del_addr(idx, net("10.1.2.3/24"));
    });
}

TEST_CASE("netlink: routes round-trip through add, list and delete") {
    TempNetns a("tnl6");
    netns::with(a.handle, [&] {
        Socket s;
        s.create_veth({.name = "rt0", .peer_name = "rt0p"});
        int idx = must_get(s, "rt0").index;
        s.set_up(idx);
        s.set_up(must_get(s, "rt0p").index);
        s.add_addr(idx, net("10.1.2.3/24"));
        s.add_addr(idx, net("fd00:1::3/64"), true);

        RouteSpec via{.dst = net("10.9.0.0/16"), .gw = ip("10.1.2.1"), .oif = idx, .priority = 50, .mtu = 1300,
                      .advmss = 1260};
        RouteSpec onlink{.dst = net("10.8.0.0/16"), .oif = idx, .src = ip("10.1.2.3"), .scope = RT_SCOPE_LINK};
        RouteSpec deflt{.dst = net("0.0.0.0/0"), .gw = ip("10.1.2.1"), .oif = idx};
        RouteSpec v6{.dst = net("fd00:9::/64"), .gw = ip("fd00:1::1"), .oif = idx};
        for (auto& r : {via, onlink, deflt, v6}) s.add_route(r);
        s.add_route(via);   // EEXIST is fine

        auto routes = s.list_routes(AF_INET, idx);
        auto find = [&](const std::vector<RouteSpec>& rs, const char* dst) {
            auto it = std::find_if(rs.begin(), rs.end(), [&](auto& r) { return r.dst == net(dst); });
            REQUIRE_MESSAGE(it != rs.end(), "missing route " << dst);
            return *it;
        };
        auto r = find(routes, "10.9.0.0/16");
        CHECK(r.gw == ip("10.1.2.1"));
        CHECK(r.oif == idx);
        CHECK(r.scope == RT_SCOPE_UNIVERSE);
        CHECK(r.table == RT_TABLE_MAIN);
        CHECK(r.priority == 50u);
        CHECK(r.mtu == 1300u);
        CHECK(r.advmss == 1260u);
        CHECK(r.protocol == RTPROT_STATIC);

        r = find(routes, "10.8.0.0/16");
        CHECK_FALSE(r.gw);
        CHECK(r.scope == RT_SCOPE_LINK);
        CHECK(r.src == ip("10.1.2.3"));

        r = find(routes, "0.0.0.0/0");
        CHECK(r.gw == ip("10.1.2.1"));

        r = find(routes, "10.1.2.0/24");   // made by the kernel for the address
        CHECK(r.protocol == RTPROT_KERNEL);
        CHECK(r.scope == RT_SCOPE_LINK);

        CHECK(find(s.list_routes(AF_INET6, idx), "fd00:9::/64").gw == ip("fd00:1::1"));
        CHECK(s.list_routes(AF_INET, idx, 100).empty());

        s.del_route(via);
        s.del_route(via);   // already gone: ESRCH is fine
        s.del_route(v6);
        s.del_route(v6);    // ENOENT is fine
        auto gone = [&](int family, const char* dst) {
            auto rs = s.list_routes(family, idx);
            return std::none_of(rs.begin(), rs.end(), [&](auto& x) { return x.dst == net(dst); });
        };
        CHECK(gone(AF_INET, "10.9.0.0/16"));
        CHECK(gone(AF_INET6, "fd00:9::/64"));
        CHECK_FALSE(gone(AF_INET, "10.8.0.0/16"));
    });
}

TEST_CASE("netlink: routes in a table above 255 go through RTA_TABLE") {
    TempNetns a("tnl7");
    netns::with(a.handle, [&] {
        Socket s;
        s.create_veth({.name = "tb0", .peer_name = "tb0p"});
        int idx = must_get(s, "tb0").index;
        s.set_up(idx);
        RouteSpec r{.dst = net("10.7.0.0/16"), .oif = idx, .scope = RT_SCOPE_LINK, .table = 1000};
        s.add_route(r);
        auto rs = s.list_routes(AF_INET, idx, 1000);
        REQUIRE(rs.size() == 1);
        CHECK(rs[0].dst == net("10.7.0.0/16"));
        CHECK(rs[0].table == 1000u);
        CHECK(s.list_routes(AF_INET, idx).empty());
        s.del_route(r);
        CHECK(s.list_routes(AF_INET, idx, 1000).empty());
    });
}

TEST_CASE("netlink: kernel errors carry errno and the kernel's extended-ack text") {
    TempNetns a("tnl8");
    netns::with(a.handle, [&] {
        Socket s;
        s.create_veth({.name = "er0", .peer_name = "er0p"});
        auto dup = error_of([&] { s.create_veth({.name = "er0", .peer_name = "er1p"}); });
        CHECK(dup.kind == netns::Error::Kind::Failed);
        CHECK(dup.sys_errno == EEXIST);
        CHECK(std::string(dup.what()).rfind("failed to create veth 'er0' (peer 'er1p'): File exists", 0) == 0);

        // veth checks its MTU before extack reaches it: plain EINVAL, no text.
        auto veth_mtu = error_of([&] { s.create_veth({.name = "er2", .peer_name = "er2p", .mtu = 10}); });
        CHECK(veth_mtu.sys_errno == EINVAL);
        CHECK(std::string(veth_mtu.what()) == "failed to create veth 'er2' (peer 'er2p'): Invalid argument");

        auto br = error_of([&] { s.ensure_bridge("er3", 70000); });
        CHECK(br.sys_errno == EINVAL);
        std::string head = "failed to create bridge 'er3': " + std::string(std::strerror(EINVAL)) + ": ";
        std::string msg = br.what();
        CHECK(msg.rfind(head, 0) == 0);
        CHECK(msg.size() > head.size());   // the kernel said why

        auto name = error_of([&] { s.create_veth({.name = "abcdefghijklmnopq", .peer_name = "er4p"}); });
        CHECK(name.sys_errno == ERANGE);
        CHECK(std::string(name.what()).find(std::strerror(ERANGE) + std::string(": ")) != std::string::npos);

        // Errors about an existing link name it, even though the request used its index.
        int idx = must_get(s, "er0").index;
        auto big = error_of([&] { s.set_mtu(idx, 1 << 20); });
        CHECK(big.sys_errno == EINVAL);
        msg = big.what();
        CHECK(msg.rfind("failed to set MTU 1048576 on link 'er0': Invalid argument: ", 0) == 0);

        CHECK_FALSE(s.get_link("nosuch0"));
        CHECK_FALSE(s.del_link("nosuch0"));
        CHECK(error_of([&] { s.set_mac(idx, "not-a-mac"); }).kind == netns::Error::Kind::Invalid);
    });
}

TEST_CASE("netlink: a dump spanning many receive buffers returns every link") {
    TempNetns a("tnl9");
    netns::with(a.handle, [&] {
        Socket s;
        constexpr int kPairs = 100;   // ~200 links of ~1.5 KiB each: several 32 KiB reads
        for (int i = 0; i < kPairs; ++i)
            s.create_veth({.name = "m" + std::to_string(i), .peer_name = "m" + std::to_string(i) + "p"});
        auto links = s.list_links();
        CHECK(links.size() == 2 * kPairs + 1);   // + lo
        CHECK(s.list_routes(AF_INET, 0).empty());
    });
}
