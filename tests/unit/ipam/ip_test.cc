#include <doctest/doctest.h>

#include "base/ip.h"

using base::IpAddr;
using base::IpNet;

TEST_CASE("ip: addresses print the way Go prints them, so host-local file names match") {
    CHECK(base::IpAddr::parse("10.1.2.3")->str() == "10.1.2.3");
    CHECK(base::IpAddr::parse("2001:DB8:0:0:0:0:0:10")->str() == "2001:db8::10");
    CHECK(base::IpAddr::parse("::ffff:10.0.0.1")->str() == "10.0.0.1");
    CHECK_FALSE(base::IpAddr::parse("10.1.2"));
    CHECK_FALSE(base::IpAddr::parse(""));
    CHECK_FALSE(base::IpAddr::parse("10.0.0.1/24"));
}

TEST_CASE("ip: prefixes know their network, last address and members") {
    auto n = *base::IpNet::parse("10.1.2.77/24");
    CHECK(n.network().str() == "10.1.2.0/24");
    CHECK(n.last().str() == "10.1.2.255");
    CHECK(n.contains(*base::IpAddr::parse("10.1.2.1")));
    CHECK_FALSE(n.contains(*base::IpAddr::parse("10.1.3.1")));
    CHECK_FALSE(n.contains(*base::IpAddr::parse("fd00::1")));
    auto v6 = *base::IpNet::parse("fd00:1::5/64");
    CHECK(v6.network().str() == "fd00:1::/64");
    CHECK(v6.last().str() == "fd00:1::ffff:ffff:ffff:ffff");
    CHECK_FALSE(base::IpNet::parse("10.0.0.0/33"));
    CHECK_FALSE(base::IpNet::parse("10.0.0.0/"));
    CHECK_FALSE(base::IpNet::parse("10.0.0.0/2x"));
}

TEST_CASE("ip: next and prev step across byte boundaries") {
    CHECK(base::IpAddr::parse("10.0.0.255")->next().str() == "10.0.1.0");
    CHECK(base::IpAddr::parse("10.0.1.0")->prev().str() == "10.0.0.255");
    CHECK(base::IpAddr::parse("fd00::ffff")->next().str() == "fd00::1:0");
}
