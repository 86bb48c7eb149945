// The networks a pod asks Multus for: the annotation k8s.v1.cni.cncf.io/networks in every
// form Multus accepts (pkg/k8sclient parsePodNetworkAnnotation): a comma-separated list of
// "name", "namespace/name", "name@ifname", "namespace/name@ifname", or a JSON list of
// objects with "name", "namespace", "interface" (and others topocni does not need).
#pragma once
#include <string>
#include <vector>

namespace cluster {

inline constexpr const char* kNetworksAnnotation = "k8s.v1.cni.cncf.io/networks";
inline constexpr const char* kResourceNameAnnotation = "k8s.v1.cni.cncf.io/resourceName";

struct NetworkSelection {
    std::string namespace_;   ///< the NAD's namespace: the pod's when the selection names none
    std::string name;         ///< the NAD's name
    std::string interface;    ///< the interface asked for, "" for Multus's default (net1, net2...)
};

/// Parses the annotation's value; a selection without a namespace gets `pod_namespace`.
/// Throws conf-style code 7 naming what is wrong ("networks annotation: ...").
std::vector<NetworkSelection> parse_networks(const std::string& value, const std::string& pod_namespace);

}  // namespace cluster
