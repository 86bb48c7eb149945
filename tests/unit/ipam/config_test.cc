#include "helpers.h"

using ipam_test::ip;
using json = nlohmann::json;

namespace {

ipam::Config parse(const json& ipam, const std::string& version = "1.0.0", json runtime = nullptr) {
    json whole = {{"cniVersion", version}, {"name", "n"}, {"ipam", ipam}};
    if (!runtime.is_null()) whole["runtimeConfig"] = runtime;
    return ipam::parse_config(whole, version);
}

json one(json range) { return {{"ranges", json::array({json::array({range})})}}; }

struct BadCase {
    const char* what;
    json ipam;
    const char* prefix;   // the message must start with this
    const char* version = "1.0.0";
};

}  // namespace

TEST_CASE("config: every invalid config is code 7 and names the key path") {
    const BadCase cases[] = {
        {"host bits in subnet", one({{"subnet", "10.0.0.1/24"}}), "ipam.ranges[0][0].subnet: network 10.0.0.1/24 has host bits set"},
        {"/31 is too small", one({{"subnet", "10.0.0.0/31"}}), "ipam.ranges[0][0].subnet: network 10.0.0.0/31 too small"},
        {"/32 is too small", one({{"subnet", "10.0.0.0/32"}}), "ipam.ranges[0][0].subnet: network 10.0.0.0/32 too small"},
        {"/127 is too small", one({{"subnet", "fd00::/127"}}), "ipam.ranges[0][0].subnet: network fd00::/127 too small"},
        {"/128 is too small", one({{"subnet", "fd00::/128"}}), "ipam.ranges[0][0].subnet: network fd00::/128 too small"},
        {"subnet missing", one({{"rangeStart", "10.0.0.1"}}), "ipam.ranges[0][0].subnet: missing"},
        {"subnet not a CIDR", one({{"subnet", "10.0.0.0"}}), "ipam.ranges[0][0].subnet: invalid CIDR '10.0.0.0'"},
        {"subnet not a string", one({{"subnet", 10}}), "ipam.ranges[0][0].subnet: expected a string"},
        {"rangeStart not a string", one({{"subnet", "10.0.0.0/24"}, {"rangeStart", 5}}), "ipam.ranges[0][0].rangeStart: expected a string"},
        {"rangeStart not an address", one({{"subnet", "10.0.0.0/24"}, {"rangeStart", "ten"}}), "ipam.ranges[0][0].rangeStart: invalid IP address 'ten'"},
        {"rangeStart outside", one({{"subnet", "10.0.0.0/24"}, {"rangeStart", "10.0.1.5"}}), "ipam.ranges[0][0].rangeStart: 10.0.1.5 is not in network 10.0.0.0/24"},
        {"rangeEnd outside", one({{"subnet", "10.0.0.0/24"}, {"rangeEnd", "10.0.1.5"}}), "ipam.ranges[0][0].rangeEnd: 10.0.1.5 is not in network"},
        {"rangeEnd of the other family", one({{"subnet", "10.0.0.0/24"}, {"rangeEnd", "fd00::5"}}), "ipam.ranges[0][0].rangeEnd: fd00::5 is not in network"},
        {"gateway outside", one({{"subnet", "10.0.0.0/24"}, {"gateway", "10.9.0.1"}}), "ipam.ranges[0][0].gateway: 10.9.0.1 is not in network"},
        {"start after end", one({{"subnet", "10.0.0.0/24"}, {"rangeStart", "10.0.0.10"}, {"rangeEnd", "10.0.0.5"}}), "ipam.ranges[0][0].rangeEnd: 10.0.0.5 is before rangeStart 10.0.0.10"},
        {"mixed families in a set", {{"ranges", {{{{"subnet", "10.0.0.0/24"}}, {{"subnet", "fd00::/64"}}}}}}, "ipam.ranges[0][1]: mixed address families"},
        {"overlap inside a set", {{"ranges", {{{{"subnet", "10.0.0.0/24"}}, {{"subnet", "10.0.0.0/25"}}}}}}, "ipam.ranges[0][1]: range 10.0.0.1-10.0.0.126 overlaps with ipam.ranges[0][0]"},
        {"overlap across sets", {{"ranges", {{{{"subnet", "10.0.0.0/24"}}}, {{{"subnet", "10.0.0.0/16"}}}}}}, "ipam.ranges[1]: range set 1 overlaps with range set 0"},
        {"legacy subnet overlaps ranges", {{"subnet", "10.0.0.0/24"}, {"ranges", {{{{"subnet", "10.0.0.0/24"}}}}}}, "ipam.ranges[0]: range set 1 overlaps with range set 0 (ipam)"},
        {"two v4 sets before 0.3.0", {{"ranges", {{{{"subnet", "10.0.0.0/24"}}}, {{{"subnet", "10.1.0.0/24"}}}}}}, "ipam.ranges: cniVersion 0.2.0 allows at most one IPv4", "0.2.0"},
        {"no ranges at all", json::object(), "ipam.ranges: no IP ranges specified"},
        {"empty ranges list", {{"ranges", json::array()}}, "ipam.ranges: no IP ranges specified"},
        {"ranges not a list", {{"ranges", "10.0.0.0/24"}}, "ipam.ranges: expected a list"},
        {"range set not a list", {{"ranges", {{{"subnet", "10.0.0.0/24"}}}}}, "ipam.ranges[0]: expected a list of ranges"},
        {"empty range set", {{"ranges", {json::array()}}}, "ipam.ranges[0]: empty range set"},
        {"range not an object", {{"ranges", {{"10.0.0.0/24"}}}}, "ipam.ranges[0][0]: expected an object"},
        {"legacy subnet with host bits", {{"subnet", "10.0.0.7/24"}}, "ipam.subnet: network 10.0.0.7/24 has host bits set"},
        {"legacy rangeStart without subnet", {{"rangeStart", "10.0.0.7"}, {"ranges", {{{{"subnet", "10.1.0.0/24"}}}}}}, "ipam.rangeStart: given without ipam.subnet"},
        {"route without dst", {{"subnet", "10.0.0.0/24"}, {"routes", {{{"gw", "10.0.0.1"}}}}}, "ipam.routes[0].dst: missing"},
        {"route gw not an address", {{"subnet", "10.0.0.0/24"}, {"routes", {{{"dst", "0.0.0.0/0"}, {"gw", "x"}}}}}, "ipam.routes[0].gw: invalid IP address 'x'"},
        {"route mtu not an integer", {{"subnet", "10.0.0.0/24"}, {"routes", {{{"dst", "0.0.0.0/0"}, {"mtu", "1500"}}}}}, "ipam.routes[0].mtu: expected an integer"},
        {"routes not a list", {{"subnet", "10.0.0.0/24"}, {"routes", json::object()}}, "ipam.routes: expected a list"},
        {"relative dataDir", {{"subnet", "10.0.0.0/24"}, {"dataDir", "var/lib"}}, "ipam.dataDir: must be an absolute path"},
        {"dataDir not a string", {{"subnet", "10.0.0.0/24"}, {"dataDir", true}}, "ipam.dataDir: expected a string"},
        {"resolvConf not a string", {{"subnet", "10.0.0.0/24"}, {"resolvConf", 1}}, "ipam.resolvConf: expected a string"},
        {"lockTimeout zero", {{"subnet", "10.0.0.0/24"}, {"lockTimeout", 0}}, "ipam.lockTimeout: must be more than 0"},
        {"lockTimeout negative", {{"subnet", "10.0.0.0/24"}, {"lockTimeout", -1}}, "ipam.lockTimeout: must be more than 0"},
        {"lockTimeout over an hour", {{"subnet", "10.0.0.0/24"}, {"lockTimeout", 3601}}, "ipam.lockTimeout: must be more than 0 and at most 3600"},
        {"lockTimeout a string", {{"subnet", "10.0.0.0/24"}, {"lockTimeout", "10"}}, "ipam.lockTimeout: expected a number"},
        {"fsync not a boolean", {{"subnet", "10.0.0.0/24"}, {"fsync", "yes"}}, "ipam.fsync: expected true or false"},
    };
    for (auto& c : cases) {
        SUBCASE(c.what) {
            std::string msg;
            CHECK(ipam_test::failure([&] { parse(c.ipam, c.version); }, &msg) == "invalid");
            INFO("message: ", msg);
            CHECK(msg.rfind(c.prefix, 0) == 0);
        }
    }
}

