// `topocni collect`: the node-local garbage collection that Multus never triggers. Multus
// sends no CNI GC to a NAD's plugin, and a pod whose runtime lost it (a crashed node, a
// runtime restarted at the wrong moment) never gets its DEL: its addresses, links,
// records and VFs would stay forever. Every attachment record keeps the config ADD ran
// with; an attachment whose pod netns path no longer exists is provably gone (no process
// can enter it again), so collect runs a real DEL for it with that config, exactly as the
// runtime would have: addresses released, links removed, the VF restored to the node.
#include <CLI/CLI.hpp>

#include <dirent.h>
#include <sys/stat.h>

#include <cerrno>

#include <cstdio>
#include <cstdlib>
#include <memory>

#include "cni/attach/attachment.h"
#include "cni/cli/cli.h"
#include "cni/error.h"
#include "cni/pod_netns.h"
#include "cni/records.h"
#include "cni/verbs/verbs.h"
#include "conf/netconf.h"

namespace cni::cli {

namespace {

struct CollectOptions {
    std::string state_dir = "/var/lib/cni/topocni";
    std::string cni_path = kDefaultCniPath;
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
    // The ADD's own CNI_PATH and CNI_ARGS when the record has them (runtimes differ:
    // /opt/cni/bin, /var/lib/cni/bin, /usr/libexec/cni...).
    const std::string& path = r.cni_path.empty() ? o.cni_path : r.cni_path;
    ::setenv("CNI_PATH", path.c_str(), 1);
    if (r.cni_args.empty()) ::unsetenv("CNI_ARGS");
    else ::setenv("CNI_ARGS", r.cni_args.c_str(), 1);
    for (size_t pos = 0; pos <= path.size();) {
        size_t end = path.find(':', pos);
        std::string dir = path.substr(pos, end == std::string::npos ? std::string::npos : end - pos);
        if (!dir.empty() && dir[0] == '/') env.path.push_back(dir);
        if (end == std::string::npos) break;
        pos = end + 1;
    }
    return env;
}

/// Why this process cannot judge netns paths as the runtime that gave them, or "".
/// "Gone" must mean gone on the node: in a container without the node's PID namespace
/// every /proc/<pid>/ns/net path looks missing.
std::string not_on_the_node() {
    constexpr ino_t kInitialPidNs = 0xEFFFFFFCU;   // PROC_PID_INIT_INO: the kernel's own
    struct stat self_pid;
    if (::stat("/proc/self/ns/pid", &self_pid) != 0 || self_pid.st_ino != kInitialPidNs)
        return "this process is not in the node's PID namespace";
    return "";
}

enum class Owner { Alive, Gone, Unknown };

/// Gone only when the path does not exist while its directory does. A path that exists
/// but is no namespace (a bind mount that did not propagate into this mount namespace),
/// or whose directory is not there at all (not mounted here), proves nothing.
Owner owner_of(const Record& r) {
    if (netns_exists(r.netns)) return Owner::Alive;
    return netns_gone(r.netns) ? Owner::Gone : Owner::Unknown;
}

int collect(const CollectOptions& o) {
    if (auto why = not_on_the_node(); !why.empty()) {
        std::fprintf(stderr,
                     "topocni collect: %s, so a pod netns path that looks gone may not be: refusing to delete "
                     "anything. Run it on the node (hostPID, then nsenter -t 1 -m; see examples/daemonset.yaml)\n",
                     why.c_str());
        return 2;
    }
    int collected = 0, failed = 0, kept = 0;
    for (auto& net : networks(o.state_dir)) {
        for (auto& r : list_records(o.state_dir, net)) {
            std::string who = net + " " + r.container_id + "/" + r.ifname;
            Owner owner = owner_of(r);
            if (owner == Owner::Unknown)
                std::printf("kept %s: cannot tell whether netns '%s' is gone (no namespace, or its directory "
                            "not mounted, in this mount namespace)\n",
                            who.c_str(), r.netns.c_str());
            if (owner != Owner::Gone) {
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
                auto net = read_network(r.config.dump(), {}, conf::Purpose::Teardown);
                // The record lives under this stateDir, whatever the config said.
                net.conf.state_dir = o.state_dir;
                cmd_del(del_env(r, o), net.conf, *net.kind);
                std::printf("deleted %s (netns %s is gone)\n", who.c_str(), r.netns.c_str());
                ++collected;
            } catch (const base::Error& e) {
                std::fprintf(stderr, "topocni collect: %s: code %d: %s\n", who.c_str(), code_of(e), e.what());
                ++failed;
            } catch (const std::exception& e) {   // one bad record must not stop the others
                std::fprintf(stderr, "topocni collect: %s: %s\n", who.c_str(), e.what());
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
