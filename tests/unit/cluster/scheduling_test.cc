// The scheduler side on hand-made facts: the networks annotation in every form Multus
// accepts, ExtenderArgs read as Go reads it, and judge_node's verdicts and words.
#include <doctest/doctest.h>

#include "base/json_text.h"
#include "cluster/extender.h"
#include "cluster/networks.h"
#include "cluster/scheduling.h"
#include "cni/error.h"
#include "../support.h"

using nlohmann::json;
using namespace cluster;

namespace {


bool has(const std::string& s, const std::string& part) { return s.find(part) != std::string::npos; }

constexpr std::time_t kNow = 1'796'000'000;   // 2026-11-30

/// A node with one PF of 4 VFs on NUMA node `numa` (resource `res`), `used` of them in
/// use, and master eth1 (25 Gb/s, NUMA 0, 1 macvlan on it).
placement::NodeFacts facts(int numa = 1, int used = 1, const std::string& res = "intel.com/sriov") {
    placement::NodeFacts f;
    f.node = "w1";
    f.taken_at = "2026-11-30T07:33:20Z";   // kNow
    f.numa = {{0, "0-7"}, {1, "8-15"}};
    placement::PfFacts pf;
    pf.pci = "0000:af:00.0";
    pf.netdev = "ens2f0";
    pf.numa = numa;
    pf.speed_mbps = 25000;
    pf.resource_name = res;
    pf.total_vfs = 8;
    for (int i = 0; i < 4; ++i) pf.vfs.push_back({"0000:af:02." + std::to_string(i), numa, i < used, i < used ? "old" : ""});
    f.pfs.push_back(pf);
    placement::LinkFacts l;
    l.name = "eth1";
    l.has_device = true;
    l.numa = 0;
    l.speed_mbps = 25000;
    l.link_count = 1;
    l.link_sample = {"/run/netns/a"};
    f.links.push_back(l);
    return f;
}

NodeView view(const placement::NodeFacts& f, std::map<std::string, std::string> labels = {{"zone", "a"}}) {
    NodeView v;
    v.name = f.node;
    v.labels = std::move(labels);
    v.facts = std::make_shared<placement::NodeFacts>(f);
    v.taken_at = kNow;
    return v;
}

json nad(const std::string& name, const json& config, const std::string& resource = "") {
    json n = {{"apiVersion", "k8s.cni.cncf.io/v1"}, {"kind", "NetworkAttachmentDefinition"},
              {"metadata", {{"name", name}, {"namespace", "default"}}}, {"spec", {{"config", config.dump()}}}};
    if (!resource.empty()) n["metadata"]["annotations"] = {{kResourceNameAnnotation, resource}};
    return n;
}

PodNetwork sriov(const json& topology, const std::string& name = "sriov-a") {
    json c = {{"cniVersion", "1.0.0"}, {"name", name}, {"type", "topocni"}, {"attachment", "sriov"}, {"topology", topology}};
    json n = nad(name, c, "intel.com/sriov");
    return pod_network({"default", name, ""}, &n);
}

PodNetwork macvlan(const json& extra) {
    json c = {{"cniVersion", "1.0.0"}, {"name", "mv"}, {"type", "topocni"}, {"attachment", "macvlan"}, {"master", "eth1"}};
    c.update(extra);
    json n = nad("mv", c);
    return pod_network({"default", "mv", ""}, &n);
}

NodeVerdict judge(const std::vector<PodNetwork>& nets, const NodeView& v, std::vector<const PendingPod*> pending = {}) {
    return judge_node(nets, v, pending, {}, kNow);
}

}  // namespace

