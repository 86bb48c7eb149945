// The scheduler's own books: resource names by Kubernetes' rules, what a NAD asks and a
// node offers, and the admission webhook's JSON patch, applied by nlohmann's RFC 6902
// implementation to the pod, for every selector operator and every shape of affinity.
#include <doctest/doctest.h>

#include <cstdlib>
#include <unistd.h>

#include "base/json_text.h"
#include "cluster/admission.h"
#include "cluster/resources.h"
#include "cni/error.h"
#include "conf/placement.h"
#include "../support.h"

using nlohmann::json;
using namespace cluster;

namespace {

json nad(const std::string& name, const json& config, const std::string& resource = "") {
    json n = {{"apiVersion", "k8s.cni.cncf.io/v1"}, {"kind", "NetworkAttachmentDefinition"},
              {"metadata", {{"name", name}, {"namespace", "default"}}}, {"spec", {{"config", config.dump()}}}};
    if (!resource.empty()) n["metadata"]["annotations"] = {{kResourceNameAnnotation, resource}};
    return n;
}

json macvlan_conf(const std::string& name, const json& extra = json::object()) {
    json c = {{"cniVersion", "1.0.0"}, {"name", name}, {"type", "topocni"}, {"attachment", "macvlan"}, {"master", "eth1"}};
    c.update(extra);
    return c;
}

json host_local(const std::string& subnet) {
    return {{"type", "host-local"}, {"subnet", subnet}, {"dataDir", "/nonexistent/topocni-unit"}};
}

/// A lookup over a fixed set of NADs, as the webhook's cache answers.
struct Nads {
    std::map<std::string, json> by_key;
    void add(const json& n) { by_key["default/" + n["metadata"]["name"].get<std::string>()] = n; }
    NadLookup lookup() const {
        return [this](const NetworkSelection& s) {
            auto it = by_key.find(s.namespace_ + "/" + s.name);
            return pod_network(s, it == by_key.end() ? nullptr : &it->second);
        };
    }
};

json pod(const std::string& networks, const json& spec_extra = json::object(), const json& annotations = json::object()) {
    json p = {{"apiVersion", "v1"}, {"kind", "Pod"},
              {"metadata", {{"name", "p"}, {"namespace", "default"}, {"annotations", {{kNetworksAnnotation, networks}}}}},
              {"spec", {{"containers", json::array({{{"name", "app"}, {"image", "busybox"}}})}}}};
    p["metadata"]["annotations"].update(annotations);
    p["spec"].update(spec_extra);
    return p;
}

/// The pod as the API server stores it after the webhook's patch.
json admitted(const json& p, const Nads& nads) {
    Mutation m = mutate_pod(p, "default", nads.lookup());
    REQUIRE_MESSAGE(m.allowed, m.message);
    return p.patch(m.patch);
}

conf::LabelSelector selector(const json& j) { return conf::parse_label_selector(j, "nodeSelector"); }

}  // namespace

TEST_CASE("resource names are valid by Kubernetes' rules, stable, and distinct for distinct links") {
    std::string why;
    CHECK(valid_resource_name(bandwidth_resource("macvlan.eth1", true), &why));
    CHECK(bandwidth_resource("macvlan.eth1", true) == "bandwidth.topocni.io/macvlan.eth1.egress");
    CHECK(bandwidth_resource("sriov.intel.com/sriov_netdevice", false) ==
          "bandwidth.topocni.io/sriov.intel.com_sriov_netdevice.ingress");
    CHECK(address_resource("macvlan-net") == "addresses.topocni.io/macvlan-net");
    // Too long, or with characters a name may not hold: cut, with a hash, still valid and distinct.
    std::string long_name(80, 'a');
    for (auto& n : {bandwidth_resource("sriov.example.com/" + long_name, true), bandwidth_resource("macvlan.eth@1:x", false),
                    address_resource("_net_"), address_resource(long_name), address_resource("-")}) {
        CHECK_MESSAGE(valid_resource_name(n, &why), n, ": ", why);
    }
    CHECK(address_resource(long_name) != address_resource(long_name + "b"));
    CHECK(address_resource(long_name) == address_resource(long_name));
    CHECK(bandwidth_resource("macvlan.a@b", true) != bandwidth_resource("macvlan.a#b", true));
    // The rules themselves.
    CHECK_FALSE(valid_resource_name("bandwidth", &why));
    CHECK_FALSE(valid_resource_name("kubernetes.io/x", &why));
    CHECK_FALSE(valid_resource_name("a.kubernetes.io/x", &why));
    CHECK_FALSE(valid_resource_name("requests.topocni.io/x", &why));
    CHECK_FALSE(valid_resource_name("Topocni.io/x", &why));
    CHECK_FALSE(valid_resource_name("topocni.io/-x", &why));
    CHECK_FALSE(valid_resource_name("topocni.io/" + std::string(64, 'x'), &why));
    CHECK(is_topocni_resource("bandwidth.topocni.io/x"));
    CHECK_FALSE(is_topocni_resource("intel.com/sriov"));
    // The extender's marker is valid, and outside the two domains (the publisher always
    // writes it, at marker_capacity, and never removes it).
    CHECK(valid_resource_name(kMarkerResource, &why));
    CHECK_FALSE(is_topocni_resource(kMarkerResource));
}

