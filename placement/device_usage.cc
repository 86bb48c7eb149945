#include "placement/device_usage.h"

#include <dirent.h>
#include <linux/net_namespace.h>
#include <linux/rtnetlink.h>
#include <sys/stat.h>
#include <unistd.h>

#include <memory>
#include <optional>
#include <set>

#include <nlohmann/json.hpp>

#include "base/files.h"
#include "placement/error.h"
#include "base/log.h"
#include "netns/netlink.h"
#include "netns/sysfs.h"
#include "netns/mnl.h"

using namespace netns::mnl;   // the libmnl-compatible helpers

namespace placement {

namespace {

namespace nl = netns::nl;

/// Directories where runtimes pin pod network namespaces.
const char* const kNetnsDirs[] = {"/run/netns", "/var/run/netns", "/run/docker/netns"};

/// The id the calling thread's netns has given the netns `fd` (RTM_GETNSID), nullopt
/// when it has none: then no link here can point at it.
std::optional<int> nsid_of(int fd) {
    std::unique_ptr<mnl_socket, int (*)(mnl_socket*)> s(mnl_socket_open2(NETLINK_ROUTE, SOCK_CLOEXEC),
                                                         mnl_socket_close);
    if (!s || mnl_socket_bind(s.get(), 0, MNL_SOCKET_AUTOPID) < 0) return std::nullopt;
    alignas(nlmsghdr) char buf[MNL_SOCKET_BUFFER_SIZE];
    nlmsghdr* req = mnl_nlmsg_put_header(buf);
    req->nlmsg_type = RTM_GETNSID;
    req->nlmsg_flags = NLM_F_REQUEST;
    req->nlmsg_seq = 1;
    auto* g = static_cast<rtgenmsg*>(mnl_nlmsg_put_extra_header(req, sizeof(rtgenmsg)));
    g->rtgen_family = AF_UNSPEC;
    mnl_attr_put_u32(req, NETNSA_FD, static_cast<uint32_t>(fd));
    if (mnl_socket_sendto(s.get(), req, req->nlmsg_len) < 0) return std::nullopt;
    ssize_t n = mnl_socket_recvfrom(s.get(), buf, sizeof buf);
    if (n <= 0) return std::nullopt;
    auto* reply = reinterpret_cast<nlmsghdr*>(buf);
    if (!mnl_nlmsg_ok(reply, static_cast<int>(n)) || reply->nlmsg_type != RTM_NEWNSID) return std::nullopt;
    std::optional<int> id;
    mnl_attr_parse(
        reply, sizeof(rtgenmsg),
        [](const nlattr* a, void* data) -> int {
            if (mnl_attr_get_type(a) == NETNSA_NSID && mnl_attr_get_payload_len(a) >= 4)
                *static_cast<std::optional<int>*>(data) = static_cast<int>(mnl_attr_get_u32(a));
            return MNL_CB_OK;
        },
        &id);
    if (id && *id < 0) return std::nullopt;   // NETNSA_NSID_NOT_ASSIGNED
    return id;
}

bool same_ns(int fd, std::set<std::pair<dev_t, ino_t>>& seen) {
    struct stat st;
    if (::fstat(fd, &st) < 0) return true;
    return !seen.insert({st.st_dev, st.st_ino}).second;
}

}  // namespace

MacvlanUse macvlans_on_master(const std::string& master, const std::string& kind, const netns::Handle* self,
                              const std::string& self_ifname) {
    MacvlanUse use;
    auto node = netns::Handle::current();
    {
        nl::Socket s;
        auto m = s.get_link(master);
        if (!m) throw Error(Error::Kind::Invalid, "master: interface '" + master + "' not found on the node");
        use.index = m->index;
        for (auto& l : s.list_links())
            if (l.kind == kind && l.link == use.index && !l.link_netnsid) use.where.push_back("node:" + l.name);
    }
    std::set<std::pair<dev_t, ino_t>> seen;
    same_ns(node.fd(), seen);
    for (const char* dir : kNetnsDirs) {
        DIR* d = ::opendir(dir);
        if (!d) continue;
        std::vector<std::string> names;
        while (dirent* e = ::readdir(d))
            if (e->d_name[0] != '.') names.emplace_back(e->d_name);
        ::closedir(d);
        for (auto& name : names) {
            std::string path = std::string(dir) + "/" + name;
            std::optional<netns::Handle> h;
            try {
                h = netns::Handle::open(path);
            } catch (const base::Error&) {
                continue;   // not a mounted namespace (a stale file)
            }
            if (same_ns(h->fd(), seen)) continue;
            bool is_self = self && h->same_as(*self);
            try {
                netns::with(*h, [&] {
                    nl::Socket s;
                    std::optional<std::optional<int>> node_id;   // looked up once, when needed
                    for (auto& l : s.list_links()) {
                        if (l.kind != kind || !l.link_netnsid || l.link != use.index) continue;
                        if (is_self && l.name == self_ifname) continue;
                        if (!node_id) node_id = nsid_of(node.fd());
                        if (*node_id && **node_id == *l.link_netnsid) use.where.push_back(path + ":" + l.name);
                    }
                });
            } catch (const base::Error& e) {
                base::log::debug("skipping netns '" + path + "' while counting macvlans: " + e.what());
            }
        }
    }
    return use;
}


}  // namespace placement