TEST_CASE("the networks annotation is read in every form Multus accepts") {
    auto a = parse_networks("sriov-a, other/mv@net5,x@eth9, ns2/y", "default");
    REQUIRE(a.size() == 4);
    CHECK((a[0].namespace_ == "default" && a[0].name == "sriov-a" && a[0].interface.empty()));
    CHECK((a[1].namespace_ == "other" && a[1].name == "mv" && a[1].interface == "net5"));
    CHECK((a[2].namespace_ == "default" && a[2].name == "x" && a[2].interface == "eth9"));
    CHECK((a[3].namespace_ == "ns2" && a[3].name == "y"));
    auto j = parse_networks(R"([{"name":"sriov-a","interface":"net1"},{"name":"mv","namespace":"other","ips":["10.0.0.5/24"]}])",
                            "default");
    REQUIRE(j.size() == 2);
    CHECK((j[0].namespace_ == "default" && j[0].interface == "net1"));
    CHECK(j[1].namespace_ == "other");
    CHECK(parse_networks("  ", "default").empty());
    CHECK(has(support::coded_error([] { parse_networks("a,,b", "d"); }), "an empty entry"));
    CHECK(has(support::coded_error([] { parse_networks("Bad_Name", "d"); }), "is not a valid name"));
    CHECK(has(support::coded_error([] { parse_networks(R"([{"name": 5}])", "d"); }), "[0].name: expected a string"));
    CHECK(has(support::coded_error([] { parse_networks("[1", "d"); }), "not a JSON list"));
}

TEST_CASE("ExtenderArgs are read with Go's names in any case, and a request without nodes is refused") {
    auto a = parse_extender_args(R"({"Pod": {"metadata": {"name": "p"}}, "Nodes": null, "NodeNames": ["w1", "w2"]})");
    CHECK(a.pod.name == "p");
    CHECK_FALSE(a.nodes);
    REQUIRE(a.node_names);
    CHECK(a.node_names->size() == 2);
    auto b = parse_extender_args(R"({"pod": {}, "nodes": {"items": [{"metadata": {"name": "w1"}}]}})");
    REQUIRE(b.nodes);
    CHECK(b.nodes->size() == 1);
    // As Go decodes: a later member of the same field (in any case) wins.
    auto c = parse_extender_args(R"({"Pod": {"metadata": {"name": "a"}}, "pod": {"metadata": {"name": "b"}}, "NodeNames": ["x"], "nodeNames": null, "Nodes": {"items": []}})");
    CHECK(c.pod.name == "b");
    // The Pod's fields as Go fills a v1.Pod: names ignoring case, annotation keys exact, a
    // later value winning, null emptying the annotations; nothing else of it is kept.
    auto d = parse_extender_args(R"({"Pod": {"spec": {"x": [1, {"y": null}]}, "Metadata": {"NAME": "n", "namespace": "ns", "uid": "u",
        "annotations": {"k8s.v1.cni.cncf.io/networks": "a", "K8s.v1.cni.cncf.io/networks": "no"}, "uid": "u2"}}, "NodeNames": []})");
    CHECK((d.pod.name == "n" && d.pod.namespace_ == "ns" && d.pod.uid == "u2" && d.pod.networks == "a"));
    auto e = parse_extender_args(R"({"Pod": {"metadata": {"annotations": {"k8s.v1.cni.cncf.io/networks": "a"}}}, "Pod": {"metadata": {"annotations": null}}, "NodeNames": []})");
    CHECK(e.pod.networks.empty());
    // Bounded: nesting as deep as Go's decoder allows, and a count of nodes.
    std::string deep = R"({"Pod": {"x": )" + std::string(base::json_text::kMaxDepth, '[') + std::string(base::json_text::kMaxDepth, ']') + R"(}, "NodeNames": []})";
    CHECK(has(support::coded_error([&] { parse_extender_args(deep); }), "nested deeper than 10000 levels"));
    std::string many = R"({"Pod": {}, "NodeNames": [)";
    for (size_t i = 0; i <= kMaxNodesPerRequest; ++i) many += i ? ",\"w\"" : "\"w\"";
    CHECK(has(support::coded_error([&] { parse_extender_args(many + "]}"); }), "more than 100000 nodes in one request"));
    many.pop_back();
    many.resize(many.rfind(','));
    CHECK(parse_extender_args(many + "]}").node_names->size() == kMaxNodesPerRequest);
    CHECK_FALSE(c.node_names);
    CHECK(c.nodes->empty());
    CHECK(has(support::coded_error([] { parse_extender_args(R"({"Pod": {}})"); }), "neither Nodes nor NodeNames"));
    CHECK(has(support::coded_error([] { parse_extender_args(R"({"Pod": 1, "NodeNames": []})"); }), "Pod: missing or not an object"));
    CHECK(has(support::coded_error([] { parse_extender_args(R"({"Pod": {}, "NodeNames": [1]})"); }), "not a string"));
    CHECK(has(support::coded_error([] { parse_extender_args(R"({"Pod": {}, "NodeNames": []} x)"); }), "not a JSON object"));
    CHECK(has(support::coded_error([] { parse_extender_args(R"({"Pod": {"a": 1e999}, "NodeNames": []})"); }), "a number too large for a double"));
    CHECK(has(support::coded_error([] { parse_extender_args(R"({"Pod": {}, "Nodes": {"items": [1]}})"); }), "a node that is not an object"));
}

