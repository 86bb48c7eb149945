// Placement's facts about the node. The node's labels come from a file or the Kubernetes
// API. Everything else is read into a facts document (node_facts.h), each part on its own
// so that a constraint reads only what it needs (the device's PF or master, a ledger, a
// pool), and then put into words by functions that read only the document: the same
// words whether the document was read live by ADD or published by node-report. A fact
// that is not known is returned unknown, with the sentence that says why; evaluate.h
// judges them.
#pragma once
#include <functional>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "placement/labels.h"
#include "placement/ledger.h"
#include "placement/node_facts.h"
#include "placement/placement.h"
#include "conf/netconf.h"

namespace placement {

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

// ---- reading the node into a facts document (node_facts.h): each adds what it reads ----

/// NUMA nodes and their CPUs.
void gather_numa(NodeFacts& f, const std::string& sysfs);
/// A PCI device; with `all_vfs`, when it is a PF, its configured VFs with their NUMA nodes
/// and, from `in_use` (may be empty: unknown), which of them attachments hold; `vf` (may be
/// empty) is a VF of it that must be among them. Idempotent.
void gather_pci(NodeFacts& f, const std::string& sysfs, const std::string& pci,
                const std::function<std::vector<std::string>(const std::string& pf)>& in_use, const std::string& vf,
                bool all_vfs);
/// A netdev used as a master: its device, NUMA node, speed; with `count_links`, the links
/// of `links_kind` on it (not counting `pod`'s own). Throws code 7 (as macvlans_on_master)
/// when counting links on a master that does not exist.
void gather_link(NodeFacts& f, const std::string& sysfs, const std::string& name, const std::string& links_kind,
                 bool count_links, const PodInfo& pod);
/// The bandwidth ledger of `link`, without `pod`'s own entry.
void gather_ledger(NodeFacts& f, const std::string& state_dir, const std::string& link, const std::string& network,
                   const PodInfo& pod);
/// The host-local pool of `network`, per range set, without `pod`'s own reservation.
void gather_pool(NodeFacts& f, const ipam::Config& pool, const std::string& network, const PodInfo& pod);
/// The device's part of the node: its PCI device and PF, or its master; with
/// `count_links`, what is already on it (the links on a master, a PF's VFs in use).
void gather_device(NodeFacts& f, const conf::NetConf& c, const Device& d, const PodInfo& pod, bool count_links);

// ---- the facts of one device, as words: the same from a live read and a published document ----

Fact device_numa(const NodeFacts& f, const Device& d);
Fact link_speed(const NodeFacts& f, const Device& d);

/// The NUMA nodes of the pod's exclusive CPUs.
struct PodNuma {
    bool known = false;
    std::set<int> nodes;
    std::string text;
};
/// From the kubelet's cpu_manager_state on this node, CPUs placed by `f`'s NUMA nodes.
PodNuma pod_numa(const conf::NetConf& c, const std::string& uid, const NodeFacts& f);

/// How many other links are on a master, or VFs in use on a PF: unknown (no `used`) with
/// the why.
struct DeviceUse {
    std::optional<long long> used;
    std::string text;
};
DeviceUse device_use(const NodeFacts& f, const Device& d);

/// A range set of the pool, and how many addresses it has left once the pod has its own.
struct PoolSet {
    std::string range_set;
    unsigned __int128 size = 0, taken = 0, free_after = 0;
};
/// The pool's sets as `f` has them; a network `f` does not hold is as the config makes it,
/// with nothing reserved.
std::vector<PoolSet> pool_sets(const NodeFacts& f, const ipam::Config& pool, const std::string& network);

/// The link a device shares: a master by name, a VF's PF by PCI address.
struct SharedLink {
    std::string key;     ///< ledger name: "eth1", "0000:03:00.0"; empty: none
    std::string label;   ///< "master 'eth1'", "PF 0000:03:00.0 of VF 0000:03:02.1"
    std::string none_why;
};
SharedLink shared_link(const NodeFacts& f, const Device& d);

/// What the link can carry: topology.linkCapacityMbps, else its speed; unknown with why.
struct LinkCapacity {
    std::optional<double> bps;
    std::string source;    ///< "topology.linkCapacityMbps", "link speed"
    std::string unknown;   ///< why there is no capacity
};
LinkCapacity link_capacity(const conf::Topology* t, const NodeFacts& f, const Device& d);

/// Everything the bandwidth constraint is decided on; read in order, each only when the
/// one before is known.
struct BandwidthFacts {
    SharedLink link;
    LinkCapacity capacity;
    std::vector<ledger::Entry> others;   ///< the first few committed on the link, not by this attachment
    long long others_count = 0;          ///< all of them
    uint64_t others_egress = 0, others_ingress = 0;   ///< what all of them committed
};
BandwidthFacts bandwidth_facts(const conf::NetConf& c, const NodeFacts& f, const Device& d, const PodInfo& pod);

}  // namespace placement