TEST_CASE("a node offers as many markers as it takes pods, and kubelet's default when that cannot be read") {
    CHECK(marker_capacity("110") == 110);
    CHECK(marker_capacity("250") == 250);
    CHECK(marker_capacity("1k") == 1000);
    CHECK(marker_capacity("") == 110);
    CHECK(marker_capacity("0") == 110);
    CHECK(marker_capacity("1.5") == 110);
    CHECK(marker_capacity("many") == 110);
}

TEST_CASE("quantities are read as Kubernetes writes them") {
    CHECK(*parse_quantity("10M") == 10e6);
    CHECK(*parse_quantity("1.5G") == 1.5e9);
    CHECK(*parse_quantity("100Mi") == 100.0 * 1048576);
    CHECK(*parse_quantity("2500") == 2500);
    CHECK(*parse_quantity("1e6") == 1e6);
    CHECK_FALSE(parse_quantity("ten"));
    CHECK_FALSE(parse_quantity("10 M"));
    CHECK_FALSE(parse_quantity(""));
    CHECK_FALSE(parse_quantity("1.2.3"));
}

TEST_CASE("a NAD asks its bandwidth in Mb/s rounded up and one address; the pod's annotations win where it takes the capability") {
    json bw = {{"egressRate", 1'500'001}, {"ingressRate", 3'000'000}};
    json n1 = nad("a", macvlan_conf("a", {{"bandwidth", bw}, {"ipam", host_local("10.1.0.0/24")}}));
    auto needs = needs_of(pod_network({"default", "a", ""}, &n1), {});
    CHECK((needs.resources == Resources{{"bandwidth.topocni.io/macvlan.eth1.egress", 2},
                                       {"bandwidth.topocni.io/macvlan.eth1.ingress", 3},
                                       {"addresses.topocni.io/a", 1}}));
    json n2 = nad("b", macvlan_conf("b", {{"bandwidth", bw}, {"capabilities", {{"bandwidth", true}}}}));
    auto pn = pod_network({"default", "b", ""}, &n2);
    CHECK((needs_of(pn, {{"kubernetes.io/egress-bandwidth", "10M"}}).resources ==
          Resources{{"bandwidth.topocni.io/macvlan.eth1.egress", 10}}));
    CHECK(needs_of(pn, {}).resources.size() == 2);   // no annotation: the NAD's own
    std::map<std::string, std::string> bad = {{"kubernetes.io/ingress-bandwidth", "lots"}};
    CHECK_THROWS_AS(needs_of(pn, bad), base::Error);
    // No link to name: not requested, and the note says why.
    json n3 = nad("c", json{{"cniVersion", "1.0.0"}, {"name", "c"}, {"type", "topocni"}, {"attachment", "veth"}, {"bandwidth", bw}, {"ipam", host_local("10.3.0.0/24")}});
    auto n3net = pod_network({"default", "c", ""}, &n3);
    REQUIRE_MESSAGE(n3net.error.empty(), n3net.error);
    auto n3needs = needs_of(n3net, {});
    CHECK((n3needs.resources == Resources{{"addresses.topocni.io/c", 1}}));
    REQUIRE(n3needs.notes.size() == 1);
    CHECK(n3needs.notes[0].find("shares no link") != std::string::npos);
    // An SR-IOV NAD names its link by the device plugin's resource.
    json n4 = nad("d", json{{"cniVersion", "1.0.0"}, {"name", "d"}, {"type", "topocni"}, {"attachment", "sriov"}, {"bandwidth", bw}},
                  "intel.com/sriov");
    CHECK((needs_of(pod_network({"default", "d", ""}, &n4), {}).resources.count("bandwidth.topocni.io/sriov.intel.com_sriov.egress")));
}

