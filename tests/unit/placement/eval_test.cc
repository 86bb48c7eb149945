// evaluate_placement on a fake node: sysfs tree, cpu_manager_state, labels file, IPAM
// store, SR-IOV state records. (Macvlan counting needs namespaces: integration tests.)
#include <doctest/doctest.h>

#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <iostream>
#include <sstream>

#include "cni/error.h"
#include "cni/attach/attachment.h"
#include "cni/cli/cli.h"
#include "placement/error.h"
#include "placement/placement.h"
#include "conf/netconf.h"
#include "../support.h"

namespace fs = std::filesystem;
using nlohmann::json;

namespace {

const char* kUid = "0f5c1a9e-1111-4222-8333-444455556666";

struct FakeNode : support::TempDir {
    FakeNode() : TempDir("eval") {
        write("sys/devices/system/node/node0/cpulist", "0-3\n");
        write("sys/devices/system/node/node1/cpulist", "4-7\n");
        fake_pf("0000:03:00.0", "ens1f0", 0, "25000");
        fake_vf("0000:03:02.0", "0000:03:00.0", 0);
        fake_vf("0000:03:02.1", "0000:03:00.0", 0);
        fake_vf("0000:03:02.2", "0000:03:00.0", 0);
        fake_pf("0000:81:00.0", "ens2f0", 1, "10000");
        fake_vf("0000:81:02.0", "0000:81:00.0", 1);
        write("sys/bus/pci/devices/0000:05:00.0/numa_node", "-1\n");   // no affinity, no physfn
        write("kubelet/cpu_manager_state", std::string(R"({"policyName":"static","defaultCpuSet":"0-1,6-7","entries":{")") +
                                               kUid + R"(":{"app":"2-3"},"wide":{"app":"2-5"}},"checksum":1})");
        write("labels", "example.com/zone=a\nexample.com/cores=16\n");
    }

    /// A meta-plugin config whose delegate gets `device` the way Multus passes it.
    json conf(const json& extra, const std::string& device = "0000:03:02.0") const {
        json c = {{"cniVersion", "1.0.0"},
                  {"name", "evalnet"},
                  {"type", "topocni"},
                  {"sysfsRoot", p("sys")},
                  {"stateDir", p("state")},
                  {"kubeletRootDir", p("kubelet")},
                  {"nodeName", "worker-1"},
                  {"nodeLabelsFile", p("labels")},
                  {"delegate", {{"type", "ptp"}}}};
        if (!device.empty()) c["deviceID"] = device;
        c.update(extra);
        return c;
    }
};

std::vector<placement::Verdict> eval(const json& c, const std::string& uid = kUid, placement::EvalOptions opt = {}) {
    auto net = cni::read_network(c.dump(), {});
    return placement::evaluate_placement(net.conf, *net.kind, {uid, "c1", "net1", nullptr}, opt);
}

const placement::Verdict& only(const std::vector<placement::Verdict>& v) {
    REQUIRE(v.size() == 1);
    return v[0];
}

bool has(const std::string& s, const std::string& part) { return s.find(part) != std::string::npos; }

}  // namespace

TEST_CASE("evaluate: nodeSelector against a labels file names node, source and the failing requirement") {
    FakeNode n;
    auto ok = only(eval(n.conf({{"nodeSelector", {{"example.com/zone", "a"}}}})));
    CHECK(ok.pass);
    CHECK(ok.constraint == "nodeSelector");
    CHECK(has(ok.evidence, "node 'worker-1' (labels from file '" + n.p("labels") + "'): matches example.com/zone=a"));

    json sel = {{"matchExpressions",
                 {{{"key", "example.com/cores"}, {"operator", "Gt"}, {"values", {"32"}}},
                  {{"key", "example.com/gpu"}, {"operator", "Exists"}}}}};
    auto bad = only(eval(n.conf({{"nodeSelector", sel}})));
    CHECK_FALSE(bad.pass);
    CHECK(has(bad.evidence, "wants example.com/cores>32, has example.com/cores=16; wants example.com/gpu, has example.com/gpu absent"));

    SUBCASE("explain's --node-labels replaces the configured sources") {
        n.write("other", R"({"example.com/cores": "64", "example.com/gpu": "yes"})");
        auto v = only(eval(n.conf({{"nodeSelector", sel}}), kUid, {n.p("other"), false, false}));
        CHECK(v.pass);
    }
    SUBCASE("a missing labels file is code 11, a broken one code 7; collect_errors turns them into verdicts") {
        json c = n.conf({{"nodeSelector", sel}, {"nodeLabelsFile", n.p("absent")}});
        CHECK_THROWS_WITH_AS(eval(c), doctest::Contains("does not exist (yet)"), placement::Error);
        auto v = only(eval(c, kUid, {"", false, true, cni::code_of}));
        CHECK_FALSE(v.pass);
        CHECK(has(v.evidence, "cannot evaluate (code 11)"));
        n.write("broken", "bad key=1\n");
        try {
            eval(n.conf({{"nodeSelector", sel}, {"nodeLabelsFile", n.p("broken")}}));
            FAIL("expected an error");
        } catch (const base::Error& e) {
            CHECK(cni::code_of(e) == cni::kInvalidConfig);
        }
    }
    SUBCASE("no labels source at all is code 7") {
        json c = n.conf({{"nodeSelector", sel}, {"kubeconfig", ""}});
        c.erase("nodeLabelsFile");
        CHECK_THROWS_WITH_AS(eval(c), doctest::Contains("nodeSelector: no source of node labels"), placement::Error);
    }
}