TEST_CASE("config: runtimeConfig.ipRanges errors name their own path") {
    std::string msg;
    json runtime = {{"ipRanges", {{{{"subnet", "10.0.0.0/33"}}}}}};
    CHECK(ipam_test::failure([&] { parse(json::object(), "1.0.0", runtime); }, &msg) == "invalid");
    CHECK(msg.rfind("runtimeConfig.ipRanges[0][0].subnet: invalid CIDR", 0) == 0);
    CHECK(ipam_test::failure([] { ipam::parse_config(json{{"name", "n"}}, "1.0.0"); }, &msg) == "invalid");
    CHECK(msg == "ipam: missing");
}

TEST_CASE("config: defaults follow the reference plugin") {
    SUBCASE("IPv4: gateway and start are .1, the end excludes broadcast") {
        auto c = parse(one({{"subnet", "10.1.2.0/24"}}));
        REQUIRE(c.ranges.size() == 1);
        auto& r = c.ranges[0][0];
        CHECK(r.gateway == ip("10.1.2.1"));
        CHECK(r.start == ip("10.1.2.1"));
        CHECK(r.end == ip("10.1.2.254"));
        CHECK(r.subnet.str() == "10.1.2.0/24");
    }
    SUBCASE("IPv6: the end is the all-ones address") {
        auto r = parse(one({{"subnet", "fd00:1::/64"}})).ranges[0][0];
        CHECK(r.gateway == ip("fd00:1::1"));
        CHECK(r.start == ip("fd00:1::1"));
        CHECK(r.end == ip("fd00:1::ffff:ffff:ffff:ffff"));
    }
    SUBCASE("explicit values are kept, empty strings mean unset") {
        auto r = parse(one({{"subnet", "10.1.2.0/24"}, {"rangeStart", "10.1.2.10"}, {"rangeEnd", ""}, {"gateway", "10.1.2.254"}}))
                     .ranges[0][0];
        CHECK(r.start == ip("10.1.2.10"));
        CHECK(r.end == ip("10.1.2.254"));
        CHECK(r.gateway == ip("10.1.2.254"));
    }
    SUBCASE("files and timeouts") {
        auto c = parse({{"subnet", "10.0.0.0/24"}});
        CHECK(c.data_dir == "/var/lib/cni/networks");
        CHECK_FALSE(c.resolv_conf);
        CHECK(c.lock_timeout == std::chrono::milliseconds(10000));
        c = parse({{"subnet", "10.0.0.0/24"}, {"dataDir", "/run/x"}, {"resolvConf", "/etc/r"}, {"lockTimeout", 0.2}});
        CHECK(c.data_dir == "/run/x");
        CHECK(c.resolv_conf == "/etc/r");
        CHECK(c.lock_timeout == std::chrono::milliseconds(200));
        CHECK(parse({{"subnet", "10.0.0.0/24"}, {"lockTimeout", 0.0001}}).lock_timeout == std::chrono::milliseconds(1));
        CHECK(parse({{"subnet", "10.0.0.0/24"}, {"lockTimeout", 1.2345}}).lock_timeout == std::chrono::milliseconds(1235));
    }
    SUBCASE("fsync: off unless asked for") {
        CHECK_FALSE(parse({{"subnet", "10.0.0.0/24"}}).fsync);
        CHECK(parse({{"subnet", "10.0.0.0/24"}, {"fsync", true}}).fsync);
        CHECK_FALSE(parse({{"subnet", "10.0.0.0/24"}, {"fsync", false}}).fsync);
    }
}

