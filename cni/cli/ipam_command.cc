// `topocni ipam`: look at and clean up host-local reservations of one network.
#include <CLI/CLI.hpp>

#include <sys/stat.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <set>

#include "cni/cli/cli.h"
#include "cni/error.h"
#include "cni/pod_netns.h"
#include "cni/records.h"
#include "ipam/host_local.h"

namespace cni::cli {

namespace {

struct IpamOptions {
    std::string network, data_dir = "/var/lib/cni/networks", state_dir = "/var/lib/cni/topocni";
    std::string container_id, ifname, ip, format = "text";
    bool dry_run = false;
};

/// The network's store. A dataDir or network directory that is not there is an error: an
/// empty listing would look like "no reservations" when the flags point elsewhere.
ipam::HostLocal store(const IpamOptions& o) {
    struct stat st;
    if (::stat(o.data_dir.c_str(), &st) != 0 || !S_ISDIR(st.st_mode))
        throw Error(kInvalidConfig, "--data-dir '" + o.data_dir + "' is not a directory (" +
                                        (errno == ENOENT ? "does not exist" : std::strerror(errno)) +
                                        "); give the ipam.dataDir of the network");
    ipam::Config c;
    c.data_dir = o.data_dir;
    ipam::HostLocal s(c, o.network);
    if (::stat(s.dir().c_str(), &st) != 0)
        throw Error(kInvalidConfig, "network '" + o.network + "' has no store in '" + o.data_dir +
                                        "' (no ADD of it yet under this dataDir, or another --network/--data-dir)");
    return s;
}

/// "yes" / "no" / "unknown": whether the owner's netns still exists, from its attachment record.
std::string owner_alive(const IpamOptions& o, const ipam::Reservation& r) {
    auto rec = read_record(o.state_dir, o.network, r.container_id, r.ifname);
    if (!rec || rec->netns.empty()) return "unknown";
    if (netns_exists(rec->netns)) return "yes";
    return netns_gone(rec->netns) ? "no" : "unknown";
}

/// The record's pod (K8S_POD_NAMESPACE/K8S_POD_NAME of its ADD), or "".
std::string pod_of(const IpamOptions& o, const ipam::Reservation& r) {
    auto rec = read_record(o.state_dir, o.network, r.container_id, r.ifname);
    if (!rec) return "";
    std::string ns, name;
    for (size_t pos = 0; pos <= rec->cni_args.size();) {
        size_t end = rec->cni_args.find(';', pos);
        std::string kv = rec->cni_args.substr(pos, end == std::string::npos ? std::string::npos : end - pos);
        if (kv.rfind("K8S_POD_NAMESPACE=", 0) == 0) ns = kv.substr(18);
        if (kv.rfind("K8S_POD_NAME=", 0) == 0) name = kv.substr(13);
        if (end == std::string::npos) break;
        pos = end + 1;
    }
    return name.empty() ? "" : ns + "/" + name;
}

int list(const IpamOptions& o) {
    auto reservations = store(o).list();
    if (o.format == "json") {
        nlohmann::json out = nlohmann::json::array();
        for (auto& r : reservations)
            out.push_back({{"address", r.ip.str()}, {"containerID", r.container_id}, {"ifname", r.ifname},
                           {"pod", pod_of(o, r)}, {"netnsExists", owner_alive(o, r)}});
        std::printf("%s\n", out.dump(2).c_str());
        return 0;
    }
    // Whole container IDs: the derived ones differ only in their middle, and release
    // takes what is shown here.
    size_t width = 9;
    for (auto& r : reservations) width = std::max(width, r.container_id.size());
    std::printf("%-40s %-*s %-16s %s\n", "ADDRESS", int(width), "CONTAINER", "IFNAME", "NETNS-EXISTS");
    for (auto& r : reservations)
        std::printf("%-40s %-*s %-16s %s\n", r.ip.str().c_str(), int(width), r.container_id.c_str(),
                    r.ifname.empty() ? "-" : r.ifname.c_str(), owner_alive(o, r).c_str());
    if (reservations.empty()) std::printf("(no reservations in network '%s')\n", o.network.c_str());
    return 0;
}

int release(const IpamOptions& o) {
    auto s = store(o);
    auto all = s.list();
    std::vector<ipam::Owner> owners;
    auto add_owner = [&](const ipam::Owner& w) {
        if (std::find(owners.begin(), owners.end(), w) == owners.end()) owners.push_back(w);
    };
    if (!o.ip.empty()) {
        auto ip = base::IpAddr::parse(o.ip);
        if (!ip) throw Error(kInvalidConfig, "--ip: '" + o.ip + "' is not an IP address");
        for (auto& r : all)
            if (r.ip == *ip) add_owner({r.container_id, r.ifname});
        if (owners.empty()) throw Error(kInvalidConfig, "--ip: " + o.ip + " is not reserved in network '" + o.network + "'");
    } else if (o.container_id.empty()) {
        throw CLI::ValidationError("--ip/--container-id", "give --ip, or --container-id (and --ifname)");
    } else {
        // The whole ID, or a prefix of one ID only (as `ipam list` once cut them).
        std::set<std::string> ids;
        for (auto& r : all)
            if (r.container_id == o.container_id) ids = {r.container_id};
        if (ids.empty())
            for (auto& r : all)
                if (r.container_id.rfind(o.container_id, 0) == 0) ids.insert(r.container_id);
        if (ids.size() > 1) {
            std::string list;
            for (auto& id : ids) list += (list.empty() ? "" : ", ") + id;
            throw Error(kInvalidConfig, "--container-id '" + o.container_id + "' is a prefix of several: " + list);
        }
        for (auto& r : all)
            if (ids.count(r.container_id) && (o.ifname.empty() || r.ifname == o.ifname))
                add_owner({r.container_id, r.ifname});
        if (owners.empty())
            throw Error(kInvalidConfig, "no reservation of container '" + o.container_id + "'" +
                                            (o.ifname.empty() ? "" : " ifname '" + o.ifname + "'") + " in network '" +
                                            o.network + "' (topocni ipam list shows the owners)");
    }
    size_t before = all.size();
    for (auto& owner : owners) {
        s.release(owner);
        std::printf("released %s/%s\n", owner.container_id.c_str(), owner.ifname.c_str());
    }
    std::printf("released %zu reservation(s)\n", before - s.list().size());
    return 0;
}

int gc(const IpamOptions& o) {
    // Only owners provably gone are collected: their attachment record names a netns
    // that no longer exists. Unknown owners (no record) are kept.
    // Each gone owner is released by name: a "release all but these" would also take an
    // address an ADD reserved between the listing and the release.
    auto s = store(o);
    int collected = 0;
    auto reservations = s.list();
    for (auto& r : reservations) {
        if (owner_alive(o, r) != "no") continue;
        std::printf("%s %s %s/%s\n", o.dry_run ? "would release" : "released", r.ip.str().c_str(),
                    r.container_id.c_str(), r.ifname.c_str());
        ++collected;
        if (o.dry_run) continue;
        s.release({r.container_id, r.ifname});
        remove_record(o.state_dir, o.network, r.container_id, r.ifname);
    }
    std::printf("%d reservation(s) %s\n", collected, o.dry_run ? "collectable" : "collected");
    if (!collected && !reservations.empty())
        std::printf("(none of the %zu owners is provably gone)\n", reservations.size());
    return 0;
}

}  // namespace

void add_ipam(CLI::App& app, int& status) {
    auto o = std::make_shared<IpamOptions>();
    auto* cmd = app.add_subcommand("ipam", "List and clean up host-local IPAM reservations of a network");
    cmd->require_subcommand(1);
    cmd->footer("Examples:\n  topocni ipam list --network sriov-net\n  topocni ipam gc --network sriov-net --dry-run");
    auto common = [&](CLI::App* sub) {
        sub->add_option("--network", o->network, "network name (the config's \"name\")")->required();
        sub->add_option("--data-dir", o->data_dir, "host-local dataDir")->capture_default_str();
        sub->add_option("--state-dir", o->state_dir, "topocni stateDir (attachment records)")->capture_default_str();
    };
    auto* l = cmd->add_subcommand("list", "List reservations with their owner and whether its netns still exists");
    common(l);
    l->add_option("-o,--output", o->format, "text or json")->check(CLI::IsMember({"text", "json"}))->capture_default_str();
    l->footer("Example:\n  topocni ipam list --network sriov-net\n  topocni ipam list --network sriov-net -o json");
    l->callback([o, &status] { status = list(*o); });
    auto* r = cmd->add_subcommand("release", "Release the reservations of one owner");
    common(r);
    r->add_option("--ip", o->ip, "release the owner of this address");
    r->add_option("--container-id", o->container_id, "owner's container ID, or a prefix of one only");
    r->add_option("--ifname", o->ifname, "owner's interface name");
    r->footer("Examples:\n  topocni ipam release --network sriov-net --ip 10.56.217.7\n"
              "  topocni ipam release --network sriov-net --container-id 3f2a... --ifname net1");
    r->callback([o, &status] { status = release(*o); });
    auto* g = cmd->add_subcommand("gc", "Release reservations whose owner's netns is provably gone");
    common(g);
    g->add_flag("--dry-run", o->dry_run, "only print what would be released");
    g->footer("Example:\n  topocni ipam gc --network sriov-net --dry-run");
    g->callback([o, &status] { status = gc(*o); });
}

}  // namespace cni::cli
