// The NetworkAttachmentDefinitions as every cluster-side caller reads them: the scheduler
// extender, the admission webhook, the Node publisher and the DRA driver. One LIST+WATCH
// (kube/store.h) keeps them, and each NAD is parsed (pod_network) once per resourceVersion,
// when first asked for, whoever asks: one parse policy for all.
#pragma once
#include <optional>
#include <string>
#include <vector>

#include "cluster/scheduling.h"
#include "kube/store.h"

namespace cluster {

inline constexpr const char* kNadPath = "/apis/k8s.cni.cncf.io/v1/network-attachment-definitions";
inline constexpr const char* kNadResource = "network-attachment-definitions";

class NadInformer {
public:
    /// What the reflector feeds (reflect(client, kNadPath, kNadResource, store().handlers(), ...)).
    kube::Store& store() { return store_; }
    bool synced() const { return store_.synced(); }
    uint64_t changes() const { return store_.changes(); }

    /// The network the selection names, parsed, with the selection's own interface; nullopt
    /// when the store has no such NAD (the caller decides: refuse, or read the API).
    std::optional<PodNetwork> find(const NetworkSelection& s) const;
    /// Every NAD, parsed (what a node offers depends on all of them).
    std::vector<PodNetwork> all() const;

private:
    std::shared_ptr<const PodNetwork> parsed(const std::string& key) const;
    kube::Store store_;
};

}  // namespace cluster
