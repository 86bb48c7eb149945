// All of this node's facts, as node-report prints and publishes them: every SR-IOV PF
// with its VFs, every physical link and master with the links on it, every bandwidth
// ledger, the pool of every network with attachments, the attachments themselves and the
// NUMA nodes. Each part is read by the same functions ADD reads its own part with
// (placement/facts.h).
#pragma once
#include <string>
#include <vector>

#include "placement/node_facts.h"

namespace cluster::cmd {

struct FactsOptions {
    std::string sysfs_root = "/sys";
    std::string state_dir = "/var/lib/cni/topocni";
    std::string kubelet_root_dir = "/var/lib/kubelet";   ///< the device plugins' checkpoint (resourceName)
    std::string node;                                     ///< the Node's name, for the document
    std::vector<std::string> masters;                     ///< named by NADs: described even with no link on them yet
};

/// Throws code 7 when sysfs_root has no class/net (not a sysfs).
placement::NodeFacts read_node_facts(const FactsOptions& o);

}  // namespace cluster::cmd
