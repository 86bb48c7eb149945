// Names and marks that let DEL and GC find host-side links without any state file.
#pragma once
#include <optional>
#include <string>

#include "cni/attach/attachment.h"

namespace cni {

/// "veth" + 11 hex digits of a hash of (container ID, ifname): 15 bytes, stable, so
/// DEL finds the host end from the CNI_* variables alone. NetworkManager ignores veth*.
std::string host_link_name(const std::string& container_id, const std::string& ifname);

/// "ifb" + 12 hex digits of the same hash: the ifb device that shapes what the pod sends
/// (veth: on the node) or receives (macvlan, SR-IOV: in the pod).
std::string ifb_link_name(const std::string& container_id, const std::string& ifname);

/// IFLA_IFALIAS put on host links we create: "topocni <network> <containerID> <ifname>".
/// GC uses it to find links of stale attachments of one network.
std::string owner_alias(const std::string& network, const std::string& container_id, const std::string& ifname);

struct AliasOwner { std::string network, container_id, ifname; };
std::optional<AliasOwner> parse_owner_alias(const std::string& alias);

/// GC: deletes host links of `kind` marked for this network whose owner is not in the
/// valid-attachments list. Errors on one link do not stop the others.
void gc_host_links(Context& ctx, const std::string& kind);

}  // namespace cni
