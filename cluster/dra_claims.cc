#include "cluster/dra_claims.h"

#include <cmath>

#include "base/hash.h"
#include "cluster/dra_slices.h"
#include "cluster/parsed.h"
#include "ipam/range.h"

namespace cluster::dra {

using nlohmann::json;

namespace {

/// A CEL string literal: a NAD's names may hold any character.
std::string cel_string(const std::string& s) {
    std::string out = "\"";
    for (char c : s) {
        if (c == '"' || c == '\\') out += '\\';
        if (c == '\n') { out += "\\n"; continue; }
        out += c;
    }
    return out + "\"";
}

/// `device.attributes[domain].id`, guarded: a missing id is an evaluation error in
/// kube-scheduler, which fails the whole allocation, not just this device. A device that
/// does not say passes when the NAD allows unknown topology, as ADD lets it pass.
std::string attribute_test(const std::string& domain, const std::string& id, const std::string& test, bool deny_unknown) {
    std::string present = cel_string(id) + " in device.attributes[" + cel_string(domain) + "]";
    std::string value = "device.attributes[" + cel_string(domain) + "]." + id + " " + test;
    return deny_unknown ? present + " && " + value : "!(" + present + ") || " + value;
}

json selector(const std::string& expression) { return {{"cel", {{"expression", expression}}}}; }

json request(const std::string& name, const char* device_class, json selectors) {
    json exactly = {{"deviceClassName", device_class}, {"allocationMode", "ExactCount"}, {"count", 1}};
    if (!selectors.empty()) exactly["selectors"] = std::move(selectors);
    return {{"name", name}, {"exactly", exactly}};
}

/// The topology selectors of the device whose NUMA node and speed ADD judges: the VF, or
/// the master a macvlan sits on.
json topology_selectors(const conf::Topology* t) {
    json out = json::array();
    if (!t) return out;
    if (t->numa_node)
        out.push_back(selector(attribute_test("resource.kubernetes.io", "numaNode", "== " + std::to_string(*t->numa_node), t->deny_unknown)));
    if (t->min_link_speed_mbps)
        out.push_back(selector(attribute_test(kDriver, "linkSpeedMbps", ">= " + std::to_string(*t->min_link_speed_mbps), t->deny_unknown)));
    return out;
}

long long mbps_up(uint64_t bps) { return static_cast<long long>((bps + 999999) / 1000000); }

}  // namespace

bool ClaimPlan::empty() const { return spec["devices"]["requests"].empty(); }

ClaimPlan claim_plan(const PodNetwork& n, const std::string& driver) {
    ClaimPlan plan;
    plan.spec = {{"devices", {{"requests", json::array()}}}};
    json& requests = plan.spec["devices"]["requests"];
    if (!n.parsed) return plan;
    const auto& p = *n.parsed;
    const conf::Topology* t = p.conf.placement && p.conf.placement->topology ? &*p.conf.placement->topology : nullptr;
    const std::string d = driver;
    // kube-scheduler matches a request's capacity name to the device's literally (the
    // DRAConsumableCapacity allocator looks it up in the device's map): the device says
    // "egressMbps", so the claim must too. Attributes, unlike capacities, are looked up in
    // the driver's domain when unqualified, and a matchAttribute must be qualified.
    auto cap = [](const char* id) { return std::string(id); };
    auto qualified = [&](const char* id) { return d + "/" + id; };

    uint64_t egress = p.conf.bandwidth && p.conf.bandwidth->egress ? p.conf.bandwidth->egress->rate_bps : 0;
    uint64_t ingress = p.conf.bandwidth && p.conf.bandwidth->ingress ? p.conf.bandwidth->ingress->rate_bps : 0;
    json bandwidth = json::object();
    // Rounded up, as the extended resources are: the allocator never lets through what
    // ADD's ledger, counting bits, refuses.
    if (egress) bandwidth[cap("egressMbps")] = std::to_string(mbps_up(egress));
    if (ingress) bandwidth[cap("ingressMbps")] = std::to_string(mbps_up(ingress));

    if (wants_vf(p, n)) {
        json sel = topology_selectors(t);
        if (!n.resource_name.empty())
            sel.insert(sel.begin(), selector(attribute_test("k8s.cni.cncf.io", "resourceName", "== " + cel_string(n.resource_name), true)));
        else
            plan.notes.push_back("the NAD has no k8s.v1.cni.cncf.io/resourceName annotation: any VF of the node matches, "
                                 "and Multus passes a DRA device's deviceID only to a NAD that has one");
        requests.push_back(request("vf", kVfClass, sel));
        if (!bandwidth.empty()) {
            json link = request("link", kLinkClass, json::array());
            link["exactly"]["capacity"] = {{"requests", bandwidth}};
            requests.push_back(link);
            // The VF's bandwidth is counted on its own PF, as ADD's ledger counts it.
            plan.spec["devices"]["constraints"] = json::array({{{"requests", {"vf", "link"}}, {"matchAttribute", qualified("pf")}}});
        }
    } else if (p.device.master && !p.device.master_in_pod) {
        json sel = topology_selectors(t);
        sel.insert(sel.begin(), selector("device.attributes[" + cel_string(d) + "].netdev == " + cel_string(*p.device.master)));
        json link = request("link", kLinkClass, sel);
        if (!bandwidth.empty()) link["exactly"]["capacity"] = {{"requests", bandwidth}};
        requests.push_back(link);
    } else if (!bandwidth.empty() || (t && (t->numa_node || t->min_link_speed_mbps))) {
        plan.notes.push_back("the " + p.kind_name + " attachment names no shared link: its topology and bandwidth are left to ADD");
    }

    if (p.pool) {
        // host-local takes one address from every range set: one request per set, each
        // naming its set (count 2 on one request could take both from one set).
        for (size_t i = 0; i < p.pool->ranges.size(); ++i) {
            json sel = json::array({selector("device.attributes[" + cel_string(d) + "].network == " + cel_string(p.conf.name))});
            std::string set = ipam::to_string(p.pool->ranges[i]);
            if (set.size() <= kMaxAttributeValueLength)
                sel.push_back(selector("device.attributes[" + cel_string(d) + "].rangeSet == " + cel_string(set)));
            else
                plan.notes.push_back("range set " + set + " is too long for an attribute: any set of the network matches");
            // minFreeAddresses needs no selector: the node publishes the set's capacity less
            // the addresses the network keeps free (resources.h address_reserves), so the allocator's
            // consumed capacity stops claims where ADD would, also after claims it allocated.
            json pool = request(i ? "pool-" + std::to_string(i) : std::string("pool"), kPoolClass, sel);
            pool["exactly"]["capacity"] = {{"requests", {{cap("addresses"), "1"}}}};
            requests.push_back(pool);
        }
    }
    if (p.conf.placement && p.conf.placement->node_selector)
        plan.notes.push_back("nodeSelector is no device attribute: the admission webhook's node affinity and ADD enforce it");
    if (t && t->numa_policy != conf::NumaPolicy::None)
        plan.notes.push_back("topology.numaPolicy aligns with the pod's CPUs: ADD checks it (with a CPU DRA driver, add a "
                             "matchAttribute constraint on resource.kubernetes.io/numaNode)");
    return plan;
}

std::string claim_name(const std::string& nad_name) { return device_name("", nad_name + "-topocni").substr(1); }

json claim_template(const PodNetwork& n, const ClaimPlan& plan) {
    return {{"apiVersion", "resource.k8s.io/v1"},
            {"kind", "ResourceClaimTemplate"},
            {"metadata",
             {{"name", claim_name(n.selection.name)},
              {"namespace", n.selection.namespace_},
              {"annotations", {{kNetworkAnnotation, n.key()}}}}},
            {"spec", {{"metadata", {{"annotations", {{kNetworkAnnotation, n.key()}}}}}, {"spec", plan.spec}}}};
}

}  // namespace cluster::dra