TEST_CASE("config: runtime ranges come first, then the legacy range, then ranges") {
    json ipam = {{"subnet", "10.2.0.0/24"}, {"ranges", {{{{"subnet", "10.3.0.0/24"}}}, {{{"subnet", "fd00::/64"}}}}}};
    // Go's encoding/json matches runtimeConfig keys case-insensitively.
    auto c = parse(ipam, "1.0.0", {{"IPRANGES", {{{{"subnet", "10.1.0.0/24"}}}}}});
    REQUIRE(c.ranges.size() == 4);
    CHECK(c.ranges[0][0].subnet.str() == "10.1.0.0/24");
    CHECK(c.ranges[1][0].subnet.str() == "10.2.0.0/24");
    CHECK(c.ranges[2][0].subnet.str() == "10.3.0.0/24");
    CHECK(c.ranges[3][0].subnet.str() == "fd00::/64");
}

TEST_CASE("config: one IPv4 and one IPv6 set are fine before 0.3.0") {
    json ipam = {{"ranges", {{{{"subnet", "10.0.0.0/24"}}}, {{{"subnet", "fd00::/64"}}}}}};
    CHECK(parse(ipam, "0.2.0").ranges.size() == 2);
    json two_v4 = {{"ranges", {{{{"subnet", "10.0.0.0/24"}}}, {{{"subnet", "10.1.0.0/24"}}}}}};
    CHECK(parse(two_v4, "0.3.1").ranges.size() == 2);
}

TEST_CASE("config: a range set may hold several disjoint ranges") {
    json ipam = {{"ranges", {{{{"subnet", "10.0.0.0/24"}, {"rangeStart", "10.0.0.10"}, {"rangeEnd", "10.0.0.20"}},
                               {{"subnet", "10.0.0.0/24"}, {"rangeStart", "10.0.0.30"}, {"rangeEnd", "10.0.0.40"}}}}}};
    auto c = parse(ipam);
    REQUIRE(c.ranges[0].size() == 2);
    CHECK(c.ranges[0][1].start == ip("10.0.0.30"));
}

TEST_CASE("config: routes are copied, including the CNI 1.1 route fields") {
    json ipam = {{"subnet", "10.0.0.0/24"},
                 {"routes", {{{"dst", "0.0.0.0/0"}},
                             {{"dst", "192.168.0.0/16"}, {"gw", "10.0.0.254"}, {"mtu", 1400}, {"advmss", 1360},
                              {"priority", 10}, {"table", 100}, {"scope", 0}}}}};
    auto c = parse(ipam);
    REQUIRE(c.routes.size() == 2);
    CHECK(c.routes[0].dst.str() == "0.0.0.0/0");
    CHECK_FALSE(c.routes[0].gw);
    CHECK(c.routes[1].gw == ip("10.0.0.254"));
    CHECK(c.routes[1].mtu == 1400);
    CHECK(c.routes[1].advmss == 1360);
    CHECK(c.routes[1].priority == 10);
    CHECK(c.routes[1].table == 100);
    CHECK(c.routes[1].scope == 0);
}