TEST_CASE("a Node in ExtenderArgs is read for its name, version, labels and facts, and kept as the bytes sent") {
    std::string node = R"({"kind": "Node", "metadata": {"name": "w\u0031", "resourceVersion": "7", "labels": {"zone": "a"},)"
                       R"( "annotations": {"other": "x", "topocni.io/facts": "{\"version\": 1}"}}, "status": {"images": [1, 2.5e3, true, null]}})";
    auto a = parse_extender_args(R"({"Pod": {}, "Nodes": {"metadata": {}, "items": [ )" + node + R"( ,{"metadata": null}]}})");
    REQUIRE(a.nodes->size() == 2);
    const NodeItem& n = (*a.nodes)[0];
    CHECK(n.raw == node);
    CHECK(n.name == "w1");
    CHECK(n.resource_version == "7");
    CHECK(n.labels == R"({"zone": "a"})");
    CHECK(n.facts == R"("{\"version\": 1}")");
    CHECK((*a.nodes)[1].name.empty());
    CHECK((*a.nodes)[1].raw == R"({"metadata": null})");
}

TEST_CASE("an SR-IOV network fits where a free VF of its resource sits on the NUMA node its topology allows") {
    auto net = sriov({{"numaNode", 1}});
    REQUIRE(net.error.empty());
    CHECK(judge({net}, view(facts(1))).fits);
    auto wrong = judge({net}, view(facts(0)));
    CHECK_FALSE(wrong.fits);
    CHECK(wrong.reason == "topocni: default/sriov-a: topology.numaNode not met");
    CHECK(has(wrong.evidence, "VF 0000:af:02.1 is on NUMA node 0; numaNode 1"));
    CHECK(wrong.resolvable);   // another VF may free up
    auto none = judge({net}, view(facts(1, 4)));
    CHECK_FALSE(none.fits);
    CHECK(none.reason == "topocni: default/sriov-a: no free VF of resource intel.com/sriov");
    auto other = judge({net}, view(facts(1, 0, "mellanox.com/cx6")));
    CHECK(other.reason == "topocni: default/sriov-a: no SR-IOV PF of resource intel.com/sriov");
    CHECK_FALSE(other.resolvable);
}

TEST_CASE("every VF a pod asks for counts, across its networks") {
    auto a = sriov({}, "sriov-a"), b = sriov({}, "sriov-b");
    CHECK(judge({a, b}, view(facts(1, 2))).fits);        // 2 free, 2 asked
    CHECK_FALSE(judge({a, b}, view(facts(1, 3))).fits);  // 1 free, 2 asked
}

TEST_CASE("a pod bound but not yet attached takes the last VF before the next pod can") {
    auto net = sriov({});
    NodeView v = view(facts(1, 3));   // one free VF
    CHECK(judge({net}, v).fits);
    PendingPod first{"first-uid", "first", {net}};
    auto second = judge({net}, v, {&first});
    CHECK_FALSE(second.fits);
    CHECK(second.reason == "topocni: default/sriov-a: no free VF of resource intel.com/sriov");
    // Once the node's facts count the first pod, it is not counted twice.
    placement::NodeFacts f = facts(1, 4);
    f.pfs[0].vfs[3].pod_uid = "first-uid";
    CHECK_FALSE(judge({net}, view(f), {&first}).fits);   // still none free, but only because it is in use
    f.pfs[0].vfs[2].in_use = false;                      // a VF freed elsewhere
    CHECK(judge({net}, view(f), {&first}).fits);
}

