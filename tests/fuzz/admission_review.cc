// What the API server sends the admission webhook: an AdmissionReview with a Pod in it,
// answered against two NADs (a macvlan with bandwidth, a pool and a nodeSelector; a
// conflist) while any other name is missing; and the pod's bandwidth annotations read as
// Kubernetes quantities.
#include "cluster/admission.h"
#include "cluster/resources.h"
#include "fuzz.h"

namespace {

const nlohmann::json& nads() {
    static const nlohmann::json n = nlohmann::json::parse(R"({
      "default/a": {"metadata": {"name": "a", "namespace": "default"}, "spec": {"config":
        "{\"cniVersion\":\"1.0.0\",\"name\":\"a\",\"type\":\"topocni\",\"attachment\":\"macvlan\",\"master\":\"eth1\",\"capabilities\":{\"bandwidth\":true},\"bandwidth\":{\"egressRate\":100000000},\"nodeSelector\":{\"matchExpressions\":[{\"key\":\"nic\",\"operator\":\"Gt\",\"values\":[\"3\"]}]},\"ipam\":{\"type\":\"host-local\",\"subnet\":\"10.1.0.0/24\",\"dataDir\":\"/nonexistent\"}}"}},
      "default/l": {"metadata": {"name": "l", "namespace": "default"}, "spec": {"config":
        "{\"cniVersion\":\"1.0.0\",\"name\":\"l\",\"plugins\":[{\"type\":\"topocni\",\"attachment\":\"macvlan\",\"master\":\"eth2\",\"nodeSelector\":{\"zone\":\"a\"}}]}"}}
    })");
    return n;
}

}  // namespace

TOPOCNI_FUZZ_TARGET({
    cluster::NadLookup lookup = [](const cluster::NetworkSelection& s) {
        auto it = nads().find(s.namespace_ + "/" + s.name);
        return cluster::pod_network(s, it == nads().end() ? nullptr : &*it);
    };
    (void)cluster::parse_quantity(input);
    std::string answer = cluster::review(input, lookup);
    // The answer is JSON the API server can read, whatever came in.
    (void)nlohmann::json::parse(answer).size();
})
