#include "placement/facts.h"

#include <limits.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <map>
#include <set>

#include "base/files.h"
#include "base/log.h"
#include "placement/error.h"
#include "placement/device_usage.h"
#include "kube/node_cache.h"
#include "placement/prepared_claims.h"
#include "placement/topology.h"
#include "ipam/usage.h"
#include "netns/sysfs.h"

namespace placement {

namespace {

bool exists(const std::string& path) {
    struct stat st;
    return ::stat(path.c_str(), &st) == 0;
}

/// The entry of `v` whose `field` is `key`, or nullptr (facts are gathered into a document
/// once per PF or link, however many networks name it).
template <class T>
T* find_entry(std::vector<T>& v, std::string T::*field, const std::string& key) {
    for (auto& x : v)
        if (x.*field == key) return &x;
    return nullptr;
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
    if (::gethostname(buf, sizeof buf - 1) < 0) throw base::Error("failed to read the host name", {}, errno);
    std::string n = buf;
    for (auto& ch : n) ch = static_cast<char>(std::tolower(static_cast<unsigned char>(ch)));   // as kubelet does
    if (!valid_node_name(n))
        throw Error(Error::Kind::Invalid, "nodeName: not set, and the host name '" + n + "' is no valid node name");
    return n;
}

namespace {

Labels read_labels_file(const std::string& path) {
    auto text = base::fs::read_file(path);   // code 5 when unreadable
    if (!text)
        throw Error(Error::Kind::NotYet, "nodeLabelsFile: '" + path + "' does not exist (yet)");
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
        throw Error(Error::Kind::Invalid, std::string("nodeSelector: no source of node labels: set nodeLabelsFile or "
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
                if (!valid_node_name(n)) throw Error(Error::Kind::Invalid, "spec.nodeName '" + n + "' is no node name");
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
            if (!is_unavailable(e) || !p.node_labels_file) throw;
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

// ---- reading the node into the document ----

namespace {

std::string link_target(const std::string& path) {
    char buf[PATH_MAX];
    ssize_t n = ::readlink(path.c_str(), buf, sizeof buf - 1);
    if (n <= 0) return {};
    buf[n] = '\0';
    std::string s = buf;
    return s.substr(s.rfind('/') + 1);
}

std::optional<long long> read_number(const std::string& path) {
    auto text = base::fs::read_file(path);
    if (!text) return std::nullopt;
    try {
        return std::stoll(*text);
    } catch (const std::exception&) {
        return std::nullopt;
    }
}

}  // namespace

void gather_numa(NodeFacts& f, const std::string& sysfs) {
    if (!f.numa.empty()) return;
    for (auto& [node, cpus] : topo::numa_cpus(sysfs)) f.numa.push_back({node, topo::format_cpuset(cpus)});
}

void gather_pci(NodeFacts& f, const std::string& sysfs, const std::string& pci,
                const std::function<std::vector<std::string>(const std::string& pf)>& in_use, const std::string& vf,
                bool all_vfs) {
    netns::sysfs::Tree tree(sysfs);
    PfFacts* pf = find_entry(f.pfs, &PfFacts::pci, pci);
    if (!pf) {
        PfFacts n;
        n.pci = pci;
        auto nets = tree.netdevs(pci);
        if (!nets.empty()) {
            n.netdev = nets.front();
            n.speed_mbps = topo::read_speed(sysfs, n.netdev);
        }
        n.numa = topo::read_numa_node(tree.pci_path(pci) + "/numa_node");
        n.total_vfs = read_number(tree.pci_path(pci) + "/sriov_totalvfs").value_or(0);
        n.vfs_listed = false;
        f.pfs.push_back(std::move(n));
        pf = &f.pfs.back();
    }
    auto add = [&](const std::string& v, bool held) {
        if (VfFacts* x = find_entry(pf->vfs, &VfFacts::pci, v)) {
            x->in_use = x->in_use || held;
            return;
        }
        pf->vfs.push_back({v, topo::read_numa_node(tree.pci_path(v) + "/numa_node"), held, ""});
    };
    // Every VF of the PF, and which are in use, only for what counts them
    // (maxAttachmentsPerMaster, node-report): an ADD that only asks its VF's NUMA node or
    // speed reads nothing of the others.
    if (all_vfs && !pf->vfs_listed) {
        long long configured = read_number(tree.pci_path(pci) + "/sriov_numvfs").value_or(0);
        for (long long i = 0; i < configured && i < 65536; ++i) {
            std::string v = link_target(tree.pci_path(pci) + "/virtfn" + std::to_string(i));
            if (!v.empty()) add(v, false);
        }
        pf->usage_known = static_cast<bool>(in_use);
        // Records name VFs in use; a VF sysfs shows only by its physfn link is a VF too.
        if (in_use)
            for (auto& v : in_use(pci)) add(v, true);
        pf->vfs_listed = true;
    }
    if (!vf.empty()) add(vf, false);
}

void gather_link(NodeFacts& f, const std::string& sysfs, const std::string& name, const std::string& links_kind,
                 bool count_links, const PodInfo& pod) {
    LinkFacts* l = find_entry(f.links, &LinkFacts::name, name);
    if (!l) {
        LinkFacts n;
        n.name = name;
        std::string dir = sysfs + "/class/net/" + name;
        n.exists = exists(dir);
        n.has_device = exists(dir + "/device");
        n.pci = link_target(dir + "/device");
        if (!netns::sysfs::is_pci_address(n.pci)) n.pci.clear();
        if (!n.pci.empty()) {
            netns::sysfs::Tree tree(sysfs);
            if (auto pf = tree.physfn(n.pci)) n.pf = *pf;
            else if (exists(tree.pci_path(n.pci) + "/sriov_totalvfs")) n.pf = n.pci;
        }
        n.numa = topo::read_numa_node(dir + "/device/numa_node");
        n.speed_mbps = topo::read_speed(sysfs, name);
        n.links_kind = links_kind;
        f.links.push_back(std::move(n));
        l = &f.links.back();
    }
    if (count_links && !l->link_count) {
        auto where = macvlans_on_master(name, links_kind, pod.netns, pod.ifname).where;
        l->link_count = static_cast<long long>(where.size());
        where.resize(std::min(where.size(), kSample));
        l->link_sample = std::move(where);
    }
}

void gather_ledger(NodeFacts& f, const std::string& state_dir, const std::string& link, const std::string& network,
                   const PodInfo& pod) {
    if (f.ledger_of(link)) return;
    LedgerFacts l{link, ledger::capacity(state_dir, link)};
    for (auto& e : ledger::entries(state_dir, link)) {
        // CHECK of an admitted attachment does not count itself.
        if (e.network == network && e.container_id == pod.container_id && e.ifname == pod.ifname) continue;
        l.egress_bps += e.egress_bps;
        l.ingress_bps += e.ingress_bps;
        if (e.network == prepared_claims::kLedgerNetwork) {
            l.claimed_egress_bps += e.egress_bps;
            l.claimed_ingress_bps += e.ingress_bps;
        }
        if (++l.count <= static_cast<long long>(kSample)) l.sample.push_back(e);
    }
    f.ledgers.push_back(std::move(l));
}

void gather_pool(NodeFacts& f, const ipam::Config& pool, const std::string& network, const PodInfo& pod) {
    if (f.network(network)) return;
    NetworkFacts n{network, {}};
    for (auto& u : ipam::pool_usage(pool, network)) {
        bool mine = false;
        for (auto& r : u.held)
            mine = mine || (!pod.container_id.empty() && r.container_id == pod.container_id && r.ifname == pod.ifname);
        n.sets.push_back({u.range_set, u.size, u.held.size(), mine});
    }
    f.networks.push_back(std::move(n));
}

void gather_device(NodeFacts& f, const conf::NetConf& c, const Device& d, const PodInfo& pod, bool count_links) {
    gather_numa(f, c.sysfs_root);
    if (d.kind == Device::Kind::Pci) {
        auto pf = netns::sysfs::Tree(c.sysfs_root).physfn(d.name);
        if (pf) gather_pci(f, c.sysfs_root, *pf, d.in_use_on_pf, d.name, count_links);
        else gather_pci(f, c.sysfs_root, d.name, nullptr, "", count_links);
    } else if (d.kind == Device::Kind::Master) {
        gather_link(f, c.sysfs_root, d.name, d.link_kind, count_links, pod);
        if (auto* l = f.link(d.name); l && !l->pf.empty()) gather_pci(f, c.sysfs_root, l->pf, d.in_use_on_pf, "", false);
    }
}

// ---- the device's facts, as words, from the document alone ----

namespace {

/// The PCI device `pci` as the document has it: a VF with its PF, or a device of its own.
struct PciView {
    const PfFacts* pf = nullptr;     ///< the VF's PF; null for a device that is no VF
    const PfFacts* self = nullptr;   ///< the device itself when it is no VF
    const VfFacts* vf = nullptr;
};

PciView view(const NodeFacts& f, const std::string& pci) {
    auto [pf, vf] = f.vf(pci);
    if (vf) return {pf, nullptr, vf};
    return {nullptr, f.pf(pci), nullptr};
}

std::string numa_text(const std::string& label, const std::optional<int>& n, Fact& out) {
    if (!n) return label + " has no NUMA node in sysfs (a virtual device?)";
    if (*n < 0) return label + " reports NUMA node -1 (no affinity)";
    out.value = *n;
    return label + " is on NUMA node " + std::to_string(*n);
}

}  // namespace

Fact device_numa(const NodeFacts& f, const Device& d) {
    if (d.kind == Device::Kind::None) return {std::nullopt, d.none_why};
    Fact out;
    if (d.kind == Device::Kind::Pci) {
        auto v = view(f, d.name);
        std::optional<int> n = v.vf ? v.vf->numa : v.self ? v.self->numa : std::nullopt;
        out.text = numa_text(d.label, n, out);
        return out;
    }
    auto* l = f.link(d.name);
    out.text = numa_text(d.label, l ? l->numa : std::nullopt, out);
    return out;
}

Fact link_speed(const NodeFacts& f, const Device& d) {
    if (d.kind == Device::Kind::None) return {std::nullopt, d.none_why};
    std::optional<long long> speed;
    std::string label = d.label;
    if (d.kind == Device::Kind::Pci) {
        auto v = view(f, d.name);
        const PfFacts* dev = v.pf ? v.pf : v.self;
        if (!dev || dev->netdev.empty())
            return {std::nullopt, (v.pf ? "PF " + v.pf->pci + " of " + d.label : d.label) + " has no netdev in sysfs"};
        label = v.pf ? "PF '" + dev->netdev + "' of " + d.label : d.label + " ('" + dev->netdev + "')";
        speed = dev->speed_mbps;
    } else if (auto* l = f.link(d.name)) {
        speed = l->speed_mbps;
    }
    if (!speed) return {std::nullopt, label + " reports no link speed (link down or virtual)"};
    return {*speed, label + " runs at " + std::to_string(*speed) + " Mb/s"};
}

PodNuma pod_numa(const conf::NetConf& c, const std::string& uid, const NodeFacts& f) {
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
    std::map<int, topo::CpuSet> numa;
    for (auto& n : f.numa)
        if (auto cpus = topo::parse_cpuset(n.cpus)) numa[n.id] = *cpus;
    topo::CpuSet unplaced;
    out.nodes = topo::nodes_of(pc.cpus, numa, &unplaced);
    std::string cpus = "pod " + uid + " CPUs " + topo::format_cpuset(pc.cpus);
    if (!unplaced.empty()) {
        out.text = cpus + ": CPUs " + topo::format_cpuset(unplaced) + " are on no NUMA node of this node";
        return out;
    }
    out.known = true;
    out.text = cpus + (out.nodes.size() == 1 ? " are on NUMA node " : " are on NUMA nodes ") +
               topo::format_nodes(out.nodes);
    return out;
}

namespace {

/// " (a, b, c, d, ...)": the first few of `count` things.
std::string some(const std::vector<std::string>& sample, long long count) {
    std::string out;
    for (size_t i = 0; i < sample.size() && i < kSample; ++i) out += (i ? ", " : "") + sample[i];
    if (count > static_cast<long long>(kSample)) out += ", ...";
    return sample.empty() ? "" : " (" + out + ")";
}

}  // namespace

DeviceUse device_use(const NodeFacts& f, const Device& d) {
    if (d.kind == Device::Kind::None) return {std::nullopt, d.none_why};
    if (d.kind == Device::Kind::Master) {
        auto* l = f.link(d.name);
        if (!l || !l->exists) return {std::nullopt, d.label + " does not exist on this node"};
        if (!l->link_count) return {std::nullopt, "the links on " + d.label + " were not counted"};
        long long n = *l->link_count;
        std::string facts = d.label + " already has " + std::to_string(n) + " " + l->links_kind + " link" +
                            (n == 1 ? "" : "s") + some(l->link_sample, n);
        return {n, facts};
    }
    auto v = view(f, d.name);
    if (!v.pf) return {std::nullopt, d.label + " is no VF (no physfn in sysfs)"};
    if (!v.pf->usage_known) return {std::nullopt, "nothing records which VFs of PF " + v.pf->pci + " are in use"};
    std::vector<std::string> used;
    for (auto& x : v.pf->vfs)
        if (x.in_use) used.push_back(x.pci);
    long long n = static_cast<long long>(used.size());
    std::string facts = "PF " + v.pf->pci + " of " + d.label + " has " + std::to_string(n) + " VF" + (n == 1 ? "" : "s") +
                        " in use" + some(used, n);
    return {n, facts};
}

std::vector<PoolSet> pool_sets(const NodeFacts& f, const ipam::Config& pool, const std::string& network) {
    std::vector<PoolSet> out;
    auto put = [&](const std::string& set, unsigned __int128 size, unsigned __int128 used, bool mine) {
        unsigned __int128 taken = used + (mine ? 0 : 1);   // this pod's own, unless it has it already
        out.push_back({set, size, used, size > taken ? size - taken : 0});
    };
    if (auto* n = f.network(network)) {
        for (auto& s : n->sets) put(s.range_set, s.size, s.used, s.held_by_pod);
        return out;
    }
    // Not this machine's store: a published document is judged elsewhere (the extender).
    for (auto& u : ipam::pool_sizes(pool)) put(u.range_set, u.size, 0, false);
    return out;
}

// ---- the link a device shares, and the bandwidth committed on it ----

SharedLink shared_link(const NodeFacts& f, const Device& d) {
    if (d.kind == Device::Kind::None) return {"", "", d.none_why};
    if (d.kind == Device::Kind::Master) {
        // A PF (or a VF) as macvlan master shares its wire with the PF's VFs: one ledger,
        // named by the PF's PCI address as theirs is.
        auto* l = f.link(d.name);
        if (l && !l->pf.empty()) return {l->pf, d.label + " (PF " + l->pf + ")", ""};
        return {d.name, d.label, ""};
    }
    auto v = view(f, d.name);
    if (!v.pf) return {"", "", d.label + " is no VF (no physfn in sysfs)"};
    return {v.pf->pci, "PF " + v.pf->pci + " of " + d.label, ""};
}

LinkCapacity link_capacity(const conf::Topology* t, const NodeFacts& f, const Device& d) {
    if (t && t->link_capacity_mbps) return {double(*t->link_capacity_mbps) * 1e6, "topology.linkCapacityMbps", ""};
    Fact speed = link_speed(f, d);
    if (speed.value) return {double(*speed.value) * 1e6, "link speed", ""};
    return {std::nullopt, "", speed.text + " and topology.linkCapacityMbps is not set"};
}

BandwidthFacts bandwidth_facts(const conf::NetConf& c, const NodeFacts& f, const Device& d, const PodInfo& pod) {
    BandwidthFacts out;
    out.link = shared_link(f, d);
    if (out.link.key.empty()) return out;
    const conf::Topology* t = c.placement && c.placement->topology ? &*c.placement->topology : nullptr;
    out.capacity = link_capacity(t, f, d);
    if (!out.capacity.bps) return out;
    // A live read left this attachment's own entry out already; a published document has
    // none of a pod not yet attached.
    if (auto* l = f.ledger_of(out.link.key)) {
        out.others = l->sample;
        out.others_count = l->count;
        out.others_egress = l->egress_bps;
        out.others_ingress = l->ingress_bps;
    }
    (void)pod;
    return out;
}

}  // namespace placement
