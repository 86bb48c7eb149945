#include <cerrno>

#include "cni/attach/attachment.h"
#include "cni/error.h"
#include "cni/ipam.h"
#include "base/log.h"
#include "cni/attach/delegate.h"
#include "cni/pod_netns.h"
#include "cni/placement/ledger.h"
#include "cni/records.h"
#include "cni/attach/shaping.h"
#include "cni/verbs.h"

namespace cni {

namespace {

// DEL is forwarded even when ADD was refused. A delegate that fails the DEL of an
// attachment it never saw (no record of ours says it got the ADD: we refused it, or the
// config could not even be read) must not keep the pod from going away; its failure is
// logged. With a record, its failure is the runtime's to see.
Output meta_del(const Env& env, const conf::NetConf& c) {
    bool delegated = read_record(c.state_dir, c.name, env.container_id, env.ifname).has_value();
    try {
        meta_run(env, c);
    } catch (const Error& e) {
        if (delegated) throw;
        base::log::warn(std::string(e.what()) + " (ignored: the delegate never got an ADD for this attachment)");
    }
    remove_record(c.state_dir, c.name, env.container_id, env.ifname);
    return std::nullopt;
}

}  // namespace

// DEL is best-effort and idempotent (spec): addresses are released first, even when the
// netns is gone or CNI_NETNS is empty, so nothing leaks when the link cannot be reached.
// The config was parsed for teardown (conf::Purpose::Teardown): keys DEL does not need
// may be invalid, and DEL still succeeds.
Output cmd_del(const Env& env, const conf::NetConf& c) {
    if (c.name.empty()) {
        // Every file of an attachment is found through the network's name, and ADD refuses
        // a config without a valid one: nothing can have been added under it.
        base::log::warn("the config has no valid name; nothing can have been added under it, nothing to delete");
        return std::nullopt;
    }
    if (c.delegate) return meta_del(env, c);
    ipam_del(env, c);

    auto host = netns::Handle::current();
    std::optional<netns::Handle> pod = open_pod_netns_if_present(env.netns, host);
    Context ctx{env, c, host, pod ? &*pod : nullptr};
    make_attachment(c)->del(ctx);
    unshape(ctx, c.attachment != conf::Attachment::Veth);
    ledger::remove_everywhere(c.state_dir, c.name, env.container_id, env.ifname);
    remove_record(c.state_dir, c.name, env.container_id, env.ifname);
    return std::nullopt;
}

}  // namespace cni
