// The cluster side's commands: the node agents that feed the scheduler side (node-report,
// dra-driver, refusal-agent), its servers (scheduler-extender, admission-webhook) and
// `api`, for troubleshooting the API as they see it. The same binary runs them; bin/
// registers them beside the CNI operator commands (cni/cli/). Each lives in its own
// file and registers itself on the app.
#pragma once
#include <functional>
#include <string>

namespace CLI { class App; }

namespace cluster::cmd {

/// The Node an agent runs for: `flag` (--node), else NODE_NAME (the DaemonSet's downward
/// API), else the host name as kubelet takes it.
std::string node_of(const std::string& flag);

// Each returns nothing; the subcommand's callback sets the exit status through `status`.
void add_node_report(CLI::App& app, int& status);
void add_api(CLI::App& app, int& status);
void add_scheduler_extender(CLI::App& app, int& status);
void add_admission_webhook(CLI::App& app, int& status);
void add_refusal_agent(CLI::App& app, int& status);
struct PublishOptions;
/// `dra-driver`'s kubelet plugin (kubelet/plugin.h), which only the topocni-dra binary links.
struct KubeletPluginFlags {
    bool enabled = true;
    std::string registration_dir = "/var/lib/kubelet/plugins_registry";
    std::string plugin_dir = "/var/lib/kubelet/plugins/topocni.io";
};
/// How a binary runs `dra-driver`: topocni-dra serves kubelet beside the publisher; topocni
/// passes none and, unless --no-kubelet-plugin, execs topocni-dra beside itself.
using DraDriverRun = std::function<int(const PublishOptions&, const KubeletPluginFlags&)>;
void add_dra_driver(CLI::App& app, int& status, DraDriverRun run = {});
void add_dra_template(CLI::App& app, int& status);

}  // namespace cluster::cmd
