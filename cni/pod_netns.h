// Opening CNI_NETNS safely.
#pragma once
#include <optional>
#include <string>

#include "netns/netns.h"

namespace cni {

/// ADD/CHECK: the path must be a network namespace other than the plugin's own
/// (code 8), so a reused or wrong path never makes us reconfigure the node.
netns::Handle open_pod_netns(const std::string& path, const netns::Handle& host);
/// DEL: nullopt when the path is empty, gone, or not a namespace any more.
std::optional<netns::Handle> open_pod_netns_if_present(const std::string& path, const netns::Handle& host);
/// Code 105 naming the interface and the netns (`path`, for the message) when `ifname`
/// already exists in the pod netns (spec: ADD MUST fail).
void require_ifname_free(const netns::Handle& pod, const std::string& path, const std::string& ifname);

/// True when `path` still names a network namespace.
bool netns_exists(const std::string& path);
/// True only when `path` provably names no namespace any more: it does not exist while its
/// directory does. A path that exists but is no namespace (a bind mount that did not
/// propagate into this mount namespace), or whose directory is not there (not mounted
/// here), proves nothing: false.
bool netns_gone(const std::string& path);

}  // namespace cni
