// `topocni dra-template --nad NS/NAME`: the ResourceClaimTemplate that asks Dynamic
// Resource Allocation for what a NAD needs (cluster/dra_claims.cc), printed as JSON for
// `kubectl apply -f -`. The NAD is read from the API, or from a file with --file.
#include <CLI/CLI.hpp>

#include <cstdio>

#include "base/files.h"
#include "cluster/cmd/api_credentials.h"
#include "cluster/cmd/commands.h"
#include "cluster/dra_claims.h"
#include "cluster/dra_slices.h"
#include "cluster/networks.h"
#include "cni/error.h"
#include "kube/client.h"
#include "kube/yaml.h"

namespace cluster::cmd {

namespace {

struct TemplateOptions {
    std::string nad, file, kubeconfig, driver = dra::kDriver;
    double timeout = 10;
};

nlohmann::json read_nad(const TemplateOptions& o, const NetworkSelection& sel) {
    if (!o.file.empty()) {
        auto text = base::fs::read_file(o.file);
        if (!text) throw cni::Error(cni::kInvalidConfig, "--file " + o.file + ": cannot be read");
        nlohmann::json nad = kube::parse_yaml(*text, o.file);
        // The file is the NAD --nad names: a template for one NAD made from another's config
        // would be a quiet mistake.
        const auto& md = nad.is_object() && nad.contains("metadata") ? nad["metadata"] : nlohmann::json();
        for (auto [key, want] : {std::pair{"name", sel.name}, {"namespace", sel.namespace_}})
            if (md.is_object() && md.contains(key) && md[key].is_string() && md[key].get<std::string>() != want)
                throw cni::Error(cni::kInvalidConfig, "--file " + o.file + " holds " + key + " '" +
                                 md[key].get<std::string>() + "', --nad names '" + want + "'");
        return nad;
    }
    kube::Client client(pick_kubeconfig(o.kubeconfig, !o.kubeconfig.empty()),
                        std::chrono::milliseconds(static_cast<long long>(o.timeout * 1000)));
    return client.get("/apis/k8s.cni.cncf.io/v1/namespaces/" + sel.namespace_ + "/network-attachment-definitions/" + sel.name,
                      "network-attachment-definition " + sel.namespace_ + "/" + sel.name, "network-attachment-definitions");
}

int run(const TemplateOptions& o) {
    size_t slash = o.nad.find('/');
    if (slash == std::string::npos || slash == 0 || slash + 1 == o.nad.size())
        throw cni::Error(cni::kInvalidConfig, "--nad '" + o.nad + "': not NAMESPACE/NAME");
    NetworkSelection sel;
    sel.namespace_ = o.nad.substr(0, slash);
    sel.name = o.nad.substr(slash + 1);
    nlohmann::json nad = read_nad(o, sel);
    PodNetwork n = pod_network(sel, &nad);
    if (!n.error.empty()) throw cni::Error(cni::kInvalidConfig, n.error);
    if (!n.parsed) throw cni::Error(cni::kInvalidConfig, "network-attachment-definition " + n.key() + " has no topocni config");
    dra::ClaimPlan plan = dra::claim_plan(n, o.driver);
    for (const auto& note : plan.notes) std::fprintf(stderr, "note: %s\n", note.c_str());
    if (plan.empty()) {
        std::fprintf(stderr, "topocni: %s asks for no device (no VF, shared link or address pool): no template\n", n.key().c_str());
        return 1;
    }
    std::printf("%s\n", dra::claim_template(n, plan).dump(2).c_str());
    return 0;
}

}  // namespace

void add_dra_template(CLI::App& app, int& status) {
    auto o = std::make_shared<TemplateOptions>();
    auto* cmd = app.add_subcommand("dra-template", "Print the ResourceClaimTemplate that asks DRA for what a NAD needs");
    cmd->add_option("--nad", o->nad, "the NetworkAttachmentDefinition, NAMESPACE/NAME")->required();
    cmd->add_option("--file", o->file, "read the NAD from this file (JSON or YAML) instead of the API");
    cmd->add_option("--kubeconfig", o->kubeconfig, "kubeconfig (default: the pod's service account, else topocni's)");
    cmd->add_option("--driver-name", o->driver, "the DRA driver name the devices are published under")->capture_default_str();
    cmd->add_option("--timeout", o->timeout, "seconds per API request")->capture_default_str();
    cmd->footer("Prints a resource.k8s.io/v1 ResourceClaimTemplate named <nad>-topocni in the NAD's namespace;\n"
                "what a claim cannot say (nodeSelector, numaPolicy) goes to stderr as notes.\n"
                "Examples:\n  topocni dra-template --nad default/sriov-net | kubectl apply -f -\n"
                "  topocni dra-template --nad default/sriov-net --file nad.yaml");
    cmd->callback([o, &status] { status = run(*o); });
}

}  // namespace cluster::cmd
