// nodeSelector parsing and matching: Kubernetes label selector semantics, table-driven.
#include <doctest/doctest.h>

#include "cni/error.h"
#include "cni/attach/attachment.h"
#include "placement/labels.h"
#include "conf/netconf.h"
#include "../support.h"

using nlohmann::json;

namespace {


bool sel_matches(const json& selector, const placement::Labels& labels) {
    return placement::matches(conf::parse_label_selector(selector, "nodeSelector"), labels);
}

const placement::Labels kNode = {
    {"zone", "a"},
    {"cores", "16"},
    {"feature.node.kubernetes.io/network-sriov.capable", "true"},
    {"empty", ""},
    {"word", "many"},
};

}  // namespace

TEST_CASE("selector: every operator follows apimachinery's Requirement.Matches") {
    struct Row {
        const char* what;
        json expr;
        bool want;
    };
    const Row rows[] = {
        {"In, value present", {{"key", "zone"}, {"operator", "In"}, {"values", {"a", "b"}}}, true},
        {"In, other value", {{"key", "zone"}, {"operator", "In"}, {"values", {"b"}}}, false},
        {"In, key absent", {{"key", "gpu"}, {"operator", "In"}, {"values", {"x"}}}, false},
        {"In, empty value", {{"key", "empty"}, {"operator", "In"}, {"values", {""}}}, true},
        {"NotIn, other value", {{"key", "zone"}, {"operator", "NotIn"}, {"values", {"b"}}}, true},
        {"NotIn, value present", {{"key", "zone"}, {"operator", "NotIn"}, {"values", {"a"}}}, false},
        {"NotIn, key absent matches", {{"key", "gpu"}, {"operator", "NotIn"}, {"values", {"x"}}}, true},
        {"Exists", {{"key", "zone"}, {"operator", "Exists"}}, true},
        {"Exists, empty value counts", {{"key", "empty"}, {"operator", "Exists"}}, true},
        {"Exists, absent", {{"key", "gpu"}, {"operator", "Exists"}}, false},
        {"DoesNotExist, absent", {{"key", "gpu"}, {"operator", "DoesNotExist"}}, true},
        {"DoesNotExist, present", {{"key", "zone"}, {"operator", "DoesNotExist"}, {"values", json::array()}}, false},
        {"Gt, larger", {{"key", "cores"}, {"operator", "Gt"}, {"values", {"8"}}}, true},
        {"Gt, equal", {{"key", "cores"}, {"operator", "Gt"}, {"values", {"16"}}}, false},
        {"Gt, negative bound", {{"key", "cores"}, {"operator", "Gt"}, {"values", {"-3"}}}, true},
        {"Gt, key absent", {{"key", "gpu"}, {"operator", "Gt"}, {"values", {"1"}}}, false},
        {"Gt, label not a number", {{"key", "word"}, {"operator", "Gt"}, {"values", {"1"}}}, false},
        {"Lt, smaller", {{"key", "cores"}, {"operator", "Lt"}, {"values", {"32"}}}, true},
        {"Lt, larger", {{"key", "cores"}, {"operator", "Lt"}, {"values", {"4"}}}, false},
        {"Lt, key absent", {{"key", "gpu"}, {"operator", "Lt"}, {"values", {"4"}}}, false},
    };
    for (auto& r : rows) {
        CAPTURE(r.what);
        json sel = {{"matchExpressions", {r.expr}}};
        CHECK(sel_matches(sel, kNode) == r.want);
    }
}

TEST_CASE("selector: Gt and Lt compare as int64, not as strings") {
    placement::Labels l = {{"n", "9"}, {"big", "9223372036854775807"}, {"huge", "9223372036854775808"}};
    CHECK(sel_matches({{"matchExpressions", {{{"key", "n"}, {"operator", "Lt"}, {"values", {"10"}}}}}}, l));
    CHECK(sel_matches({{"matchExpressions", {{{"key", "big"}, {"operator", "Gt"}, {"values", {"0"}}}}}}, l));
    // Out of int64 range: parse failure, so no match either way.
    CHECK_FALSE(sel_matches({{"matchExpressions", {{{"key", "huge"}, {"operator", "Gt"}, {"values", {"0"}}}}}}, l));
    CHECK_FALSE(sel_matches({{"matchExpressions", {{{"key", "huge"}, {"operator", "Lt"}, {"values", {"0"}}}}}}, l));
}

