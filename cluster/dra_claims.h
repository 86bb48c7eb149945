// From a NAD to a DRA claim: the ResourceClaimTemplate that asks kube-scheduler's device
// allocator for what the NAD's topology, bandwidth and IPAM need on a node, in terms of
// the devices dra_slices.cc publishes (the same names, the same units). A user keeps
// writing only the k8s.v1.cni.cncf.io/networks annotation: `topocni dra-template` prints
// the template, and the admission webhook adds the pod's claim on it.
//
//   request "vf"    vf.topocni.io    the NAD's resourceName, numaNode, minLinkSpeedMbps
//   request "link"  link.topocni.io  egressMbps/ingressMbps (and attachments on a master);
//                                    matchAttribute topocni.io/pf: a VF's bandwidth is
//                                    counted on its own PF
//   request "pool"  pool.topocni.io  one address from each of the network's range sets
#pragma once
#include <map>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "cluster/scheduling.h"

namespace cluster::dra {

inline constexpr const char* kVfClass = "vf.topocni.io";
inline constexpr const char* kLinkClass = "link.topocni.io";
inline constexpr const char* kPoolClass = "pool.topocni.io";
/// On a template and on the pod's claim entry: the NAD ("namespace/name") it was made for.
inline constexpr const char* kNetworkAnnotation = "topocni.io/network";

struct ClaimPlan {
    nlohmann::json spec;              ///< a v1 ResourceClaimSpec: {"devices": {...}}
    std::vector<std::string> notes;   ///< what the claim cannot say, and what checks it instead
    bool empty() const;               ///< the NAD needs no device (a veth without IPAM)
};

/// What a NAD's network asks of DRA. Pod-independent (a template serves every pod): the
/// pod's bandwidth annotations are left to ADD's ledger, as its notes say.
ClaimPlan claim_plan(const PodNetwork& n, const std::string& driver);

/// The name of a NAD's template and of the pod's claim entry: "<nad>-topocni", a DNS label
/// (the claim entry's rule) made from the NAD's name.
std::string claim_name(const std::string& nad_name);

/// The ResourceClaimTemplate object for `plan` in the NAD's namespace.
nlohmann::json claim_template(const PodNetwork& n, const ClaimPlan& plan);

}  // namespace cluster::dra