TEST_CASE("a node offers capacity x overcommit of each link a NAD can land on, the least when NADs disagree, and its pools' sizes") {
    placement::NodeFacts f;
    f.node = "w1";
    placement::LinkFacts l;
    l.name = "eth1";
    l.has_device = true;
    l.speed_mbps = 10000;
    f.links.push_back(l);
    placement::PfFacts pf;
    pf.pci = "0000:af:00.0";
    pf.netdev = "ens2f0";
    pf.speed_mbps = 25000;
    pf.resource_name = "intel.com/sriov";
    pf.total_vfs = 4;
    pf.vfs.push_back({"0000:af:02.0", 0, false, ""});
    f.pfs.push_back(pf);
    json bw = {{"egressRate", 1'000'000}};
    json a = nad("a", macvlan_conf("a", {{"bandwidth", bw}, {"topology", {{"bandwidthOvercommit", 1.5}}}}));
    json b = nad("b", macvlan_conf("b", {{"bandwidth", bw}, {"topology", {{"linkCapacityMbps", 4000}}}}));
    json c = nad("c", macvlan_conf("c", {{"bandwidth", bw}, {"nodeSelector", {{"zone", "b"}}}, {"master", "eth9"}}));
    json d = nad("d", json{{"cniVersion", "1.0.0"}, {"name", "d"}, {"type", "topocni"}, {"attachment", "sriov"}, {"bandwidth", bw}},
                 "intel.com/sriov");
    json e = nad("e", macvlan_conf("e", {{"ipam", host_local("10.2.0.0/29")}}));
    std::vector<PodNetwork> nets;
    for (auto* n : {&a, &b, &c, &d, &e}) nets.push_back(pod_network({"default", (*n)["metadata"]["name"], ""}, n));
    auto caps = capacities(nets, f, {{"zone", "a"}});
    CHECK((caps == Resources{{"bandwidth.topocni.io/macvlan.eth1.egress", 4000},
                            {"bandwidth.topocni.io/macvlan.eth1.ingress", 4000},
                            {"bandwidth.topocni.io/sriov.intel.com_sriov.egress", 25000},
                            {"bandwidth.topocni.io/sriov.intel.com_sriov.ingress", 25000},
                            {"addresses.topocni.io/e", 5}}));   // /29: 8 less network, broadcast, gateway
    // NAD c lands on zone b only, and its master is not on this node: nothing of it here.
    CHECK((capacities({nets[2]}, f, {{"zone", "b"}}).empty()));
    CHECK((masters_of(nets) == std::vector<std::string>{"eth1", "eth9"}));
}

TEST_CASE("a pool offers the pods it can take: its size less the largest minFreeAddresses of its network's NADs") {
    placement::NodeFacts f;
    f.node = "w1";
    placement::LinkFacts l;
    l.name = "eth1";
    l.has_device = true;
    f.links.push_back(l);
    auto with_reserve = [](const std::string& name, int reserve) {
        json c = macvlan_conf("shared", {{"ipam", host_local("10.2.0.0/29")}});
        if (reserve) c["topology"] = {{"minFreeAddresses", reserve}};
        return nad(name, c);
    };
    json none = with_reserve("none", 0), two = with_reserve("two", 2), all = with_reserve("all", 9);
    auto caps = [&](std::vector<const json*> nads) {
        std::vector<PodNetwork> nets;
        for (auto* n : nads) nets.push_back(pod_network({"default", (*n)["metadata"]["name"], ""}, n));
        return capacities(nets, f, {}).at("addresses.topocni.io/shared");
    };
    CHECK(caps({&none}) == 5);
    // ADD of the fourth pod would leave 1 free address, fewer than 2.
    CHECK(caps({&two}) == 3);
    CHECK(caps({&none, &two}) == 3);
    CHECK(caps({&all}) == 0);
}

