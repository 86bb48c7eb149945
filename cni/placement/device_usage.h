// How busy a master or a PF already is (topology.maxAttachmentsPerMaster).
#pragma once
#include <optional>
#include <string>
#include <vector>

#include "netns/netlink.h"
#include "netns/netns.h"

namespace cni {

/// Where the macvlans of a master were found ("node", "/run/netns/cni-1234...").
struct MacvlanUse {
    int index = 0;                      ///< the master's ifindex in the node netns
    std::vector<std::string> where;     ///< one entry per macvlan
};

/// Links of `kind` ("macvlan", "ipvlan") whose lower device is `master` (in the calling thread's netns, the
/// node's). A macvlan moved into a pod is invisible from the node (no upper_* link in
/// sysfs, no netlink entry), so besides the node netns every namespace pinned under
/// /run/netns (containerd, CRI-O, podman, ip netns) and /run/docker/netns is entered,
/// and its macvlans count when their IFLA_LINK_NETNSID is the node netns' id there and
/// their IFLA_LINK is the master. `self` (the pod netns, may be null) and `self_ifname`
/// name the attachment being checked, which is not counted (CHECK). Throws code 7 when
/// the master does not exist.
MacvlanUse macvlans_on_master(const std::string& master, const std::string& kind, const netns::Handle* self,
                              const std::string& self_ifname);

/// VFs of the PF `pf_pci` that are in use according to the SR-IOV state records
/// (<stateDir>/sriov/<vf-pci>.json), not counting `vf`. A record belongs to the PF
/// when its "pfPciAddress" says so, or else when sysfs says the VF's physfn is the PF.
std::vector<std::string> vfs_in_use(const std::string& state_dir, const std::string& sysfs_root,
                                    const std::string& pf_pci, const std::string& vf);

}  // namespace cni
