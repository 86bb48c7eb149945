// kube-scheduler's extender verbs (k8s.io/kube-scheduler/extender/v1): `filter` answers
// which candidate nodes fit the pod's topocni networks, `prioritize` scores them by the
// headroom they keep. The types there carry no json tags, so the wire names are the Go
// field names (Pod, Nodes, NodeNames, FailedNodes, FailedAndUnresolvableNodes, Error,
// Host, Score), read case-insensitively as Go reads them. The caches behind it (NADs,
// Nodes with their facts, pods bound but not yet attached) are fed by LIST+WATCH.
#pragma once
#include <ctime>
#include <map>
#include <mutex>
#include <optional>
#include <shared_mutex>
#include <set>
#include <string>
#include <unordered_map>
#include <vector>

#include <nlohmann/json.hpp>

#include "cni/cluster/scheduling.h"
#include "kube/client.h"

namespace cni::cluster {

/// ExtenderArgs as kube-scheduler sends it.
struct ExtenderArgs {
    nlohmann::json pod;
    std::optional<std::vector<nlohmann::json>> nodes;        ///< Nodes.items (nodeCacheCapable: false)
    std::optional<std::vector<std::string>> node_names;      ///< NodeNames (nodeCacheCapable: true)
};

/// Parses an ExtenderArgs body: keys matched case-insensitively (an exact match first),
/// as Go's encoding/json does; Nodes is a v1.NodeList. Throws code 6 naming what is wrong.
ExtenderArgs parse_extender_args(const std::string& body);

struct ExtenderOptions {
    Options judge;                      ///< max_facts_age
    double pending_seconds = 300;       ///< a bound pod counts against its node this long at most
    std::string url_prefix;             ///< "/scheduler": serves /scheduler/filter and /scheduler/prioritize
};

class Extender {
public:
    explicit Extender(ExtenderOptions o) : o_(std::move(o)) {}

    // The caches, fed by a reflector each (kube/reflector.h).
    void replace_nads(const std::vector<nlohmann::json>& items);
    void nad_event(const kube::Event& e);
    void replace_nodes(const std::vector<nlohmann::json>& items);
    void node_event(const kube::Event& e);
    void replace_pods(const std::vector<nlohmann::json>& items);
    void pod_event(const kube::Event& e);

    /// POST <prefix>/filter, <prefix>/prioritize; GET /healthz. Any other path is 404.
    struct Reply {
        int status;
        std::string body;
    };
    Reply handle(const std::string& method, const std::string& target, const std::string& body);

    /// ExtenderFilterResult.
    nlohmann::json filter(const ExtenderArgs& a, std::time_t now);
    /// HostPriorityList.
    nlohmann::json prioritize(const ExtenderArgs& a, std::time_t now);

private:
    struct Bound {
        std::string node, ns, annotation;
        std::time_t since = 0;
        PendingPod pod;
        bool resolved = false;
    };
    std::vector<PodNetwork> networks_of(const nlohmann::json& pod, bool& has_topocni);
    std::vector<PodNetwork> resolve(const std::vector<NetworkSelection>& sels);
    NodeView view_of(const nlohmann::json& node);
    std::shared_ptr<const NodeView> cached_view(const std::string& name);
    void forget(const std::string& uid);   ///< under pods_mu_
    std::vector<PendingPod> pending_on(const std::string& node, const std::string& except_uid, std::time_t now);
    void put_pod(const nlohmann::json& pod);

    ExtenderOptions o_;
    std::shared_mutex mu_;
    std::map<std::string, nlohmann::json> nads_;       ///< "ns/name" -> NAD
    std::map<std::string, std::shared_ptr<const NodeView>> nodes_;   ///< from the node cache
    std::map<std::string, std::pair<std::string, NodeView>> seen_;   ///< name -> (resourceVersion, view): Nodes in requests
    /// Verdicts by node (its facts as cached), pod networks and pending pods: the pods of a
    /// Deployment ask the same of nodes whose facts rarely change.
    NodeVerdict cached_judge(const std::vector<PodNetwork>& nets, size_t nets_sig, const NodeView& v,
                             const std::string& uid, std::time_t now);
    std::mutex verdicts_mu_;
    std::unordered_map<std::string, NodeVerdict> verdicts_;
    std::mutex pods_mu_;
    std::map<std::string, Bound> bound_;               ///< pod UID -> a pod bound to a node, pending
    std::unordered_map<std::string, std::set<std::string>> bound_on_;   ///< node -> UIDs in bound_
};

}  // namespace cni::cluster