TEST_CASE("a network's reserve is the largest minFreeAddresses of its NADs that land on the node and parse") {
    auto conf = [](const std::string& network, int reserve, const json& extra = json::object()) {
        json c = macvlan_conf(network, {{"ipam", host_local("10.2.0.0/29")}, {"topology", {{"minFreeAddresses", reserve}}}});
        c.update(extra);
        return c;
    };
    json a = nad("a", conf("shared", 2)), b = nad("b", conf("shared", 3)), c = nad("c", conf("other", 1));
    json elsewhere = nad("elsewhere", conf("shared", 5, {{"nodeSelector", {{"zone", "b"}}}}));
    json no_pool = nad("no-pool", macvlan_conf("bare", {{"topology", {{"minFreeAddresses", 4}}}}));
    std::vector<PodNetwork> nets;
    for (auto* n : {&a, &b, &c, &elsewhere, &no_pool}) nets.push_back(pod_network({"default", (*n)["metadata"]["name"], ""}, n));
    nets.push_back(pod_network({"default", "missing", ""}, nullptr));   // a NAD that is not there: no reserve, no throw
    CHECK((address_reserves(nets, {{"zone", "a"}}) == std::map<std::string, long long>{{"other", 1}, {"shared", 3}}));
    CHECK((address_reserves(nets, {{"zone", "b"}}) == std::map<std::string, long long>{{"other", 1}, {"shared", 5}}));
}

TEST_CASE("every selector operator becomes the same node selector requirement") {
    auto reqs = node_selector_requirements(selector(json{
        {"matchLabels", {{"zone", "a"}}},
        {"matchExpressions",
         {{{"key", "nic"}, {"operator", "In"}, {"values", {"cx6", "cx7"}}},
          {{"key", "tier"}, {"operator", "NotIn"}, {"values", {"edge"}}},
          {{"key", "sriov"}, {"operator", "Exists"}},
          {{"key", "legacy"}, {"operator", "DoesNotExist"}},
          {{"key", "gbps"}, {"operator", "Gt"}, {"values", {"24"}}},
          {{"key", "cores"}, {"operator", "Lt"}, {"values", {"129"}}}}}}));
    json want = json::parse(R"([
      {"key":"zone","operator":"In","values":["a"]},
      {"key":"nic","operator":"In","values":["cx6","cx7"]},
      {"key":"tier","operator":"NotIn","values":["edge"]},
      {"key":"sriov","operator":"Exists"},
      {"key":"legacy","operator":"DoesNotExist"},
      {"key":"gbps","operator":"Gt","values":["24"]},
      {"key":"cores","operator":"Lt","values":["129"]}])");
    // matchLabels and matchExpressions may come in either order; compare as sets.
    CHECK(reqs.size() == want.size());
    for (auto& w : want) CHECK_MESSAGE(std::find(reqs.begin(), reqs.end(), w) != reqs.end(), w.dump());
    // The map form is matchLabels.
    CHECK((node_selector_requirements(selector(json{{"zone", "a"}})) == json::parse(R"([{"key":"zone","operator":"In","values":["a"]}])")));
}

