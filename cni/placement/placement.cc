// Placement: each constraint is one function that gathers its facts (node labels,
// sysfs, cpu_manager_state, netlink, the IPAM store) and returns a verdict with the
// evidence. Nothing here changes the node.
#include "cni/placement/placement.h"

#include <limits.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cctype>
#include <iostream>

#include <nlohmann/json.hpp>

#include "cni/placement/device_usage.h"
#include "cni/error.h"
#include "cni/placement/kube.h"
#include "cni/placement/labels.h"
#include "cni/placement/ledger.h"
#include "cni/placement/refusals.h"
#include "base/log.h"
#include "cni/attach/state.h"
#include "cni/placement/topology.h"
#include "cni/placement/yaml.h"
#include "conf/fields.h"
#include "ipam/range.h"
#include "ipam/usage.h"
#include "netns/sysfs.h"

namespace cni {

namespace {

using json = nlohmann::json;
using conf::NumaPolicy;

bool exists(const std::string& path) {
    struct stat st;
    return ::stat(path.c_str(), &st) == 0;
}

std::optional<std::string> string_at(const json& j, const char* key) {
    auto it = j.find(key);
    if (it == j.end() || !it->is_string() || it->get<std::string>().empty()) return std::nullopt;
    return it->get<std::string>();
}

// ---- the node's labels ----

bool valid_node_name(const std::string& n) {
    bool ok = !n.empty() && n.size() <= 253 && n.front() != '.' && n.front() != '-';
    for (char ch : n) ok = ok && (std::islower(static_cast<unsigned char>(ch)) || std::isdigit(static_cast<unsigned char>(ch)) ||
                                  ch == '-' || ch == '.');
    return ok;
}

std::string node_name(const conf::Placement& p) {
    if (p.node_name) return *p.node_name;
    char buf[HOST_NAME_MAX + 1] = {};
    if (::gethostname(buf, sizeof buf - 1) < 0) fail_internal("failed to read the host name", errno);
    std::string n = buf;
    for (auto& ch : n) ch = static_cast<char>(std::tolower(static_cast<unsigned char>(ch)));   // as kubelet does
    if (!valid_node_name(n))
        throw Error(kInvalidConfig, "nodeName: not set, and the host name '" + n + "' is no valid node name");
    return n;
}

Labels read_labels_file(const std::string& path) {
    auto text = state::read_file(path);   // code 5 when unreadable
    if (!text)
        throw Error(kTryAgainLater, "nodeLabelsFile: '" + path + "' does not exist (yet)");
    return parse_labels(*text, path);
}

struct NodeLabels {
    Labels labels;
    std::string sources;   ///< "file '/x' and the API at https://..."
    std::string node;      ///< the node whose labels these are
    std::string node_source = "the config's nodeName";
};

/// Labels from nodeLabelsFile and/or the API (both merged, the file's win); explain's
/// --node-labels replaces both.
NodeLabels node_labels(const conf::NetConf& c, std::string node, const PodInfo& pod, const EvalOptions& opt) {
    const conf::Placement& p = *c.placement;
    NodeLabels out;
    out.node = node;
    if (!opt.node_labels_file.empty()) {
        out.labels = read_labels_file(opt.node_labels_file);
        out.sources = "file '" + opt.node_labels_file + "'";
        return out;
    }
    std::string kubeconfig = p.kubeconfig.value_or(exists(kube::kTopocniKubeconfig) ? kube::kTopocniKubeconfig
                                                   : exists(kube::kMultusKubeconfig)  ? kube::kMultusKubeconfig
                                                                                      : "");
    if (kubeconfig.empty() && !p.node_labels_file)
        throw Error(kInvalidConfig, std::string("nodeSelector: no source of node labels: set nodeLabelsFile or "
                                                "kubeconfig (neither '") +
                                        kube::kTopocniKubeconfig + "' nor Multus's '" + kube::kMultusKubeconfig +
                                        "' exists; examples/daemonset.yaml writes the first)");
    if (!kubeconfig.empty()) {
        auto kc = kube::load_kubeconfig(kubeconfig);
        kube::CacheOptions cache{c.state_dir, p.node_labels_ttl, opt.write_cache,
                                 std::chrono::milliseconds(static_cast<long long>(p.api_timeout * 1000))};
        // A NAD is cluster-wide, so nodeName rarely fits every node, and the host name is
        // often not the Node's (cloud FQDNs, --hostname-override): the pod knows its node.
        kc.node_source = p.node_name ? "the config's nodeName" : "this host's name, lower-cased as kubelet does";
        if (!p.node_name && !pod.pod_namespace.empty() && !pod.pod_name.empty()) {
            try {
                std::string n = kube::pod_node_name(kc, pod.pod_namespace, pod.pod_name, pod.uid, cache);
                if (!valid_node_name(n)) throw Error(kInvalidConfig, "spec.nodeName '" + n + "' is no node name");
                node = n;
                kc.node_source = "spec.nodeName of pod " + pod.pod_namespace + "/" + pod.pod_name;
            } catch (const std::exception& e) {
                base::log::warn(std::string("node name from the pod: ") + e.what() + "; using " + kc.node_source + " '" + node + "'");
            }
        }
        out.node = node;
        out.node_source = kc.node_source;
        base::log::info("node labels of '" + node + "' (" + kc.node_source + ") from " + kc.server);
        try {
            out.labels = kube::cached_node_labels(kc, node, cache);
            out.sources = "the API at " + kc.server;
        } catch (const Error& e) {
            // With a local file there is still something to decide on.
            if (e.code != kTryAgainLater || !p.node_labels_file) throw;
            base::log::warn(std::string("node labels from nodeLabelsFile only: ") + e.what());
            out.sources = "(API unreachable) ";
        }
    }
    if (p.node_labels_file) {
        for (auto& [k, v] : read_labels_file(*p.node_labels_file)) out.labels[k] = v;
        out.sources += (out.sources.empty() || out.sources.back() == ' ' ? "" : " and ") +
                       std::string("file '") + *p.node_labels_file + "'";
    }
    return out;
}

Verdict check_selector(const conf::NetConf& c, const PodInfo& pod, const EvalOptions& opt) {
    const auto& sel = *c.placement->node_selector;
    NodeLabels nl = node_labels(c, node_name(*c.placement), pod, opt);
    const std::string& node = nl.node;
    std::string matched, failed;
    for (auto& r : sel.requirements) {
        std::string has = evidence(r, nl.labels);
        if (matches(r, nl.labels)) matched += (matched.empty() ? "" : ", ") + to_string(r) + " (" + has + ")";
        else failed += (failed.empty() ? "" : "; ") + std::string("wants ") + to_string(r) + ", has " + has;
    }
    std::string head = "node '" + node + "' (labels from " + nl.sources + "): ";
    if (!failed.empty()) return {"nodeSelector", false, false, head + failed};
    if (sel.requirements.empty()) return {"nodeSelector", true, false, head + "an empty selector matches every node"};
    return {"nodeSelector", true, false, head + "matches " + matched};
}

// ---- the device: a VF (PCI address) or a master interface ----

struct Device {
    enum class Kind { None, Pci, Master } kind = Kind::None;
    std::string name;                 ///< PCI address or interface name
    std::string link_kind = "macvlan";   ///< links counted on a master
    std::string none_why;             ///< Kind::None: why there is no device to look at
    std::string label;                ///< "VF 0000:03:02.1", "master 'eth1'"
};

std::optional<std::string> device_id(const json& j) {
    if (auto v = string_at(j, "deviceID")) return v;
    if (auto v = string_at(j, "pciBusID")) return v;
    if (auto rc = j.find("runtimeConfig"); rc != j.end() && rc->is_object())
        if (auto* v = conf::member_ci(*rc, "deviceID"); v && v->is_string() && !v->get<std::string>().empty())
            return v->get<std::string>();
    return std::nullopt;
}

Device resolve_device(const conf::NetConf& c) {
    Device d;
    std::optional<std::string> pci, master;
    bool lower_kind = false, in_pod = false;
    std::string what;
    if (c.kind == "delegate") {
        const json& dj = c.raw["delegate"];
        std::string type = dj.value("type", "");
        what = "delegate '" + type + "'";
        pci = device_id(c.raw);   // Multus puts deviceID into the config it passes us
        if (!pci) pci = device_id(dj);
        master = string_at(dj, "master");
        lower_kind = type == "macvlan" || type == "ipvlan";
        if (lower_kind) d.link_kind = type;
        in_pod = dj.value("linkInContainer", json(false)) == json(true);
    } else if (c.kind == "sriov") {
        what = "attachment sriov";
        pci = device_id(c.raw);
        if (pci) for (auto& ch : *pci) ch = static_cast<char>(std::tolower(static_cast<unsigned char>(ch)));
    } else if (c.kind == "macvlan") {
        what = "attachment macvlan";
        master = string_at(c.raw, "master");
        lower_kind = true;
        in_pod = c.raw.value("linkInContainer", json(false)) == json(true);
    } else {
        d.none_why = "attachment veth has no device";
        return d;
    }
    if (pci) {
        if (!netns::sysfs::is_pci_address(*pci)) {
            d.none_why = "deviceID '" + *pci + "' is not a PCI address";
            return d;
        }
        d.kind = Device::Kind::Pci;
        d.name = *pci;
        d.label = (netns::sysfs::Tree(c.sysfs_root).physfn(*pci) ? "VF " : "PCI device ") + *pci;
        return d;
    }
    if (!master && lower_kind) {
        netns::nl::Socket s;
        master = default_route_interface(s);
        if (!master) {
            d.none_why = what + ": no master set and the node has no default route";
            return d;
        }
    }
    if (!master) {
        d.none_why = what + " names no device (no deviceID, pciBusID or master)";
        return d;
    }
    if (in_pod) {
        d.none_why = "master '" + *master + "' is in the pod netns (linkInContainer), out of the node's sysfs";
        return d;
    }
    d.kind = Device::Kind::Master;
    d.name = *master;
    d.label = "master '" + *master + "'";
    return d;
}

/// A fact that may be unknown, with the sentence that states it either way.
struct Fact {
    std::optional<long long> value;
    std::string text;
};

Fact device_numa(const Device& d, const std::string& sysfs) {
    if (d.kind == Device::Kind::None) return {std::nullopt, d.none_why};
    std::string file = d.kind == Device::Kind::Pci ? netns::sysfs::Tree(sysfs).pci_path(d.name) + "/numa_node"
                                                   : sysfs + "/class/net/" + d.name + "/device/numa_node";
    auto n = topo::read_numa_node(file);
    if (!n) return {std::nullopt, d.label + " has no NUMA node in sysfs ('" + file + "' missing: a virtual device?)"};
    if (*n < 0) return {std::nullopt, d.label + " reports NUMA node -1 (no affinity)"};
    return {*n, d.label + " is on NUMA node " + std::to_string(*n)};
}

Fact link_speed(const Device& d, const std::string& sysfs) {
    if (d.kind == Device::Kind::None) return {std::nullopt, d.none_why};
    std::string ifname = d.name, label = d.label;
    if (d.kind == Device::Kind::Pci) {
        netns::sysfs::Tree tree(sysfs);
        auto pf = tree.physfn(d.name);
        auto nets = tree.netdevs(pf ? *pf : d.name);
        if (nets.empty())
            return {std::nullopt, (pf ? "PF " + *pf + " of " + d.label : d.label) + " has no netdev in sysfs"};
        ifname = nets.front();
        label = pf ? "PF '" + ifname + "' of " + d.label : d.label + " ('" + ifname + "')";
    }
    auto speed = topo::read_speed(sysfs, ifname);
    if (!speed) return {std::nullopt, label + " reports no link speed (link down or virtual)"};
    return {*speed, label + " runs at " + std::to_string(*speed) + " Mb/s"};
}

struct PodNuma {
    bool known = false;
    std::set<int> nodes;
    std::string text;
};

PodNuma pod_numa(const conf::NetConf& c, const std::string& uid) {
    PodNuma out;
    if (uid.empty()) {
        out.text = "the pod UID is unknown (no K8S_POD_UID in CNI_ARGS)";
        return out;
    }
    std::string path = c.placement->kubelet_root_dir + "/cpu_manager_state";
    auto text = state::read_file(path);
    if (!text) {
        out.text = "'" + path + "' does not exist (no CPU manager)";
        return out;
    }
    topo::PodCpus pc;
    try {
        pc = topo::parse_cpu_manager_state(*text, uid);
    } catch (const Error& e) {
        out.text = "'" + path + "' is unreadable: " + e.what();
        return out;
    }
    if (pc.cpus.empty()) {
        out.text = "pod " + uid + " has no exclusive CPUs in '" + path + "' (policy '" + pc.policy + "')";
        return out;
    }
    auto numa = topo::numa_cpus(c.sysfs_root);
    topo::CpuSet unplaced;
    out.nodes = topo::nodes_of(pc.cpus, numa, &unplaced);
    std::string cpus = "pod " + uid + " CPUs " + topo::format_cpuset(pc.cpus);
    if (!unplaced.empty()) {
        out.text = cpus + ": CPUs " + topo::format_cpuset(unplaced) + " are on no NUMA node in '" + c.sysfs_root +
                   "/devices/system/node'";
        return out;
    }
    out.known = true;
    out.text = cpus + (out.nodes.size() == 1 ? " are on NUMA node " : " are on NUMA nodes ") +
               topo::format_nodes(out.nodes);
    return out;
}

Verdict unknown(const std::string& constraint, const std::string& facts, bool deny) {
    return {constraint, !deny, !deny, facts + "; unknownTopology " + (deny ? "deny" : "allow")};
}

Verdict check_numa_policy(const conf::NetConf& c, const Device& d, const std::string& uid) {
    const auto& t = *c.placement->topology;
    const char* name = "topology.numaPolicy";
    std::string policy = std::string("numaPolicy ") + conf::numa_policy_name(t.numa_policy);
    Fact dev = device_numa(d, c.sysfs_root);
    PodNuma pod = pod_numa(c, uid);
    std::string facts = dev.text + "; " + pod.text + "; " + policy;
    if (!dev.value || !pod.known) return unknown(name, facts, t.deny_unknown);
    int node = static_cast<int>(*dev.value);
    bool ok = t.numa_policy == NumaPolicy::SingleNumaNode ? pod.nodes == std::set<int>{node}
                                                          : pod.nodes.count(node) > 0;
    if (ok) return {name, true, false, facts};
    if (t.numa_policy == NumaPolicy::BestEffort) return {name, true, true, facts + " (mismatch tolerated)"};
    return {name, false, false, facts};
}

Verdict check_numa_node(const conf::NetConf& c, const Device& d) {
    const auto& t = *c.placement->topology;
    Fact dev = device_numa(d, c.sysfs_root);
    std::string facts = dev.text + "; numaNode " + std::to_string(*t.numa_node);
    if (!dev.value) return unknown("topology.numaNode", facts, t.deny_unknown);
    return {"topology.numaNode", *dev.value == *t.numa_node, false, facts};
}

Verdict check_speed(const conf::NetConf& c, const Device& d) {
    const auto& t = *c.placement->topology;
    Fact speed = link_speed(d, c.sysfs_root);
    std::string facts = speed.text + "; minLinkSpeedMbps " + std::to_string(*t.min_link_speed_mbps);
    if (!speed.value) return unknown("topology.minLinkSpeedMbps", facts, t.deny_unknown);
    return {"topology.minLinkSpeedMbps", *speed.value >= *t.min_link_speed_mbps, false, facts};
}

std::string some(const std::vector<std::string>& items) {
    std::string out;
    for (size_t i = 0; i < items.size() && i < 4; ++i) out += (i ? ", " : "") + items[i];
    if (items.size() > 4) out += ", ...";
    return items.empty() ? "" : " (" + out + ")";
}

Verdict check_attachments(const conf::NetConf& c, const Device& d, const PodInfo& pod) {
    const auto& t = *c.placement->topology;
    const char* name = "topology.maxAttachmentsPerMaster";
    long long max = *t.max_attachments_per_master;
    std::string limit = "; maxAttachmentsPerMaster " + std::to_string(max);
    if (d.kind == Device::Kind::None) return unknown(name, d.none_why + limit, t.deny_unknown);
    std::vector<std::string> used;
    std::string facts;
    if (d.kind == Device::Kind::Master) {
        used = macvlans_on_master(d.name, d.link_kind, pod.netns, pod.ifname).where;
        facts = d.label + " already has " + std::to_string(used.size()) + " " + d.link_kind + " link" +
                (used.size() == 1 ? "" : "s") + some(used);
    } else {
        auto pf = netns::sysfs::Tree(c.sysfs_root).physfn(d.name);
        if (!pf) return unknown(name, d.label + " is no VF (no physfn in sysfs)" + limit, t.deny_unknown);
        used = vfs_in_use(c.state_dir, c.sysfs_root, *pf, d.name);
        facts = "PF " + *pf + " of " + d.label + " has " + std::to_string(used.size()) + " VF" +
                (used.size() == 1 ? "" : "s") + " in use" + some(used);
    }
    return {name, static_cast<long long>(used.size()) < max, false, facts + limit};
}

/// host-local's config and network for the pool the attachment draws from.
ipam::Config pool_config(const conf::NetConf& c) {
    if (c.kind != "delegate") return *c.host_local;
    json whole = c.raw["delegate"];
    whole["name"] = c.name;
    if (auto rc = c.raw.find("runtimeConfig"); rc != c.raw.end()) whole["runtimeConfig"] = *rc;
    try {
        return ipam::parse_config(whole, c.cni_version);
    } catch (const Error& e) {
        throw Error(e.code, std::string("delegate.") + e.what(), e.details);
    }
}

Verdict check_free_addresses(const conf::NetConf& c, const PodInfo& pod) {
    const auto& t = *c.placement->topology;
    long long min = *t.min_free_addresses;
    bool ok = true;
    std::string facts;
    for (auto& u : ipam::pool_usage(pool_config(c), c.name)) {
        unsigned __int128 taken = u.held.size();
        bool mine = false;
        for (auto& r : u.held)
            mine = mine || (!pod.container_id.empty() && r.container_id == pod.container_id && r.ifname == pod.ifname);
        unsigned __int128 need = taken + (mine ? 0 : 1);
        unsigned __int128 after = u.size > need ? u.size - need : 0;
        if (after < static_cast<unsigned __int128>(min)) ok = false;
        facts += (facts.empty() ? "" : "; ") + std::string("range set ") + u.range_set + ": " +
                 ipam::count_text(u.size) + " addresses, " + ipam::count_text(taken) + " reserved, " +
                 ipam::count_text(after) + " free after this allocation";
    }
    return {"topology.minFreeAddresses", ok, false, facts + "; minFreeAddresses " + std::to_string(min)};
}

// ---- bandwidth admission ----

std::string rate_text(double bps) {
    char buf[48];
    if (bps <= 0) return "0 b/s";
    if (bps >= 1e9 && static_cast<uint64_t>(bps) % 1'000'000'000 == 0) std::snprintf(buf, sizeof buf, "%.0f Gb/s", bps / 1e9);
    else if (bps >= 1e6) std::snprintf(buf, sizeof buf, "%.6g Mb/s", bps / 1e6);
    else std::snprintf(buf, sizeof buf, "%.6g kb/s", bps / 1e3);
    return buf;
}

/// The link a device shares: a master by name, a VF's PF by PCI address.
struct SharedLink {
    std::string key;     ///< ledger name: "eth1", "0000:03:00.0"
    std::string label;   ///< "master 'eth1'", "PF 0000:03:00.0 of VF 0000:03:02.1"
    std::string none_why;
};

/// The SR-IOV PF behind a netdev (itself, or the PF of a VF), by PCI address; nullopt for
/// a netdev that is neither (or not a PCI device).
std::optional<std::string> pf_of_netdev(const std::string& sysfs, const std::string& ifname) {
    char buf[PATH_MAX];
    std::string dev = sysfs + "/class/net/" + ifname + "/device";
    ssize_t n = ::readlink(dev.c_str(), buf, sizeof buf - 1);
    if (n <= 0) return std::nullopt;
    buf[n] = '\0';
    std::string pci = buf;
    pci = pci.substr(pci.rfind('/') + 1);
    if (!netns::sysfs::is_pci_address(pci)) return std::nullopt;
    netns::sysfs::Tree tree(sysfs);
    if (auto pf = tree.physfn(pci)) return pf;
    if (exists(tree.pci_path(pci) + "/sriov_totalvfs")) return pci;
    return std::nullopt;
}

SharedLink shared_link(const conf::NetConf& c, const Device& d) {
    if (d.kind == Device::Kind::None) return {"", "", d.none_why};
    if (d.kind == Device::Kind::Master) {
        // A PF (or a VF) as macvlan master shares its wire with the PF's VFs: one ledger,
        // named by the PF's PCI address as theirs is.
        if (auto pf = pf_of_netdev(c.sysfs_root, d.name)) return {*pf, d.label + " (PF " + *pf + ")", ""};
        return {d.name, d.label, ""};
    }
    auto pf = netns::sysfs::Tree(c.sysfs_root).physfn(d.name);
    if (!pf) return {"", "", d.label + " is no VF (no physfn in sysfs)"};
    return {*pf, "PF " + *pf + " of " + d.label, ""};
}

bool same_owner(const ledger::Entry& e, const conf::NetConf& c, const PodInfo& pod) {
    return e.network == c.name && e.container_id == pod.container_id && e.ifname == pod.ifname;
}

}  // namespace

BandwidthAdmission evaluate_bandwidth(const conf::NetConf& c, const PodInfo& pod) {
    const char* name = "bandwidth";
    BandwidthAdmission out;
    const conf::Bandwidth& bw = *c.bandwidth;
    uint64_t egress = bw.egress ? bw.egress->rate_bps : 0, ingress = bw.ingress ? bw.ingress->rate_bps : 0;
    out.entry = {c.name, pod.container_id, pod.ifname, egress, ingress, 0, 1.0, ""};
    std::string asked = "asks egress " + rate_text(double(egress)) + ", ingress " + rate_text(double(ingress));
    const conf::Topology* t = c.placement && c.placement->topology ? &*c.placement->topology : nullptr;
    bool deny = t && t->deny_unknown;
    double overcommit = t ? t->bandwidth_overcommit : 1.0;
    Device d = resolve_device(c);
    SharedLink link = shared_link(c, d);
    if (link.key.empty()) {
        out.verdict = unknown(name, link.none_why + ": no shared link to admit on; " + asked, deny);
        return out;
    }
    out.link = link.key;
    std::optional<double> capacity;
    std::string source;
    if (t && t->link_capacity_mbps) {
        capacity = double(*t->link_capacity_mbps) * 1e6;
        source = "topology.linkCapacityMbps";
    } else if (Fact speed = link_speed(d, c.sysfs_root); speed.value) {
        capacity = double(*speed.value) * 1e6;
        source = "link speed";
    } else {
        out.verdict = unknown(name, speed.text + " and topology.linkCapacityMbps is not set; " + asked, deny);
        return out;
    }
    out.entry.capacity_bps = static_cast<uint64_t>(*capacity);
    out.entry.overcommit = overcommit;
    out.entry.capacity_source = source;
    double limit = *capacity * overcommit;
    double used_e = 0, used_i = 0;
    std::string by;
    int others = 0;
    for (auto& e : ledger::entries(c.state_dir, link.key)) {
        if (same_owner(e, c, pod)) continue;   // CHECK of an admitted attachment
        used_e += double(e.egress_bps);
        used_i += double(e.ingress_bps);
        if (++others <= 4)
            by += std::string(by.empty() ? "" : ", ") + e.network + "/" + e.container_id.substr(0, 12) + "/" + e.ifname +
                  " (egress " + rate_text(double(e.egress_bps)) + ", ingress " + rate_text(double(e.ingress_bps)) + ")";
    }
    if (others > 4) by += ", and " + std::to_string(others - 4) + " more";
    // A direction this attachment adds nothing to cannot be the one it oversubscribes
    // (the link may already be over a capacity lowered since).
    bool ok_e = egress == 0 || used_e + double(egress) <= limit;
    bool ok_i = ingress == 0 || used_i + double(ingress) <= limit;
    std::string facts = link.label + ": capacity " + rate_text(*capacity) + " (" + source + ")";
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

namespace {

template <class F>
void run(std::vector<Verdict>& out, const char* name, const EvalOptions& opt, F&& f) {
    if (!opt.collect_errors) {
        out.push_back(f());
        return;
    }
    try {
        out.push_back(f());
    } catch (const Error& e) {
        out.push_back({name, false, false, "cannot evaluate (code " + std::to_string(e.code) + "): " + e.what()});
    } catch (const std::exception& e) {
        out.push_back({name, false, false, std::string("cannot evaluate: ") + e.what()});
    }
}

}  // namespace

std::vector<Verdict> evaluate_placement(const conf::NetConf& c, const PodInfo& pod, const EvalOptions& opt) {
    std::vector<Verdict> out;
    if (c.bandwidth) run(out, "bandwidth", opt, [&] { return evaluate_bandwidth(c, pod).verdict; });
    if (!c.placement) return out;
    const conf::Placement& p = *c.placement;
    if (p.node_selector) run(out, "nodeSelector", opt, [&] { return check_selector(c, pod, opt); });
    if (!p.topology) return out;
    const conf::Topology& t = *p.topology;

    std::optional<Device> device;   // resolved once, by the first constraint that needs it
    auto dev = [&]() -> const Device& {
        if (!device) device = resolve_device(c);
        return *device;
    };
    if (t.numa_policy != NumaPolicy::None)
        run(out, "topology.numaPolicy", opt, [&] { return check_numa_policy(c, dev(), pod.uid); });
    if (t.numa_node) run(out, "topology.numaNode", opt, [&] { return check_numa_node(c, dev()); });
    if (t.min_link_speed_mbps) run(out, "topology.minLinkSpeedMbps", opt, [&] { return check_speed(c, dev()); });
    if (t.max_attachments_per_master)
        run(out, "topology.maxAttachmentsPerMaster", opt, [&] { return check_attachments(c, dev(), pod); });
    if (t.min_free_addresses) run(out, "topology.minFreeAddresses", opt, [&] { return check_free_addresses(c, pod); });
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

void check_placement(Context& ctx, bool count_refusals) {
    const conf::NetConf& c = ctx.conf;
    if (!c.placement && !c.bandwidth) return;
    enforce(c, evaluate_placement(c, pod_of(ctx)), count_refusals);
}

// The check before any change (check_placement) read the ledger without a lock, so two
// ADDs may both have seen room for one. Here, under the link's lock, the ledger is read
// again and this attachment's entry written before the lock goes: the next ADD on the
// link counts it.
void admit_bandwidth(Context& ctx, base::Rollback& undo) {
    const conf::NetConf& c = ctx.conf;
    if (!c.bandwidth) return;
    PodInfo pod = pod_of(ctx);
    // Only where to lock, and whether there is a capacity to count against: the verdict
    // itself is the one taken under the lock.
    BandwidthAdmission first = evaluate_bandwidth(c, pod);
    if (first.link.empty() || first.entry.capacity_bps == 0) return;   // unknown topology, allowed by check_placement
    auto lock = NetworkLock::on_dir(ledger::dir(c.state_dir, first.link), c.state_dir, NetworkLock::Exclusive, 10000,
                                    "another ADD is admitting bandwidth on this link");
    BandwidthAdmission again = evaluate_bandwidth(c, pod);
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

std::optional<ipam::Config> host_local_pool(const conf::NetConf& c) {
    if (c.kind == "delegate") {
        auto* ipam = conf::member(c.raw["delegate"], "ipam");
        if (!ipam || ipam->value("type", json("")) != json("host-local")) return std::nullopt;
    } else if (!c.host_local) {
        return std::nullopt;
    }
    return pool_config(c);
}

std::string attachment_link(const conf::NetConf& c) {
    try {
        Device d = resolve_device(c);
        if (d.kind == Device::Kind::None) return string_at(c.raw, "bridge").value_or("");
        return shared_link(c, d).key;
    } catch (const std::exception&) {
        return "";
    }
}

namespace {

/// The CNI config inside `path`: a config, a conflist (its topocni plugin), or a NAD
/// (JSON or YAML) whose spec.config holds either.
std::string explain_config_text(const std::string& path) {
    auto text = state::read_file(path);
    if (!text) throw Error(kInvalidConfig, "'" + path + "' does not exist");
    json j = parse_yaml(*text, "'" + path + "'");
    if (!j.is_object())
        throw Error(kInvalidConfig, "'" + path + "' is not a CNI config or a NetworkAttachmentDefinition");
    json conf = j;
    if (auto spec = j.find("spec"); spec != j.end()) {
        auto cfg = spec->is_object() ? spec->find("config") : spec->end();
        if (!spec->is_object() || cfg == spec->end())
            throw Error(kInvalidConfig, "'" + path + "': spec.config: missing (not a NetworkAttachmentDefinition?)");
        conf = cfg->is_string() ? json::parse(cfg->get<std::string>(), nullptr, false) : *cfg;
        if (!conf.is_object()) throw Error(kInvalidConfig, "'" + path + "': spec.config: not a JSON object");
    }
    if (auto plugins = conf.find("plugins"); plugins != conf.end() && plugins->is_array()) {
        for (auto& p : *plugins)
            if (p.is_object() && p.value("type", "") == "topocni") {
                json one = p;
                if (!one.contains("cniVersion") && conf.contains("cniVersion")) one["cniVersion"] = conf["cniVersion"];
                if (conf.contains("name")) one["name"] = conf["name"];
                return one.dump();
            }
        throw Error(kInvalidConfig, "'" + path + "': the plugin list has no plugin of type topocni");
    }
    return conf.dump();
}

}  // namespace

int explain_main(const std::string& config_path, const std::string& pod_uid, const std::string& node_labels_file) {
    std::vector<Verdict> verdicts;
    conf::NetConf c;
    try {
        c = parse_config(explain_config_text(config_path), {});
        verdicts = evaluate_placement(c, {pod_uid, "", "", nullptr}, {node_labels_file, false, true});
    } catch (const Error& e) {
        std::cerr << "topocni explain: " << e.what() << " (code " << e.code << ")"
                  << (e.details.empty() ? "" : ": " + e.details) << "\n";
        return 2;
    }
    std::string node;
    try {
        node = c.placement ? node_name(*c.placement) : "";
    } catch (const Error&) {
        node = "?";
    }
    std::cout << "network '" << c.name << "' from '" << config_path << "'";
    if (!node.empty()) std::cout << ", node '" << node << "'";
    std::cout << ", pod " << (pod_uid.empty() ? std::string("(no --pod-uid)") : pod_uid) << "\n";
    if (verdicts.empty()) {
        std::cout << "no placement constraints (nodeSelector, topology)\n";
        return 0;
    }
    size_t failed = 0;
    for (auto& v : verdicts) {
        const char* mark = !v.pass ? "FAIL" : v.warning ? "WARN" : "PASS";
        if (!v.pass) ++failed;
        std::cout << mark << "  " << v.constraint << ": " << v.evidence << "\n";
    }
    if (failed) std::cout << failed << " of " << verdicts.size() << " constraints not met\n";
    else std::cout << "all " << verdicts.size() << " constraints met\n";
    return failed ? 1 : 0;
}

}  // namespace cni
