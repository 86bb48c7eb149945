#include "cni/pod_netns.h"

#include <sys/stat.h>
#include <sys/vfs.h>

#include <cerrno>

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

void require_ifname_free(const netns::Handle& pod, const std::string& path, const std::string& ifname) {
    netns::with(pod, [&] {
        netns::nl::Socket s;
        if (s.get_link(ifname))
            throw Error(kLinkExists, "interface '" + ifname + "' already exists in the pod netns '" + path + "'");
    });
}

bool netns_gone(const std::string& path) {
    struct stat st;
    if (path.empty() || path[0] != '/' || ::stat(path.c_str(), &st) == 0 || errno != ENOENT) return false;
    std::string dir = path.rfind("/proc/", 0) == 0 ? "/proc/self" : path.substr(0, path.rfind('/'));
    return !dir.empty() && ::stat(dir.c_str(), &st) == 0 && S_ISDIR(st.st_mode);
}

bool netns_exists(const std::string& path) {
    if (path.empty()) return false;
    struct statfs fs;
    if (::statfs(path.c_str(), &fs) < 0) return false;
    return fs.f_type == 0x6e736673 /* NSFS_MAGIC */ || fs.f_type == 0x9fa0 /* PROC_SUPER_MAGIC */;
}

}  // namespace cni
