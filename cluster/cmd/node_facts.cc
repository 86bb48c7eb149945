#include "cluster/cmd/node_facts.h"

#include <sys/stat.h>
#include <sys/time.h>

#include <algorithm>
#include <ctime>
#include <map>
#include <set>
#include <tuple>

#include "base/files.h"
#include "base/log.h"
#include "cni/args.h"
#include "cni/attach/attachment.h"
#include "cni/attach/sriov_state.h"
#include "cni/error.h"
#include "placement/facts.h"
#include "placement/ledger.h"
#include "cni/records.h"
#include "conf/netconf.h"
#include "netns/sysfs.h"

namespace cluster::cmd {

// The node as the plugin left it: its records, state and errors are the CNI side's own.
using namespace cni;

namespace {

using json = nlohmann::json;

bool exists(const std::string& p) {
    struct stat st;
    return ::lstat(p.c_str(), &st) == 0;
}

std::string now_rfc3339() {
    timeval tv;
    gettimeofday(&tv, nullptr);
    std::tm tm{};
    gmtime_r(&tv.tv_sec, &tm);
    char buf[32];
    std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", &tm);
    return buf;
}

/// The SR-IOV device plugin's pools by device: kubelet's device manager checkpoint,
/// Data.RegisteredDevices (resource name -> device IDs, PCI addresses for SR-IOV).
std::map<std::string, std::string> resource_names(const std::string& kubelet_root) {
    std::map<std::string, std::string> out;
    std::string path = kubelet_root + "/device-plugins/kubelet_internal_checkpoint";
    std::optional<std::string> text;
    try {
        text = base::fs::read_file(path);
    } catch (const base::Error& e) {
        base::log::warn(std::string("device plugin checkpoint: ") + e.what());
    }
    if (!text) return out;
    auto j = json::parse(*text, nullptr, false);
    auto data = j.is_object() ? j.find("Data") : j.end();
    if (data == j.end() || !data->is_object()) {
        base::log::warn("device plugin checkpoint '" + path + "' has no Data object: resource names unknown");
        return out;
    }
    auto reg = data->find("RegisteredDevices");
    if (reg == data->end() || !reg->is_object()) return out;
    for (auto it = reg->begin(); it != reg->end(); ++it)
        if (it->is_array())
            for (auto& id : *it)
                if (id.is_string()) out[id.get<std::string>()] = it.key();
    return out;
}

/// (network, container, ifname) -> K8S_POD_UID of its ADD.
using PodOf = std::map<std::tuple<std::string, std::string, std::string>, std::string>;

void read_attachments(const FactsOptions& o, placement::NodeFacts& f, PodOf& pods, std::set<std::string>& masters) {
    for (auto& network : base::fs::list_dir(o.state_dir + "/attachments")) {
        const Record* latest = nullptr;
        std::vector<Record> recs = list_records(o.state_dir, network);
        for (auto& r : recs) {
            if (r.result.is_null()) continue;   // ADD in flight, or died: not an attachment
            std::string uid;
            try {
                uid = Args::parse(r.cni_args).pod_uid;
            } catch (const std::exception&) {
            }
            std::string kind = conf::kind_of(r.config);
            auto same = std::find_if(f.attachments.begin(), f.attachments.end(), [&](const placement::AttachmentFacts& a) {
                return a.network == network && a.kind == kind && a.link == r.link;
            });
            if (same == f.attachments.end()) f.attachments.push_back({network, kind, r.link, {uid}});
            else same->pods.push_back(uid);
            pods[{network, r.container_id, r.ifname}] = uid;
            if (kind == "macvlan" && !r.link.empty() && !netns::sysfs::is_pci_address(r.link)) masters.insert(r.link);
            if (!latest || r.completed_ns > latest->completed_ns) latest = &r;
        }
        // The pool as the network's newest attachment configured it.
        if (!latest || !latest->config.is_object()) continue;
        try {
            auto net = read_network(latest->config.dump(), {});
            if (auto pool = net.kind->pool(net.conf)) placement::gather_pool(f, *pool, network, {});
        } catch (const std::exception& e) {
            base::log::warn("network '" + network + "': its pool is not reported: " + e.what());
        }
    }
}

/// A link and the macvlans on it; a netdev sysfs shows but the kernel does not have (a
/// master that went away) is published with its links uncounted.
void count_links_on(placement::NodeFacts& f, const std::string& sysfs, const std::string& name) {
    try {
        placement::gather_link(f, sysfs, name, "macvlan", true, {});
    } catch (const base::Error& e) {
        base::log::debug("links on '" + name + "' not counted: " + e.what());
        placement::gather_link(f, sysfs, name, "macvlan", false, {});
    }
}

}  // namespace

placement::NodeFacts read_node_facts(const FactsOptions& o) {
    if (!exists(o.sysfs_root + "/class/net"))
        throw Error(kInvalidConfig, "sysfs root '" + o.sysfs_root + "' has no class/net: not a sysfs");
    placement::NodeFacts f;
    f.node = o.node;
    f.taken_at = now_rfc3339();
    placement::gather_numa(f, o.sysfs_root);

    PodOf pods;
    std::set<std::string> masters;
    read_attachments(o, f, pods, masters);

    // VFs in use: the SR-IOV state records, read as ADD reads them, with the pod of each.
    std::map<std::string, std::string> vf_pod;
    for (auto& r : state::VfStore(o.state_dir).list()) {
        auto it = pods.find({r.owner.network, r.owner.container_id, r.owner.ifname});
        if (it != pods.end()) vf_pod[r.pci] = it->second;
    }
    auto in_use = [&](const std::string& pf) { return state::vfs_in_use(o.state_dir, o.sysfs_root, pf, ""); };
    auto names = resource_names(o.kubelet_root_dir);

    netns::sysfs::Tree tree(o.sysfs_root);
    std::string net = o.sysfs_root + "/class/net";
    for (auto& ifname : base::fs::list_dir(net)) {
        std::string dev = net + "/" + ifname + "/device";
        if (!exists(dev)) continue;              // virtual device
        if (exists(dev + "/physfn")) continue;   // a VF, under its PF
        // Every physical link can be a master: its links are counted (when the kernel has it).
        count_links_on(f, o.sysfs_root, ifname);
        auto pci = tree.netdev_pci(ifname);
        if (pci && exists(tree.pci_path(*pci) + "/sriov_totalvfs")) placement::gather_pci(f, o.sysfs_root, *pci, in_use, "", true);
    }
    masters.insert(o.masters.begin(), o.masters.end());
    for (auto& m : masters)
        if (!f.link(m)) count_links_on(f, o.sysfs_root, m);
    for (auto& link : placement::ledger::links(o.state_dir)) {
        placement::gather_ledger(f, o.state_dir, link, "", {});
        if (!netns::sysfs::is_pci_address(link) && !f.link(link)) placement::gather_link(f, o.sysfs_root, link, "macvlan", false, {});
    }
    for (auto& pf : f.pfs) {
        std::map<std::string, int> votes;
        for (auto& vf : pf.vfs) {
            if (auto it = vf_pod.find(vf.pci); it != vf_pod.end()) vf.pod_uid = it->second;
            if (auto it = names.find(vf.pci); it != names.end()) ++votes[it->second];
        }
        int best = 0;
        for (auto& [name, n] : votes)
            if (n > best) best = n, pf.resource_name = name;
    }
    return f;
}

}  // namespace cluster::cmd
