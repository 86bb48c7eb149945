// Placement's facts about the node, each read on its own so a constraint reads only what
// it needs: node labels (file or Kubernetes API), the device's NUMA node and link speed
// (sysfs), the pod's CPUs (cpu_manager_state), links or VFs already on a master or PF,
// pool usage, and the bandwidth ledger. A fact that cannot be read is returned unknown,
// with the sentence that says why; evaluate.h judges them.
#pragma once
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "cni/placement/labels.h"
#include "cni/placement/ledger.h"
#include "cni/placement/placement.h"
#include "conf/netconf.h"

namespace cni {

/// A number that may be unknown, with the sentence that states it either way.
struct Fact {
    std::optional<long long> value;
    std::string text;
};

struct NodeLabels {
    Labels labels;
    std::string sources;   ///< "file '/x' and the API at https://..."
    std::string node;      ///< the node whose labels these are
    std::string node_source = "the config's nodeName";
};

/// Labels from nodeLabelsFile and/or the API (both merged, the file's win); explain's
/// --node-labels replaces both. Code 11 when the API is unreachable and there is no file.
NodeLabels node_labels(const conf::NetConf& c, const PodInfo& pod, const EvalOptions& opt);

Fact device_numa(const Device& d, const std::string& sysfs);
Fact link_speed(const Device& d, const std::string& sysfs);

/// The NUMA nodes of the pod's exclusive CPUs.
struct PodNuma {
    bool known = false;
    std::set<int> nodes;
    std::string text;
};
PodNuma pod_numa(const conf::NetConf& c, const std::string& uid);

/// The other links on a master, or VFs in use on a PF: unknown (no `used`) with the why.
struct DeviceUse {
    std::optional<std::vector<std::string>> used;
    std::string text;
};
DeviceUse device_use(const conf::NetConf& c, const Device& d, const PodInfo& pod);

/// A range set of the pool, and how many addresses it has left once the pod has its own.
struct PoolSet {
    std::string range_set;
    unsigned __int128 size = 0, taken = 0, free_after = 0;
};
std::vector<PoolSet> pool_sets(const ipam::Config& pool, const std::string& network, const PodInfo& pod);

/// The link a device shares: a master by name, a VF's PF by PCI address.
struct SharedLink {
    std::string key;     ///< ledger name: "eth1", "0000:03:00.0"; empty: none
    std::string label;   ///< "master 'eth1'", "PF 0000:03:00.0 of VF 0000:03:02.1"
    std::string none_why;
};
SharedLink shared_link(const std::string& sysfs, const Device& d);

/// What the link can carry: topology.linkCapacityMbps, else its speed; unknown with why.
struct LinkCapacity {
    std::optional<double> bps;
    std::string source;    ///< "topology.linkCapacityMbps", "link speed"
    std::string unknown;   ///< why there is no capacity
};
LinkCapacity link_capacity(const conf::Topology* t, const Device& d, const std::string& sysfs);

/// Everything the bandwidth constraint is decided on; read in order, each only when the
/// one before is known.
struct BandwidthFacts {
    SharedLink link;
    LinkCapacity capacity;
    std::vector<ledger::Entry> others;   ///< committed on the link, not by this attachment
};
BandwidthFacts bandwidth_facts(const conf::NetConf& c, const Device& d, const PodInfo& pod);

}  // namespace cni
