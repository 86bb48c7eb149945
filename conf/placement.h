// Placement constraints (nodeSelector, topology): the keys as plain structs. What they
// mean at ADD lives in placement/.
#pragma once
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace conf {

struct NetConf;

/// One requirement of a Kubernetes label selector (apimachinery labels.Requirement).
struct LabelRequirement {
    enum class Op { In, NotIn, Exists, DoesNotExist, Gt, Lt };
    std::string key;
    Op op = Op::In;
    std::vector<std::string> values;   ///< In/NotIn: one or more; Gt/Lt: exactly one int64; else none
};

/// A nodeSelector: every requirement must hold. The map form and matchLabels become
/// `In [value]`. An empty selector matches every node.
struct LabelSelector {
    std::vector<LabelRequirement> requirements;
};

/// The Topology Manager's policy names.
enum class NumaPolicy { None, BestEffort, Restricted, SingleNumaNode };

struct Topology {
    NumaPolicy numa_policy = NumaPolicy::None;
    std::optional<int> numa_node;                  ///< the device must be on this NUMA node
    bool deny_unknown = false;                     ///< unknownTopology: deny (default allow)
    std::optional<long long> min_link_speed_mbps;
    std::optional<long long> max_attachments_per_master;
    std::optional<long long> min_free_addresses;
    std::optional<long long> link_capacity_mbps;   ///< overrides the driver's link speed for admission
    double bandwidth_overcommit = 1.0;             ///< committed bandwidth may reach capacity x this
};

struct Placement {
    std::optional<LabelSelector> node_selector;
    std::optional<std::string> node_name;          ///< default: the host name, lower-cased
    std::optional<std::string> node_labels_file;   ///< JSON object or NFD features.d lines
    /// kubeconfig for the Node GET; unset: Multus's kubeconfig when it exists; "": no API.
    std::optional<std::string> kubeconfig;
    double node_labels_ttl = 60;                   ///< seconds the API labels are cached
    double api_timeout = 3;                        ///< apiTimeout: seconds for each step of an API request
    std::optional<Topology> topology;
    std::string kubelet_root_dir = "/var/lib/kubelet";
};

/// Human name of an operator ("In", "NotIn", ...).
const char* op_name(LabelRequirement::Op op);
const char* numa_policy_name(NumaPolicy p);

/// Parses a nodeSelector value (map or label selector). Code 7 naming the bad part by
/// its path under `path`, e.g. "nodeSelector.matchExpressions[1].operator".
LabelSelector parse_label_selector(const nlohmann::json& j, const std::string& path);

/// Fills c.placement when any placement key is present; code 7 naming the key.
void parse_placement(NetConf& c);

}  // namespace conf