TEST_CASE("evaluate: numaPolicy compares the device's NUMA node with the pod's CPUs") {
    FakeNode n;
    auto policy = [&](const char* p, const std::string& dev, const std::string& uid = kUid, const char* unknown = "allow") {
        return only(eval(n.conf({{"topology", {{"numaPolicy", p}, {"unknownTopology", unknown}}}}, dev), uid));
    };
    auto v = policy("single-numa-node", "0000:03:02.0");
    CHECK(v.pass);
    CHECK(v.evidence == std::string("VF 0000:03:02.0 is on NUMA node 0; pod ") + kUid +
                            " CPUs 2-3 are on NUMA node 0; numaPolicy single-numa-node");
    v = policy("single-numa-node", "0000:81:02.0");
    CHECK_FALSE(v.pass);
    CHECK(v.evidence == std::string("VF 0000:81:02.0 is on NUMA node 1; pod ") + kUid +
                            " CPUs 2-3 are on NUMA node 0; numaPolicy single-numa-node");
    // A pod spanning two nodes never satisfies single-numa-node; restricted only needs one of them.
    CHECK_FALSE(policy("single-numa-node", "0000:81:02.0", "wide").pass);
    CHECK(has(policy("single-numa-node", "0000:03:02.0", "wide").evidence, "CPUs 2-5 are on NUMA nodes 0,1"));
    CHECK(policy("restricted", "0000:81:02.0", "wide").pass);
    CHECK_FALSE(policy("restricted", "0000:81:02.0").pass);
    v = policy("best-effort", "0000:81:02.0");
    CHECK(v.pass);
    CHECK(v.warning);

    SUBCASE("unknown topology: allowed with a warning, or denied") {
        for (auto [dev_, uid_, why_] : {std::tuple{"0000:05:00.0", kUid, "PCI device 0000:05:00.0 reports NUMA node -1"},
                                     std::tuple{"0000:03:02.0", "nobody", "pod nobody has no exclusive CPUs"},
                                     std::tuple{"0000:03:02.0", "", "no K8S_POD_UID"},
                                     std::tuple{"0000:09:00.0", kUid, "has no NUMA node in sysfs"}}) {
            // Plain copies: clang 14 cannot capture structured bindings (CAPTURE does).
            const char* dev = dev_;
            const char* uid = uid_;
            const char* why = why_;
            CAPTURE(why);
            auto a = policy("single-numa-node", dev, uid);
            CHECK(a.pass);
            CHECK(a.warning);
            CHECK(has(a.evidence, why));
            CHECK(has(a.evidence, "unknownTopology allow"));
            auto d = policy("single-numa-node", dev, uid, "deny");
            CHECK_FALSE(d.pass);
            CHECK(has(d.evidence, "unknownTopology deny"));
        }
        fs::remove(n.dir() / "kubelet/cpu_manager_state");
        auto m = policy("restricted", "0000:03:02.0", kUid, "deny");
        CHECK_FALSE(m.pass);
        CHECK(has(m.evidence, "cpu_manager_state' does not exist"));
    }
    SUBCASE("a delegate without a device has no NUMA node") {
        auto c = n.conf({{"topology", {{"numaPolicy", "restricted"}}}}, "");
        auto u = only(eval(c));
        CHECK(u.warning);
        CHECK(has(u.evidence, "delegate 'ptp' names no device"));
    }
}

