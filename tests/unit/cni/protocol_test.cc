#include <doctest/doctest.h>

#include "cni/args.h"
#include "cni/attach/attachment.h"
#include "cni/env.h"
#include "cni/error.h"
#include "cni/result.h"
#include "cni/version.h"
#include "conf/netconf.h"

using nlohmann::json;

namespace {

int code_of(auto&& fn) {
    try { fn(); } catch (const base::Error& e) { return cni::code_of(e); }
    return 0;
}

std::string message_of(auto&& fn) {
    try { fn(); } catch (const base::Error& e) { return e.what(); }
    return "";
}

base::Result sample() {
    base::Result r;
    r.interfaces.push_back({.name = "veth1", .mac = "02:00:00:00:00:01", .mtu = 1500});
    r.interfaces.push_back({.name = "eth0", .mac = "02:00:00:00:00:02", .mtu = 1500, .sandbox = "/run/netns/x"});
    r.ips.push_back({*base::IpNet::parse("10.1.0.5/24"), base::IpAddr::parse("10.1.0.1"), 1});
    r.ips.push_back({*base::IpNet::parse("fd00::5/64"), base::IpAddr::parse("fd00::1"), 1});
    r.routes.push_back({*base::IpNet::parse("0.0.0.0/0"), std::nullopt, 1400});
    r.routes.push_back({*base::IpNet::parse("::/0"), base::IpAddr::parse("fd00::1")});
    return r;
}

}  // namespace

TEST_CASE("args: order, repeats and '=' inside values never matter") {
    auto a = cni::Args::parse("K8S_POD_NAME=x=y;IP=10.0.0.9/24;IgnoreUnknown=1;Foo=1;Foo=2;;");
    CHECK(a.pod_name == "x=y");
    CHECK(a.ips.at(0).str() == "10.0.0.9");
    CHECK(cni::Args::parse("IP=10.0.0.1,fd00::1").ips.size() == 2);
    CHECK(a.ignore_unknown);
    CHECK(a.all["Foo"] == "2");
    auto b = cni::Args::parse("IgnoreUnknown=true;K8S_POD_UID=abc;MAC=02:aa:bb:cc:dd:ee");
    CHECK(b.pod_uid == "abc");
    CHECK(*b.mac == "02:aa:bb:cc:dd:ee");
}

TEST_CASE("args: garbage is code 4 and names CNI_ARGS") {
    for (auto s : {"novalue", "=1", "IP=1.2.3", "MAC=zz", "IgnoreUnknown=maybe", "IP=10.0.0.1/99"}) {
        CAPTURE(s);
        CHECK(code_of([&] { cni::Args::parse(s); }) == cni::kInvalidEnv);
        CHECK(message_of([&] { cni::Args::parse(s); }).find("CNI_ARGS") != std::string::npos);
    }
}

TEST_CASE("env: interface names follow the kernel's rules") {
    CHECK(base::ifname_problem("eth0").empty());
    CHECK(base::ifname_problem("123456789012345").empty());
    CHECK_FALSE(base::ifname_problem("1234567890123456").empty());
    CHECK_FALSE(base::ifname_problem("a/b").empty());
    CHECK_FALSE(base::ifname_problem("a b").empty());
    CHECK_FALSE(base::ifname_problem("..").empty());
    CHECK_FALSE(base::ifname_problem("").empty());
    CHECK(base::valid_container_id("abc-1.2_3"));
    CHECK_FALSE(base::valid_container_id("-abc"));
    CHECK_FALSE(base::valid_container_id("a/b"));
}

TEST_CASE("version: exactly the seven spec versions, compared numerically") {
    CHECK(cni::supported_versions().size() == 7);
    CHECK(cni::compare_versions("0.10.0", "0.4.0") > 0);
    CHECK(cni::at_least("1.1.0", "1.1.0"));
    CHECK_FALSE(cni::at_least("0.3.1", "0.4.0"));
    CHECK(cni::at_least("", "0.1.0"));
    CHECK(code_of([] { cni::require_supported("0.5.0"); }) == cni::kIncompatibleVersion);
}

