#include "cni/attach/attachment.h"
#include "cni/delegate.h"
#include "cni/error.h"
#include "base/failpoint.h"
#include "cni/verbs/ipam_step.h"
#include "cni/placement/placement.h"
#include "cni/records.h"
#include "cni/pod_netns.h"
#include "cni/result.h"
#include "cni/verbs/verbs.h"

namespace cni {

namespace {
/// The intent record: who, where, and what a later DEL needs without the runtime.
Record record_of(const Env& env, const conf::NetConf& c, const Subject& subject) {
    Record r{c.name, env.container_id, env.ifname, env.netns, nullptr, 0, record_config(c.raw), "", ""};
    for (auto& dir : env.path) r.cni_path += (r.cni_path.empty() ? "" : ":") + dir;
    for (auto& [k, v] : env.args.all) r.cni_args += (r.cni_args.empty() ? "" : ";") + k + "=" + v;
    r.link = attachment_link(c, subject);
    return r;
}

/// The result of an earlier, completed ADD of this attachment in this version, when its
/// pod interface is still in the pod netns.
std::optional<nlohmann::json> completed_result(const Env& env, const conf::NetConf& c, const netns::Handle& pod) {
    auto rec = read_record(c.state_dir, c.name, env.container_id, env.ifname);
    if (!rec || !rec->completed_ns || rec->result.is_null() || rec->netns != env.netns) return std::nullopt;
    if (rec->result.value("cniVersion", "") != c.cni_version) return std::nullopt;
    try {
        require_ifname_free(pod, env.ifname);
        return std::nullopt;   // the interface is gone: a new ADD makes it again
    } catch (const base::Error& e) {
        if (code_of(e) != kLinkExists) throw;
    }
    return rec->result;
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
Output cmd_add(const Env& env, const conf::NetConf& c, Attachment& kind) {
    auto host = netns::Handle::current();
    auto pod = open_pod_netns(env.netns, host);
    // A retry of an ADD that completed (same container ID, ifname and netns, the interface
    // still there) gets the first result again: the runtime may have lost it.
    if (auto done = completed_result(env, c, pod)) return *done;
    Context ctx{env, c, host, &pod};
    const Subject& subject = kind;
    kind.preflight(ctx);
    if (kind.runs_ipam()) ipam_preflight(env, c);
    // Placement is checked before anything changes, so a refused pod leaves no trace.
    check_placement(ctx, subject, true);

    // Held until we return: GC of this network waits for us and we for it.
    auto gc_guard = lock_network(c.state_dir, c.name, base::DirLock::Shared, lock_timeout_ms(c));
    base::Rollback undo;
    // Runs last: the directories this ADD created go when nothing else is in them.
    undo.add("network directory", [&] { gc_guard.release_created(); });
    // The record goes first: if we die anywhere below, GC finds the attachment by it.
    Record rec = record_of(env, c, subject);
    write_record(c.state_dir, rec);
    undo.add("record", [&] { remove_record(c.state_dir, c.name, env.container_id, env.ifname); });
    admit_bandwidth(ctx, subject, undo);
    Result ipam = kind.runs_ipam() ? ipam_add(env, c, undo) : Result{};
    base::failpoint("after-ipam");

    Result result;
    auto pod_interface = kind.add(ctx, ipam, result, undo);
    if (kind.runs_ipam()) take_ipam_result(result, ipam, pod_interface, c.dns);

    auto out = result_to_json(result, c.cni_version);
    base::failpoint("before-result");
    rec.result = out;
    write_record(c.state_dir, rec);
    undo.dismiss();
    return out;
}

}  // namespace cni
