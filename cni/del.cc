#include <cerrno>

#include "cni/attachment.h"
#include "cni/error.h"
#include "cni/ipam.h"
#include "cni/meta.h"
#include "cni/pod_netns.h"
#include "cni/records.h"
#include "cni/verbs.h"

namespace cni {

// DEL is best-effort and idempotent (spec): addresses are released first, even when the
// netns is gone or CNI_NETNS is empty, so nothing leaks when the link cannot be reached.
Output cmd_del(const Env& env, const conf::NetConf& c) {
    if (c.delegate) return meta_run(env, c);   // DEL is forwarded even when ADD was refused
    ipam_del(env, c);

    auto host = netns::Handle::current();
    std::optional<netns::Handle> pod = open_pod_netns_if_present(env.netns, host);
    Context ctx{env, c, host, pod ? &*pod : nullptr};
    make_attachment(c)->del(ctx);
    remove_record(c.state_dir, c.name, env.container_id, env.ifname);
    return std::nullopt;
}

}  // namespace cni
