#include "cluster/nad_informer.h"

namespace cluster {

using nlohmann::json;

namespace {

PodNetwork parse(const json& nad) {
    // The store's key is "namespace/name", read without throwing whatever the object holds.
    std::string key = kube::Store::key_of(nad);
    NetworkSelection s;
    s.namespace_ = key.substr(0, key.find('/'));
    s.name = key.substr(key.find('/') + 1);
    return pod_network(s, &nad);
}

}  // namespace

std::shared_ptr<const PodNetwork> NadInformer::parsed(const std::string& key) const {
    return store_.derived<PodNetwork>(key, parse);
}

std::optional<PodNetwork> NadInformer::find(const NetworkSelection& s) const {
    auto p = parsed(s.namespace_ + "/" + s.name);
    if (!p) return std::nullopt;
    PodNetwork n = *p;
    n.selection = s;   // the interface asked for is the pod's
    return n;
}

std::vector<PodNetwork> NadInformer::all() const {
    std::vector<PodNetwork> out;
    for (const auto& nad : store_.list())
        if (auto p = parsed(kube::Store::key_of(*nad))) out.push_back(*p);
    return out;
}

}  // namespace cluster
