// `topocni explain --facts FILE`: the same question as `explain`, answered on a published
// facts document (topocni.io/facts, or `node-report --format facts`) instead of this node
// read live: the evaluation the scheduler side runs. On the node the document came from,
// both give the same verdicts in the same words.
#include <iostream>

#include "base/files.h"
#include "cni/attach/attachment.h"
#include "cni/cli/cli.h"
#include "cni/error.h"
#include "placement/facts.h"
#include "placement/node_facts.h"
#include "placement/placement.h"

namespace cni {

namespace {

using json = nlohmann::json;

/// The document in `path`: the document itself, or a Node object carrying it as annotation.
placement::NodeFacts load_facts(const std::string& path) {
    auto text = path == "-" ? std::optional<std::string>(std::string(std::istreambuf_iterator<char>(std::cin), {}))
                            : base::fs::read_file(path);
    if (!text) throw Error(kInvalidConfig, "facts document '" + path + "' does not exist");
    json j = json::parse(*text, nullptr, false);
    if (j.is_object() && j.contains("metadata") && j["metadata"].is_object()) {   // a Node
        auto an = j["metadata"].find("annotations");
        if (an == j["metadata"].end() || !an->is_object() || !an->contains(placement::kFactsAnnotation) ||
            !(*an)[placement::kFactsAnnotation].is_string())
            throw Error(kInvalidConfig, "'" + path + "' is a Node without the annotation " + placement::kFactsAnnotation);
        j = json::parse((*an)[placement::kFactsAnnotation].get<std::string>(), nullptr, false);
    }
    if (j.is_discarded()) throw Error(kDecodingFailure, "'" + path + "' is not JSON");
    return placement::facts_from_json(j);
}

}  // namespace

int explain_facts_main(const std::string& config_text, const std::string& config_path, const std::string& facts_path,
                       const std::string& pod_uid, const std::string& node_labels_file) {
    std::vector<placement::Verdict> verdicts;
    conf::NetConf c;
    placement::NodeFacts doc;
    try {
        doc = load_facts(facts_path);
        auto net = read_network(config_text, {});
        c = net.conf;
        const placement::Subject& s = *net.kind;
        placement::PodInfo pod{pod_uid, "", "", nullptr};
        placement::EvalOptions opt{node_labels_file, false, true, code_of};
        // Only what the document cannot hold is read here: the device the kind names, the
        // node's labels, the pod's CPUs (kubelet's, on this node) and the pool's ranges.
        placement::Device d;
        placement::NodeLabels labels;
        placement::PodNuma numa;
        std::optional<ipam::Config> pool;
        if (c.bandwidth || (c.placement && c.placement->topology)) d = s.device(c);
        if (c.placement && c.placement->node_selector) labels = node_labels(c, pod, opt);
        if (c.placement && c.placement->topology) {
            numa = placement::pod_numa(c, pod_uid, doc);
            if (c.placement->topology->min_free_addresses) pool = s.pool(c);
        }
        auto src = placement::published_facts(doc, d, labels, numa, pool);
        verdicts = placement::evaluate_on(c, *src, pod, opt);
    } catch (const base::Error& e) {
        std::cerr << "topocni explain: " << e.what() << " (code " << code_of(e) << ")"
                  << (e.details.empty() ? "" : ": " + e.details) << "\n";
        return 2;
    }
    std::cout << "network '" << c.name << "' from '" << config_path << "', node '" << doc.node << "' (facts taken "
              << doc.taken_at << " from '" << facts_path << "'), pod "
              << (pod_uid.empty() ? std::string("(no --pod-uid)") : pod_uid) << "\n";
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
