// ADD's and CHECK's placement step: placement's verdicts on this node's live facts, a
// refusal counted, recorded for the refusal agent and thrown as code 100; and ADD's
// bandwidth admitted under the link's ledger lock.
#include "cni/verbs/placement_step.h"

#include <ctime>

#include "base/flock.h"
#include "base/log.h"
#include "cni/error.h"
#include "placement/ledger.h"
#include "placement/refusal_record.h"
#include "placement/refusals.h"

namespace cni {

using placement::BandwidthAdmission;
using placement::PodInfo;
using placement::Verdict;
namespace ledger = placement::ledger;
namespace refusal_record = placement::refusal_record;
namespace refusals = placement::refusals;

namespace {

PodInfo pod_of(const Context& ctx) {
    return {ctx.env.args.pod_uid, ctx.env.container_id, ctx.env.ifname, ctx.pod, ctx.env.args.pod_namespace,
            ctx.env.args.pod_name};
}

/// What a refused ADD leaves for the refusal agent: the pod's record (refusal_record.h).
void record_refusal(const Context& ctx, const std::vector<std::string>& failed, const std::string& details) {
    const conf::NetConf& c = ctx.conf;
    std::string node;
    try {
        if (c.placement) node = placement::node_name(*c.placement);
    } catch (const base::Error&) {
        // The record names the node when it can; the agent knows its own.
    }
    refusal_record::note(c.state_dir,
                         {ctx.env.args.pod_namespace, ctx.env.args.pod_name, ctx.env.args.pod_uid, c.name, node, failed,
                          details, c.on_refusal.evict, c.on_refusal.after, c.on_refusal.window_seconds},
                         std::time(nullptr));
}

}  // namespace

/// Logs what passed, and throws code 100 naming every constraint that did not; a refused
/// ADD is counted (placement/refusals.h) for the operator's metrics and recorded for the pod
/// (refusal_record.h), with no API call.
void enforce(const Context& ctx, const std::vector<Verdict>& verdicts, bool count) {
    const conf::NetConf& c = ctx.conf;
    std::string names, details;
    std::vector<std::string> failed;
    for (auto& v : verdicts) {
        if (!v.pass) {
            failed.push_back(v.constraint);
            names += (names.empty() ? "" : ", ") + v.constraint;
            details += (details.empty() ? "" : " | ") + v.constraint + ": " + v.evidence;
        } else if (v.warning) {
            base::log::warn(v.constraint + ": " + v.evidence);
        } else {
            base::log::debug(v.constraint + " met: " + v.evidence);
        }
    }
    if (failed.empty()) return;
    if (count) {
        refusals::count(c.state_dir, c.name, failed);
        record_refusal(ctx, failed, details);
    }
    // The dispatcher logs the error (message and details) as it prints it.
    throw Error(kPlacement, "placement constraint not met: " + names, details);
}


void check_placement(Context& ctx, const placement::Subject& s, bool count_refusals) {
    const conf::NetConf& c = ctx.conf;
    if (!c.placement && !c.bandwidth) return;
    enforce(ctx, placement::evaluate_placement(c, s, pod_of(ctx)), count_refusals);
}

// The check before any change (check_placement) read the ledger without a lock, so two
// ADDs may both have seen room for one. Here, under the link's lock, the ledger is read
// again and this attachment's entry written before the lock goes: the next ADD on the
// link counts it.
void admit_bandwidth(Context& ctx, const placement::Subject& s, base::Rollback& undo) {
    const conf::NetConf& c = ctx.conf;
    if (!c.bandwidth) return;
    PodInfo pod = pod_of(ctx);
    // Only where to lock, and whether there is a capacity to count against: the verdict
    // itself is the one taken under the lock.
    BandwidthAdmission first = placement::evaluate_bandwidth(c, s, pod);
    if (first.link.empty() || first.entry.capacity_bps == 0) return;   // unknown topology, allowed by check_placement
    auto lock = base::DirLock::create(ledger::dir(c.state_dir, first.link), c.state_dir, base::DirLock::Exclusive,
                                      std::chrono::seconds(10), "another ADD is admitting bandwidth on this link");
    BandwidthAdmission again = placement::evaluate_bandwidth(c, s, pod);
    if (!again.admitted) {
        lock.release_created();
        enforce(ctx, {again.verdict}, true);
    }
    ledger::commit(c.state_dir, again.link, again.entry);
    ledger::record_capacity(c.state_dir, again.link, again.entry);
    undo.add("bandwidth ledger entry on " + again.link,
             [sd = c.state_dir, link = again.link, e = again.entry] { ledger::remove(sd, link, e.network, e.container_id, e.ifname); });
    base::log::info("bandwidth admitted: " + again.verdict.evidence);
}

}  // namespace cni
