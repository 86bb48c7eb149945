#include "cni/pod_netns.h"

#include "cni/error.h"
#include "netns/netlink.h"

namespace cni {

netns::Handle open_pod_netns(const std::string& path, const netns::Handle& host) {
    auto pod = netns::Handle::open(path);
    if (pod.same_as(host))
        throw Error(kInvalidNetns, "CNI_NETNS '" + path + "' is the plugin's own network namespace");
    return pod;
}

std::optional<netns::Handle> open_pod_netns_if_present(const std::string& path, const netns::Handle& host) {
    if (path.empty()) return std::nullopt;
    try {
        auto pod = netns::Handle::open(path);
        if (pod.same_as(host)) return std::nullopt;
        return pod;
    } catch (const base::Error&) {
        return std::nullopt;   // gone (k8s#43014 convention) or no longer a netns
    }
}

void require_ifname_free(const netns::Handle& pod, const std::string& ifname) {
    netns::with(pod, [&] {
        netns::nl::Socket s;
        if (s.get_link(ifname))
            throw Error(kLinkExists, "interface '" + ifname + "' already exists in the pod netns");
    });
}

}  // namespace cni
