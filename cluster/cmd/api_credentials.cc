#include "cluster/cmd/api_credentials.h"

#include <sys/stat.h>

#include "cni/error.h"

namespace cluster::cmd {

using cni::Error;
using cni::kInvalidConfig;

kube::Kubeconfig pick_kubeconfig(const std::string& path, bool path_set) {
    if (path_set) return kube::load_kubeconfig(path);
    if (auto kc = kube::in_cluster_config()) return *kc;
    struct stat st;
    if (::stat(kube::kTopocniKubeconfig, &st) == 0) return kube::load_kubeconfig(kube::kTopocniKubeconfig);
    if (::stat(kube::kMultusKubeconfig, &st) == 0) return kube::load_kubeconfig(kube::kMultusKubeconfig);
    throw Error(kInvalidConfig, std::string("no kubeconfig: not in a pod, and neither '") + kube::kTopocniKubeconfig +
                                    "' nor '" + kube::kMultusKubeconfig + "' exists; pass --kubeconfig");
}

}  // namespace cluster::cmd
