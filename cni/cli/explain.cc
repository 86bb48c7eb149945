// `topocni explain`: does this node satisfy a NAD's placement constraints? Prints every
// constraint with pass/fail and its evidence; changes nothing.
#include <CLI/CLI.hpp>

#include <iostream>

#include "cni/attach/attachment.h"
#include "base/files.h"
#include "cni/cli/cli.h"
#include "cni/error.h"
#include "cni/placement/placement.h"
#include "kube/yaml.h"

namespace cni {

namespace {

using json = nlohmann::json;

/// The CNI config inside `path`: a config, a conflist (its topocni plugin), or a NAD
/// (JSON or YAML) whose spec.config holds either.
std::string explain_config_text(const std::string& path) {
    auto text = base::fs::read_file(path);
    if (!text) throw Error(kInvalidConfig, "'" + path + "' does not exist");
    json j = kube::parse_yaml(*text, "'" + path + "'");
    if (!j.is_object())
        throw Error(kInvalidConfig, "'" + path + "' is not a CNI config or a NetworkAttachmentDefinition");
    json conf = j;
    if (auto spec = j.find("spec"); spec != j.end()) {
        auto cfg = spec->is_object() ? spec->find("config") : spec->end();
        if (!spec->is_object() || cfg == spec->end())
            throw Error(kInvalidConfig, "'" + path + "': spec.config: missing (not a NetworkAttachmentDefinition?)");
        conf = cfg->is_string() ? json::parse(cfg->get<std::string>(), nullptr, false) : *cfg;
        if (!conf.is_object()) throw Error(kInvalidConfig, "'" + path + "': spec.config: not a JSON object");
    }
    if (auto plugins = conf.find("plugins"); plugins != conf.end() && plugins->is_array()) {
        for (auto& p : *plugins)
            if (p.is_object() && p.value("type", "") == "topocni") {
                json one = p;
                if (!one.contains("cniVersion") && conf.contains("cniVersion")) one["cniVersion"] = conf["cniVersion"];
                if (conf.contains("name")) one["name"] = conf["name"];
                return one.dump();
            }
        throw Error(kInvalidConfig, "'" + path + "': the plugin list has no plugin of type topocni");
    }
    return conf.dump();
}

}  // namespace

int explain_main(const std::string& config_path, const std::string& pod_uid, const std::string& node_labels_file,
                 const std::string& facts_path) {
    if (!facts_path.empty()) {
        std::string text;
        try {
            text = explain_config_text(config_path);
        } catch (const base::Error& e) {
            std::cerr << "topocni explain: " << e.what() << " (code " << code_of(e) << ")\n";
            return 2;
        }
        return explain_facts_main(text, config_path, facts_path, pod_uid, node_labels_file);
    }
    std::vector<Verdict> verdicts;
    conf::NetConf c;
    try {
        auto net = read_network(explain_config_text(config_path), {});
        c = net.conf;
        verdicts = evaluate_placement(c, placement_subject(c, *net.kind), {pod_uid, "", "", nullptr},
                                      {node_labels_file, false, true});
    } catch (const base::Error& e) {
        std::cerr << "topocni explain: " << e.what() << " (code " << code_of(e) << ")"
                  << (e.details.empty() ? "" : ": " + e.details) << "\n";
        return 2;
    }
    std::string node;
    try {
        node = c.placement ? node_name(*c.placement) : "";
    } catch (const base::Error&) {
        node = "?";
    }
    std::cout << "network '" << c.name << "' from '" << config_path << "'";
    if (!node.empty()) std::cout << ", node '" << node << "'";
    std::cout << ", pod " << (pod_uid.empty() ? std::string("(no --pod-uid)") : pod_uid) << "\n";
    if (verdicts.empty()) {
        std::cout << "no placement constraints (nodeSelector, topology)\n";
        return 0;
    }
    size_t failed = 0;
    for (auto& v : verdicts) {
        const char* mark = !v.pass ? "FAIL" : v.warning ? "WARN" : "PASS";
        if (!v.pass) ++failed;
        std::cout << mark << "  " << v.constraint << ": " << v.evidence << "\n";
    }
    if (failed) std::cout << failed << " of " << verdicts.size() << " constraints not met\n";
    else std::cout << "all " << verdicts.size() << " constraints met\n";
    return failed ? 1 : 0;
}


}  // namespace cni

namespace cni::cli {

void add_explain(CLI::App& app, int& status) {
    struct Options { std::string config, pod_uid, node_labels, facts, pod, state_dir = "/var/lib/cni/topocni"; };
    auto o = std::make_shared<Options>();
    auto* cmd = app.add_subcommand("explain", "Explain whether this node satisfies a network's placement constraints");
    cmd->add_option("--config", o->config, "CNI config, conflist, or NetworkAttachmentDefinition (JSON or YAML)");
    cmd->add_option("--pod-uid", o->pod_uid, "pod UID, to check NUMA alignment with its exclusive CPUs");
    cmd->add_option("--node-labels", o->node_labels, "labels file to use instead of nodeLabelsFile and the API");
    cmd->add_option("--facts", o->facts,
                    "judge on this facts document (node-report --format facts, a Node object carrying topocni.io/facts, "
                    "or - for stdin) instead of this node read live");
    cmd->footer("Examples:\n"
                "  topocni explain --config sriov-nad.yaml\n"
                "  topocni explain --config sriov-nad.yaml --pod-uid 6f1c2a0e-... \n"
                "  topocni explain --config net.conf --node-labels /etc/kubernetes/node-feature-discovery/features.d/x\n"
                "Exit status: 0 all constraints pass, 1 one fails, 2 the config cannot be read.");
    // --pod: the pod's last refusal on this node (explain_pod.cc), instead of a config.
    cmd->add_option("--pod", o->pod, "NAMESPACE/NAME: show the pod's last placement refusal on this node");
    cmd->add_option("--state-dir", o->state_dir, "--pod: topocni stateDir (the refusal records)")->capture_default_str();
    cmd->callback([o, &status] {
        if (!o->pod.empty()) return void(status = explain_pod_main(o->pod, o->state_dir));
        if (o->config.empty()) throw CLI::RequiredError("--config (or --pod)");
        status = explain_main(o->config, o->pod_uid, o->node_labels, o->facts);
    });
}

}  // namespace cni::cli
