#include "placement/evaluate.h"

#include <cstdio>

#include "ipam/usage.h"

namespace placement {

namespace {

using conf::NumaPolicy;

/// A constraint whose facts are unknown: unknownTopology decides.
Verdict unknown(const std::string& constraint, const std::string& facts, bool deny) {
    return {constraint, !deny, !deny, facts + "; unknownTopology " + (deny ? "deny" : "allow")};
}

}  // namespace

std::string rate_text(double bps) {
    char buf[48];
    if (bps <= 0) return "0 b/s";
    if (bps >= 1e9 && static_cast<uint64_t>(bps) % 1'000'000'000 == 0) std::snprintf(buf, sizeof buf, "%.0f Gb/s", bps / 1e9);
    else if (bps >= 1e6) std::snprintf(buf, sizeof buf, "%.6g Mb/s", bps / 1e6);
    else std::snprintf(buf, sizeof buf, "%.6g kb/s", bps / 1e3);
    return buf;
}

Verdict evaluate_selector(const conf::LabelSelector& sel, const NodeLabels& node) {
    std::string matched, failed;
    for (auto& r : sel.requirements) {
        std::string has = evidence(r, node.labels);
        // The node's own label only when it says more than the requirement ("a In [x,y]": has a=x).
        if (matches(r, node.labels))
            matched += (matched.empty() ? "" : ", ") + to_string(r) + (has == to_string(r) ? "" : " (" + has + ")");
        else failed += (failed.empty() ? "" : "; ") + std::string("wants ") + to_string(r) + ", has " + has;
    }
    std::string head = "node '" + node.node + "' (labels from " + node.sources + "): ";
    if (!failed.empty()) return {"nodeSelector", false, false, head + failed};
    if (sel.requirements.empty()) return {"nodeSelector", true, false, head + "an empty selector matches every node"};
    return {"nodeSelector", true, false, head + "matches " + matched};
}

Verdict evaluate_numa_policy(const conf::Topology& t, const Fact& dev, const PodNuma& pod) {
    const char* name = "topology.numaPolicy";
    std::string policy = std::string("numaPolicy ") + conf::numa_policy_name(t.numa_policy);
    std::string facts = dev.text + "; " + pod.text + "; " + policy;
    if (!dev.value || !pod.known) return unknown(name, facts, t.deny_unknown);
    int node = static_cast<int>(*dev.value);
    bool ok = t.numa_policy == NumaPolicy::SingleNumaNode ? pod.nodes == std::set<int>{node}
                                                          : pod.nodes.count(node) > 0;
    if (ok) return {name, true, false, facts};
    if (t.numa_policy == NumaPolicy::BestEffort) return {name, true, true, facts + " (mismatch tolerated)"};
    return {name, false, false, facts};
}

Verdict evaluate_numa_node(const conf::Topology& t, const Fact& dev) {
    std::string facts = dev.text + "; numaNode " + std::to_string(*t.numa_node);
    if (!dev.value) return unknown("topology.numaNode", facts, t.deny_unknown);
    return {"topology.numaNode", *dev.value == *t.numa_node, false, facts};
}

Verdict evaluate_link_speed(const conf::Topology& t, const Fact& speed) {
    std::string facts = speed.text + "; minLinkSpeedMbps " + std::to_string(*t.min_link_speed_mbps);
    if (!speed.value) return unknown("topology.minLinkSpeedMbps", facts, t.deny_unknown);
    return {"topology.minLinkSpeedMbps", *speed.value >= *t.min_link_speed_mbps, false, facts};
}

Verdict evaluate_attachments(const conf::Topology& t, const DeviceUse& use) {
    const char* name = "topology.maxAttachmentsPerMaster";
    long long max = *t.max_attachments_per_master;
    std::string limit = "; maxAttachmentsPerMaster " + std::to_string(max);
    if (!use.used) return unknown(name, use.text + limit, t.deny_unknown);
    return {name, *use.used < max, false, use.text + limit};
}

Verdict evaluate_free_addresses(const conf::Topology& t, const std::vector<PoolSet>& sets) {
    long long min = *t.min_free_addresses;
    bool ok = true;
    std::string facts;
    for (auto& s : sets) {
        if (s.free_after < static_cast<unsigned __int128>(min)) ok = false;
        facts += (facts.empty() ? "" : "; ") + std::string("range set ") + s.range_set + ": " +
                 ipam::count_text(s.size) + " addresses, " + ipam::count_text(s.taken) + " reserved, " +
                 ipam::count_text(s.free_after) + " free after this allocation";
    }
    return {"topology.minFreeAddresses", ok, false, facts + "; minFreeAddresses " + std::to_string(min)};
}

BandwidthAdmission evaluate_bandwidth_facts(const conf::Bandwidth& bw, const conf::Topology* t,
                                            const ledger::Entry& me, const BandwidthFacts& f) {
    const char* name = "bandwidth";
    BandwidthAdmission out;
    uint64_t egress = bw.egress ? bw.egress->rate_bps : 0, ingress = bw.ingress ? bw.ingress->rate_bps : 0;
    out.entry = {me.network, me.container_id, me.ifname, egress, ingress, 0, 1.0, "", me.pod};
    std::string asked = "asks egress " + rate_text(double(egress)) + ", ingress " + rate_text(double(ingress));
    bool deny = t && t->deny_unknown;
    double overcommit = t ? t->bandwidth_overcommit : 1.0;
    if (f.link.key.empty()) {
        out.verdict = unknown(name, f.link.none_why + ": no shared link to admit on; " + asked, deny);
        return out;
    }
    out.link = f.link.key;
    if (!f.capacity.bps) {
        out.verdict = unknown(name, f.capacity.unknown + "; " + asked, deny);
        return out;
    }
    double capacity = *f.capacity.bps;
    out.entry.capacity_bps = static_cast<uint64_t>(capacity);
    out.entry.overcommit = overcommit;
    out.entry.capacity_source = f.capacity.source;
    double limit = capacity * overcommit;
    double used_e = double(f.others_egress), used_i = double(f.others_ingress);
    std::string by;
    for (size_t i = 0; i < f.others.size() && i < kSample; ++i) {
        auto& e = f.others[i];
        by += std::string(by.empty() ? "" : ", ") + (e.pod.empty() ? "" : "pod " + e.pod + " ") + e.network + "/" +
              e.container_id + "/" + e.ifname +
              " (egress " + rate_text(double(e.egress_bps)) + ", ingress " + rate_text(double(e.ingress_bps)) + ")";
    }
    if (f.others_count > static_cast<long long>(kSample))
        by += ", and " + std::to_string(f.others_count - static_cast<long long>(kSample)) + " more";
    // A direction this attachment adds nothing to cannot be the one it oversubscribes
    // (the link may already be over a capacity lowered since).
    bool ok_e = egress == 0 || used_e + double(egress) <= limit;
    bool ok_i = ingress == 0 || used_i + double(ingress) <= limit;
    std::string facts = f.link.label + ": capacity " + rate_text(capacity) + " (" + f.capacity.source + ")";
    if (overcommit != 1.0) {
        char buf[32];
        std::snprintf(buf, sizeof buf, "%g", overcommit);
        facts += " x bandwidthOvercommit " + std::string(buf) + " = " + rate_text(limit);
    }
    facts += "; committed egress " + rate_text(used_e) + ", ingress " + rate_text(used_i) +
             (by.empty() ? " (no other attachment)" : " by " + by) + "; this attachment " + asked;
    if (!ok_e) facts += "; egress would reach " + rate_text(used_e + double(egress)) + " > " + rate_text(limit);
    if (!ok_i) facts += "; ingress would reach " + rate_text(used_i + double(ingress)) + " > " + rate_text(limit);
    out.verdict = {name, ok_e && ok_i, false, facts};
    out.admitted = ok_e && ok_i;
    return out;
}

}  // namespace placement
