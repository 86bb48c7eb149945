// Placement: which constraints apply, the facts each needs (facts.cc, each read once and
// only when a constraint needs it), their verdicts (evaluate.cc), and the refusal.
// Nothing here changes the node, except admit_bandwidth's ledger entry.
#include "cni/placement/placement.h"

#include <ctime>

#include "base/log.h"
#include "cni/error.h"
#include "cni/placement/evaluate.h"
#include "cni/placement/facts.h"
#include "cni/placement/refusal_record.h"
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

namespace {

/// This node, read when a constraint first needs a part of it.
class LiveFacts : public FactSource {
public:
    LiveFacts(const conf::NetConf& c, const Subject& s, const PodInfo& pod, const EvalOptions& opt)
        : c_(c), s_(s), pod_(pod), opt_(opt) {}
    NodeLabels labels() override { return node_labels(c_, pod_, opt_); }
    const Device& device() override {
        if (!device_) device_ = s_.device(c_);
        return *device_;
    }
    const NodeFacts& device_facts(bool count_links) override {
        gather_device(f_, c_, device(), pod_, count_links);
        return f_;
    }
    const NodeFacts& ledger_facts(const std::string& link) override {
        gather_ledger(f_, c_.state_dir, link, c_.name, pod_);
        return f_;
    }
    const NodeFacts& pool_facts(const ipam::Config& pool) override {
        gather_pool(f_, pool, c_.name, pod_);
        return f_;
    }
    PodNuma pod_numa() override {
        gather_numa(f_, c_.sysfs_root);
        return cni::pod_numa(c_, pod_.uid, f_);
    }
    std::optional<ipam::Config> pool() override { return s_.pool(c_); }

private:
    const conf::NetConf& c_;
    const Subject& s_;
    const PodInfo& pod_;
    const EvalOptions& opt_;
    std::optional<Device> device_;
    NodeFacts f_;
};

class PublishedFacts : public FactSource {
public:
    PublishedFacts(const NodeFacts& doc, Device d, NodeLabels labels, PodNuma pod, std::optional<ipam::Config> pool)
        : doc_(doc), device_(std::move(d)), labels_(std::move(labels)), pod_(std::move(pod)), pool_(std::move(pool)) {}
    NodeLabels labels() override { return labels_; }
    const Device& device() override { return device_; }
    const NodeFacts& device_facts(bool) override { return doc_; }
    const NodeFacts& ledger_facts(const std::string&) override { return doc_; }
    const NodeFacts& pool_facts(const ipam::Config&) override { return doc_; }
    PodNuma pod_numa() override { return pod_; }
    std::optional<ipam::Config> pool() override { return pool_; }

private:
    const NodeFacts& doc_;
    Device device_;
    NodeLabels labels_;
    PodNuma pod_;
    std::optional<ipam::Config> pool_;
};

BandwidthAdmission bandwidth_on(const conf::NetConf& c, FactSource& src, const PodInfo& pod) {
    const conf::Topology* t = c.placement && c.placement->topology ? &*c.placement->topology : nullptr;
    ledger::Entry me{c.name, pod.container_id, pod.ifname, 0, 0, 0, 1.0, ""};
    if (!pod.pod_name.empty()) me.pod = pod.pod_namespace + "/" + pod.pod_name;
    const Device& d = src.device();
    SharedLink link = shared_link(src.device_facts(false), d);
    const NodeFacts& f = link.key.empty() ? src.device_facts(false) : src.ledger_facts(link.key);
    return evaluate_bandwidth_facts(*c.bandwidth, t, me, bandwidth_facts(c, f, d, pod));
}

}  // namespace

std::unique_ptr<FactSource> published_facts(const NodeFacts& doc, Device device, const NodeLabels& labels,
                                            const PodNuma& pod, std::optional<ipam::Config> pool) {
    return std::make_unique<PublishedFacts>(doc, std::move(device), labels, pod, std::move(pool));
}

