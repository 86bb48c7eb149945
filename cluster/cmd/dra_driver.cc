// `topocni dra-driver`: the node agent of Dynamic Resource Allocation. It keeps this node's
// ResourceSlices for driver topocni.io (cluster/dra_slices.h: VFs, shared links, address
// pools, from the same facts document ADD judges on) fresh and quiet, with the publisher's
// loop (publish.h): a change ADD, DEL or GC makes is in the slices within a second or two,
// an idle node sends nothing, the API down is retried with back-off, SIGTERM ends it with 0.
#include <CLI/CLI.hpp>

#include "cluster/cmd/commands.h"
#include "cluster/cmd/publish.h"
#include "netns/sysfs.h"

namespace cluster::cmd {

namespace {

struct Options {
    PublishOptions pub;
    std::string node;
    std::vector<std::string> resource_names;   ///< PF=NAME
};

}  // namespace

void add_dra_driver(CLI::App& app, int& status) {
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
    cmd->footer("Example:\n  topocni dra-driver --node \"$NODE_NAME\"");
    cmd->callback([o, kc, &status] {
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
        status = publish_until_signal(o->pub);
    });
}

}  // namespace cluster::cmd
