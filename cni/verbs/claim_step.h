// ADD's step for a device the scheduler allocated through Dynamic Resource Allocation:
// kubelet's DRA plugin (kubelet/, cluster/claim_prepare.h) recorded the claim that holds
// it (placement/prepared_claims.h), and Multus passes the device's PCI address as
// deviceID. A VF a prepared claim holds attaches only to that claim's pod; the claim's
// link bandwidth is already in the ledger, so ADD does not book the NAD's again.
#pragma once
#include <string>

#include "cni/context.h"
#include "placement/placement.h"

namespace cni {

struct ClaimHold {
    bool held = false;               ///< a prepared claim of this pod holds the device
    bool bandwidth_booked = false;   ///< and it books bandwidth on the device's link
    std::string claim;               ///< "namespace/name (uid U)"
};

/// Throws code 100 when the attachment's VF is held by another pod's claim (or the pod is
/// not named: no K8S_POD_UID). Costs one stat when no claim was ever prepared here.
ClaimHold check_claim(const Context& ctx, const placement::Subject& s);

}  // namespace cni