TEST_CASE("selector: map form, matchLabels and matchExpressions are ANDed; {} matches every node") {
    CHECK(sel_matches(json::object(), {}));
    CHECK(sel_matches({{"zone", "a"}, {"cores", "16"}}, kNode));
    CHECK_FALSE(sel_matches({{"zone", "a"}, {"cores", "8"}}, kNode));
    CHECK_FALSE(sel_matches({{"zone", "a"}}, {}));
    json both = {{"matchLabels", {{"zone", "a"}}},
                 {"matchExpressions", {{{"key", "cores"}, {"operator", "Gt"}, {"values", {"32"}}}}}};
    CHECK_FALSE(sel_matches(both, kNode));
    both["matchExpressions"][0]["values"] = {"8"};
    CHECK(sel_matches(both, kNode));
    CHECK(sel_matches({{"matchLabels", json::object()}}, {}));
    CHECK(sel_matches({{"feature.node.kubernetes.io/network-sriov.capable", "true"}}, kNode));
}

TEST_CASE("selector: an invalid selector is code 7 naming the bad part by its path") {
    struct Row {
        json sel;
        const char* path;
    };
    const Row rows[] = {
        {{{"matchExpressions", {{{"key", "a"}, {"operator", "In"}, {"values", {"x"}}},
                                {{"key", "b"}, {"operator", "Equals"}, {"values", {"x"}}}}}},
         "nodeSelector.matchExpressions[1].operator: 'Equals' is not one of"},
        {{{"matchExpressions", {{{"key", "a"}, {"values", {"x"}}}}}}, "nodeSelector.matchExpressions[0].operator: missing"},
        {{{"matchExpressions", {{{"operator", "Exists"}}}}}, "nodeSelector.matchExpressions[0].key: missing"},
        {{{"matchExpressions", {{{"key", "a"}, {"operator", "In"}}}}}, "nodeSelector.matchExpressions[0].values: must not be empty"},
        {{{"matchExpressions", {{{"key", "a"}, {"operator", "Exists"}, {"values", {"x"}}}}}},
         "nodeSelector.matchExpressions[0].values: must be empty for Exists"},
        {{{"matchExpressions", {{{"key", "a"}, {"operator", "Gt"}, {"values", {"1", "2"}}}}}},
         "nodeSelector.matchExpressions[0].values: must hold exactly one integer"},
        {{{"matchExpressions", {{{"key", "a"}, {"operator", "Lt"}, {"values", {"1.5"}}}}}},
         "nodeSelector.matchExpressions[0].values[0]: '1.5' is not a 64-bit integer"},
        {{{"matchExpressions", {{{"key", "a"}, {"operator", "In"}, {"values", {"ok", "bad value"}}}}}},
         "nodeSelector.matchExpressions[0].values[1]: label value 'bad value'"},
        {{{"matchExpressions", {{{"key", "a"}, {"operator", "In"}, {"values", {"x"}}, {"value", "y"}}}}},
         "nodeSelector.matchExpressions[0].value: unknown key"},
        {{{"matchExpressions", {"zone"}}}, "nodeSelector.matchExpressions[0]: expected an object"},
        {{{"matchExpressions", {{"key", "a"}}}}, "nodeSelector.matchExpressions: expected a list"},
        {{{"matchLabels", {{"zone", 1}}}}, "nodeSelector.matchLabels[\"zone\"]: expected a string"},
        {{{"matchLabels", {{"zone", "a"}}}, {"nodeSelectorTerms", json::array()}},
         "nodeSelector.nodeSelectorTerms: unknown key in a label selector"},
        {{{"Zone_", "a"}}, "nodeSelector[\"Zone_\"]: label key 'Zone_' must begin and end"},
        {{{"Example.com/zone", "a"}}, "label key 'Example.com/zone': prefix may contain only lower-case"},
        {{{"example.com/", "a"}}, "label key 'example.com/': name must not be empty"},
        {{{std::string(64, 'k'), "a"}}, "must be at most 63 characters"},
        {{{"zone", std::string(64, 'v')}}, "nodeSelector[\"zone\"]: label value"},
        {"zone=a", "nodeSelector: expected an object"},
    };
    for (auto& r : rows) {
        CAPTURE(r.sel.dump());
        std::string e = support::coded_error([&] { conf::parse_label_selector(r.sel, "nodeSelector"); });
        CHECK(e.rfind("7 ", 0) == 0);
        CHECK(e.find(r.path) != std::string::npos);
    }
}

