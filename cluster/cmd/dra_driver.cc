// `topocni dra-driver`: the node agent of Dynamic Resource Allocation. It keeps this node's
// ResourceSlices for driver topocni.io (cluster/dra_slices.h: VFs, shared links, address
// pools, from the same facts document ADD judges on) fresh and quiet, with the publisher's
// loop (publish.h): a change ADD, DEL or GC makes is in the slices within a second or two,
// an idle node sends nothing, the API down is retried with back-off, SIGTERM ends it with 0.
//
// Beside it, kubelet's DRA plugin (kubelet/plugin.h) prepares the claims the scheduler
// allocated from those slices. It needs gRPC, which only the topocni-dra binary links: in
// topocni, this command execs topocni-dra from the same directory with the same arguments,
// unless --no-kubelet-plugin asks for the publisher alone.
#include <CLI/CLI.hpp>

#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "cluster/cmd/commands.h"
#include "cluster/cmd/publish.h"
#include "base/error.h"
#include "base/files.h"
#include "netns/sysfs.h"

namespace cluster::cmd {

namespace {

struct Options {
    PublishOptions pub;
    KubeletPluginFlags kubelet;
    bool no_kubelet_plugin = false;
    std::string node;
    std::vector<std::string> resource_names;   ///< PF=NAME
};

/// topocni's own run: the publisher alone, or topocni-dra (same directory, same arguments).
int run_here_or_exec(const PublishOptions& pub, const KubeletPluginFlags& k) {
    if (!k.enabled) return publish_until_signal(pub);
    char self[4096];
    ssize_t n = ::readlink("/proc/self/exe", self, sizeof self - 1);
    if (n <= 0) throw base::Error("cannot find topocni's own path (/proc/self/exe): " + std::string(std::strerror(errno)));
    self[n] = '\0';
    std::string dir(self);
    std::string target = dir.substr(0, dir.rfind('/') + 1) + "topocni-dra";
    // Our arguments as given, from the kernel's copy.
    auto cmdline = base::fs::read_file("/proc/self/cmdline");
    std::vector<std::string> args;
    if (cmdline)
        for (size_t at = 0; at < cmdline->size();) {
            size_t end = cmdline->find('\0', at);
            if (end == std::string::npos) end = cmdline->size();
            args.push_back(cmdline->substr(at, end - at));
            at = end + 1;
        }
    if (args.empty()) args.push_back("topocni");
    args[0] = target;
    std::vector<char*> argv;
    for (auto& a : args) argv.push_back(a.data());
    argv.push_back(nullptr);
    ::execv(target.c_str(), argv.data());
    std::fprintf(stderr, "topocni: %s not found beside topocni (%s): install the whole package, or pass "
                         "--no-kubelet-plugin to run the ResourceSlice publisher alone\n",
                 target.c_str(), std::strerror(errno));
    return 1;
}

}  // namespace

void add_dra_driver(CLI::App& app, int& status, DraDriverRun run) {
    auto o = std::make_shared<Options>();
    o->pub.annotation = false;
    o->pub.capacities = false;
    o->pub.slices = true;
    auto* cmd = app.add_subcommand("dra-driver", "Keep this node's ResourceSlices (Dynamic Resource Allocation) in the API");
    cmd->add_option("--node", o->node, "the Node's name (default: $NODE_NAME, else the host name lower-cased)");
    auto* kc = cmd->add_option("--kubeconfig", o->pub.kubeconfig,
                               "default: the pod's service account, else topocni's, else Multus's kubeconfig");
    cmd->add_option("--driver-name", o->pub.driver, "the DRA driver name the slices are published for")->capture_default_str();
    cmd->add_option("--sysfs-root", o->pub.facts.sysfs_root, "sysfs mount point")->capture_default_str();
    cmd->add_option("--state-dir", o->pub.facts.state_dir, "topocni stateDir, shared with ADD (VFs in use, ledgers)")
        ->capture_default_str();
    cmd->add_option("--kubelet-root-dir", o->pub.facts.kubelet_root_dir,
                    "where kubelet's device-plugins checkpoint is (a PF's resourceName)")->capture_default_str();
    cmd->add_option("--resource-name", o->resource_names,
                    "PF=NAME: the k8s.cni.cncf.io/resourceName of a PF's VFs (PF: PCI address or netdev); repeatable");
    cmd->add_option("--bandwidth-overcommit", o->pub.devices.bandwidth_overcommit,
                    "a link's bandwidth offered: its speed x this, until an ADD records its capacity")
        ->capture_default_str()->check(CLI::Range(0.01, 1000.0));
    cmd->add_option("--max-attachments-per-master", o->pub.devices.max_attachments_per_master,
                    "the attachments a macvlan master offers (default 1024)")->check(CLI::Range(1LL, 1000000LL));
    cmd->add_option("--interval", o->pub.interval, "read the node at least every this many seconds")
        ->capture_default_str()->check(CLI::Range(0.1, 86400.0));
    cmd->add_option("--api-timeout", o->pub.api_timeout, "seconds per API request")
        ->capture_default_str()->check(CLI::Range(0.1, 600.0));
    cmd->add_flag("--once", o->pub.once, "write the slices if needed, then exit (0: the API has them)");
    cmd->add_option("--plugin-registration-dir", o->kubelet.registration_dir,
                    "kubelet's plugin registry: topocni.io-reg.sock is made here")->capture_default_str();
    cmd->add_option("--plugin-dir", o->kubelet.plugin_dir, "where dra.sock, kubelet's DRA plugin socket, is made")
        ->capture_default_str();
    cmd->add_flag("--no-kubelet-plugin", o->no_kubelet_plugin, std::string("publish the ResourceSlices only: no kubelet plugin "
                                    "(kubelet then cannot prepare claims of topocni.io)"));
    cmd->footer("Example:\n  topocni dra-driver --node \"$NODE_NAME\"\n  topocni dra-driver --no-kubelet-plugin --once");
    if (!run) run = run_here_or_exec;
    cmd->callback([o, kc, run, &status] {
        o->pub.facts.node = node_of(o->node);
        for (const auto& rn : o->resource_names) {
            auto eq = rn.find('=');
            if (eq == std::string::npos || eq == 0 || eq + 1 == rn.size())
                throw CLI::ValidationError("--resource-name", "'" + rn + "' is not PF=NAME");
            o->pub.devices.resource_names[rn.substr(0, eq)] = rn.substr(eq + 1);
        }
        netns::sysfs::Tree tree(o->pub.facts.sysfs_root);
        o->pub.devices.kernel_driver = [tree](const std::string& pci) { return tree.driver(pci); };
        o->pub.devices.pcie_root = [tree](const std::string& pci) { return tree.pcie_root(pci); };
        o->pub.kubeconfig_set = kc->count() > 0;
        o->kubelet.enabled = !o->no_kubelet_plugin && !o->pub.once;
        status = run(o->pub, o->kubelet);
    });
}

}  // namespace cluster::cmd
