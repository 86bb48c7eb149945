#include "cluster/scheduling.h"

#include "cluster/parsed.h"

#include <algorithm>
#include <cmath>
#include <set>

#include "cni/attach/attachment.h"
#include "cni/error.h"
#include "placement/evaluate.h"
#include "placement/facts.h"
#include "placement/placement.h"
#include "conf/netconf.h"

namespace cluster {

using json = nlohmann::json;

// ---- shared with resources.cc and admission.cc (parsed.h) ----

/// The PFs a NAD's VFs come from: those of its resource; every PF when the node does not
/// say which resource its PFs belong to.
std::vector<size_t> pool_pfs(const placement::NodeFacts& f, const std::string& resource) {
    std::vector<size_t> out;
    bool any_named = std::any_of(f.pfs.begin(), f.pfs.end(), [](auto& p) { return !p.resource_name.empty(); });
    for (size_t i = 0; i < f.pfs.size(); ++i) {
        auto& p = f.pfs[i];
        if (p.total_vfs > 0 && (resource.empty() || !any_named || p.resource_name == resource)) out.push_back(i);
    }
    return out;
}

/// A device on `master`, as placement describes it.
placement::Device master_dev(const std::string& master) {
    placement::Device d;
    d.kind = placement::Device::Kind::Master;
    d.name = master;
    d.label = "master '" + master + "'";
    return d;
}

/// A device ADD will get on this node, as placement describes it.
placement::Device vf_device(const std::string& pci) {
    placement::Device d;
    d.kind = placement::Device::Kind::Pci;
    d.name = pci;
    d.label = "VF " + pci;
    return d;
}

bool wants_vf(const PodNetwork::Parsed& p, const PodNetwork&) { return p.device.kind == placement::ScheduledDevice::Kind::Vf; }

namespace {

/// Constraints preempting other pods cannot help with: the node is as it is.
bool unresolvable(const std::string& constraint, const placement::ScheduledDevice& d) {
    if (constraint == "nodeSelector" || constraint == "topology.minLinkSpeedMbps" || constraint == "master") return true;
    bool numa = constraint == "topology.numaPolicy" || constraint == "topology.numaNode";
    // A master's NUMA node does not change; another VF's may fit, and so may the device ADD chooses.
    return numa && d.kind != placement::ScheduledDevice::Kind::Vf && !d.chosen_at_add;
}

std::time_t parse_time(const std::string& s) {
    std::tm tm{};
    const char* end = ::strptime(s.c_str(), "%Y-%m-%dT%H:%M:%SZ", &tm);
    return end && !*end ? ::timegm(&tm) : 0;
}

/// Marks one free VF of `pf` taken by a pod on its way (the device plugin would give it one).
bool take_vf(placement::PfFacts& pf, const std::string& uid) {
    for (auto& v : pf.vfs)
        if (!v.in_use) {
            v.in_use = true;
            v.pod_uid = uid;
            return true;
        }
    return false;
}

/// The ledger a master's bandwidth is admitted on (its PF's, when it is one), as ADD finds it.
std::string ledger_of_master(const placement::NodeFacts& f, const std::string& master) {
    return placement::shared_link(f, master_dev(master)).key;
}

/// The ledger of `link` in `f`, an empty one added when the facts have none yet:
/// node-report publishes only the ledgers the state dir has, so a link nobody admitted
/// rates on has none, and the first pods with rates on it must still count.
placement::LedgerFacts& ledger_in(placement::NodeFacts& f, const std::string& link) {
    for (auto& led : f.ledgers)
        if (led.link == link) return led;
    placement::LedgerFacts led;
    led.link = link;
    f.ledgers.push_back(std::move(led));
    return f.ledgers.back();
}

/// The network's pool in `f`, added as its config makes it (nothing held, the sizes
/// pool_sets gives the evaluation) when the facts do not list it: node-report publishes
/// only the pools of networks with attachments. Null: the network has no host-local pool.
placement::NetworkFacts* pool_in(placement::NodeFacts& f, const PodNetwork::Parsed& p) {
    for (auto& net : f.networks)
        if (net.name == p.conf.name) return &net;
    if (!p.pool) return nullptr;
    placement::NetworkFacts net;
    net.name = p.conf.name;
    for (auto& s : pool_sets(f, *p.pool, p.conf.name)) net.sets.push_back({s.range_set, s.size, 0, false});
    f.networks.push_back(std::move(net));
    return &f.networks.back();
}

/// A pending pod's needs taken from the facts: a VF of each SR-IOV network, a link on each
/// master, an address of each pool, its rates on each ledger (the pool and the ledger
/// added when the facts have none yet).
void reserve(placement::NodeFacts& f, const PendingPod& pod) {
    for (auto& n : pod.networks) {
        if (!n.parsed) continue;
        const auto& p = *n.parsed;
        if (wants_vf(p, n)) {
            for (size_t i : pool_pfs(f, n.resource_name))
                if (take_vf(f.pfs[i], pod.uid)) break;
        } else if (p.device.master) {
            for (auto& l : f.links)
                if (l.name == *p.device.master && l.link_count) ++*l.link_count;
        }
        if (auto* net = pool_in(f, p))
            for (auto& s : net->sets) ++s.used;
        if (p.conf.bandwidth && p.device.master) {
            auto& led = ledger_in(f, ledger_of_master(f, *p.device.master));
            led.egress_bps += p.conf.bandwidth->egress ? p.conf.bandwidth->egress->rate_bps : 0;
            led.ingress_bps += p.conf.bandwidth->ingress ? p.conf.bandwidth->ingress->rate_bps : 0;
            ++led.count;
        }
    }
}

struct Outcome {
    std::vector<placement::Verdict> verdicts;
    std::string device;   ///< the VF chosen, for the next network of the pod
    size_t failed = 0;
};

/// The network on device `d`. The pod's exclusive CPUs are not placed yet: the Topology
/// Manager places them at admission, with the device, or on `pod_node` when the pod's
/// devices must share one NUMA node (pod_numa_node).
Outcome evaluate(const PodNetwork::Parsed& p, const placement::NodeFacts& f, const placement::Device& d, const placement::NodeLabels& labels,
                 std::optional<int> pod_node = std::nullopt) {
    placement::PodNuma numa;
    placement::Fact dev = placement::device_numa(f, d);
    if (pod_node) {
        numa.known = true;
        numa.nodes = {*pod_node};
        numa.text = "the pod's CPUs are placed on NUMA node " + std::to_string(*pod_node) +
                    " with all its single-numa-node VFs by the Topology Manager at admission";
    } else if (dev.value) {
        // The Topology Manager places the pod's exclusive CPUs at admission, with the device.
        numa.known = true;
        numa.nodes = {static_cast<int>(*dev.value)};
        numa.text = "the pod's CPUs are placed on NUMA node " + std::to_string(*dev.value) +
                    " with the device by the Topology Manager at admission";
    } else {
        numa.text = "the pod's CPUs are not placed yet";
    }
    auto src = placement::published_facts(f, d, labels, numa, p.pool);
    placement::EvalOptions opt;
    opt.collect_errors = true;
    opt.code_of = cni::code_of;   // the evidence names the code ADD would return
    Outcome o;
    o.verdicts = placement::evaluate_on(p.conf, *src, placement::PodInfo{}, opt);
    o.device = d.kind == placement::Device::Kind::Pci ? d.name : "";
    for (auto& v : o.verdicts) o.failed += !v.pass;
    return o;
}

/// One free VF per PF and NUMA node of `pfs` stands for all of them: they share every fact.
std::vector<placement::Device> vf_candidates(const placement::NodeFacts& f, const std::vector<size_t>& pfs) {
    std::vector<placement::Device> out;
    std::set<std::pair<std::string, int>> seen;
    for (size_t i : pfs)
        for (auto& v : f.pfs[i].vfs)
            if (!v.in_use && seen.insert({f.pfs[i].pci, v.numa.value_or(-2)}).second) out.push_back(vf_device(v.pci));
    return out;
}

bool single_numa_node(const PodNetwork::Parsed& p) {
    const auto& pl = p.conf.placement;
    return pl && pl->topology && pl->topology->numa_policy == conf::NumaPolicy::SingleNumaNode;
}

/// Where the pod's exclusive CPUs go when two or more of its VFs are single-numa-node: the
/// Topology Manager places them once, with every such VF, so each VF is judged against that
/// one NUMA node, not against its own (ADD, seeing the real CPUs, refuses a VF elsewhere).
/// The first NUMA node where every VF network of the pod, in order, gets a VF that passes
/// (counting those its earlier networks took); none: the one where most do, so the others
/// fail numaPolicy there with its evidence. Unset: no such pod, or no free VF's NUMA known.
std::optional<int> pod_numa_node(const std::vector<PodNetwork>& networks, const placement::NodeFacts& doc,
                                 const placement::NodeLabels& labels) {
    size_t binding = 0, vf_networks = 0;
    std::set<int> nodes;
    for (auto& n : networks) {
        if (!n.error.empty() || !n.parsed || !wants_vf(*n.parsed, n)) continue;
        ++vf_networks;
        if (!single_numa_node(*n.parsed)) continue;
        ++binding;
        for (size_t i : pool_pfs(doc, n.resource_name))
            for (auto& v : doc.pfs[i].vfs)
                if (!v.in_use && v.numa && *v.numa >= 0) nodes.insert(*v.numa);
    }
    if (binding < 2 || nodes.empty()) return std::nullopt;
    std::optional<int> best;
    size_t best_met = 0;
    for (int node : nodes) {
        placement::NodeFacts f = doc;
        size_t met = 0;
        for (auto& n : networks) {
            if (!n.error.empty() || !n.parsed || !wants_vf(*n.parsed, n)) continue;
            for (auto& d : vf_candidates(f, pool_pfs(f, n.resource_name)))
                if (evaluate(*n.parsed, f, d, labels, node).failed == 0) {
                    ++met;
                    if (auto [pf, v] = f.vf(d.name); v) const_cast<placement::VfFacts*>(v)->in_use = true;
                    break;
                }
        }
        if (met == vf_networks) return node;
        if (!best || met > best_met) best = node, best_met = met;
    }
    return best;
}

/// The headroom a device leaves after this pod, 0..1: the least of free VFs on its PF,
/// free bandwidth on its link and free addresses in its pool, each as a share.
double headroom(const PodNetwork::Parsed& p, const placement::NodeFacts& f, const std::string& vf) {
    double h = 1;
    if (!vf.empty())
        if (auto [pf, v] = f.vf(vf); pf && !pf->vfs.empty()) {
            long long free = std::count_if(pf->vfs.begin(), pf->vfs.end(), [](auto& x) { return !x.in_use; });
            h = std::min(h, std::max(0.0, double(free - 1) / double(pf->vfs.size())));
        }
    if (auto* n = f.network(p.conf.name))
        for (auto& s : n->sets)
            if (s.size > 0) h = std::min(h, std::max(0.0, (double(s.size) - double(s.used) - 1) / double(s.size)));
    if (p.conf.bandwidth && p.device.master) {
        auto* l = f.link(*p.device.master);
        auto* led = f.ledger_of(ledger_of_master(f, *p.device.master));
        double cap = led && led->capacity && led->capacity->capacity_bps
                         ? double(led->capacity->capacity_bps) * led->capacity->overcommit
                         : l && l->speed_mbps ? double(*l->speed_mbps) * 1e6 : 0;
        if (cap > 0) {
            double ask = double(p.conf.bandwidth->egress ? p.conf.bandwidth->egress->rate_bps : 0);
            double used = led ? double(led->egress_bps) : 0;
            h = std::min(h, std::max(0.0, (cap - used - ask) / cap));
        }
    }
    return h;
}

}  // namespace

std::optional<std::string> topocni_config_of(const json& nad) {
    if (!nad.is_object()) throw cni::Error(cni::kInvalidConfig, "not a NetworkAttachmentDefinition object");
    auto spec = nad.find("spec");
    if (spec == nad.end() || !spec->is_object()) return std::nullopt;   // no config: Multus's delegate by file
    auto cfg = spec->find("config");
    if (cfg == spec->end() || !cfg->is_string()) return std::nullopt;
    json conf = json::parse(cfg->get<std::string>(), nullptr, false);
    if (!conf.is_object()) throw cni::Error(cni::kInvalidConfig, "spec.config is not a JSON object");
    // Multus names a network whose config has no "name" (or "") after its NAD before it
    // calls the plugin (network-attachment-definition-client's GetCNIConfigFromSpec): the
    // scheduler side reads the config ADD will get.
    if (auto n = conf.find("name"); n == conf.end() || (n->is_string() && n->get<std::string>().empty()))
        if (auto md = nad.find("metadata"); md != nad.end() && md->is_object())
            if (auto nm = md->find("name"); nm != md->end() && nm->is_string()) conf["name"] = *nm;
    if (auto plugins = conf.find("plugins"); plugins != conf.end() && plugins->is_array()) {
        for (auto& p : *plugins)
            if (p.is_object() && p.value("type", json()) == "topocni") {
                json one = p;
                if (!one.contains("cniVersion") && conf.contains("cniVersion")) one["cniVersion"] = conf["cniVersion"];
                if (conf.contains("name")) one["name"] = conf["name"];
                return one.dump();
            }
        return std::nullopt;
    }
    if (conf.value("type", json()) != "topocni") return std::nullopt;
    return conf.dump();
}

std::string object_key(const json& object) {
    auto field = [&](const char* key) -> std::string {
        if (!object.is_object()) return "";
        auto md = object.find("metadata");
        if (md == object.end() || !md->is_object()) return "";
        auto v = md->find(key);
        return v != md->end() && v->is_string() ? v->get<std::string>() : "";
    };
    return field("namespace") + "/" + field("name");
}

PodNetwork pod_network(const NetworkSelection& sel, const json* nad) {
    PodNetwork n;
    n.selection = sel;
    if (!nad) {
        n.error = "network-attachment-definition " + n.key() + " not found";
        return n;
    }
    try {
        auto text = topocni_config_of(*nad);
        if (!text) return n;   // not topocni's: nothing to judge
        n.config = *text;
        if (auto md = nad->find("metadata"); md != nad->end() && md->is_object())
            if (auto an = md->find("annotations"); an != md->end() && an->is_object())
                if (auto rn = an->find(kResourceNameAnnotation); rn != an->end() && rn->is_string())
                    n.resource_name = rn->get<std::string>();
        auto parsed = std::make_shared<PodNetwork::Parsed>(n.config);
        parsed->kind_name = conf::kind_of(parsed->conf.raw);
        try {
            parsed->pool = parsed->kind->pool(parsed->conf);
        } catch (const base::Error&) {   // minFreeAddresses then fails as it would at ADD
        }
        // The kind says what it attaches, from its own keys (as it does for ADD).
        parsed->device = parsed->kind->scheduled_device(parsed->conf, n.resource_name);
        n.parsed = std::move(parsed);
    } catch (const base::Error& e) {
        n.error = "network-attachment-definition " + n.key() + " does not parse: " + e.what();
    }
    return n;
}

NodeView node_view(std::string name, std::string resource_version, std::map<std::string, std::string> labels,
                   const std::string* facts) {
    NodeView v;
    v.name = std::move(name);
    v.resource_version = std::move(resource_version);
    v.labels = std::move(labels);
    if (!facts) {
        v.facts_why = "the node publishes no topocni facts";
        return v;
    }
    try {
        auto doc = std::make_shared<placement::NodeFacts>(placement::facts_from_json(json::parse(*facts)));
        v.taken_at = parse_time(doc->taken_at);
        v.facts = std::move(doc);
    } catch (const std::exception& e) {
        v.facts_why = std::string("the node's topocni facts do not parse: ") + e.what();
    }
    return v;
}

NodeView node_view(const json& node) {
    const json* md = node.is_object() && node.contains("metadata") && node["metadata"].is_object() ? &node["metadata"] : nullptr;
    if (!md) {
        NodeView v;
        v.facts_why = "not a Node object";
        return v;
    }
    auto text = [&](const char* key) {
        auto it = md->find(key);
        return it != md->end() && it->is_string() ? it->get<std::string>() : std::string();
    };
    std::map<std::string, std::string> labels;
    if (auto l = md->find("labels"); l != md->end() && l->is_object())
        for (auto it = l->begin(); it != l->end(); ++it)
            if (it->is_string()) labels[it.key()] = it->get<std::string>();
    const std::string* facts = nullptr;
    if (auto an = md->find("annotations"); an != md->end() && an->is_object())
        if (auto f = an->find(placement::kFactsAnnotation); f != an->end() && f->is_string()) facts = &f->get_ref<const std::string&>();
    return node_view(text("name"), text("resourceVersion"), std::move(labels), facts);
}

NodeVerdict judge_node(const std::vector<PodNetwork>& networks, const NodeView& node,
                       const std::vector<const PendingPod*>& pending, const Options& opt, std::time_t now) {
    NodeVerdict out;
    std::vector<std::string> reasons, evidence;
    bool all_unresolvable = true;
    auto fail = [&](const PodNetwork& n, const std::string& what, const std::string& why, bool permanent) {
        out.fits = false;
        reasons.push_back("topocni: " + n.key() + ": " + what);
        evidence.push_back(n.key() + ": " + why);
        all_unresolvable = all_unresolvable && permanent;
    };
    std::string stale;
    if (!node.facts) stale = node.facts_why.empty() ? "the node publishes no topocni facts" : node.facts_why;
    else if (node.taken_at && now - *node.taken_at > static_cast<std::time_t>(opt.max_facts_age))
        stale = "the node's topocni facts are " + std::to_string(now - *node.taken_at) + " s old (more than " +
                std::to_string(static_cast<long long>(opt.max_facts_age)) + " s)";
    // The node's own document unless this pod's networks or pending pods change it: a copy
    // then (a VF taken by one network is not there for the next).
    static const placement::NodeFacts kNone;
    const placement::NodeFacts* docp = node.facts ? node.facts.get() : &kNone;
    std::optional<placement::NodeFacts> copy;
    auto writable = [&]() -> placement::NodeFacts& {
        if (!copy) {
            copy = *docp;
            docp = &*copy;
        }
        return *copy;
    };
    if (stale.empty() && !pending.empty()) {
        std::set<std::string> counted;
        for (auto& a : docp->attachments) counted.insert(a.pods.begin(), a.pods.end());
        for (auto& pf : docp->pfs)
            for (auto& v : pf.vfs)
                if (v.in_use) counted.insert(v.pod_uid);
        for (auto* p : pending)
            if (!counted.count(p->uid)) reserve(writable(), *p);
    }
    size_t vf_networks = 0;
    for (auto& n : networks) vf_networks += n.parsed && wants_vf(*n.parsed, n);
    placement::NodeLabels labels{node.labels, "the Node object", node.name, "the Node object"};
    const std::optional<int> pod_node = stale.empty() ? pod_numa_node(networks, *docp, labels) : std::nullopt;
    double score = 1;
    for (auto& n : networks) {
        if (!n.error.empty()) {
            fail(n, n.error, n.error, true);
            continue;
        }
        if (!n.parsed) continue;   // not topocni's
        const auto& p = *n.parsed;
        const bool deny = p.conf.placement && p.conf.placement->topology && p.conf.placement->topology->deny_unknown;
        if (!stale.empty()) {
            // Without facts only the labels can be judged here; unknownTopology decides the rest.
            if (p.conf.placement && p.conf.placement->node_selector) {
                placement::Verdict v = placement::evaluate_selector(*p.conf.placement->node_selector, labels);
                if (!v.pass) fail(n, "nodeSelector not met", v.evidence, true);
            }
            if (deny && p.conf.placement->topology) fail(n, "no fresh facts from the node (unknownTopology deny)", stale, false);
            continue;
        }
        std::vector<placement::Device> candidates;
        const placement::NodeFacts& doc = *docp;
        if (wants_vf(p, n)) {
            auto pfs = pool_pfs(doc, n.resource_name);
            if (pfs.empty()) {
                fail(n, "no SR-IOV PF of resource " + (n.resource_name.empty() ? "(any)" : n.resource_name),
                     "no PF of resource '" + n.resource_name + "' on node " + node.name, true);
                continue;
            }
            candidates = vf_candidates(doc, pfs);
            if (candidates.empty()) {
                fail(n, "no free VF of resource " + (n.resource_name.empty() ? "(any)" : n.resource_name),
                     "every VF of resource '" + n.resource_name + "' on node " + node.name + " is in use", false);
                continue;
            }
        } else if (p.device.kind == placement::ScheduledDevice::Kind::Master) {
            placement::Device d;
            d.link_kind = p.kind_name;
            if (p.device.master_in_pod) {
                d.none_why = "master '" + p.device.master.value_or("") + "' is in the pod netns (linkInContainer), out of the node's sysfs";
            } else if (!p.device.master) {
                d.none_why = "macvlan: the master is the node's default-route interface, chosen at ADD";
            } else {
                auto* l = doc.link(*p.device.master);
                if (!l || !l->exists) {
                    fail(n, "master not found", "master '" + *p.device.master + "' does not exist on node " + node.name, true);
                    continue;
                }
                d = master_dev(*p.device.master);
            }
            candidates.push_back(d);
        } else {
            placement::Device d;
            d.none_why = p.device.none_why;
            candidates.push_back(d);
        }
        Outcome best;
        bool have = false;
        for (auto& d : candidates) {
            Outcome o = evaluate(p, doc, d, labels, pod_node);
            if (!have || o.failed < best.failed) best = std::move(o), have = true;
            if (best.failed == 0) break;
        }
        std::vector<std::string> failed;
        std::string why;
        bool permanent = true;
        for (auto& v : best.verdicts)
            if (!v.pass) {
                failed.push_back(v.constraint);
                why += (why.empty() ? "" : " | ") + v.constraint + ": " + v.evidence;
                permanent = permanent && unresolvable(v.constraint, p.device);
            }
        if (!failed.empty()) {
            std::string names;
            for (auto& c : failed) names += (names.empty() ? "" : ", ") + c;
            fail(n, names + " not met", why, permanent);
            continue;
        }
        score = std::min(score, headroom(p, doc, best.device));
        // The pod's next network on this node cannot have the same VF.
        if (!best.device.empty() && vf_networks > 1)
            if (auto [pf, v] = writable().vf(best.device); pf && v) const_cast<placement::VfFacts*>(v)->in_use = true;
    }
    if (!out.fits) {
        out.resolvable = !all_unresolvable;
        for (auto& r : reasons) out.reason += (out.reason.empty() ? "" : "; ") + r;
        for (auto& e : evidence) out.evidence += (out.evidence.empty() ? "" : " || ") + e;
        return out;
    }
    // Judged on fresh facts: 1-10, so that every such node ranks above one judged blind
    // (0): a node whose publisher died must not draw the pods the extender steers.
    out.score = stale.empty() ? 1 + static_cast<int>(std::lround(9 * score)) : 0;
    if (!stale.empty()) out.evidence = stale;
    return out;
}

}  // namespace cluster
