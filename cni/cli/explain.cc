// `topocni explain`: does this node satisfy a NAD's placement constraints? Prints every
// constraint with pass/fail and its evidence; changes nothing.
#include <CLI/CLI.hpp>

#include <net/if.h>
#include <unistd.h>

#include <iostream>
#include <optional>

#include "cni/attach/attachment.h"
#include "cni/cli/cli.h"
#include "cni/error.h"
#include "placement/placement.h"
#include "base/files.h"
#include "cni/cli/config_file.h"

namespace cni {

namespace {

using json = nlohmann::json;

/// The CNI config inside `o.config` (a config, a conflist's topocni plugin, or a NAD's
/// spec.config), read as the plugin reads it, with what the options put in.
std::string explain_config_text(const ExplainOptions& o) {
    auto file = cli::read_config_file(o.config);
    if (file.plugins.empty()) return file.text;   // read_network says why, as the plugin would
    json conf = file.plugins[file.is_list ? cli::topocni_entry(file) : 0];
    // A NAD's VF is chosen by the device plugin and injected by Multus at ADD.
    if (!o.device_id.empty()) conf["deviceID"] = o.device_id;
    if (!o.node_name.empty()) conf["nodeName"] = o.node_name;
    return conf.dump();
}

/// The facts are worded for the plugin, whose input is CNI_ARGS; explain's operator gives
/// the pod by flag.
void reword_for_the_cli(placement::Verdict& v, const ExplainOptions& o) {
    const std::string from = "no K8S_POD_UID in CNI_ARGS";
    if (auto at = v.evidence.find(from); at != std::string::npos) v.evidence.replace(at, from.size(), "no --pod-uid given");
    if (v.constraint == "nodeSelector" && !v.pass && o.node_labels.empty() &&
        v.evidence.find("cannot evaluate") != std::string::npos)
        v.evidence += " (to try labels by hand: --node-labels FILE)";
}

/// ADD refuses a master or PCI device that is not on the node (code 7) before any
/// constraint is judged: say that first, rather than constraints judged on nothing.
std::optional<placement::Verdict> missing_device(const conf::NetConf& c, const placement::Subject& s) {
    placement::Device d;
    try {
        d = s.device(c);
    } catch (const base::Error& e) {
        return placement::Verdict{"device", false, false, e.what()};
    }
    if (d.kind == placement::Device::Kind::Master && ::if_nametoindex(d.name.c_str()) == 0)
        return placement::Verdict{"master", false, false, "interface '" + d.name + "' not found on the node (ADD refuses it, code 7)"};
    if (d.kind == placement::Device::Kind::Pci && ::access((c.sysfs_root + "/bus/pci/devices/" + d.name).c_str(), F_OK) != 0)
        return placement::Verdict{"deviceID", false, false, "PCI device " + d.name + " not found in " + c.sysfs_root +
                                                     "/bus/pci/devices (ADD refuses it, code 7)"};
    return std::nullopt;
}

const char* mark(const placement::Verdict& v) { return !v.pass ? "FAIL" : v.warning ? "WARN" : "PASS"; }

std::string lower(std::string s) {
    for (auto& ch : s) ch = static_cast<char>(std::tolower(static_cast<unsigned char>(ch)));
    return s;
}

}  // namespace

int explain(const ExplainOptions& o) {
    if (!o.facts.empty()) {
        std::string text;
        try {
            text = explain_config_text(o);
        } catch (const base::Error& e) {
            std::cerr << "topocni explain: " << e.what() << " (code " << code_of(e) << ")\n";
            return 2;
        }
        return explain_facts_main(text, o.config, o.facts, o.pod_uid, o.node_labels);
    }
    std::vector<placement::Verdict> verdicts;
    conf::NetConf c;
    try {
        auto net = read_network(explain_config_text(o), {});
        c = net.conf;
        // Every constraint gets a line: one whose facts cannot be read (a missing master)
        // fails with the reason instead of cutting the report short.
        const placement::Subject& subject = *net.kind;
        if (c.placement || c.bandwidth)
            if (auto v = missing_device(c, subject)) verdicts.push_back(*v);
        auto rest = placement::evaluate_placement(c, subject, {o.pod_uid, "", "", nullptr}, {o.node_labels, false, true, code_of});
        verdicts.insert(verdicts.end(), rest.begin(), rest.end());
    } catch (const base::Error& e) {
        std::cerr << "topocni explain: " << e.what() << " (code " << code_of(e) << ")"
                  << (e.details.empty() ? "" : ": " + e.details) << "\n";
        return 2;
    }
    for (auto& v : verdicts) reword_for_the_cli(v, o);
    std::string node;
    try {
        node = c.placement ? placement::node_name(*c.placement) : "";
    } catch (const base::Error&) {
        node = "?";
    }
    size_t failed = 0;
    for (auto& v : verdicts) failed += v.pass ? 0 : 1;
    if (o.json) {
        json out = {{"network", c.name}, {"config", o.config}, {"node", node}, {"podUID", o.pod_uid},
                    {"constraints", json::array()}, {"failed", failed}, {"met", failed == 0}};
        for (auto& v : verdicts)
            out["constraints"].push_back({{"constraint", v.constraint}, {"result", lower(mark(v))}, {"evidence", v.evidence}});
        std::cout << out.dump(2, ' ', false, json::error_handler_t::replace) << "\n";
        return failed ? 1 : 0;
    }
    std::cout << "network '" << c.name << "' from '" << o.config << "'";
    if (!node.empty()) std::cout << ", node '" << node << "'";
    std::cout << ", pod " << (o.pod_uid.empty() ? std::string("(no --pod-uid)") : o.pod_uid) << "\n";
    if (verdicts.empty()) {
        std::cout << "no placement constraints (nodeSelector, topology)\n";
        return 0;
    }
    for (auto& v : verdicts) std::cout << mark(v) << "  " << v.constraint << ": " << v.evidence << "\n";
    const char* noun = verdicts.size() == 1 ? " constraint" : " constraints";
    if (failed) std::cout << failed << " of " << verdicts.size() << noun << " not met\n";
    else if (verdicts.size() == 1) std::cout << "the constraint is met\n";
    else std::cout << "all " << verdicts.size() << noun << " met\n";
    return failed ? 1 : 0;
}

int explain_main(const std::string& config_path, const std::string& pod_uid, const std::string& node_labels_file) {
    ExplainOptions o;
    o.config = config_path;
    o.pod_uid = pod_uid;
    o.node_labels = node_labels_file;
    return explain(o);
}

}  // namespace cni

