#include <doctest/doctest.h>

#include <cerrno>

#include "netns/netlink.h"
#include "netns/sysctl.h"
#include "temp_netns.h"

using testing::error_of;
using testing::TempNetns;
namespace sysctl = netns::sysctl;

TEST_CASE("sysctl: get, set and ensure act on the calling thread's namespace only") {
    TempNetns a("tsc1");
    auto host = sysctl::get("net/ipv4/ip_forward");
    REQUIRE(host);
    netns::with(a.handle, [&] {
        // A new netns starts with the node's IPv4 forwarding (devconf_inherit_init_net 0
        // inherits init_net's), so the test sets its own starting point.
        sysctl::set("net/ipv4/ip_forward", "0");
        CHECK(sysctl::get("net/ipv4/ip_forward") == "0");
        sysctl::set("net/ipv4/ip_forward", "1");
        CHECK(sysctl::get("net/ipv4/ip_forward") == "1");
        sysctl::ensure("net/ipv4/ip_forward", "1");
        CHECK(sysctl::get("net/ipv4/ip_forward") == "1");
        sysctl::ensure("net/ipv4/ip_forward", "0");
        CHECK(sysctl::get("net/ipv4/ip_forward") == "0");
        // The opposite of the node's: the check below then shows the node's did not move.
        sysctl::set("net/ipv4/ip_forward", *host == "1" ? "0" : "1");

        // Slash-form names keep interface names with dots intact.
        netns::nl::Socket s;
        s.create_veth({.name = "v.1", .peer_name = "v.1p"});
        sysctl::set("net/ipv4/conf/v.1/arp_notify", "1");
        CHECK(sysctl::get("net/ipv4/conf/v.1/arp_notify") == "1");
    });
    CHECK(sysctl::get("net/ipv4/ip_forward") == host);
}

TEST_CASE("sysctl: a missing key reads as nullopt and fails to write with ENOENT") {
    TempNetns a("tsc2");
    netns::with(a.handle, [&] {
        CHECK_FALSE(sysctl::get("net/ipv4/conf/nosuchlink/arp_notify"));
        auto e = error_of([] { sysctl::set("net/ipv4/conf/nosuchlink/arp_notify", "1"); });
        CHECK(e.kind == netns::Error::Kind::Failed);
        CHECK(e.sys_errno == ENOENT);
        CHECK(std::string(e.what()).find("No such file or directory") != std::string::npos);
        CHECK(error_of([] { sysctl::get("net/../../etc/hostname"); }).kind == netns::Error::Kind::Invalid);
        CHECK(error_of([] { sysctl::ensure("../hostname", "x"); }).kind == netns::Error::Kind::Invalid);
    });
}