TEST_CASE("the patch writes requests equal to limits into the first container and ANDs the selector into every affinity term") {
    Nads nads;
    nads.add(nad("a", macvlan_conf("a", {{"bandwidth", {{"egressRate", 100'000'000}}}, {"ipam", host_local("10.1.0.0/24")},
                                          {"nodeSelector", {{"zone", "a"}}}})));
    nads.add(nad("b", macvlan_conf("b", {{"bandwidth", {{"egressRate", 50'000'000}}},
                                          {"nodeSelector", {{"matchExpressions", {{{"key", "nic"}, {"operator", "Exists"}}}}}}})));
    const json zone = {{"key", "zone"}, {"operator", "In"}, {"values", {"a"}}};
    const json nic = {{"key", "nic"}, {"operator", "Exists"}};

    SUBCASE("no affinity: one term with both NADs' requirements; resources summed over the networks") {
        json p = pod("a,b,a");
        p["spec"]["containers"].push_back({{"name", "sidecar"}, {"image", "busybox"}});
        json out = admitted(p, nads);
        // ... and one marker per pod, whatever its networks: the extender's managedResources.
        json want_res = {{"bandwidth.topocni.io/macvlan.eth1.egress", "250"}, {"addresses.topocni.io/a", "2"},
                         {"topocni.io/networks", "1"}};
        CHECK(out["spec"]["containers"][0]["resources"]["requests"] == want_res);
        CHECK(out["spec"]["containers"][0]["resources"]["limits"] == want_res);
        CHECK_FALSE(out["spec"]["containers"][1].contains("resources"));
        auto terms = out["spec"]["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]["nodeSelectorTerms"];
        REQUIRE(terms.size() == 1);
        CHECK((terms[0]["matchExpressions"] == json::array({zone, nic, zone})));
        CHECK(out["metadata"]["annotations"][kAdmittedAnnotation] == "default/a,default/b,default/a");
    }
    SUBCASE("what the container asks already is kept and added to; a limit alone counts as the request") {
        json p = pod("b");
        p["spec"]["containers"][0]["resources"] = {
            {"limits", {{"cpu", "2"}, {"bandwidth.topocni.io/macvlan.eth1.egress", "0"}}},
            {"requests", {{"memory", "1Gi"}}}};
        // A zero request of ours is still ours: it is left as it is, but for the marker,
        // without which kube-scheduler would never ask the extender about the pod.
        json only_marker = admitted(p, nads);
        auto& mr = only_marker["spec"]["containers"][0]["resources"];
        CHECK((mr["limits"] == json{{"cpu", "2"}, {"bandwidth.topocni.io/macvlan.eth1.egress", "0"}, {"topocni.io/networks", "1"}}));
        CHECK((mr["requests"] == json{{"memory", "1Gi"}, {"topocni.io/networks", "1"}}));
        p["spec"]["containers"][0]["resources"]["limits"].erase("bandwidth.topocni.io/macvlan.eth1.egress");
        p["spec"]["containers"][0]["resources"]["limits"]["intel.com/sriov"] = "1";
        json out = admitted(p, nads);
        auto& r = out["spec"]["containers"][0]["resources"];
        CHECK((r["limits"] == json{{"cpu", "2"}, {"intel.com/sriov", "1"}, {"bandwidth.topocni.io/macvlan.eth1.egress", "50"},
                                   {"topocni.io/networks", "1"}}));
        CHECK((r["requests"] == json{{"memory", "1Gi"}, {"bandwidth.topocni.io/macvlan.eth1.egress", "50"}, {"topocni.io/networks", "1"}}));
        // The marker alone is ours too: such a pod was admitted already.
        json marked = pod("b");
        marked["spec"]["containers"][0]["resources"] = {{"limits", {{"topocni.io/networks", "1"}}}};
        CHECK(mutate_pod(marked, "default", nads.lookup()).patch.empty());
    }
    SUBCASE("one existing term gets the requirements beside its own; matchFields stay") {
        json aff = json::parse(R"({"nodeAffinity":{"requiredDuringSchedulingIgnoredDuringExecution":{"nodeSelectorTerms":[
            {"matchFields":[{"key":"metadata.name","operator":"In","values":["w1","w2"]}]}]},
            "preferredDuringSchedulingIgnoredDuringExecution":[{"weight":1,"preference":{"matchExpressions":[{"key":"x","operator":"Exists"}]}}]},
            "podAntiAffinity":{}})");
        json out = admitted(pod("a", {{"affinity", aff}}), nads);
        auto& na = out["spec"]["affinity"]["nodeAffinity"];
        auto& t = na["requiredDuringSchedulingIgnoredDuringExecution"]["nodeSelectorTerms"];
        REQUIRE(t.size() == 1);
        CHECK(t[0]["matchFields"] == aff["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]["nodeSelectorTerms"][0]["matchFields"]);
        CHECK((t[0]["matchExpressions"] == json::array({zone})));
        CHECK(na["preferredDuringSchedulingIgnoredDuringExecution"] == aff["nodeAffinity"]["preferredDuringSchedulingIgnoredDuringExecution"]);
        CHECK(out["spec"]["affinity"].contains("podAntiAffinity"));
    }
    SUBCASE("several terms (ORed) each get every requirement (ANDed)") {
        json aff = json::parse(R"({"nodeAffinity":{"requiredDuringSchedulingIgnoredDuringExecution":{"nodeSelectorTerms":[
            {"matchExpressions":[{"key":"rack","operator":"In","values":["r1"]}]},
            {"matchExpressions":[{"key":"rack","operator":"In","values":["r2"]}]}]}}})");
        json out = admitted(pod("a,b", {{"affinity", aff}}), nads);
        auto& t = out["spec"]["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]["nodeSelectorTerms"];
        REQUIRE(t.size() == 2);
        CHECK((t[0]["matchExpressions"] == json::array({{{"key", "rack"}, {"operator", "In"}, {"values", {"r1"}}}, zone, nic})));
        CHECK((t[1]["matchExpressions"] == json::array({{{"key", "rack"}, {"operator", "In"}, {"values", {"r2"}}}, zone, nic})));
    }
    SUBCASE("an affinity without nodeAffinity, or with only preferred terms, gets the required part") {
        json out = admitted(pod("b", {{"affinity", {{"podAffinity", json::object()}}}}), nads);
        CHECK((out["spec"]["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]["nodeSelectorTerms"] ==
              json::array({{{"matchExpressions", {nic}}}})));
        CHECK(out["spec"]["affinity"].contains("podAffinity"));
        json pref = {{"nodeAffinity", {{"preferredDuringSchedulingIgnoredDuringExecution", json::array()}}}};
        out = admitted(pod("b", {{"affinity", pref}}), nads);
        CHECK(out["spec"]["affinity"]["nodeAffinity"].contains("preferredDuringSchedulingIgnoredDuringExecution"));
        CHECK(out["spec"]["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]["nodeSelectorTerms"].size() == 1);
    }
    SUBCASE("admitted once, a pod is left as it is") {
        json once = admitted(pod("a,b"), nads);
        CHECK(mutate_pod(once, "default", nads.lookup()).patch.empty());
        CHECK(admitted(once, nads) == once);
    }
}

TEST_CASE("a missing NAD refuses the pod naming it; a pod without topocni networks gets an empty patch") {
    Nads nads;
    nads.add(nad("a", macvlan_conf("a", {{"ipam", host_local("10.1.0.0/24")}})));
    nads.add(nad("br", json{{"cniVersion", "1.0.0"}, {"name", "br"}, {"type", "bridge"}}));
    Mutation m = mutate_pod(pod("a,other/missing"), "default", nads.lookup());
    CHECK_FALSE(m.allowed);
    CHECK(m.message == "topocni: network-attachment-definition other/missing not found");
    CHECK(mutate_pod(pod("br"), "default", nads.lookup()).patch.empty());
    json plain = pod("");
    plain["metadata"].erase("annotations");
    CHECK(mutate_pod(plain, "default", nads.lookup()).patch.empty());
    CHECK_FALSE((mutate_pod(pod("[{\"name\": 3}]"), "default", nads.lookup()).allowed));
    // Every form Multus accepts names the same NAD.
    for (auto& form : {"a", "default/a", "a@net1", R"([{"name":"a","namespace":"default","interface":"net1"}])"}) {
        json out = admitted(pod(form), nads);
        CHECK_MESSAGE((out["spec"]["containers"][0]["resources"]["requests"] ==
                       json{{"addresses.topocni.io/a", "1"}, {"topocni.io/networks", "1"}}), form);
    }
}

TEST_CASE("an AdmissionReview is answered with the request's uid, a base64 JSONPatch, or a refusal with a code") {
    Nads nads;
    nads.add(nad("a", macvlan_conf("a", {{"ipam", host_local("10.1.0.0/24")}})));
    json req = {{"apiVersion", "admission.k8s.io/v1"}, {"kind", "AdmissionReview"},
                {"request", {{"uid", "705ab4f5-6393-11e8-b7cc-42010a800002"},
                             {"kind", {{"group", ""}, {"version", "v1"}, {"kind", "Pod"}}},
                             {"resource", {{"group", ""}, {"version", "v1"}, {"resource", "pods"}}},
                             {"namespace", "default"}, {"operation", "CREATE"},
                             {"userInfo", {{"username", "admin"}}}, {"object", pod("a")}, {"oldObject", nullptr},
                             {"dryRun", false}}}};
    json r = json::parse(review(req.dump(), nads.lookup()));
    CHECK(r["apiVersion"] == "admission.k8s.io/v1");
    CHECK(r["kind"] == "AdmissionReview");
    CHECK(r["response"]["uid"] == "705ab4f5-6393-11e8-b7cc-42010a800002");
    CHECK(r["response"]["allowed"] == true);
    CHECK(r["response"]["patchType"] == "JSONPatch");
    CHECK(r["response"]["patch"].get<std::string>().find_first_not_of(
              "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/=") == std::string::npos);
    req["request"]["object"] = pod("missing");
    r = json::parse(review(req.dump(), nads.lookup()));
    CHECK(r["response"]["allowed"] == false);
    CHECK(r["response"]["status"]["code"] == 400);
    CHECK(r["response"]["status"]["message"] == "topocni: network-attachment-definition default/missing not found");
    CHECK_FALSE(r["response"].contains("patch"));
    req["request"]["operation"] = "DELETE";
    r = json::parse(review(req.dump(), nads.lookup()));
    CHECK((r["response"] == json{{"uid", "705ab4f5-6393-11e8-b7cc-42010a800002"}, {"allowed", true}}));
    CHECK_THROWS_AS(review("[]", nads.lookup()), base::Error);
    CHECK_THROWS_AS(review(R"({"request":{"uid":5}})", nads.lookup()), base::Error);
}

namespace {
bool has(const std::string& s, const std::string& part) { return s.find(part) != std::string::npos; }
}  // namespace

TEST_CASE("a review builds a tree only of the pod's parts the webhook reads, at most 1 MiB of them") {
    Nads nads;
    nads.add(nad("a", macvlan_conf("a", {{"ipam", host_local("10.1.0.0/24")}})));
    // The review of pod("a") with `where` ("x": elsewhere in spec, "affinity") holding `text`.
    auto body = [](const std::string& where, const std::string& text) {
        json p = pod("a");
        p["spec"][where] = "@";
        json req = {{"request", {{"uid", "u"}, {"kind", {{"group", ""}, {"version", "v1"}, {"kind", "Pod"}}},
                                 {"namespace", "default"}, {"operation", "CREATE"}, {"object", p}}}};
        std::string s = req.dump();
        return s.replace(s.find("\"@\""), 3, text);
    };
    std::string wide = "[";
    while (wide.size() < (2u << 20)) wide += R"({"a":{"b":{}}},)";
    wide += "{}]";
    json plain = json::parse(review(body("x", "1"), nads.lookup()));
    json big = json::parse(review(body("x", wide), nads.lookup()));
    CHECK(big["response"]["patch"] == plain["response"]["patch"]);
    CHECK(has(support::coded_error([&] { review(body("affinity", wide), nads.lookup()); }), "more than 1048576"));
    std::string deep = std::string(base::json_text::kMaxDepth, '[') + std::string(base::json_text::kMaxDepth, ']');
    CHECK(has(support::coded_error([&] { review(body("x", deep), nads.lookup()); }), "nested deeper than 10000 levels"));
    // The annotations it does not read are not kept, and change nothing.
    json p = pod("a");
    p["metadata"]["annotations"]["example.com/other"] = "x";
    json req = {{"request", {{"uid", "u"}, {"kind", {{"group", ""}, {"version", "v1"}, {"kind", "Pod"}}},
                             {"namespace", "default"}, {"operation", "CREATE"}, {"object", p}}}};
    CHECK(json::parse(review(req.dump(), nads.lookup()))["response"]["patch"] == plain["response"]["patch"]);
}
