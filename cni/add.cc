#include "cni/attach/attachment.h"
#include "cni/delegate.h"
#include "cni/error.h"
#include "base/failpoint.h"
#include "cni/ipam.h"
#include "cni/attach/delegate.h"
#include "cni/placement/placement.h"
#include "cni/records.h"
#include "cni/pod_netns.h"
#include "cni/result.h"
#include "cni/verbs.h"

namespace cni {

namespace {
/// The intent record: who, where, and what a later DEL needs without the runtime.
Record record_of(const Env& env, const conf::NetConf& c) {
    Record r{c.name, env.container_id, env.ifname, env.netns, nullptr, 0, record_config(c.raw), "", ""};
    for (auto& dir : env.path) r.cni_path += (r.cni_path.empty() ? "" : ":") + dir;
    for (auto& [k, v] : env.args.all) r.cni_args += (r.cni_args.empty() ? "" : ";") + k + "=" + v;
    r.link = attachment_link(c);
    return r;
}

int lock_timeout_ms(const conf::NetConf& c) {
    return c.host_local ? static_cast<int>(c.host_local->lock_timeout.count()) : 10000;
}
}  // namespace

// ADD: check everything that needs no change first (the pod's interface name is free,
// the device or master exists and is free, requested addresses are in range, placement),
// then acquire step by step with an undo registered right after each acquisition; the
// result is printed only when all steps succeeded, and only then is the undo stack
// dismissed. A refused ADD leaves no file and no directory it did not find.
Output cmd_add(const Env& env, const conf::NetConf& c) {
    auto host = netns::Handle::current();
    auto pod = open_pod_netns(env.netns, host);
    Context ctx{env, c, host, &pod};
    // Placement is checked before anything changes, so a refused pod leaves no trace.
    if (c.delegate) {
        find_plugin(env.path, c.delegate->value("type", ""), "delegate.type");
        check_placement(ctx, true);
        // The record says the delegate got this ADD: a DEL the delegate fails for an
        // attachment it never saw (one we refused) is then not the runtime's problem. It
        // stays when the delegate fails too: that ADD may have changed things, and its DEL
        // must be able to fail (see meta_del). So there is nothing to roll back here.
        NetworkLock gc_guard(c.state_dir, c.name, NetworkLock::Shared, lock_timeout_ms(c));
        Record rec = record_of(env, c);
        write_record(c.state_dir, rec);
        rec.result = *meta_run(env, c);
        write_record(c.state_dir, rec);
        return rec.result;
    }
    auto attachment = make_attachment(c);
    require_ifname_free(pod, env.ifname);
    attachment->preflight(ctx);
    ipam_preflight(env, c);
    check_placement(ctx, true);

    // Held until we return: GC of this network waits for us and we for it.
    NetworkLock gc_guard(c.state_dir, c.name, NetworkLock::Shared, lock_timeout_ms(c));
    base::Rollback undo;
    // Runs last: the directories this ADD created go when nothing else is in them.
    undo.add("network directory", [&] { gc_guard.release_created(); });
    // The record goes first: if we die anywhere below, GC finds the attachment by it.
    Record rec = record_of(env, c);
    write_record(c.state_dir, rec);
    undo.add("record", [&] { remove_record(c.state_dir, c.name, env.container_id, env.ifname); });
    admit_bandwidth(ctx, undo);
    Result ipam = ipam_add(env, c, undo);
    base::failpoint("after-ipam");

    Result result;
    attachment->add(ctx, ipam, result, undo);
    if (!c.dns.empty()) result.dns = c.dns;

    auto out = result_to_json(result, c.cni_version);
    base::failpoint("before-result");
    rec.result = out;
    write_record(c.state_dir, rec);
    undo.dismiss();
    return out;
}

}  // namespace cni
