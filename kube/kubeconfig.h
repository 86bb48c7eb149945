// Kubeconfigs: what a request to the API server needs (server, CA, client certificate or
// token), read from the current context of a kubectl or Multus kubeconfig.
#pragma once
#include <chrono>
#include <string>
#include <vector>

#include <optional>

#include "kube/https.h"

namespace kube {

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
/// are resolved against the kubeconfig's directory. kube::Error (Invalid) naming the key.
Kubeconfig parse_kubeconfig(const std::string& text, const std::string& path);
Kubeconfig load_kubeconfig(const std::string& path);

/// The pod's own service account, as client-go's rest.InClusterConfig reads it:
/// KUBERNETES_SERVICE_HOST and _PORT, the token and CA under
/// /var/run/secrets/kubernetes.io/serviceaccount (`sa_dir`). nullopt outside a pod.
std::optional<Kubeconfig> in_cluster_config(const std::string& sa_dir = "/var/run/secrets/kubernetes.io/serviceaccount");

/// base64 (RFC 4648, padding optional, whitespace ignored); nullopt when malformed.
std::optional<std::string> base64_decode(const std::string& in);

/// The bearer token to send now: tokenFile read again (projected tokens rotate), else token.
std::string current_token(const Kubeconfig& kc);
/// The TLS settings of the kubeconfig's cluster and user.
https::Tls tls_of(const Kubeconfig& kc);

}  // namespace kube
