// Shaping an attachment's traffic to the rates of its bandwidth request (conf/bandwidth.h),
// with the tc objects of netns/tc.h. Where the shaping lives depends on the kind:
// - veth: on the host end, as the reference bandwidth plugin does it, out of the pod's
//   reach: a tbf on the host end limits what the pod receives; what the pod sends is
//   redirected from the host end's ingress to an ifb on the node and limited there.
// - macvlan and an SR-IOV VF netdev have no host end: in the pod, on CNI_IFNAME (a tbf for
//   what it sends, an ifb in the pod for what it receives). A VF's egress is limited by the
//   PF instead (max_tx_rate, cni/attach/sriov.cc), in hardware.
#pragma once
#include <string>

#include "cni/attach/attachment.h"

namespace cni {

/// veth: shapes on `host_end` in the node netns; the node's ifb is undone by `undo`
/// (the host end's own qdiscs go with the veth).
void shape_host_end(Context& ctx, const std::string& host_end, base::Rollback& undo);
/// macvlan, SR-IOV: shapes CNI_IFNAME in the pod; `egress` false leaves what the pod sends
/// alone (the PF limits it). The pod's ifb is undone by `undo`.
void shape_in_pod(Context& ctx, bool egress, base::Rollback& undo);
/// CHECK: the qdiscs, filter and ifb that shape the attachment are there with the rates
/// of its bandwidth request (code 103 naming the difference): on the host end of a veth,
/// or in the pod (`egress` false: a VF's egress is the PF's max_tx_rate, which the SR-IOV
/// check does not read back).
void check_host_end_shaping(const Context& ctx, const std::string& host_end);
void check_pod_shaping(const Context& ctx, bool egress);
/// GC: removes the ifb of an attachment from a pod netns that still exists.
void unshape_pod(const std::string& netns_path, const std::string& container_id, const std::string& ifname);
/// DEL: removes the attachment's ifb from the node and, with `in_pod` and the pod netns
/// still there, from the pod. Nothing there is fine.
void unshape(const Context& ctx, bool in_pod);

}  // namespace cni
