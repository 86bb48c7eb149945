#include "base/log.h"
#include "cni/attach/attachment.h"
#include "cni/error.h"
#include "cni/verbs/ipam_step.h"
#include "cni/pod_netns.h"
#include "placement/ledger.h"
#include "cni/records.h"
#include "cni/verbs/verbs.h"

namespace cni {

// DEL is best-effort and idempotent (spec): addresses are released first, even when the
// netns is gone or CNI_NETNS is empty, so nothing leaks when the link cannot be reached.
// The config was parsed for teardown (conf::Purpose::Teardown): keys DEL does not need
// may be invalid, and DEL still succeeds.
Output cmd_del(const Env& env, const conf::NetConf& c, Attachment& kind) {
    if (c.name.empty()) {
        // Every file of an attachment is found through the network's name, and ADD refuses
        // a config without a valid one: nothing can have been added under it.
        base::log::warn("the config has no valid name; nothing can have been added under it, nothing to delete");
        return std::nullopt;
    }
    if (kind.runs_ipam()) ipam_del(env, c);

    auto host = netns::Handle::current();
    std::optional<netns::Handle> pod = open_pod_netns_if_present(env.netns, host);
    Context ctx{env, c, host, pod ? &*pod : nullptr};
    kind.del(ctx);
    placement::ledger::remove_everywhere(c.state_dir, c.name, env.container_id, env.ifname);
    remove_record(c.state_dir, c.name, env.container_id, env.ifname);
    return std::nullopt;
}

}  // namespace cni
