// `topocni node-report`: this node's secondary-network resources as a Node Feature
// Discovery local feature file ("key=value" lines), so NFD turns them into node labels
// the scheduler can select on. It closes the scheduler's blind spot for VFs per NUMA
// node and NIC speeds.
#include <CLI/CLI.hpp>

#include <algorithm>
#include <atomic>
#include <cctype>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <set>
#include <tuple>
#include <sstream>

#include "cni/attach/attachment.h"
#include "cni/attach/sriov_state.h"
#include "base/files.h"
#include "base/hash.h"
#include "cluster/cmd/commands.h"
#include "cluster/cmd/node_facts.h"
#include "cluster/cmd/prometheus.h"
#include "cluster/cmd/publish.h"
#include "cni/error.h"
#include "placement/ledger.h"
#include "placement/placement.h"
#include "cni/records.h"
#include "placement/evictions.h"
#include "placement/refusals.h"
#include "conf/netconf.h"
#include "ipam/usage.h"
#include "netns/sysfs.h"

namespace cluster::cmd {

// The node as the plugin left it: its records, state and errors are the CNI side's own.
using namespace cni;

namespace {

constexpr const char* kPrefix = "topocni.io/";

/// Label-safe name: [A-Za-z0-9][-A-Za-z0-9_.]*, at most 63 bytes.
std::string label_name(std::string s) {
    for (auto& ch : s)
        if (!std::isalnum(static_cast<unsigned char>(ch)) && ch != '-' && ch != '_' && ch != '.') ch = '_';
    return s.substr(0, 63);
}

/// label_name(s), at most `max` bytes: a longer one keeps its head and ends in 8 hex
/// digits of a hash of the whole, so two long names do not become one label.
std::string short_label(const std::string& s, size_t max) {
    std::string name = label_name(s);
    if (name.size() <= max) return name;
    char tail[10];
    std::snprintf(tail, sizeof tail, "-%08x", base::fnv1a32(s));
    return name.substr(0, max - 9) + tail;
}

std::string numa_key(int n) { return n < 0 ? "numa-unknown" : "numa" + std::to_string(n); }

struct Options {
    std::string output, sysfs_root = "/sys", state_dir = "/var/lib/cni/topocni", format = "nfd";
    std::string kubelet_root_dir = "/var/lib/kubelet", node;
    bool publish = false;
    PublishOptions pub;
};


// ---- what the node has: gathered once, rendered as NFD labels or Prometheus metrics ----

struct Pf {
    std::string name, pci;
    int numa = -1;
    std::string total;
    int configured = 0, free_vfs = 0;
};

struct LinkBandwidth {
    std::string link;                 ///< ledger name: master interface or PF PCI address
    double capacity_bps = 0;          ///< capacity x overcommit: what admission compares against
    double committed_egress = 0, committed_ingress = 0;
};

struct PoolUse {
    std::string network, range_set;
    unsigned __int128 size = 0, used = 0;
};

struct Facts {
    int numa_count = 0;
    std::vector<Pf> pfs;
    std::vector<std::pair<std::string, std::string>> speeds;   ///< ifname -> Mb/s
    std::vector<LinkBandwidth> bandwidth;
    std::map<std::tuple<std::string, std::string, std::string>, int> attachments;   ///< (network, kind, link) -> n
    std::vector<PoolUse> pools;
    placement::refusals::Counts refused;
    placement::evictions::Counts evictions;
};

void gather_records(const Options& o, Facts& f, const std::map<std::string, std::string>& pf_names) {
    for (auto& network : base::fs::list_dir(o.state_dir + "/attachments")) {
        std::vector<Record> recs = list_records(o.state_dir, network);
        const Record* latest = nullptr;
        for (auto& r : recs) {
            if (r.result.is_null()) continue;   // ADD in flight, or died: not an attachment
            std::string link = pf_names.count(r.link) ? pf_names.at(r.link) : r.link;
            ++f.attachments[{network, conf::kind_of(r.config), link}];
            if (!latest || r.completed_ns > latest->completed_ns) latest = &r;
        }
        // The pool as the network's newest attachment configured it.
        if (!latest || !latest->config.is_object()) continue;
        try {
            auto net = read_network(latest->config.dump(), {});
            const auto& c = net.conf;
            auto pool = net.kind->pool(c);
            if (!pool) continue;
            for (auto& u : ipam::pool_usage(*pool, c.name))
                f.pools.push_back({network, u.range_set, u.size, u.held.size()});
        } catch (const std::exception&) {
            continue;   // a config this version cannot read: its pool is not reported
        }
    }
}

void gather_bandwidth(const Options& o, const netns::sysfs::Tree& tree, Facts& f,
                      const std::map<std::string, std::string>& pf_names) {
    std::set<std::string> seen;
    for (auto& link : placement::ledger::links(o.state_dir)) {
        LinkBandwidth b{link};
        for (auto& e : placement::ledger::entries(o.state_dir, link)) {
            b.committed_egress += double(e.egress_bps);
            b.committed_ingress += double(e.ingress_bps);
        }
        // What the last admission counted against (linkCapacityMbps x overcommit), which
        // stays while the link is idle; never admitted on: the link's own speed.
        if (auto cap = placement::ledger::capacity(o.state_dir, link); cap && cap->capacity_bps)
            b.capacity_bps = double(cap->capacity_bps) * cap->overcommit;
        if (b.capacity_bps == 0) {
            std::string ifname = pf_names.count(link) ? pf_names.at(link) : link;
            auto speed = tree.netdev_attribute(ifname, "speed").value_or("");
            if (speed.empty() || speed[0] == '-') continue;
            b.capacity_bps = std::atof(speed.c_str()) * 1e6;
        }
        seen.insert(link);
        // A PF is named by its netdev, as in the sriov-pf.<pf> labels and the VF metrics.
        if (pf_names.count(link)) {
            b.link = pf_names.at(link);
            seen.insert(b.link);
        }
        // One series per link: a ledger kept under the PF's netdev name by an older version
        // and the one under its PCI address add up, against the smaller capacity.
        auto same = std::find_if(f.bandwidth.begin(), f.bandwidth.end(), [&](auto& x) { return x.link == b.link; });
        if (same == f.bandwidth.end()) {
            f.bandwidth.push_back(b);
        } else {
            same->committed_egress += b.committed_egress;
            same->committed_ingress += b.committed_ingress;
            same->capacity_bps = std::min(same->capacity_bps, b.capacity_bps);
        }
    }
    // Every other physical link with a known speed: all of it is free.
    for (auto& [ifname, speed] : f.speeds)
        if (!seen.count(ifname)) f.bandwidth.push_back({ifname, std::atof(speed.c_str()) * 1e6, 0, 0});
}

Facts gather(const Options& o) {
    Facts f;
    netns::sysfs::Tree tree(o.sysfs_root);
    f.numa_count = tree.numa_node_count();

    std::set<std::string> used_vfs;   // VF PCI addresses with a topocni state record
    for (auto& pci : state::VfStore(o.state_dir).pcis()) used_vfs.insert(pci);

    std::map<std::string, std::string> pf_names;   // PF PCI -> netdev
    for (auto& ifname : tree.netdev_names()) {
        if (!tree.netdev_has_device(ifname)) continue;   // virtual device
        auto pci = tree.netdev_pci(ifname);
        if (pci && tree.physfn(*pci)) continue;          // a VF, counted under its PF
        auto speed = tree.netdev_attribute(ifname, "speed").value_or("");
        if (!speed.empty() && speed[0] != '-') f.speeds.push_back({ifname, speed});
        if (!pci) continue;
        auto total = tree.attribute(*pci, "sriov_totalvfs").value_or("");
        if (total.empty() || total == "0") continue;
        Pf pf{ifname, *pci, tree.numa_node(*pci).value_or(-1), total};
        pf.configured = std::atoi(tree.attribute(*pci, "sriov_numvfs").value_or("").c_str());
        for (int i = 0; i < pf.configured; ++i) {
            auto vf = tree.virtfn(*pci, i);
            if (vf && !used_vfs.count(*vf)) ++pf.free_vfs;
        }
        pf_names[pf.pci] = ifname;
        f.pfs.push_back(pf);
    }
    gather_bandwidth(o, tree, f, pf_names);
    gather_records(o, f, pf_names);
    f.refused = placement::refusals::read(o.state_dir);
    f.evictions = placement::evictions::read(o.state_dir);
    return f;
}

long long whole_gbps(double bps) { return bps <= 0 ? 0 : static_cast<long long>(bps / 1e9); }

std::string render_nfd(const Facts& f) {
    std::ostringstream out;
    out << "# topocni node-report: secondary-network resources of this node\n";
    out << kPrefix << "numa-nodes=" << f.numa_count << "\n";
    for (auto& [ifname, speed] : f.speeds) out << kPrefix << "link." << label_name(ifname) << ".speed-mbps=" << speed << "\n";
    std::map<int, int> free_per_numa, total_per_numa;
    for (auto& pf : f.pfs) {
        std::string name = label_name(pf.name);
        out << kPrefix << "sriov-pf." << name << ".total-vfs=" << pf.total << "\n";
        out << kPrefix << "sriov-pf." << name << ".configured-vfs=" << pf.configured << "\n";
        out << kPrefix << "sriov-pf." << name << ".free-vfs=" << pf.free_vfs << "\n";
        out << kPrefix << "sriov-pf." << name << ".numa-node=" << pf.numa << "\n";
        total_per_numa[pf.numa] += pf.configured;
        free_per_numa[pf.numa] += pf.free_vfs;
    }
    out << kPrefix << "sriov-capable=" << (f.pfs.empty() ? "false" : "true") << "\n";
    for (auto& [numa, n] : total_per_numa) {
        out << kPrefix << "sriov-" << numa_key(numa) << ".configured-vfs=" << n << "\n";
        out << kPrefix << "sriov-" << numa_key(numa) << ".free-vfs=" << free_per_numa.at(numa) << "\n";
    }
    // Whole Gb/s, rounded down: a label that changed with every pod would churn the Node object.
    for (auto& b : f.bandwidth) {
        std::string name = label_name(b.link);
        out << kPrefix << "bandwidth." << name << ".capacity-gbps=" << whole_gbps(b.capacity_bps) << "\n";
        out << kPrefix << "bandwidth." << name << ".egress-free-gbps=" << whole_gbps(b.capacity_bps - b.committed_egress) << "\n";
        out << kPrefix << "bandwidth." << name << ".ingress-free-gbps=" << whole_gbps(b.capacity_bps - b.committed_ingress) << "\n";
    }
    // The fewest free addresses of any range set: an exhausted IPv4 set next to a /64 is
    // still exhausted (and topology.minFreeAddresses counts per set too). Numbers are
    // capped at 2^62 so the label value stays a number.
    std::map<std::string, unsigned __int128> free_per_network;
    for (auto& p : f.pools) {
        unsigned __int128 free = ipam::free_addresses(p.size, p.used);
        auto [it, fresh] = free_per_network.emplace(p.network, free);
        if (!fresh) it->second = std::min(it->second, free);
    }
    constexpr unsigned __int128 kCap = static_cast<unsigned __int128>(1) << 62;
    for (auto& [network, n] : free_per_network)
        out << kPrefix << "ipam." << short_label(network, 43) << ".free-addresses="
            << static_cast<unsigned long long>(std::min(n, kCap)) << "\n";
    return out.str();
}

// ---- JSON: the same facts for scripts (--format json) ----

nlohmann::json render_json(const Facts& f) {
    nlohmann::json j = {{"numaNodes", f.numa_count}, {"sriovCapable", !f.pfs.empty()}, {"pfs", nlohmann::json::array()},
                        {"linkSpeedsMbps", nlohmann::json::object()}, {"bandwidth", nlohmann::json::array()},
                        {"pools", nlohmann::json::array()}};
    for (auto& pf : f.pfs)
        j["pfs"].push_back({{"name", pf.name}, {"pci", pf.pci}, {"numaNode", pf.numa}, {"totalVfs", pf.total},
                            {"configuredVfs", pf.configured}, {"freeVfs", pf.free_vfs}});
    for (auto& [ifname, mbps] : f.speeds) j["linkSpeedsMbps"][ifname] = mbps;
    for (auto& b : f.bandwidth)
        j["bandwidth"].push_back({{"link", b.link}, {"capacityBps", b.capacity_bps},
                                  {"committedEgressBps", b.committed_egress}, {"committedIngressBps", b.committed_ingress}});
    for (auto& p : f.pools)
        j["pools"].push_back({{"network", p.network}, {"rangeSet", p.range_set},
                              {"size", static_cast<double>(p.size)}, {"used", static_cast<double>(p.used)}});
    return j;
}

/// A sysfs root that is not one would report "no SR-IOV, no NUMA" for NFD to publish.
void require_sysfs(const std::string& root) {
    if (!netns::sysfs::Tree(root).looks_like_sysfs())
        throw Error(kInvalidConfig, "--sysfs-root '" + root + "' is not a sysfs tree (no devices, class or bus in it)");
}

std::string render_prometheus(const Facts& f) {
    std::ostringstream out;
    {
        prometheus::Family m(out, "topocni_bandwidth_capacity_bps", "gauge",
                 "Bandwidth topocni admits on a link per direction: topology.linkCapacityMbps, else the link speed, "
                 "times topology.bandwidthOvercommit (bits per second).");
        for (auto& b : f.bandwidth)
            for (const char* d : {"egress", "ingress"}) m.sample({{"master", b.link}, {"direction", d}}, b.capacity_bps);
    }
    {
        prometheus::Family m(out, "topocni_bandwidth_committed_bps", "gauge",
                 "Bandwidth committed to the attachments on a link per direction, from the admission ledger (bits per second).");
        for (auto& b : f.bandwidth) {
            m.sample({{"master", b.link}, {"direction", "egress"}}, b.committed_egress);
            m.sample({{"master", b.link}, {"direction", "ingress"}}, b.committed_ingress);
        }
    }
    {
        prometheus::Family m(out, "topocni_vfs_total", "gauge", "SR-IOV VFs configured on a PF (sriov_numvfs).");
        for (auto& pf : f.pfs) m.sample({{"pf", pf.name}, {"numa_node", std::to_string(pf.numa)}}, double(pf.configured));
    }
    {
        prometheus::Family m(out, "topocni_vfs_free", "gauge", "SR-IOV VFs of a PF that no topocni attachment holds.");
        for (auto& pf : f.pfs) m.sample({{"pf", pf.name}, {"numa_node", std::to_string(pf.numa)}}, double(pf.free_vfs));
    }
    {
        prometheus::Family m(out, "topocni_attachments", "gauge", "Attachments topocni made that are in place, by network, kind and link.");
        for (auto& [key, n] : f.attachments)
            m.sample({{"network", std::get<0>(key)}, {"attachment", std::get<1>(key)}, {"master", std::get<2>(key)}}, double(n));
    }
    {
        prometheus::Family m(out, "topocni_ipam_addresses", "gauge", "Addresses of a host-local range set, free or used.");
        for (auto& p : f.pools) {
            m.sample({{"network", p.network}, {"range_set", p.range_set}, {"state", "free"}},
                     ipam::free_addresses(p.size, p.used));
            m.sample({{"network", p.network}, {"range_set", p.range_set}, {"state", "used"}}, p.used);
        }
    }
    {
        prometheus::Family m(out, "topocni_placement_refusals_total", "counter",
                 "ADDs refused with code 100, per network and failed constraint (kept in <stateDir>/metrics).");
        for (auto& [network, per] : f.refused)
            for (auto& [constraint, n] : per) m.sample({{"network", network}, {"constraint", constraint}}, double(n));
    }
    {
        prometheus::Family m(out, "topocni_evictions_total", "counter",
                 "What the refusal agent did about pods whose network asks to move them (onRefusal: evict), per network "
                 "and outcome: evicted, blocked (a PodDisruptionBudget refused), skipped (a bare, DaemonSet or static pod, "
                 "or the per-owner loop guard); kept in <stateDir>/metrics.");
        for (auto& [network, per] : f.evictions)
            for (auto& [outcome, n] : per) m.sample({{"network", network}, {"outcome", outcome}}, double(n));
    }
    return out.str();
}

}  // namespace

void add_node_report(CLI::App& app, int& status) {
    auto o = std::make_shared<Options>();
    auto* cmd = app.add_subcommand("node-report", "Report this node's network resources as NFD feature labels");
    cmd->add_option("--output", o->output, "write the feature file here atomically (default: stdout)");
    cmd->add_option("--sysfs-root", o->sysfs_root, "sysfs mount point")->capture_default_str();
    cmd->add_option("--state-dir", o->state_dir, "topocni stateDir (VFs in use, bandwidth ledger, refusals)")
        ->capture_default_str();
    cmd->add_option("--format", o->format,
                    "nfd (key=value feature lines), prometheus (text exposition format), json (a summary) or facts "
                    "(the JSON document --publish puts on the Node)")
        ->check(CLI::IsMember({"nfd", "prometheus", "json", "facts"}))
        ->capture_default_str();
    cmd->add_option("--kubelet-root-dir", o->kubelet_root_dir, "where kubelet's device-plugins checkpoint is (resourceName)")
        ->capture_default_str();
    cmd->add_option("--node", o->node, "the Node's name (default: $NODE_NAME, else the host name lower-cased)");
    cmd->add_flag("--publish", o->publish,
                  "keep this node's facts on its Node as annotation topocni.io/facts (runs until SIGTERM)");
    auto* kc = cmd->add_option("--kubeconfig", o->pub.kubeconfig,
                               "for --publish (default: the pod's service account, else topocni's, else Multus's kubeconfig)");
    cmd->add_option("--interval", o->pub.interval, "--publish: read the facts at least every this many seconds")
        ->check(CLI::Range(1.0, 3600.0))
        ->capture_default_str();
    cmd->add_option("--heartbeat", o->pub.heartbeat, "--publish: send unchanged facts again after this many seconds")
        ->check(CLI::Range(10.0, 86400.0))
        ->capture_default_str();
    cmd->add_option("--api-timeout", o->pub.api_timeout, "--publish: seconds per API request")
        ->check(CLI::Range(0.5, 120.0))
        ->capture_default_str();
    cmd->add_flag("!--no-capacities", o->pub.capacities,
                  "--publish: leave the Node's extended resources alone (no list/watch of NADs needed)");
    cmd->add_flag("--once", o->pub.once, "--publish: publish if needed, then exit (0: the Node has the facts)");
    cmd->footer("Examples:\n  topocni node-report\n"
                "  topocni node-report --output /etc/kubernetes/node-feature-discovery/features.d/topocni\n"
                "Labels (prefix topocni.io/): numa-nodes, sriov-capable, sriov-pf.<pf>.{total,configured,free}-vfs,\n"
                "sriov-pf.<pf>.numa-node, sriov-numa<N>.{configured,free}-vfs, link.<if>.speed-mbps,\n"
                "bandwidth.<link>.{capacity,egress-free,ingress-free}-gbps, ipam.<network>.free-addresses.\n"
                "  topocni node-report --format prometheus --output /var/lib/node_exporter/textfile_collector/topocni.prom\n"
                "  topocni node-report --format facts\n"
                "  topocni node-report --publish --node \"$NODE_NAME\"");
    cmd->callback([o, kc, &status] {
        require_sysfs(o->sysfs_root);
        if (o->publish || o->format == "facts") {
            FactsOptions fo{o->sysfs_root, o->state_dir, o->kubelet_root_dir, node_of(o->node)};
            if (!o->publish) {
                std::string text = to_json(read_node_facts(fo)).dump(2) + "\n";
                if (o->output.empty()) std::fwrite(text.data(), 1, text.size(), stdout);
                else base::fs::write_file(o->output, text, 0644);   // NFD ignores the dot-file written first
                status = 0;
                return;
            }
            o->pub.facts = fo;
            o->pub.kubeconfig_set = kc->count() > 0;
            status = publish_until_signal(o->pub);
            return;
        }
        Facts f = gather(*o);
        auto text = o->format == "prometheus" ? render_prometheus(f)
                    : o->format == "json"     ? render_json(f).dump(2) + "\n"
                                              : render_nfd(f);
        if (o->output.empty()) std::fwrite(text.data(), 1, text.size(), stdout);
        else base::fs::write_file(o->output, text, 0644);   // NFD ignores the dot-file written first
        status = 0;
    });
}


}  // namespace cluster::cmd
