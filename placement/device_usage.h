// How busy a master or a PF already is (topology.maxAttachmentsPerMaster).
#pragma once
#include <optional>
#include <string>
#include <vector>

#include "netns/netlink.h"
#include "netns/netns.h"

namespace placement {

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


}  // namespace placement