BandwidthAdmission evaluate_bandwidth(const conf::NetConf& c, const Subject& s, const PodInfo& pod) {
    EvalOptions opt;
    LiveFacts live(c, s, pod, opt);
    return bandwidth_on(c, live, pod);
}

std::vector<Verdict> evaluate_on(const conf::NetConf& c, FactSource& src, const PodInfo& pod, const EvalOptions& opt) {
    std::vector<Verdict> out;
    if (c.bandwidth) run(out, "bandwidth", opt, [&] { return bandwidth_on(c, src, pod).verdict; });
    if (!c.placement) return out;
    const conf::Placement& p = *c.placement;
    if (p.node_selector)
        run(out, "nodeSelector", opt, [&] { return evaluate_selector(*p.node_selector, src.labels()); });
    if (!p.topology) return out;
    const conf::Topology& t = *p.topology;
    if (t.numa_policy != conf::NumaPolicy::None)
        run(out, "topology.numaPolicy", opt, [&] {
            const Device& d = src.device();
            return evaluate_numa_policy(t, device_numa(src.device_facts(false), d), src.pod_numa());
        });
    if (t.numa_node)
        run(out, "topology.numaNode", opt, [&] {
            const Device& d = src.device();
            return evaluate_numa_node(t, device_numa(src.device_facts(false), d));
        });
    if (t.min_link_speed_mbps)
        run(out, "topology.minLinkSpeedMbps", opt, [&] {
            const Device& d = src.device();
            return evaluate_link_speed(t, link_speed(src.device_facts(false), d));
        });
    if (t.max_attachments_per_master)
        run(out, "topology.maxAttachmentsPerMaster", opt, [&] {
            const Device& d = src.device();
            return evaluate_attachments(t, device_use(src.device_facts(true), d));
        });
    if (t.min_free_addresses)
        run(out, "topology.minFreeAddresses", opt, [&] {
            // conf checked that the kind draws from a host-local pool (cni/attach/kinds.cc).
            auto pool = src.pool();
            return evaluate_free_addresses(t, pool_sets(src.pool_facts(*pool), *pool, c.name));
        });
    return out;
}

std::vector<Verdict> evaluate_placement(const conf::NetConf& c, const Subject& s, const PodInfo& pod,
                                        const EvalOptions& opt) {
    LiveFacts live(c, s, pod, opt);
    return evaluate_on(c, live, pod, opt);
}

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
        if (c.placement) node = node_name(*c.placement);
    } catch (const base::Error&) {
        // The record names the node when it can; the agent knows its own.
    }
    refusal_record::note(c.state_dir,
                         {ctx.env.args.pod_namespace, ctx.env.args.pod_name, ctx.env.args.pod_uid, c.name, node, failed,
                          details, c.on_refusal.evict, c.on_refusal.after, c.on_refusal.window_seconds},
                         std::time(nullptr));
}

/// Logs what passed, and throws code 100 naming every constraint that did not; a refused
/// ADD is counted (cni/placement/refusals.h) for the operator's metrics and recorded for the pod
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

}  // namespace

void check_placement(Context& ctx, const Subject& s, bool count_refusals) {
    const conf::NetConf& c = ctx.conf;
    if (!c.placement && !c.bandwidth) return;
    enforce(ctx, evaluate_placement(c, s, pod_of(ctx)), count_refusals);
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
    auto lock = base::DirLock::create(ledger::dir(c.state_dir, first.link), c.state_dir, base::DirLock::Exclusive,
                                      std::chrono::seconds(10), "another ADD is admitting bandwidth on this link");
    BandwidthAdmission again = evaluate_bandwidth(c, s, pod);
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

std::string attachment_link(const conf::NetConf& c, const Subject& s) {
    try {
        Device d = s.device(c);
        if (d.kind == Device::Kind::None) return s.unshared_link();
        NodeFacts f;
        gather_device(f, c, d, {}, false);
        return shared_link(f, d).key;
    } catch (const std::exception&) {
        return "";
    }
}

}  // namespace cni
