#include "cni/attach/attachment.h"
#include "cni/delegate.h"
#include "cni/error.h"
#include "base/failpoint.h"
#include "cni/verbs/claim_step.h"
#include "cni/verbs/ipam_step.h"
#include "cni/verbs/placement_step.h"
#include "cni/records.h"
#include "cni/pod_netns.h"
#include "cni/result.h"
#include "cni/verbs/verbs.h"

namespace cni {

namespace {
/// The intent record: who, where, and what a later DEL needs without the runtime.
Record record_of(const Env& env, const conf::NetConf& c, const placement::Subject& subject) {
    Record r{c.name, env.container_id, env.ifname, env.netns, nullptr, 0, record_config(c.raw), "", ""};
    for (auto& dir : env.path) r.cni_path += (r.cni_path.empty() ? "" : ":") + dir;
    for (auto& [k, v] : env.args.all) r.cni_args += (r.cni_args.empty() ? "" : ";") + k + "=" + v;
    r.link = placement::attachment_link(c, subject);
    return r;
}

/// Why the interface is there, for the 105's details: this attachment's own earlier ADD
/// (a retry: the runtime keeps that result) or someone else's.
std::string why_taken(const Env& env, const conf::NetConf& c) {
    auto rec = read_record(c.state_dir, c.name, env.container_id, env.ifname);
    std::string who = "container '" + env.container_id + "' in network '" + c.name + "'";
    if (!rec || rec->netns != env.netns)
        return "not an attachment of " + who + ": choose another CNI_IFNAME, or DEL what holds it";
    if (rec->completed_ns)
        return "an earlier ADD of " + who + " completed and made it: DEL it before adding it again "
               "(the runtime keeps its result; CHECK verifies it)";
    return "an earlier ADD of " + who + " is running or died part-way: DEL it before adding it again";
}

/// The spec (ADD): "If an interface of the requested name already exists in the container,
/// the CNI plugin MUST return with an error." A retry of an ADD that completed is no
/// exception. Checked first, for every kind, before anything is written: a later refusal
/// would roll back what the first ADD holds under the same owner (its record, its
/// addresses), and a delegate's plugin fails only after our record was rewritten.
void refuse_existing_interface(const Env& env, const conf::NetConf& c, const netns::Handle& pod) {
    try {
        require_ifname_free(pod, env.netns, env.ifname);
    } catch (const Error& e) {
        if (e.code != kLinkExists) throw;
        throw Error(kLinkExists, e.what(), why_taken(env, c));
    }
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
    // A retry whose interface is gone goes on below: IPAM gives the owner its addresses again.
    refuse_existing_interface(env, c, pod);
    Context ctx{env, c, host, &pod};
    const placement::Subject& subject = kind;
    kind.preflight(ctx);
    if (kind.runs_ipam()) ipam_preflight(env, c);
    // A device a DRA claim holds is its pod's alone; the claim's bandwidth is booked already.
    ClaimHold claim = check_claim(ctx, subject);
    std::optional<conf::NetConf> unbooked;
    if (claim.bandwidth_booked) {
        unbooked = c;
        unbooked->bandwidth.reset();
    }
    Context judged{env, unbooked ? *unbooked : c, host, &pod};
    // Placement is checked before anything changes, so a refused pod leaves no trace.
    check_placement(judged, subject, true);

    // Held until we return: GC of this network waits for us and we for it.
    auto gc_guard = lock_network(c.state_dir, c.name, base::DirLock::Shared, lock_timeout_ms(c));
    base::Rollback undo;
    // Runs last: the directories this ADD created go when nothing else is in them.
    undo.add("network directory", [&] { gc_guard.release_created(); });
    // The record goes first: if we die anywhere below, GC finds the attachment by it.
    Record rec = record_of(env, c, subject);
    write_record(c.state_dir, rec);
    undo.add("record", [&] { remove_record(c.state_dir, c.name, env.container_id, env.ifname); });
    admit_bandwidth(judged, subject, undo);
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
