// The CNI operator commands: the same binary run with arguments instead of CNI_*
// variables, to run, check and explain the plugin on this node (exec, validate, explain,
// ipam, collect, version). Each lives in its own file and registers itself on the app;
// bin/main.cc holds the table, beside the cluster side's commands (cluster/cmd/).
#pragma once
#include <string>

namespace CLI { class App; }

namespace cni::cli {

/// CNI_PATH when the environment has none, for exec and collect alike: where runtimes
/// (/opt/cni/bin) and Debian's plugins (/usr/lib/cni) are.
inline constexpr const char* kDefaultCniPath = "/opt/cni/bin:/usr/lib/cni";

/// "topocni <version>" and the CNI versions it speaks (`version`, `--version`).
std::string version_text();

// Registration functions, one per file (exec.cc, ipam.cc, node_report.cc...).
// Each returns nothing; the subcommand's callback sets the exit status through `status`.
void add_version(CLI::App& app, int& status);
void add_exec(CLI::App& app, int& status);
void add_ipam(CLI::App& app, int& status);
void add_explain(CLI::App& app, int& status);
void add_collect(CLI::App& app, int& status);
void add_validate(CLI::App& app, int& status);

}  // namespace cni::cli

namespace cni {

/// `topocni explain`: prints every constraint of the config in `config_path` (a CNI
/// config, a conflist, or a NetworkAttachmentDefinition in JSON or YAML whose spec.config
/// holds one) with PASS/FAIL/WARN and its evidence. `pod_uid` and `node_labels_file` may
/// be empty. Changes nothing. Returns 0 when all pass, 1 when one fails, 2 when the
/// config cannot be read.
int explain_main(const std::string& config_path, const std::string& pod_uid, const std::string& node_labels_file);
/// `topocni explain --pod NS/NAME`: the pod's last refusal on this node, from its refusal
/// record under `state_dir` (explain_pod.cc). 1 when there is one, 0 when none, 2 when
/// NS/NAME is no pod name or the record cannot be read.
int explain_pod_main(const std::string& pod, const std::string& state_dir);
/// explain on a facts document (node-report --format facts, or a Node object carrying it).
int explain_facts_main(const std::string& config_text, const std::string& config_path, const std::string& facts_path,
                       const std::string& pod_uid, const std::string& node_labels_file);

struct ExplainOptions {
    std::string config, pod_uid, node_labels;
    std::string device_id;   ///< non-empty: put in as deviceID, as Multus does at ADD
    std::string node_name;   ///< non-empty: put in as nodeName
    std::string facts;       ///< non-empty: judge on this published facts document (explain_facts_main)
    std::string pod;         ///< --pod NS/NAME: the pod's last refusal instead (explain_pod_main)
    std::string state_dir = "/var/lib/cni/topocni";
    bool json = false;       ///< one JSON object instead of lines
    std::string format = "text";
};
/// explain_main with every option of `topocni explain`.
int explain(const ExplainOptions& o);

}  // namespace cni
