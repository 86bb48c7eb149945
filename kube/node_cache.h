// What ADD asks the API: the labels of its Node and the node its pod was scheduled to,
// each one GET over TLS, with a small on-disk cache under stateDir so a storm of ADDs
// does not hit the API server.
#pragma once
#include <chrono>
#include <map>
#include <string>

#include "kube/kubeconfig.h"

namespace kube {

using Labels = std::map<std::string, std::string>;

/// GET <server>/api/v1/nodes/<node> and return metadata.labels. Unreachable, timed out,
/// a truncated or non-JSON answer, 429 and 5xx are Unavailable (try again later); refused
/// credentials (quoting the Status message, naming the kubeconfig and user), a missing
/// permission, an unknown node, a certificate that does not verify and other 4xx are
/// Invalid.
Labels fetch_node_labels(const Kubeconfig& kc, const std::string& node, std::chrono::milliseconds timeout);

struct CacheOptions {
    std::string state_dir;                ///< the cache lives in <state_dir>/node-labels/
    double ttl_seconds = 60;
    bool write = true;                    ///< false: read a fresh cache, never write (explain)
    std::chrono::milliseconds timeout{3000};   ///< apiTimeout
};

/// The name of the node a pod was scheduled to (its spec.nodeName): GET
/// /api/v1/namespaces/<ns>/pods/<pod>, remembered under stateDir for the TTL (a node's
/// name does not change), so a storm of ADDs asks once. Errors as fetch_node_labels.
/// `uid` (K8S_POD_UID, when known) must be the API's pod: a pod of the same name recreated
/// elsewhere is another pod, and its node is not ours.
std::string pod_node_name(const Kubeconfig& kc, const std::string& ns, const std::string& pod, const std::string& uid,
                          const CacheOptions& opt);

/// The node's labels through the cache: a fresh entry (same server, younger than the
/// TTL) is used as is; otherwise one process at a time fetches and rewrites the entry
/// atomically. A failure is remembered for a moment, so a storm of ADDs against an
/// unreachable server fails fast instead of queueing on the timeout.
Labels cached_node_labels(const Kubeconfig& kc, const std::string& node, const CacheOptions& opt);

}  // namespace kube
