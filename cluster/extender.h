// kube-scheduler's extender verbs (k8s.io/kube-scheduler/extender/v1): `filter` answers
// which candidate nodes fit the pod's topocni networks, `prioritize` scores them by the
// headroom they keep. The types there carry no json tags, so the wire names are the Go
// field names (Pod, Nodes, NodeNames, FailedNodes, FailedAndUnresolvableNodes, Error,
// Host, Score), read case-insensitively as Go reads them. The caches behind it (NADs,
// Nodes with their facts, pods bound but not yet attached) are fed by LIST+WATCH.
#pragma once
#include <ctime>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <shared_mutex>
#include <set>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include <nlohmann/json.hpp>

#include "cluster/nad_informer.h"
#include "cluster/scheduling.h"
#include "kube/client.h"

namespace cluster {

/// One Node of ExtenderArgs.Nodes.items: what the extender reads of it, and its bytes.
struct NodeItem {
    std::string_view raw;                   ///< the Node as sent: echoed back when it fits
    std::string name, resource_version;
    std::string_view labels;                ///< metadata.labels as sent (empty: none)
    std::string_view facts;                 ///< the topocni.io/facts annotation's string literal (empty: none)
};

/// What the extender reads of ExtenderArgs.Pod. No tree of the Pod is built: it is the part
/// of a request its sender shapes freely, and a tree costs up to 30 times its text.
struct PodRef {
    std::string name, namespace_, uid;
    std::string networks;   ///< the k8s.v1.cni.cncf.io/networks annotation ("": none)
};

/// The most nodes one request may name (Nodes.items or NodeNames): 20 times the 5,000 nodes
/// Kubernetes is tested at, more than the largest clusters run. Each costs the extender
/// under 1 KiB while it is judged, whatever its name's length: the count bounds a request.
inline constexpr size_t kMaxNodesPerRequest = 100'000;

/// ExtenderArgs as kube-scheduler sends it. The nodes are views into `body`, which it owns.
struct ExtenderArgs {
    std::shared_ptr<const std::string> body;
    PodRef pod;
    std::optional<std::vector<NodeItem>> nodes;              ///< Nodes.items (nodeCacheCapable: false)
    std::optional<std::vector<std::string>> node_names;      ///< NodeNames (nodeCacheCapable: true)
};

/// Parses an ExtenderArgs body as Go's encoding/json does: member names matched ignoring
/// case, a later member overriding an earlier one; Nodes is a v1.NodeList, of which only
/// each Node's name, resourceVersion, labels and facts annotation are read (the rest is
/// validated and kept as bytes). Nothing is built of the rest: a request costs its bytes
/// and its nodes. Throws code 6 naming what is wrong: also for containers nested deeper
/// than base::json_text::kMaxDepth, and more than kMaxNodesPerRequest nodes.
ExtenderArgs parse_extender_args(std::string body);

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
        std::vector<std::string_view> pieces;   ///< instead of body: see kube::server::Response
        std::shared_ptr<const void> keep;
        std::string text() const;               ///< the pieces joined, or the body
    };
    Reply handle(const std::string& method, const std::string& target, std::string body);

    /// ExtenderFilterResult, as JSON text: with full Nodes, pieces of the request's own
    /// bytes, not copied.
    Reply filter(const ExtenderArgs& a, std::time_t now);
    /// HostPriorityList, as JSON text.
    std::string prioritize(const ExtenderArgs& a, std::time_t now);

private:
    struct Bound {
        std::string node, ns, annotation;
        std::time_t since = 0;
        PendingPod pod;
        bool resolved = false;
    };
    struct VerdictKey {
        size_t nets;           ///< signature of the pod's networks
        bool stale;
        std::string pending;   ///< UIDs of the pods pending on the node ("" mostly)
        bool operator==(const VerdictKey& o) const { return nets == o.nets && stale == o.stale && pending == o.pending; }
    };
    /// A node as cached, with the last verdicts given on it: they go when it does.
    struct Node {
        NodeView view;
        mutable std::mutex mu;
        mutable std::vector<std::pair<VerdictKey, NodeVerdict>> verdicts;   ///< the last few, newest last
    };
    using View = std::shared_ptr<const Node>;
    static View make_view(NodeView v);
    std::vector<PodNetwork> networks_of(const PodRef& pod, bool& has_topocni);
    std::vector<PodNetwork> resolve(const std::vector<NetworkSelection>& sels);
    /// The nodes a request names, as cached: a Node sent with the resourceVersion the
    /// cache holds is that node, not parsed again.
    std::vector<View> views_of(const ExtenderArgs& a);
    void forget(const std::string& uid);   ///< under pods_mu_
    /// The pods bound to `node` and still pending (copies: the watch may change them meanwhile).
    std::vector<PendingPod> pending_on(const std::string& node, const std::string& except_uid, std::time_t now);
    void put_pod(const nlohmann::json& pod);
    /// A verdict per node (its cached view), pod networks and pending pods: the pods of a
    /// Deployment ask the same of nodes whose facts rarely change.
    NodeVerdict cached_judge(const std::vector<PodNetwork>& nets, size_t nets_sig, const View& v,
                             const std::string& uid, std::time_t now);

    ExtenderOptions o_;
    std::shared_mutex mu_;
    NadInformer nads_;                                 ///< parsed once per version, read without mu_
    std::unordered_map<std::string, View> nodes_;      ///< from the node watch
    std::unordered_map<std::string, View> seen_;       ///< Nodes sent in requests unlike the watch's (bounded)

    std::mutex pods_mu_;
    std::map<std::string, Bound> bound_;               ///< pod UID -> a pod bound to a node, pending
    std::unordered_map<std::string, std::set<std::string>> bound_on_;   ///< node -> UIDs in bound_
};

}  // namespace cluster