TEST_CASE("result: printed in the shape of every version") {
    auto r = sample();
    SUBCASE("1.1.0 carries interface mtu and route 1.1 fields") {
        auto j = cni::result_to_json(r, "1.1.0");
        CHECK(j["interfaces"][1]["mtu"] == 1500);
        CHECK(j["routes"][0]["mtu"] == 1400);
        CHECK_FALSE(j["ips"][0].contains("version"));
        CHECK_FALSE(j.contains("dns"));
    }
    SUBCASE("1.0.0 has no mtu fields") {
        auto j = cni::result_to_json(r, "1.0.0");
        CHECK_FALSE(j["interfaces"][1].contains("mtu"));
        CHECK_FALSE(j["routes"][0].contains("mtu"));
    }
    SUBCASE("0.3.x and 0.4.0 add ips[].version and always dns") {
        for (auto v : {"0.3.0", "0.3.1", "0.4.0"}) {
            auto j = cni::result_to_json(r, v);
            CHECK(j["cniVersion"] == v);
            CHECK(j["ips"][0]["version"] == "4");
            CHECK(j["ips"][1]["version"] == "6");
            CHECK(j["dns"].is_object());
        }
    }
    SUBCASE("0.1.0 and 0.2.0 have ip4 and ip6 with their routes") {
        auto j = cni::result_to_json(r, "0.2.0");
        CHECK(j["ip4"]["ip"] == "10.1.0.5/24");
        CHECK(j["ip4"]["gateway"] == "10.1.0.1");
        CHECK(j["ip4"]["routes"][0]["dst"] == "0.0.0.0/0");
        CHECK(j["ip6"]["routes"][0]["gw"] == "fd00::1");
        CHECK_FALSE(j.contains("interfaces"));
    }
    SUBCASE("an L2-only result cannot be expressed before 0.3.0") {
        base::Result l2;
        l2.interfaces.push_back({.name = "eth0"});
        CHECK(code_of([&] { cni::result_to_json(l2, "0.2.0"); }) == cni::kIncompatibleVersion);
        CHECK(cni::result_to_json(l2, "0.3.1")["interfaces"][0]["name"] == "eth0");
    }
}

TEST_CASE("result: every version reads back into the same addresses and routes") {
    auto r = sample();
    for (auto v : {"0.2.0", "0.3.1", "0.4.0", "1.0.0", "1.1.0"}) {
        CAPTURE(v);
        auto back = cni::result_from_json(cni::result_to_json(r, v), "prevResult");
        REQUIRE(back.ips.size() == 2);
        CHECK(back.ips[0].address == r.ips[0].address);
        CHECK(back.ips[1].gateway == r.ips[1].gateway);
        CHECK(back.routes.size() == 2);
    }
}

TEST_CASE("result: a bad prevResult is code 7 naming the key") {
    json j = {{"ips", {{{"address", "10.0.0.1"}}}}};
    CHECK(message_of([&] { cni::result_from_json(j, "prevResult"); }).find("prevResult.ips[0].address") == 0);
    json k = {{"interfaces", json::array()}, {"ips", {{{"address", "10.0.0.1/24"}, {"interface", 3}}}}};
    CHECK(code_of([&] { cni::result_from_json(k, "prevResult"); }) == cni::kInvalidConfig);
}