TEST_CASE("selector: requirements print the way kubectl shows them") {
    auto s = conf::parse_label_selector(
        {{"matchExpressions",
          {{{"key", "z"}, {"operator", "In"}, {"values", {"a", "b"}}}, {{"key", "z"}, {"operator", "NotIn"}, {"values", {"c"}}},
           {{"key", "g"}, {"operator", "Exists"}}, {{"key", "g"}, {"operator", "DoesNotExist"}},
           {{"key", "n"}, {"operator", "Gt"}, {"values", {"3"}}}, {{"key", "n"}, {"operator", "Lt"}, {"values", {"9"}}}}}},
        "nodeSelector");
    std::vector<std::string> got;
    for (auto& r : s.requirements) got.push_back(placement::to_string(r));
    CHECK(got == std::vector<std::string>{"z in (a,b)", "z notin (c)", "g", "!g", "n>3", "n<9"});
    CHECK(placement::evidence(s.requirements[0], {{"z", "q"}}) == "z=q");
    CHECK(placement::evidence(s.requirements[0], {}) == "z absent");
}

TEST_CASE("labels file: JSON object or NFD features.d lines") {
    SUBCASE("JSON") {
        auto l = placement::parse_labels(R"({"zone": "a", "sriov": true, "count": 3})", "/f");
        CHECK(l == placement::Labels{{"zone", "a"}, {"sriov", "true"}, {"count", "3"}});
        CHECK(support::coded_error([] { placement::parse_labels(R"({"zone": ["a"]})", "/f"); }).find("label 'zone' must be a string") !=
              std::string::npos);
        CHECK(support::coded_error([] { placement::parse_labels("{oops", "/f"); }).rfind("7 nodeLabelsFile: '/f'", 0) == 0);
    }
    SUBCASE("features.d lines") {
        auto l = placement::parse_labels("# +expiry-time=2030-01-01T00:00:00Z\n"
                                   "example.com/zone=a\n"
                                   "  example.com/rack = r7  \n"
                                   "sriov-numa0\n"
                                   "\n"
                                   "example.com/gone=1\n"
                                   "-example.com/gone\n"
                                   "example.com/empty=\n",
                                   "/f");
        CHECK(l == placement::Labels{{"example.com/zone", "a"},
                               {"example.com/rack", "r7"},
                               {"feature.node.kubernetes.io/sriov-numa0", "true"},
                               {"example.com/empty", ""}});
        CHECK(support::coded_error([] { placement::parse_labels("ok=1\nbad key=2\n", "/f"); }).find("line 2") != std::string::npos);
        CHECK(support::coded_error([] { placement::parse_labels("=x\n", "/f"); }).find("line 1") != std::string::npos);
    }
}

TEST_CASE("config: placement keys are checked and name the key") {
    auto parse = [](json extra) {
        json c = {{"cniVersion", "1.0.0"}, {"name", "n"}, {"type", "topocni"}, {"attachment", "macvlan"}, {"master", "eth0"}};
        c.update(extra);
        return cni::parse_config(c.dump(), {});
    };
    auto c = parse({{"nodeSelector", {{"zone", "a"}}}, {"topology", {{"numaPolicy", "single-numa-node"}, {"numaNode", 1}}}});
    REQUIRE(c.placement);
    CHECK(c.placement->node_labels_ttl == 60);
    CHECK(c.placement->kubelet_root_dir == "/var/lib/kubelet");
    CHECK(c.placement->topology->numa_policy == conf::NumaPolicy::SingleNumaNode);
    CHECK(*c.placement->topology->numa_node == 1);
    CHECK_FALSE(c.placement->topology->deny_unknown);
    CHECK_FALSE(parse(json::object()).placement);

    struct Row {
        json extra;
        const char* want;
    };
    const Row rows[] = {
        {{{"topology", {{"numaPolicy", "strict"}}}}, "topology.numaPolicy: 'strict' is not one of"},
        {{{"topology", {{"numaNode", -1}}}}, "topology.numaNode: must be between 0"},
        {{{"topology", {{"unknownTopology", "maybe"}}}}, "topology.unknownTopology: 'maybe'"},
        {{{"topology", {{"minLinkSpeed", 10}}}}, "topology.minLinkSpeed: unknown key"},
        {{{"topology", {{"maxAttachmentsPerMaster", 0}}}}, "topology.maxAttachmentsPerMaster: must be between 1"},
        {{{"topology", {{"minFreeAddresses", 3}}}}, "topology.minFreeAddresses: needs host-local ipam"},
        {{{"nodeName", "Worker_1"}}, "nodeName: 'Worker_1'"},
        {{{"nodeLabelsFile", "labels.txt"}}, "nodeLabelsFile: 'labels.txt' must be an absolute path"},
        {{{"kubeconfig", "kc"}}, "kubeconfig: 'kc' must be an absolute path"},
        {{{"nodeLabelsTTL", -1}}, "nodeLabelsTTL: must be between 0"},
        {{{"kubeletRootDir", "var"}}, "kubeletRootDir: 'var' must be an absolute path"},
        {{{"nodeSelector", {{"matchExpressions", {{{"key", "a"}, {"operator", "in"}, {"values", {"x"}}}}}}}},
         "nodeSelector.matchExpressions[0].operator: 'in'"},
    };
    for (auto& r : rows) {
        CAPTURE(r.extra.dump());
        std::string e = support::coded_error([&] { parse(r.extra); });
        CHECK(e.rfind("7 ", 0) == 0);
        CHECK(e.find(r.want) != std::string::npos);
    }
}

