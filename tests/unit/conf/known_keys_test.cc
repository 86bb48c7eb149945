#include <doctest/doctest.h>

#include <algorithm>

#include "conf/known_keys.h"

namespace {

bool has(const std::vector<std::string>& v, const std::string& s) { return std::find(v.begin(), v.end(), s) != v.end(); }

}  // namespace

TEST_CASE("a near miss is a case change, a swap, or one or two edits, never a different word") {
    CHECK(conf::near_miss("attachement", {"attachment", "master"}) == "attachment");
    CHECK(conf::near_miss("Attachment", {"attachment"}) == "attachment");
    CHECK(conf::near_miss("rangeStrat", {"rangeStart", "rangeEnd"}) == "rangeStart");
    CHECK(conf::near_miss("mtus", {"mtu"}) == "mtu");
    CHECK(conf::near_miss("ipMasq", {"ipam", "mac"}).empty());
    CHECK(conf::near_miss("gateway", {"gw", "dst"}).empty());
    CHECK(conf::near_miss("mod", {"mode", "node"}) == "mode");
}

TEST_CASE("unknown keys: near misses at the top level, every unknown key in topocni's own objects") {
    auto raw = nlohmann::json::parse(R"({
        "cniVersion": "1.0.0", "name": "n", "type": "topocni", "attachement": "macvlan",
        "example.com/other": 1, "ipMasq": true,
        "ipam": {"type": "host-local", "rangeStrat": "10.0.0.5", "ranges": [[{"subnet": "10.0.0.0/24", "gatway": "10.0.0.1"}]],
                 "routes": [{"dst": "0.0.0.0/0", "via": "10.0.0.1"}]},
        "dns": {"nameserver": ["10.0.0.1"]}
    })");
    auto u = conf::unknown_keys(raw);
    CHECK(u.size() == 5);
    CHECK(has(u, "attachement: unknown key, ignored (did you mean \"attachment\"?)"));
    CHECK(has(u, "ipam.rangeStrat: unknown key, ignored (did you mean \"rangeStart\"?)"));
    CHECK(has(u, "ipam.ranges[0][0].gatway: unknown key, ignored (did you mean \"gateway\"?)"));
    CHECK(has(u, "ipam.routes[0].via: unknown key, ignored (known: dst, gw, mtu, advmss, priority, table, scope)"));
    CHECK(has(u, "dns.nameserver: unknown key, ignored (did you mean \"nameservers\"?)"));

    SUBCASE("another IPAM plugin's keys are its own") {
        raw["ipam"]["type"] = "static";
        CHECK(conf::unknown_keys(raw).size() == 2);
    }
    SUBCASE("values of the wrong type are the parser's business, not a crash") {
        raw["ipam"]["ranges"] = "x";
        raw["dns"] = 3;
        CHECK(conf::unknown_keys(raw).size() == 3);
        CHECK(conf::unknown_keys(nlohmann::json::array()).empty());
    }
}