TEST_CASE("config: errors name the key by its path") {
    struct Case { const char* json; int code; const char* path; };
    Case cases[] = {
        {"{", cni::kDecodingFailure, "decode"},
        {"[]", cni::kDecodingFailure, "object"},
        {R"({"cniVersion":"9.9.9","name":"n"})", cni::kIncompatibleVersion, "9.9.9"},
        {R"({"cniVersion":"1.1.0"})", cni::kInvalidConfig, "name"},
        {R"({"cniVersion":"1.1.0","name":"a/b","ipam":{"type":"x"}})", cni::kInvalidConfig, "name"},
        {R"({"cniVersion":"1.1.0","name":"n","mtu":70000,"ipam":{"type":"x"}})", cni::kInvalidConfig, "mtu"},
        {R"({"cniVersion":"1.1.0","name":"n","mtu":1.5,"ipam":{"type":"x"}})", cni::kInvalidConfig, "mtu"},
        {R"({"cniVersion":"1.1.0","name":"n","mac":"01:00:00:00:00:01","ipam":{"type":"x"}})", cni::kInvalidConfig, "mac"},
        {R"({"cniVersion":"1.1.0","name":"n","attachment":"tap"})", cni::kInvalidConfig, "attachment"},
        {R"({"cniVersion":"1.1.0","name":"n","ipam":{"type":"/bin/sh"}})", cni::kInvalidConfig, "ipam.type"},
        {R"({"cniVersion":"1.1.0","name":"n","ipam":{"type":"x"},"prevResult":{"ips":[{"address":"1"}]}})",
         cni::kInvalidConfig, "prevResult.ips[0].address"},
        {R"({"cniVersion":"1.1.0","name":"n"})", cni::kInvalidConfig, "ipam"},
        {R"({"cniVersion":"1.1.0","name":"n","isGateway":true,"ipam":{"type":"x"}})", cni::kInvalidConfig, "isGateway"},
        {R"({"cniVersion":"1.1.0","name":"n","bridge":"a/b"})", cni::kInvalidConfig, "bridge"},
        {R"({"cniVersion":"1.1.0","name":"n","ipam":{"type":"x"},"cni.dev/valid-attachments":[{"ifname":"e"}]})",
         cni::kInvalidConfig, "cni.dev/valid-attachments[0].containerID"},
        {R"({"cniVersion":"1.1.0","name":"n","ipam":{"type":"x"},"runtimeConfig":{"mac":"nope"}})",
         cni::kInvalidConfig, "runtimeConfig.mac"},
    };
    for (auto& c : cases) {
        CAPTURE(c.json);
        CHECK(code_of([&] { cni::parse_config(c.json, {}); }) == c.code);
        CHECK(message_of([&] { cni::parse_config(c.json, {}); }).find(c.path) != std::string::npos);
    }
}

TEST_CASE("config: MAC precedence is runtimeConfig, then CNI_ARGS, then config") {
    std::string base = R"({"cniVersion":"1.1.0","name":"n","ipam":{"type":"x"},"mac":"02:00:00:00:00:01")";
    CHECK(*cni::parse_config(base + "}", {}).mac == "02:00:00:00:00:01");
    CHECK(*cni::parse_config(base + "}", {.mac = "02:00:00:00:00:02"}).mac == "02:00:00:00:00:02");
    CHECK(*cni::parse_config(base + R"(,"runtimeConfig":{"Mac":"02:00:00:00:00:03"}})", {.mac = "02:00:00:00:00:02"}).mac ==
          "02:00:00:00:00:03");
}

TEST_CASE("config: requested addresses come from CNI_ARGS, args.cni.ips and runtimeConfig.ips in that order") {
    auto c = cni::parse_config(R"({"cniVersion":"1.1.0","name":"n","ipam":{"type":"x"},
        "args":{"cni":{"ips":["10.0.0.2/24"]}},"runtimeConfig":{"ips":["10.0.0.3"]}})",
                         {.ips = {*base::IpAddr::parse("10.0.0.1")}});
    REQUIRE(c.requested_ips.size() == 3);
    CHECK(c.requested_ips[0].str() == "10.0.0.1");
    CHECK(c.requested_ips[1].str() == "10.0.0.2");
    CHECK(c.requested_ips[2].str() == "10.0.0.3");
}