TEST_CASE("evaluate: numaNode, minLinkSpeedMbps (the PF's speed) and maxAttachmentsPerMaster (VFs in use)") {
    FakeNode n;
    auto v = eval(n.conf({{"topology", {{"numaNode", 1}, {"minLinkSpeedMbps", 25000}, {"maxAttachmentsPerMaster", 2}}}}));
    REQUIRE(v.size() == 3);
    CHECK(v[0].constraint == "topology.numaNode");
    CHECK_FALSE(v[0].pass);
    CHECK(v[0].evidence == "VF 0000:03:02.0 is on NUMA node 0; numaNode 1");
    CHECK(v[1].constraint == "topology.minLinkSpeedMbps");
    CHECK(v[1].pass);
    CHECK(v[1].evidence == "PF 'ens1f0' of VF 0000:03:02.0 runs at 25000 Mb/s; minLinkSpeedMbps 25000");
    CHECK(v[2].pass);
    CHECK(v[2].evidence == "PF 0000:03:00.0 of VF 0000:03:02.0 has 0 VFs in use; maxAttachmentsPerMaster 2");

    // Records of other VFs of the same PF count, the VF itself and other PFs' do not.
    n.write("state/sriov/0000:03:02.1.json", R"({"pfPciAddress": "0000:03:00.0", "owner": {}})");
    n.write("state/sriov/0000:03:02.2.json", "not json");   // the PF comes from sysfs then
    n.write("state/sriov/0000:03:02.0.json", "{}");
    n.write("state/sriov/0000:81:02.0.json", "{}");
    n.write("state/sriov/0000:03:02.1.lock", "");
    auto w = eval(n.conf({{"topology", {{"maxAttachmentsPerMaster", 2}}}}));
    CHECK_FALSE(only(w).pass);
    CHECK(only(w).evidence == "PF 0000:03:00.0 of VF 0000:03:02.0 has 2 VFs in use (0000:03:02.1, 0000:03:02.2); "
                              "maxAttachmentsPerMaster 2");
    CHECK(only(eval(n.conf({{"topology", {{"maxAttachmentsPerMaster", 3}}}}))).pass);

    auto slow = only(eval(n.conf({{"topology", {{"minLinkSpeedMbps", 25000}}}}, "0000:81:02.0")));
    CHECK_FALSE(slow.pass);
    CHECK(has(slow.evidence, "PF 'ens2f0' of VF 0000:81:02.0 runs at 10000 Mb/s"));
    auto none = only(eval(n.conf({{"topology", {{"minLinkSpeedMbps", 1}, {"unknownTopology", "deny"}}}}, "0000:05:00.0")));
    CHECK_FALSE(none.pass);
    CHECK(has(none.evidence, "PCI device 0000:05:00.0 has no netdev in sysfs"));
}

TEST_CASE("evaluate: a veth has no device, so its NUMA and link constraints are unknown topology") {
    FakeNode n;
    json c = n.conf({{"topology", {{"numaPolicy", "single-numa-node"}, {"numaNode", 0}, {"minLinkSpeedMbps", 1000},
                                   {"maxAttachmentsPerMaster", 4}}}}, "");
    c.erase("delegate");
    c["ipam"] = {{"type", "host-local"}, {"subnet", "10.9.0.0/24"}, {"dataDir", n.p("ipam")}};
    auto allow = eval(c);
    REQUIRE(allow.size() == 4);
    for (auto& v : allow) {
        CAPTURE(v.evidence);
        CHECK(v.pass);
        CHECK(v.warning);
        CHECK(has(v.evidence, "attachment veth has no device"));
        CHECK(has(v.evidence, "unknownTopology allow"));
    }
    c["topology"]["unknownTopology"] = "deny";
    for (auto& v : eval(c)) {
        CAPTURE(v.evidence);
        CHECK_FALSE(v.pass);
        CHECK(has(v.evidence, "unknownTopology deny"));
    }
}

TEST_CASE("evaluate: minFreeAddresses counts the host-local pool after this allocation") {
    FakeNode n;
    // 10.5.0.0/29: .1 is the gateway, .2-.6 can be handed out: 5 addresses.
    json ipam = {{"type", "host-local"}, {"subnet", "10.5.0.0/29"}, {"dataDir", n.p("ipam")}};
    auto c = n.conf({{"topology", {{"minFreeAddresses", 3}}}});
    c["delegate"]["ipam"] = ipam;
    auto v = only(eval(c));
    CHECK(v.pass);
    CHECK(v.evidence == "range set 10.5.0.1-10.5.0.6: 5 addresses, 0 reserved, 4 free after this allocation; minFreeAddresses 3");
    CHECK_FALSE(fs::exists(n.dir() / "ipam"));   // evaluating created no store

    n.write("ipam/evalnet/10.5.0.2", "other\r\neth0");
    n.write("ipam/evalnet/10.5.0.3", "c1\r\nnet1");   // the attachment's own address (a CHECK)
    v = only(eval(c));
    CHECK(v.pass);
    CHECK(has(v.evidence, "2 reserved, 3 free after this allocation"));
    n.write("ipam/evalnet/10.5.0.4", "third\r\neth0");
    v = only(eval(c));
    CHECK_FALSE(v.pass);
    CHECK(has(v.evidence, "3 reserved, 2 free after this allocation"));
}

