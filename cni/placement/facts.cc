#include "cni/placement/facts.h"

#include <limits.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cctype>

#include "base/files.h"
#include "base/log.h"
#include "cni/error.h"
#include "cni/placement/device_usage.h"
#include "kube/node_cache.h"
#include "cni/placement/topology.h"
#include "ipam/usage.h"
#include "netns/sysfs.h"

namespace cni {

namespace {

bool exists(const std::string& path) {
    struct stat st;
    return ::stat(path.c_str(), &st) == 0;
}

// ---- the node's labels ----

bool valid_node_name(const std::string& n) {
    bool ok = !n.empty() && n.size() <= 253 && n.front() != '.' && n.front() != '-';
    for (char ch : n) ok = ok && (std::islower(static_cast<unsigned char>(ch)) || std::isdigit(static_cast<unsigned char>(ch)) ||
                                  ch == '-' || ch == '.');
    return ok;
}

}  // namespace

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

namespace {

Labels read_labels_file(const std::string& path) {
    auto text = base::fs::read_file(path);   // code 5 when unreadable
    if (!text)
        throw Error(kTryAgainLater, "nodeLabelsFile: '" + path + "' does not exist (yet)");
    return parse_labels(*text, path);
}

}  // namespace

NodeLabels node_labels(const conf::NetConf& c, const PodInfo& pod, const EvalOptions& opt) {
    const conf::Placement& p = *c.placement;
    std::string node = node_name(p);
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
        } catch (const base::Error& e) {
            // With a local file there is still something to decide on.
            if (code_of(e) != kTryAgainLater || !p.node_labels_file) throw;
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

// ---- the device ----

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

PodNuma pod_numa(const conf::NetConf& c, const std::string& uid) {
    PodNuma out;
    if (uid.empty()) {
        out.text = "the pod UID is unknown (no K8S_POD_UID in CNI_ARGS)";
        return out;
    }
    std::string path = c.placement->kubelet_root_dir + "/cpu_manager_state";
    auto text = base::fs::read_file(path);
    if (!text) {
        out.text = "'" + path + "' does not exist (no CPU manager)";
        return out;
    }
    topo::PodCpus pc;
    try {
        pc = topo::parse_cpu_manager_state(*text, uid);
    } catch (const base::Error& e) {
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

namespace {

std::string some(const std::vector<std::string>& items) {
    std::string out;
    for (size_t i = 0; i < items.size() && i < 4; ++i) out += (i ? ", " : "") + items[i];
    if (items.size() > 4) out += ", ...";
    return items.empty() ? "" : " (" + out + ")";
}

}  // namespace

DeviceUse device_use(const conf::NetConf& c, const Device& d, const PodInfo& pod) {
    if (d.kind == Device::Kind::None) return {std::nullopt, d.none_why};
    if (d.kind == Device::Kind::Master) {
        auto used = macvlans_on_master(d.name, d.link_kind, pod.netns, pod.ifname).where;
        std::string facts = d.label + " already has " + std::to_string(used.size()) + " " + d.link_kind + " link" +
                            (used.size() == 1 ? "" : "s") + some(used);
        return {used, facts};
    }
    auto pf = netns::sysfs::Tree(c.sysfs_root).physfn(d.name);
    if (!pf) return {std::nullopt, d.label + " is no VF (no physfn in sysfs)"};
    if (!d.in_use_on_pf) return {std::nullopt, "nothing records which VFs of PF " + *pf + " are in use"};
    auto used = d.in_use_on_pf(*pf);
    std::string facts = "PF " + *pf + " of " + d.label + " has " + std::to_string(used.size()) + " VF" +
                        (used.size() == 1 ? "" : "s") + " in use" + some(used);
    return {used, facts};
}

std::vector<PoolSet> pool_sets(const ipam::Config& pool, const std::string& network, const PodInfo& pod) {
    std::vector<PoolSet> out;
    for (auto& u : ipam::pool_usage(pool, network))
        out.push_back({u.range_set, u.size, u.held.size(), ipam::free_after_allocation(u, pod.container_id, pod.ifname)});
    return out;
}

// ---- the link a device shares, and the bandwidth committed on it ----

namespace {

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

}  // namespace

SharedLink shared_link(const std::string& sysfs, const Device& d) {
    if (d.kind == Device::Kind::None) return {"", "", d.none_why};
    if (d.kind == Device::Kind::Master) {
        // A PF (or a VF) as macvlan master shares its wire with the PF's VFs: one ledger,
        // named by the PF's PCI address as theirs is.
        if (auto pf = pf_of_netdev(sysfs, d.name)) return {*pf, d.label + " (PF " + *pf + ")", ""};
        return {d.name, d.label, ""};
    }
    auto pf = netns::sysfs::Tree(sysfs).physfn(d.name);
    if (!pf) return {"", "", d.label + " is no VF (no physfn in sysfs)"};
    return {*pf, "PF " + *pf + " of " + d.label, ""};
}

LinkCapacity link_capacity(const conf::Topology* t, const Device& d, const std::string& sysfs) {
    if (t && t->link_capacity_mbps) return {double(*t->link_capacity_mbps) * 1e6, "topology.linkCapacityMbps", ""};
    Fact speed = link_speed(d, sysfs);
    if (speed.value) return {double(*speed.value) * 1e6, "link speed", ""};
    return {std::nullopt, "", speed.text + " and topology.linkCapacityMbps is not set"};
}

BandwidthFacts bandwidth_facts(const conf::NetConf& c, const Device& d, const PodInfo& pod) {
    BandwidthFacts f;
    f.link = shared_link(c.sysfs_root, d);
    if (f.link.key.empty()) return f;
    const conf::Topology* t = c.placement && c.placement->topology ? &*c.placement->topology : nullptr;
    f.capacity = link_capacity(t, d, c.sysfs_root);
    if (!f.capacity.bps) return f;
    for (auto& e : ledger::entries(c.state_dir, f.link.key))
        // CHECK of an admitted attachment does not count itself.
        if (!(e.network == c.name && e.container_id == pod.container_id && e.ifname == pod.ifname)) f.others.push_back(e);
    return f;
}

}  // namespace cni