TEST_CASE("a macvlan network is judged on its master: labels, speed, attachments, and a missing master") {
    CHECK(judge({macvlan({{"nodeSelector", {{"zone", "a"}}}})}, view(facts())).fits);
    auto labels = judge({macvlan({{"nodeSelector", {{"zone", "b"}}}})}, view(facts()));
    CHECK(labels.reason == "topocni: default/mv: nodeSelector not met");
    CHECK_FALSE(labels.resolvable);
    CHECK(has(labels.evidence, "wants zone=b, has zone=a"));
    auto speed = judge({macvlan({{"topology", {{"minLinkSpeedMbps", 100000}}}})}, view(facts()));
    CHECK(speed.reason == "topocni: default/mv: topology.minLinkSpeedMbps not met");
    CHECK(has(speed.evidence, "master 'eth1' runs at 25000 Mb/s; minLinkSpeedMbps 100000"));
    auto full = judge({macvlan({{"topology", {{"maxAttachmentsPerMaster", 1}}}})}, view(facts()));
    CHECK(full.reason == "topocni: default/mv: topology.maxAttachmentsPerMaster not met");
    CHECK(full.resolvable);
    auto missing = judge({macvlan({{"master", "eth9"}})}, view(facts()));
    CHECK(missing.reason == "topocni: default/mv: master not found");
    CHECK_FALSE(missing.resolvable);
}

TEST_CASE("without fresh facts, a NAD's unknownTopology decides and its labels are still checked") {
    NodeView v = view(facts());
    v.taken_at = kNow - 3600;
    CHECK(judge({sriov({{"numaNode", 1}})}, v).fits);
    auto deny = judge({sriov({{"numaNode", 1}, {"unknownTopology", "deny"}})}, v);
    CHECK(deny.reason == "topocni: default/sriov-a: no fresh facts from the node (unknownTopology deny)");
    CHECK(has(deny.evidence, "3600 s old"));
    NodeView none;
    none.name = "w2";
    none.facts_why = "the node publishes no topocni facts";
    CHECK(has(judge({macvlan({{"nodeSelector", {{"zone", "a"}}}})}, none).reason, "nodeSelector not met"));
}

TEST_CASE("a NAD that is missing or not topocni's: the pod fits nowhere, or is not judged") {
    auto missing = pod_network({"default", "gone", ""}, nullptr);
    auto v = judge({missing}, view(facts()));
    CHECK(v.reason == "topocni: default/gone: network-attachment-definition default/gone not found");
    CHECK_FALSE(v.resolvable);
    json other = nad("br", {{"cniVersion", "1.0.0"}, {"name", "br"}, {"type", "bridge"}});
    CHECK(judge({pod_network({"default", "br", ""}, &other)}, view(facts())).fits);
    json list = nad("l", {{"cniVersion", "1.0.0"}, {"name", "l"},
                          {"plugins", {{{"type", "topocni"}, {"attachment", "macvlan"}, {"master", "eth9"}}, {{"type", "tuning"}}}}});
    CHECK(judge({pod_network({"default", "l", ""}, &list)}, view(facts())).reason == "topocni: default/l: master not found");
}

