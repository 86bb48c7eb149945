// This node's devices for Dynamic Resource Allocation (resource.k8s.io/v1 ResourceSlices),
// made from the same facts document the node publishes and ADD judges on (one source of
// truth): a device per free SR-IOV VF, per shared link (a PF, a macvlan master) with its
// bandwidth and attachments as consumable capacity, and per host-local range set with its
// free addresses. What pods that did not come through DRA hold (VFs in use, bandwidth in
// the ledger, addresses taken, links on a master) is already subtracted in the facts, so
// the allocator is offered exactly what ADD would still admit.
//
// Field names, limits and rules are those of k8s.io/api/resource/v1 (types.go and its
// validation): a device name is a DNS label, at most 32 attributes and capacities per
// device, string values of at most 64 bytes, at most 128 devices per slice.
#pragma once
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "placement/node_facts.h"

namespace cluster::dra {

inline constexpr const char* kDriver = "topocni.io";
inline constexpr size_t kMaxDevicesPerSlice = 128;            ///< ResourceSliceMaxDevices
inline constexpr size_t kMaxAttributesAndCapacities = 32;     ///< ResourceSliceMaxAttributesAndCapacitiesPerDevice
inline constexpr size_t kMaxAttributeValueLength = 64;        ///< DeviceAttributeMaxValueLength

struct SliceOptions {
    std::string driver = kDriver;
    /// Capacity of a shared link with no admission recorded yet: its speed x this
    /// (topology.bandwidthOvercommit of the networks on it; ADD records the one it used).
    double bandwidth_overcommit = 1.0;
    /// The attachments a macvlan master offers (maxAttachmentsPerMaster); unset: 1,024.
    std::optional<long long> max_attachments_per_master;
    /// resourceName per PF (PCI address or netdev), over the SR-IOV device plugin's.
    std::map<std::string, std::string> resource_names;
    /// Addresses each network keeps free (its NADs' topology.minFreeAddresses, the most of
    /// them; dra_claims.h address_reserves): a pool offers its free addresses less this, so
    /// that claims consuming one each stop where ADD would (a selector on the published
    /// capacity cannot see what claims consumed since).
    std::map<std::string, long long> address_reserve;
    /// What the facts document does not hold, read from sysfs by the agent; unset or
    /// nullopt: the attribute is left out.
    std::function<std::optional<std::string>(const std::string& pci)> kernel_driver, pcie_root;
};

/// The devices this node offers, in a stable order (VFs, links, pools), each a v1 Device.
std::vector<nlohmann::json> devices(const placement::NodeFacts& f, const SliceOptions& o);

/// The ResourceSlice specs of the node's pool (pool name = node name) at `generation`: the
/// devices split at kMaxDevicesPerSlice, resourceSliceCount set in each.
std::vector<nlohmann::json> slice_specs(const std::vector<nlohmann::json>& devices, const std::string& node,
                                        const std::string& driver, long long generation);

/// A DNS label (lower case alphanumerics and '-', at most 63) naming `what` uniquely: `what`
/// itself when it is one, else its characters mapped and a hash of the original appended.
std::string device_name(const std::string& prefix, const std::string& what);

/// Throws base::Error naming the rule a device breaks (the API server's rules, checked
/// before anything is sent).
void validate_device(const nlohmann::json& device);

}  // namespace cluster::dra
