// Node labels from the Kubernetes API: the kubeconfig (Multus's or the operator's), one
// GET of the Node over TLS (cni/https.h, linked into the static binary), and a small
// on-disk cache under stateDir so a storm of ADDs does not hit the API server.
#pragma once
#include <chrono>
#include <string>
#include <vector>

#include "cni/placement/labels.h"

namespace cni::kube {

/// What examples/daemonset.yaml writes (with a token file and the CA beside it), for the
/// permissions of examples/rbac.yaml; the default when the config has no "kubeconfig".
inline constexpr const char* kTopocniKubeconfig = "/etc/cni/net.d/topocni.d/topocni.kubeconfig";
/// Where Multus writes its kubeconfig; the default when topocni's own does not exist.
/// Multus's stock ClusterRole has no "get nodes": expect code 7 naming examples/rbac.yaml.
inline constexpr const char* kMultusKubeconfig = "/etc/cni/net.d/multus.d/multus.kubeconfig";

/// What one GET needs, taken from the kubeconfig's current context.
struct Kubeconfig {
    std::string path;                     ///< for messages
    std::string server;                   ///< "https://10.96.0.1:443" (brackets around IPv4 removed)
    std::string ca_pem;                   ///< CA bundle; empty: the node's
    std::string ca_source;                ///< where the CA comes from, for messages
    std::string client_cert_pem, client_key_pem;
    std::string token;                    ///< bearer token (token, or tokenFile as it was at load)
    std::string token_file;               ///< tokenFile: read again for every request (tokens rotate)
    std::string user;                     ///< the context's user, for messages
    bool insecure = false;                ///< insecure-skip-tls-verify
    std::string node_source = "the config's nodeName";   ///< how the node's name was chosen, for a 404
};

/// Parses a kubeconfig (YAML or JSON): current-context -> cluster (server,
/// certificate-authority[-data], insecure-skip-tls-verify) and user
/// (client-certificate[-data], client-key[-data], token, tokenFile). Relative file paths
/// are resolved against the kubeconfig's directory. Code 7 naming the key.
Kubeconfig parse_kubeconfig(const std::string& text, const std::string& path);
Kubeconfig load_kubeconfig(const std::string& path);

/// GET <server>/api/v1/nodes/<node> and return metadata.labels. Unreachable, timed out,
/// a truncated or non-JSON answer, 429 and 5xx are code 11 (try again later); refused
/// credentials (quoting the Status message, naming the kubeconfig and user), a missing
/// permission, an unknown node, a certificate that does not verify and other 4xx are
/// code 7.
Labels fetch_node_labels(const Kubeconfig& kc, const std::string& node, std::chrono::milliseconds timeout);

struct CacheOptions {
    std::string state_dir;                ///< the cache lives in <state_dir>/node-labels/
    double ttl_seconds = 60;
    bool write = true;                    ///< false: read a fresh cache, never write (explain)
    std::chrono::milliseconds timeout{3000};   ///< apiTimeout
};

/// The name of the node a pod was scheduled to (its spec.nodeName): GET
/// /api/v1/namespaces/<ns>/pods/<pod>, remembered under stateDir for the TTL (a node's
/// name does not change), so a storm of ADDs asks once. Code 7 or 11 as fetch_node_labels.
/// `uid` (K8S_POD_UID, when known) must be the API's pod: a pod of the same name recreated
/// elsewhere is another pod, and its node is not ours.
std::string pod_node_name(const Kubeconfig& kc, const std::string& ns, const std::string& pod, const std::string& uid,
                          const CacheOptions& opt);

/// The node's labels through the cache: a fresh entry (same server, younger than the
/// TTL) is used as is; otherwise one process at a time fetches and rewrites the entry
/// atomically. A failure is remembered for a moment, so a storm of ADDs against an
/// unreachable server fails fast instead of queueing on the timeout.
Labels cached_node_labels(const Kubeconfig& kc, const std::string& node, const CacheOptions& opt);

/// base64 (RFC 4648, padding optional, whitespace ignored); nullopt when malformed.
std::optional<std::string> base64_decode(const std::string& in);

}  // namespace cni::kube
