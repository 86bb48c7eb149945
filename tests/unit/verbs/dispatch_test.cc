// Text quoting outside input, the config read for teardown, and the protocol driven
// through dispatch() with stand-in verbs: what reaches the runtime is always JSON.
#include <doctest/doctest.h>

#include <map>

#include <nlohmann/json.hpp>

#include "cni/error.h"
#include "cni/attach/attachment.h"
#include "cni/result.h"
#include "base/text.h"
#include "cni/verbs/verbs.h"
#include "conf/netconf.h"

using nlohmann::json;

namespace {

struct Run {
    int rc;
    std::string out;
    json j;
};

cni::Output echo_add(const cni::Env&, const conf::NetConf& c, cni::Attachment&) {
    return cni::result_to_json(c.prev_result.value_or(base::Result{}), c.cni_version);
}
cni::Output nothing(const cni::Env&, const conf::NetConf&, cni::Attachment&) { return std::nullopt; }
const cni::VerbEntry kVerbs[] = {{cni::Verb::Add, echo_add, "0.1.0"}, {cni::Verb::Del, nothing, "0.1.0"}};

Run run(std::map<std::string, std::string> env, const std::string& stdin_text) {
    Run r;
    cni::PluginIo io;
    io.getenv = [&](const char* n) -> const char* {
        auto it = env.find(n);
        return it == env.end() ? nullptr : it->second.c_str();
    };
    io.read_stdin = [&] { return stdin_text; };
    io.write = [&](const std::string& s) { r.out += s; };
    io.configure_logging = false;
    r.rc = cni::dispatch(io, kVerbs);
    r.j = json::parse(r.out, nullptr, false);
    return r;
}

std::map<std::string, std::string> env(const char* verb) {
    return {{"CNI_COMMAND", verb}, {"CNI_CONTAINERID", "c1"}, {"CNI_NETNS", "/run/netns/p"}, {"CNI_IFNAME", "net1"},
            {"CNI_PATH", "/opt/cni/bin"}};
}

}  // namespace

TEST_CASE("text: valid UTF-8 passes unchanged, every other byte is escaped or replaced") {
    CHECK(base::valid_utf8("plain ascii"));
    CHECK(base::valid_utf8("caf\xc3\xa9 \xe2\x82\xac \xf0\x9f\x98\x80"));
    CHECK_FALSE(base::valid_utf8("n\xff"));
    CHECK_FALSE(base::valid_utf8("\xc0\xaf"));           // overlong '/'
    CHECK_FALSE(base::valid_utf8("\xed\xa0\x80"));       // a surrogate
    CHECK_FALSE(base::valid_utf8("\xf4\x90\x80\x80"));   // above U+10FFFF
    CHECK_FALSE(base::valid_utf8("\xe2\x82"));           // cut short
    CHECK(base::utf8_escaped("caf\xc3\xa9") == "caf\xc3\xa9");
    CHECK(base::utf8_escaped("n\xff\xc3") == "n\\xFF\\xC3");
    CHECK(base::utf8_replaced("n\xff") == "n\xef\xbf\xbd");
    CHECK(base::valid_utf8(base::utf8_escaped("\x80\x81\xfe\xff")));
}

TEST_CASE("protocol: a config whose name is not UTF-8 gets error JSON with the byte escaped, and its DEL succeeds") {
    const std::string conf = "{\"cniVersion\":\"1.0.0\",\"name\":\"n\xff\",\"type\":\"topocni\"}";
    Run add = run(env("ADD"), conf);
    CHECK(add.rc == 1);
    REQUIRE(add.j.is_object());
    CHECK(add.j["code"] == 6);
    CHECK(add.j["msg"].get<std::string>().find("\\xFF") != std::string::npos);
    Run del = run(env("DEL"), conf);
    CHECK(del.rc == 0);
    CHECK(del.out.empty());
}

TEST_CASE("protocol: cniVersion \"\" and a missing cniVersion are 0.1.0, in the result and in errors") {
    json prev = {{"cniVersion", "1.0.0"}, {"ips", {{{"address", "10.1.0.2/24"}, {"gateway", "10.1.0.1"}}}}};
    for (json c : {json{{"cniVersion", ""}}, json::object()}) {
        c["name"] = "n";
        c["type"] = "topocni";
        c["ipam"] = {{"type", "host-local"}, {"subnet", "10.1.0.0/24"}};
        c["prevResult"] = prev;
        Run add = run(env("ADD"), c.dump());
        CAPTURE(add.out);
        CHECK(add.rc == 0);
        CHECK(add.j["cniVersion"] == "0.1.0");
        CHECK(add.j["ip4"]["ip"] == "10.1.0.2/24");
        c["mtu"] = "big";
        Run bad = run(env("ADD"), c.dump());
        CHECK(bad.j["cniVersion"] == "0.1.0");
        CHECK(bad.j["code"] == 7);
    }
}

TEST_CASE("config: teardown treats keys it does not need as absent and names them") {
    json c = {{"cniVersion", "1.0.0"},
              {"name", "n"},
              {"type", "topocni"},
              {"attachment", "macvlan"},
              {"master", "eth0"},
              {"mode", "sideways"},
              {"logLevel", "loud"},
              {"capabilities", {"mac"}},
              {"nodeSelector", {{"matchExpressions", {{{"key", "a"}, {"operator", "Near"}}}}}},
              {"topology", {{"numaPolicy", "strict"}}},
              {"ipam", {{"type", "host-local"}, {"ranges", "bad"}, {"dataDir", "/data"}}}};
    CHECK_THROWS_AS(cni::parse_config(c.dump(), {}), base::Error);
    auto t = cni::parse_config(c.dump(), {}, conf::Purpose::Teardown);
    CHECK(t.name == "n");
    CHECK(t.kind == "macvlan");
    CHECK(t.ipam_type == "host-local");
    REQUIRE(t.host_local);
    CHECK(t.host_local->data_dir == "/data");
    CHECK(t.log_level == "error");
    CHECK_FALSE(t.placement);
    std::string all;
    for (auto& i : t.ignored) all += i + "\n";
    CAPTURE(all);
    for (auto* key : {"mode", "logLevel", "capabilities", "nodeSelector.matchExpressions[0].operator", "ipam.ranges"})
        CHECK(all.find(key) != std::string::npos);

    json nameless = c;
    nameless["name"] = "a/b";
    CHECK(cni::parse_config(nameless.dump(), {}, conf::Purpose::Teardown).name.empty());

    // What teardown cannot do without: a decodable object, a known version, GC's list.
    CHECK_THROWS_AS(cni::parse_config("{\"name\":", {}, conf::Purpose::Teardown), base::Error);
    json v = c;
    v["cniVersion"] = "9.9.9";
    CHECK_THROWS_AS(cni::parse_config(v.dump(), {}, conf::Purpose::Teardown), base::Error);
    json gc = c;
    gc["cni.dev/valid-attachments"] = "all";
    CHECK_THROWS_AS(cni::parse_config(gc.dump(), {}, conf::Purpose::Teardown), base::Error);
}
