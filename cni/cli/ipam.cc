// `topocni ipam`: look at and clean up host-local reservations of one network.
#include <CLI/CLI.hpp>

#include <cstdio>

#include "cni/cli/cli.h"
#include "cni/error.h"
#include "cni/records.h"
#include "ipam/host_local.h"

namespace cni::cli {

namespace {

struct IpamOptions {
    std::string network, data_dir = "/var/lib/cni/networks", state_dir = "/var/lib/cni/topocni";
    std::string container_id, ifname, ip;
    bool dry_run = false;
};

ipam::HostLocal store(const IpamOptions& o) {
    ipam::Config c;
    c.data_dir = o.data_dir;
    return ipam::HostLocal(c, o.network);
}

/// "yes" / "no" / "unknown": whether the owner's netns still exists, from its attachment record.
std::string owner_alive(const IpamOptions& o, const ipam::Reservation& r) {
    auto rec = read_record(o.state_dir, o.network, r.container_id, r.ifname);
    if (!rec || rec->netns.empty()) return "unknown";
    if (netns_exists(rec->netns)) return "yes";
    return netns_gone(rec->netns) ? "no" : "unknown";
}

int list(const IpamOptions& o) {
    std::printf("%-40s %-20s %-16s %s\n", "ADDRESS", "CONTAINER", "IFNAME", "NETNS-EXISTS");
    for (auto& r : store(o).list())
        std::printf("%-40s %-20s %-16s %s\n", r.ip.str().c_str(), r.container_id.substr(0, 20).c_str(),
                    r.ifname.empty() ? "-" : r.ifname.c_str(), owner_alive(o, r).c_str());
    return 0;
}

int release(const IpamOptions& o) {
    auto s = store(o);
    ipam::Owner owner{o.container_id, o.ifname};
    if (!o.ip.empty()) {
        auto ip = base::IpAddr::parse(o.ip);
        if (!ip) throw Error(kInvalidConfig, "--ip: '" + o.ip + "' is not an IP address");
        bool found = false;
        for (auto& r : s.list())
            if (r.ip == *ip) { owner = {r.container_id, r.ifname}; found = true; }
        if (!found) throw Error(kInvalidConfig, "--ip: " + o.ip + " is not reserved in network '" + o.network + "'");
    } else if (o.container_id.empty()) {
        throw Error(kInvalidConfig, "give --ip, or --container-id (and --ifname)");
    }
    size_t before = s.list().size();
    s.release(owner);
    std::printf("released %zu reservation(s) of %s/%s\n", before - s.list().size(), owner.container_id.c_str(),
                owner.ifname.c_str());
    return 0;
}

int gc(const IpamOptions& o) {
    // Only owners provably gone are collected: their attachment record names a netns
    // that no longer exists. Unknown owners (no record) are kept.
    // Each gone owner is released by name: a "release all but these" would also take an
    // address an ADD reserved between the listing and the release.
    auto s = store(o);
    int collected = 0;
    for (auto& r : s.list()) {
        if (owner_alive(o, r) != "no") continue;
        std::printf("%s %s %s/%s\n", o.dry_run ? "would release" : "released", r.ip.str().c_str(),
                    r.container_id.c_str(), r.ifname.c_str());
        ++collected;
        if (o.dry_run) continue;
        s.release({r.container_id, r.ifname});
        remove_record(o.state_dir, o.network, r.container_id, r.ifname);
    }
    std::printf("%d reservation(s) %s\n", collected, o.dry_run ? "collectable" : "collected");
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
    l->footer("Example:\n  topocni ipam list --network sriov-net");
    l->callback([o, &status] { status = list(*o); });
    auto* r = cmd->add_subcommand("release", "Release the reservations of one owner");
    common(r);
    r->add_option("--ip", o->ip, "release the owner of this address");
    r->add_option("--container-id", o->container_id, "owner's container ID");
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