TEST_CASE("explain: a NAD in YAML, every constraint with its verdict, exit status 0 only when all pass") {
    FakeNode n;
    json inner = n.conf({{"nodeSelector", {{"example.com/zone", "a"}}},
                         {"topology", {{"numaPolicy", "single-numa-node"}, {"numaNode", 1}}}});
    n.write("nad.yaml", "apiVersion: k8s.cni.cncf.io/v1\n"
                        "kind: NetworkAttachmentDefinition\n"
                        "metadata:\n"
                        "  name: evalnet\n"
                        "  annotations:\n"
                        "    k8s.v1.cni.cncf.io/resourceName: intel.com/sriov\n"
                        "spec:\n"
                        "  config: |\n"
                        "    " + inner.dump() + "\n");
    auto explain = [](const std::string& path, const std::string& uid, const std::string& labels) {
        std::ostringstream out;
        auto* old = std::cout.rdbuf(out.rdbuf());
        auto* old_err = std::cerr.rdbuf(out.rdbuf());
        int rc = cni::explain_main(path, uid, labels);
        std::cout.rdbuf(old);
        std::cerr.rdbuf(old_err);
        return std::pair{rc, out.str()};
    };
    auto [rc, text] = explain(n.p("nad.yaml"), kUid, "");
    CHECK(rc == 1);
    CHECK(has(text, "network 'evalnet' from '" + n.p("nad.yaml") + "', node 'worker-1', pod " + kUid));
    CHECK(has(text, "PASS  nodeSelector: node 'worker-1'"));
    CHECK(has(text, "PASS  topology.numaPolicy: VF 0000:03:02.0 is on NUMA node 0; pod"));
    CHECK(has(text, "FAIL  topology.numaNode: VF 0000:03:02.0 is on NUMA node 0; numaNode 1"));
    CHECK(has(text, "1 of 3 constraints not met"));

    // A conflist in JSON whose topocni plugin has the constraints; --node-labels replaces the file.
    json list = {{"cniVersion", "1.0.0"}, {"name", "evalnet"},
                 {"plugins", {json{{"type", "tuning"}}, n.conf({{"nodeSelector", {{"example.com/zone", "b"}}}})}}};
    list["plugins"][1].erase("name");
    n.write("list.json", list.dump());
    n.write("zone-b", "example.com/zone=b\n");
    std::tie(rc, text) = explain(n.p("list.json"), "", n.p("zone-b"));
    CHECK(rc == 0);
    CHECK(has(text, "pod (no --pod-uid)"));
    CHECK(has(text, "labels from file '" + n.p("zone-b") + "'"));
    CHECK(has(text, "the constraint is met"));
    std::tie(rc, text) = explain(n.p("list.json"), "", "");
    CHECK(rc == 1);

    // Errors while evaluating one constraint are shown; an unreadable config is exit status 2.
    std::tie(rc, text) = explain(n.p("list.json"), "", n.p("absent"));
    CHECK(rc == 1);
    CHECK(has(text, "FAIL  nodeSelector: cannot evaluate (code 11)"));
    n.write("bad.yaml", "kind: NetworkAttachmentDefinition\nspec:\n  other: 1\n");
    std::tie(rc, text) = explain(n.p("bad.yaml"), "", "");
    CHECK(rc == 2);
    CHECK(has(text, "topocni explain: '" + n.p("bad.yaml") + "': spec.config: missing"));
    CHECK(explain(n.p("nothing.yaml"), "", "").first == 2);
    json plain = n.conf(json::object());
    n.write("plain.json", plain.dump());
    std::tie(rc, text) = explain(n.p("plain.json"), "", "");
    CHECK(rc == 0);
    CHECK(has(text, "no placement constraints"));
}

TEST_CASE("evaluate: the node name defaults to the host name, lower-cased as kubelet does") {
    FakeNode n;
    char buf[256] = {};
    REQUIRE(::gethostname(buf, sizeof buf - 1) == 0);
    std::string host = buf;
    for (auto& ch : host) ch = static_cast<char>(std::tolower(static_cast<unsigned char>(ch)));
    json c = n.conf({{"nodeSelector", {{"example.com/zone", "a"}}}});
    c.erase("nodeName");
    CHECK(has(only(eval(c)).evidence, "node '" + host + "'"));
}
