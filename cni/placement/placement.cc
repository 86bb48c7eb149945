// Placement: which constraints apply, the facts each needs (facts.cc, each read once and
// only when a constraint needs it), their verdicts (evaluate.cc), and the refusal.
// Nothing here changes the node, except admit_bandwidth's ledger entry.
#include "cni/placement/placement.h"

#include "base/log.h"
#include "cni/error.h"
#include "cni/placement/evaluate.h"
#include "cni/placement/facts.h"
#include "cni/placement/refusals.h"

namespace cni {

namespace {

template <class F>
void run(std::vector<Verdict>& out, const char* name, const EvalOptions& opt, F&& f) {
    if (!opt.collect_errors) {
        out.push_back(f());
        return;
    }
    try {
        out.push_back(f());
    } catch (const base::Error& e) {
        out.push_back({name, false, false, "cannot evaluate (code " + std::to_string(code_of(e)) + "): " + e.what()});
    } catch (const std::exception& e) {
        out.push_back({name, false, false, std::string("cannot evaluate: ") + e.what()});
    }
}

}  // namespace

BandwidthAdmission evaluate_bandwidth(const conf::NetConf& c, const Subject& s, const PodInfo& pod) {
    const conf::Topology* t = c.placement && c.placement->topology ? &*c.placement->topology : nullptr;
    ledger::Entry me{c.name, pod.container_id, pod.ifname, 0, 0, 0, 1.0, ""};
    if (!pod.pod_name.empty()) me.pod = pod.pod_namespace + "/" + pod.pod_name;
    return evaluate_bandwidth_facts(*c.bandwidth, t, me, bandwidth_facts(c, s.device(), pod));
}

std::vector<Verdict> evaluate_placement(const conf::NetConf& c, const Subject& s, const PodInfo& pod,
                                        const EvalOptions& opt) {
    std::vector<Verdict> out;
    if (c.bandwidth) run(out, "bandwidth", opt, [&] { return evaluate_bandwidth(c, s, pod).verdict; });
    if (!c.placement) return out;
    const conf::Placement& p = *c.placement;
    if (p.node_selector)
        run(out, "nodeSelector", opt, [&] { return evaluate_selector(*p.node_selector, node_labels(c, pod, opt)); });
    if (!p.topology) return out;
    const conf::Topology& t = *p.topology;

    std::optional<Device> device;   // resolved once, by the first constraint that needs it
    auto dev = [&]() -> const Device& {
        if (!device) device = s.device();
        return *device;
    };
    if (t.numa_policy != conf::NumaPolicy::None)
        run(out, "topology.numaPolicy", opt, [&] {
            return evaluate_numa_policy(t, device_numa(dev(), c.sysfs_root), pod_numa(c, pod.uid));
        });
    if (t.numa_node)
        run(out, "topology.numaNode", opt, [&] { return evaluate_numa_node(t, device_numa(dev(), c.sysfs_root)); });
    if (t.min_link_speed_mbps)
        run(out, "topology.minLinkSpeedMbps", opt, [&] { return evaluate_link_speed(t, link_speed(dev(), c.sysfs_root)); });
    if (t.max_attachments_per_master)
        run(out, "topology.maxAttachmentsPerMaster", opt, [&] { return evaluate_attachments(t, device_use(c, dev(), pod)); });
    if (t.min_free_addresses)
        run(out, "topology.minFreeAddresses", opt, [&] {
            // conf checked that the kind draws from a host-local pool (cni/attach/kinds.cc).
            return evaluate_free_addresses(t, pool_sets(*s.pool(), c.name, pod));
        });
    return out;
}

namespace {

PodInfo pod_of(const Context& ctx) {
    return {ctx.env.args.pod_uid, ctx.env.container_id, ctx.env.ifname, ctx.pod, ctx.env.args.pod_namespace,
            ctx.env.args.pod_name};
}

/// Logs what passed, and throws code 100 naming every constraint that did not; a refused
/// ADD is counted (cni/refusals.h) for the operator's metrics.
void enforce(const conf::NetConf& c, const std::vector<Verdict>& verdicts, bool count) {
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
    if (count) refusals::count(c.state_dir, c.name, failed);
    // The dispatcher logs the error (message and details) as it prints it.
    throw Error(kPlacement, "placement constraint not met: " + names, details);
}

}  // namespace

void check_placement(Context& ctx, const Subject& s, bool count_refusals) {
    const conf::NetConf& c = ctx.conf;
    if (!c.placement && !c.bandwidth) return;
    enforce(c, evaluate_placement(c, s, pod_of(ctx)), count_refusals);
}

// The check before any change (check_placement) read the ledger without a lock, so two
// ADDs may both have seen room for one. Here, under the link's lock, the ledger is read
// again and this attachment's entry written before the lock goes: the next ADD on the
// link counts it.
void admit_bandwidth(Context& ctx, const Subject& s, base::Rollback& undo) {
    const conf::NetConf& c = ctx.conf;
    if (!c.bandwidth) return;
    PodInfo pod = pod_of(ctx);
    // Only where to lock, and whether there is a capacity to count against: the verdict
    // itself is the one taken under the lock.
    BandwidthAdmission first = evaluate_bandwidth(c, s, pod);
    if (first.link.empty() || first.entry.capacity_bps == 0) return;   // unknown topology, allowed by check_placement
    auto lock = NetworkLock::on_dir(ledger::dir(c.state_dir, first.link), c.state_dir, NetworkLock::Exclusive, 10000,
                                    "another ADD is admitting bandwidth on this link");
    BandwidthAdmission again = evaluate_bandwidth(c, s, pod);
    if (!again.admitted) {
        lock.release_created();
        enforce(c, {again.verdict}, true);
    }
    ledger::commit(c.state_dir, again.link, again.entry);
    ledger::record_capacity(c.state_dir, again.link, again.entry);
    undo.add("bandwidth ledger entry on " + again.link,
             [sd = c.state_dir, link = again.link, e = again.entry] { ledger::remove(sd, link, e.network, e.container_id, e.ifname); });
    base::log::info("bandwidth admitted: " + again.verdict.evidence);
}

std::string attachment_link(const conf::NetConf& c, const Subject& s) {
    try {
        Device d = s.device();
        if (d.kind == Device::Kind::None) return s.unshared_link;
        return shared_link(c.sysfs_root, d).key;
    } catch (const std::exception&) {
        return "";
    }
}

}  // namespace cni
