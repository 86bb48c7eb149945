// Which kubeconfig a long-running subcommand (node-report --publish, refusal-agent,
// admission-webhook) uses:
// --kubeconfig, else the pod's own service account (in-cluster), else topocni's, else
// Multus's.
#pragma once
#include <string>

#include "kube/kubeconfig.h"

namespace cluster::cmd {

/// Throws code 7 when none is there.
kube::Kubeconfig pick_kubeconfig(const std::string& path, bool path_set);

}  // namespace cluster::cmd