TEST_CASE("filter answers with the survivors in the field the scheduler reads, and prioritize scores headroom") {
    Extender ext({});
    ext.replace_nads({nad("sriov-a", {{"cniVersion", "1.0.0"}, {"name", "sriov-a"}, {"type", "topocni"}, {"attachment", "sriov"},
                                      {"topology", {{"numaNode", 1}}}},
                          "intel.com/sriov")});
    auto node = [](const std::string& name, int numa, int used) {
        placement::NodeFacts f = facts(numa, used);
        f.node = name;
        return json{{"metadata", {{"name", name}, {"resourceVersion", "1"}, {"annotations", {{"topocni.io/facts", placement::to_json(f).dump()}}}}}};
    };
    ext.replace_nodes({node("w1", 1, 0), node("w2", 0, 0), node("w3", 1, 3)});
    json pod = {{"metadata", {{"name", "p"}, {"namespace", "default"}, {"uid", "u"},
                              {"annotations", {{kNetworksAnnotation, "sriov-a"}}}}}};
    auto args = [&](const json& p, json nodes, json names) {
        return parse_extender_args(json({{"Pod", p}, {"Nodes", nodes}, {"NodeNames", names}}).dump());
    };
    ExtenderArgs names = args(pod, nullptr, {"w1", "w2", "w3", "w4"});
    json r = json::parse(ext.filter(names, kNow).text());
    // w4 is in no cache: it has no facts, and the NAD's unknownTopology (allow) lets it pass.
    CHECK(r["NodeNames"] == json({"w1", "w3", "w4"}));
    CHECK(r["Nodes"].is_null());
    CHECK(r["FailedNodes"]["w2"] == "topocni: default/sriov-a: topology.numaNode not met");
    CHECK(r["FailedAndUnresolvableNodes"].empty());
    CHECK(r["Error"] == "");
    json p = json::parse(ext.prioritize(names, kNow));
    REQUIRE(p.size() == 4);
    // 1 + round(9 x headroom) on fresh facts; 0 for a node that does not fit or has no facts.
    CHECK(p[0] == json({{"Host", "w1"}, {"Score", 8}}));   // 3 of 4 VFs left after it: 1 + round(9 x 3/4)
    CHECK(p[1] == json({{"Host", "w2"}, {"Score", 0}}));   // does not fit
    CHECK(p[2] == json({{"Host", "w3"}, {"Score", 1}}));   // the last VF: fits, no headroom left
    CHECK(p[3] == json({{"Host", "w4"}, {"Score", 0}}));   // no facts: below every fresh node
    // Full Nodes: the ones that fit come back as sent. w2 is sent newer than the cache
    // holds (another resourceVersion, its VF now on NUMA node 1): the request's copy decides.
    json w2 = node("w2", 1, 0);
    w2["metadata"]["resourceVersion"] = "2";
    json o = json::parse(ext.filter(args(pod, {{"items", {node("w1", 1, 0), w2, node("w5", 0, 0), node("w6", 1, 0)}}}, nullptr), kNow).text());
    REQUIRE(o["Nodes"]["items"].size() == 3);
    CHECK(o["Nodes"]["items"][0] == node("w1", 1, 0));
    CHECK(o["Nodes"]["items"][1] == w2);
    CHECK(o["Nodes"]["items"][2] == node("w6", 1, 0));
    CHECK(o["FailedNodes"]["w5"] == "topocni: default/sriov-a: topology.numaNode not met");
    CHECK(o["NodeNames"].is_null());
    json plain = {{"metadata", {{"name", "q"}, {"namespace", "default"}}}};
    CHECK(json::parse(ext.filter(args(plain, nullptr, {"w2"}), kNow).text())["NodeNames"] == json({"w2"}));
}

namespace {

/// A node with PF 0000:af:00.0 (intel.com/pf0, VFs on NUMA node `numa0`) and PF
/// 0000:d8:00.0 (intel.com/pf1, VFs on `numa1`), two free VFs each.
placement::NodeFacts two_pfs(int numa0, int numa1) {
    placement::NodeFacts f = facts(numa0, 2, "intel.com/pf0");
    placement::PfFacts pf = f.pfs[0];
    pf.pci = "0000:d8:00.0";
    pf.netdev = "ens4f0";
    pf.numa = numa1;
    pf.resource_name = "intel.com/pf1";
    for (auto& v : pf.vfs) v.pci.replace(5, 2, "d8"), v.numa = numa1;
    f.pfs.push_back(pf);
    return f;
}

PodNetwork vf_of(const std::string& name, const std::string& resource, const json& topology) {
    json c = {{"cniVersion", "1.0.0"}, {"name", name}, {"type", "topocni"}, {"attachment", "sriov"}, {"topology", topology}};
    json n = nad(name, c, resource);
    return pod_network({"default", name, ""}, &n);
}

}  // namespace