TEST_CASE("config: device constraints on a veth are accepted (unknown topology decides); delegate replaces attachment") {
    json veth = {{"cniVersion", "1.0.0"}, {"name", "n"}, {"type", "topocni"},
                 {"ipam", {{"type", "host-local"}, {"subnet", "10.9.0.0/24"}}}};
    for (const char* key : {"numaNode", "minLinkSpeedMbps", "maxAttachmentsPerMaster"}) {
        json c = veth;
        c["topology"] = {{key, 1}};
        CHECK(cni::parse_config(c.dump(), {}).placement->topology);
    }
    json numa = veth;
    numa["topology"] = {{"numaPolicy", "single-numa-node"}};
    CHECK(cni::parse_config(numa.dump(), {}).placement->topology->numa_policy == conf::NumaPolicy::SingleNumaNode);
    json ok = veth;
    ok["topology"] = {{"minFreeAddresses", 2}, {"numaPolicy", "none"}};
    CHECK(cni::parse_config(ok.dump(), {}).placement->topology->min_free_addresses == 2);

    json meta = {{"cniVersion", "1.0.0"}, {"name", "n"}, {"type", "topocni"},
                 {"delegate", {{"type", "macvlan"}, {"master", "eth0"}}}, {"topology", {{"numaNode", 0}}}};
    auto c = cni::parse_config(meta.dump(), {});
    REQUIRE(c.kind == "delegate");
    CHECK(c.raw["delegate"]["type"] == "macvlan");
    CHECK(c.placement->topology->numa_node == 0);

    json bad = meta;
    bad["delegate"]["type"] = "../bin/sh";
    CHECK(support::coded_error([&] { cni::parse_config(bad.dump(), {}); }).find("delegate.type: '../bin/sh' must be a plugin name") != std::string::npos);
    bad = meta;
    bad["delegate"].erase("type");
    CHECK(support::coded_error([&] { cni::parse_config(bad.dump(), {}); }).find("delegate.type: missing") != std::string::npos);
    bad = meta;
    bad["attachment"] = "macvlan";
    CHECK(support::coded_error([&] { cni::parse_config(bad.dump(), {}); }).find("delegate: cannot be combined with \"attachment\"") != std::string::npos);
    bad = meta;
    bad["delegate"] = "macvlan";
    CHECK(support::coded_error([&] { cni::parse_config(bad.dump(), {}); }).find("delegate: expected an object") != std::string::npos);
    bad = meta;
    bad["topology"] = {{"minFreeAddresses", 1}};
    CHECK(support::coded_error([&] { cni::parse_config(bad.dump(), {}); }).find("needs host-local ipam in delegate.ipam") != std::string::npos);
    bad["delegate"]["ipam"] = {{"type", "host-local"}, {"subnet", "10.1.0.0/24"}};
    CHECK(cni::parse_config(bad.dump(), {}).placement->topology->min_free_addresses == 1);
}
