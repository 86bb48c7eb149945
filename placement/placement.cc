// Placement: which constraints apply, the facts each needs (facts.cc, each read once and
// only when a constraint needs it), their verdicts (evaluate.cc), and the refusal.
// Nothing here changes the node; ADD's refusal and its ledger entry are cni/verbs/placement_step.cc.
#include "placement/placement.h"

#include "base/log.h"
#include "placement/error.h"
#include "placement/evaluate.h"
#include "placement/facts.h"

namespace placement {

ScheduledDevice Subject::scheduled_device(const conf::NetConf& c, const std::string&) const {
    ScheduledDevice d;
    d.none_why = "attachment " + c.kind + " has no device";
    return d;
}

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
        std::string code = opt.code_of ? " (code " + std::to_string(opt.code_of(e)) + ")" : "";
        out.push_back({name, false, false, "cannot evaluate" + code + ": " + e.what()});
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
        return placement::pod_numa(c_, pod_.uid, f_);
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

}  // namespace placement
