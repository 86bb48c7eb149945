// `topocni collect`: the node-local garbage collection that Multus never triggers. Multus
// sends no CNI GC to a NAD's plugin, and a pod whose runtime lost it (a crashed node, a
// runtime restarted at the wrong moment) never gets its DEL: its addresses, links,
// records and VFs would stay forever. Every attachment record keeps the config ADD ran
// with; an attachment whose pod netns path no longer exists is provably gone (no process
// can enter it again), so collect runs a real DEL for it with that config, exactly as the
// runtime would have: addresses released, links removed, the VF restored to the node.
#include <CLI/CLI.hpp>

#include <dirent.h>

#include <cstdio>
#include <cstdlib>
#include <memory>

#include "cni/cli.h"
#include "cni/error.h"
#include "cni/records.h"
#include "cni/verbs.h"
#include "conf/netconf.h"

namespace cni::cli {

namespace {

struct CollectOptions {
    std::string state_dir = "/var/lib/cni/topocni";
    std::string cni_path = "/opt/cni/bin";
    bool dry_run = false;
};

std::vector<std::string> networks(const std::string& state_dir) {
    std::vector<std::string> out;
    std::unique_ptr<DIR, int (*)(DIR*)> d(::opendir((state_dir + "/attachments").c_str()), ::closedir);
    if (!d) return out;
    while (auto* e = ::readdir(d.get()))
        if (e->d_name[0] != '.') out.emplace_back(e->d_name);
    return out;
}

Env del_env(const Record& r, const CollectOptions& o) {
    Env env;
    env.verb = Verb::Del;
    env.command = "DEL";
    env.container_id = r.container_id;
    env.ifname = r.ifname;
    env.netns = r.netns;   // gone: DEL then finds the VF by PCI address, the veth by its host end
    // Delegated plugins (IPAM, meta-plugin mode) are run with this process's environment.
    ::setenv("CNI_COMMAND", "DEL", 1);
    ::setenv("CNI_CONTAINERID", r.container_id.c_str(), 1);
    ::setenv("CNI_NETNS", r.netns.c_str(), 1);
    ::setenv("CNI_IFNAME", r.ifname.c_str(), 1);
    ::setenv("CNI_PATH", o.cni_path.c_str(), 1);
    ::unsetenv("CNI_ARGS");
    for (size_t pos = 0; pos <= o.cni_path.size();) {
        size_t end = o.cni_path.find(':', pos);
        std::string dir = o.cni_path.substr(pos, end == std::string::npos ? std::string::npos : end - pos);
        if (!dir.empty() && dir[0] == '/') env.path.push_back(dir);
        if (end == std::string::npos) break;
        pos = end + 1;
    }
    return env;
}

int collect(const CollectOptions& o) {
    int collected = 0, failed = 0, kept = 0;
    for (auto& net : networks(o.state_dir)) {
        for (auto& r : list_records(o.state_dir, net)) {
            std::string who = net + " " + r.container_id + "/" + r.ifname;
            if (netns_exists(r.netns)) {
                ++kept;
                continue;
            }
            if (r.config.is_null()) {
                std::printf("skipped %s: its record has no config (written by an older topocni); DEL it by hand\n",
                            who.c_str());
                continue;
            }
            if (o.dry_run) {
                std::printf("would delete %s (netns %s is gone)\n", who.c_str(), r.netns.c_str());
                ++collected;
                continue;
            }
            try {
                auto c = conf::parse(r.config.dump(), {}, conf::Purpose::Teardown);
                // The record lives under this stateDir, whatever the config said.
                c.state_dir = o.state_dir;
                cmd_del(del_env(r, o), c);
                std::printf("deleted %s (netns %s is gone)\n", who.c_str(), r.netns.c_str());
                ++collected;
            } catch (const Error& e) {
                std::fprintf(stderr, "topocni collect: %s: code %d: %s\n", who.c_str(), e.code, e.what());
                ++failed;
            }
        }
    }
    std::printf("%d attachment(s) %s, %d still in use, %d failed\n", collected, o.dry_run ? "collectable" : "collected",
                kept, failed);
    return failed ? 1 : 0;
}

}  // namespace

void add_collect(CLI::App& app, int& status) {
    auto o = std::make_shared<CollectOptions>();
    auto* cmd = app.add_subcommand("collect", "DEL every attachment on this node whose pod netns is gone (all kinds)");
    cmd->add_option("--state-dir", o->state_dir, "topocni stateDir (attachment records)")->capture_default_str();
    cmd->add_option("--cni-path", o->cni_path, "CNI_PATH for IPAM and delegate plugins")->capture_default_str();
    cmd->add_flag("--dry-run", o->dry_run, "only print what would be deleted");
    cmd->footer("Run by examples/daemonset.yaml every few minutes, since Multus never sends GC.\n"
                "Example:\n  topocni collect --dry-run");
    cmd->callback([o, &status] { status = collect(*o); });
}

}  // namespace cni::cli