TEST_CASE("a bound pod's rates count on a link whose facts have no ledger yet") {
    // node-report publishes the ledgers the state dir has: none before the first rates on eth1.
    auto net = macvlan({{"bandwidth", {{"egressRate", 600'000'000}, {"ingressRate", 1'000'000}}},
                        {"topology", {{"linkCapacityMbps", 1000}}}});
    REQUIRE(net.error.empty());
    NodeView v = view(facts());
    REQUIRE(v.facts->ledgers.empty());
    CHECK(judge({net}, v).fits);
    PendingPod first{"first-uid", "first", {net}};
    auto second = judge({net}, v, {&first});
    CHECK_FALSE(second.fits);
    CHECK(second.reason == "topocni: default/mv: bandwidth not met");
    CHECK(has(second.evidence, "committed egress 600 Mb/s"));
}

TEST_CASE("a bound pod takes an address of a pool the node's facts do not list yet, sized by the NAD") {
    // node-report publishes the pools of networks with attachments; a /29 gives 5 addresses.
    auto net = macvlan({{"ipam", {{"type", "host-local"}, {"subnet", "10.79.0.0/29"}, {"dataDir", "/nonexistent/topocni"}}},
                        {"topology", {{"minFreeAddresses", 3}}}});
    REQUIRE(net.error.empty());
    NodeView v = view(facts());
    REQUIRE(v.facts->networks.empty());
    PendingPod a{"a-uid", "a", {net}}, b{"b-uid", "b", {net}};
    CHECK(judge({net}, v, {&a}).fits);   // 5 - 1 bound - 1 for the pod: 3 stay free
    auto two = judge({net}, v, {&a, &b});
    CHECK_FALSE(two.fits);
    CHECK(two.reason == "topocni: default/mv: topology.minFreeAddresses not met");
    CHECK(has(two.evidence, "5 addresses, 2 reserved, 2 free after this allocation"));
}

TEST_CASE("two single-numa-node VFs fit only where one NUMA node holds a free VF for each") {
    auto east = vf_of("east", "intel.com/pf0", {{"numaPolicy", "single-numa-node"}});
    auto west = vf_of("west", "intel.com/pf1", {{"numaPolicy", "single-numa-node"}});
    REQUIRE(east.error.empty());
    CHECK(judge({east}, view(two_pfs(0, 1))).fits);   // each alone fits with its own CPUs
    CHECK(judge({west}, view(two_pfs(0, 1))).fits);
    auto split = judge({east, west}, view(two_pfs(0, 1)));
    CHECK_FALSE(split.fits);
    CHECK(split.reason == "topocni: default/west: topology.numaPolicy not met");
    CHECK(has(split.evidence, "the pod's CPUs are placed on NUMA node 0 with all its single-numa-node VFs"));
    CHECK(split.resolvable);   // a VF may free up where the other is
    CHECK(judge({east, west}, view(two_pfs(1, 1))).fits);
    // Without the policy the CPUs need not join the VFs.
    CHECK(judge({vf_of("east", "intel.com/pf0", json::object()), west}, view(two_pfs(0, 1))).fits);
}

TEST_CASE("two single-numa-node VFs of one resource count the VF the first one takes") {
    auto a = vf_of("a", "intel.com/sriov", {{"numaPolicy", "single-numa-node"}});
    auto b = vf_of("b", "intel.com/sriov", {{"numaPolicy", "single-numa-node"}});
    placement::NodeFacts f = facts(0, 1);   // VFs .1 .2 .3 free
    f.pfs[0].vfs[2].numa = 1;
    f.pfs[0].vfs[3].numa = 1;
    CHECK(judge({a, b}, view(f)).fits);   // both on NUMA node 1
    f.pfs[0].vfs[3].in_use = true;        // one free on each NUMA node
    auto one_each = judge({a, b}, view(f));
    CHECK_FALSE(one_each.fits);
    CHECK(one_each.reason == "topocni: default/b: topology.numaPolicy not met");
}
