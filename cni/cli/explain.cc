// `topocni explain`: does this node satisfy a NAD's placement constraints? Prints every
// constraint with pass/fail and its evidence; changes nothing.
#include <CLI/CLI.hpp>

#include "cni/cli/cli.h"
#include "cni/placement/placement.h"

namespace cni::cli {

void add_explain(CLI::App& app, int& status) {
    struct Options { std::string config, pod_uid, node_labels; };
    auto o = std::make_shared<Options>();
    auto* cmd = app.add_subcommand("explain", "Explain whether this node satisfies a network's placement constraints");
    cmd->add_option("--config", o->config, "CNI config, conflist, or NetworkAttachmentDefinition (JSON or YAML)")
        ->required();
    cmd->add_option("--pod-uid", o->pod_uid, "pod UID, to check NUMA alignment with its exclusive CPUs");
    cmd->add_option("--node-labels", o->node_labels, "labels file to use instead of nodeLabelsFile and the API");
    cmd->footer("Examples:\n"
                "  topocni explain --config sriov-nad.yaml\n"
                "  topocni explain --config sriov-nad.yaml --pod-uid 6f1c2a0e-... \n"
                "  topocni explain --config net.conf --node-labels /etc/kubernetes/node-feature-discovery/features.d/x\n"
                "Exit status: 0 all constraints pass, 1 one fails, 2 the config cannot be read.");
    cmd->callback([o, &status] { status = explain_main(o->config, o->pod_uid, o->node_labels); });
}

}  // namespace cni::cli