namespace cni::cli {

void add_explain(CLI::App& app, int& status) {
    auto o = std::make_shared<ExplainOptions>();
    auto* cmd = app.add_subcommand("explain", "Explain whether this node satisfies a network's placement constraints");
    cmd->add_option("--config", o->config, "CNI config, conflist, or NetworkAttachmentDefinition (JSON or YAML)");
    cmd->add_option("--pod-uid", o->pod_uid, "pod UID, to check NUMA alignment with its exclusive CPUs");
    cmd->add_option("--node-labels", o->node_labels, "labels file to use instead of nodeLabelsFile and the API");
    cmd->add_option("--facts", o->facts,
                    "judge on this facts document (node-report --format facts, a Node object carrying topocni.io/facts, "
                    "or - for stdin) instead of this node read live");
    cmd->add_option("--device-id", o->device_id, "the VF (PCI address) Multus would inject as deviceID");
    cmd->add_option("--node-name", o->node_name, "the node whose labels the API gives (as nodeName)");
    cmd->add_option("-o,--output", o->format, "text or json")->check(CLI::IsMember({"text", "json"}))->capture_default_str();
    cmd->footer("Examples:\n"
                "  topocni explain --config sriov-nad.yaml --device-id 0000:af:06.0\n"
                "  topocni explain --config sriov-nad.yaml --pod-uid 6f1c2a0e-... -o json\n"
                "  topocni explain --config net.conf --node-labels /etc/kubernetes/node-feature-discovery/features.d/x\n"
                "Exit status: 0 all constraints pass, 1 one fails, 2 the config cannot be read.");
    // --pod: the pod's last refusal on this node (explain_pod.cc), instead of a config.
    cmd->add_option("--pod", o->pod, "NAMESPACE/NAME: show the pod's last placement refusal on this node");
    cmd->add_option("--state-dir", o->state_dir, "--pod: topocni stateDir (the refusal records)")->capture_default_str();
    cmd->callback([o, &status] {
        if (!o->pod.empty()) return void(status = explain_pod_main(o->pod, o->state_dir));
        if (o->config.empty()) throw CLI::RequiredError("--config (or --pod)");
        o->json = o->format == "json";
        status = explain(*o);
    });
}

}  // namespace cni::cli
