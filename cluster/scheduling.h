// The scheduler side's question, "do this pod's topocni networks fit this node?", asked
// with the evaluation ADD runs (placement/placement.h, evaluate_on) on the facts the
// node published (node_facts.h). What cannot be known before the pod is on the node is
// filled in as ADD will find it: the VF is any free VF of the NAD's resource (the device
// plugin picks it), on a NUMA node the topology allows; the pod's exclusive CPUs are
// chosen by the Topology Manager at admission, aligned with that device.
#pragma once
#include <ctime>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "cluster/networks.h"
#include "placement/node_facts.h"

namespace cluster {

/// A NAD's topocni config, ready to evaluate: parsed once per pod, used on every node.
struct PodNetwork {
    NetworkSelection selection;
    std::string config;          ///< the topocni config (plain, a conflist's entry, or one with "delegate")
    std::string resource_name;   ///< the NAD's k8s.v1.cni.cncf.io/resourceName
    std::string error;           ///< the NAD is missing or does not parse: the pod fits nowhere
    struct Parsed;
    std::shared_ptr<const Parsed> parsed;
    std::string key() const { return selection.namespace_ + "/" + selection.name; }
};

/// The topocni config inside a NAD object: spec.config, a conflist's topocni entry (with
/// the list's name and cniVersion; a config without a name, or with "", gets the NAD's, as
/// Multus gives it); nullopt when the NAD has no topocni plugin. Throws
/// code 7 when spec.config is not a config.
std::optional<std::string> topocni_config_of(const nlohmann::json& nad);

/// "namespace/name" of an object (a NAD): the key every NAD cache and PodNetwork::key() use.
std::string object_key(const nlohmann::json& object);

/// Resolves and parses one network of a pod from its NAD object (null: not found).
PodNetwork pod_network(const NetworkSelection& sel, const nlohmann::json* nad);

/// A node as the scheduler side knows it.
struct NodeView {
    std::string name;
    std::map<std::string, std::string> labels;
    std::shared_ptr<const placement::NodeFacts> facts;   ///< null: none published, or not parsable
    std::string facts_why;                    ///< why there are none
    std::optional<std::time_t> taken_at;
    std::string resource_version;             ///< the Node object's: the same one is the same node
};

/// The node as a Node object carries it (labels, the topocni.io/facts annotation).
NodeView node_view(const nlohmann::json& node);
/// The same from its parts; `facts` is the annotation's text (null: the node has none).
NodeView node_view(std::string name, std::string resource_version, std::map<std::string, std::string> labels,
                   const std::string* facts);

/// A pod bound to a node whose facts do not count it yet: its networks still need room.
struct PendingPod {
    std::string uid, name;
    std::vector<PodNetwork> networks;
};

struct Options {
    double max_facts_age = 900;   ///< seconds: older facts are as none (unknownTopology decides)
};

struct NodeVerdict {
    bool fits = true;
    bool resolvable = true;   ///< preempting pods could make it fit (FailedNodes, not ...Unresolvable)
    std::string reason;       ///< the same words on every node failing the same way: they group
    std::string evidence;     ///< the node's own facts, for the log and explain
    /// 1 + round(9 x headroom left after this pod), on fresh facts; 0 without them
    int score = 0;
};

/// Every network of the pod on one node, with `pending` pods' needs taken from its facts first.
NodeVerdict judge_node(const std::vector<PodNetwork>& networks, const NodeView& node,
                       const std::vector<const PendingPod*>& pending, const Options& opt, std::time_t now);

}  // namespace cluster
