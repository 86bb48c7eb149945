// `topocni admission-webhook`: the mutating admission webhook that writes a pod's topocni
// networks into the pod (cluster/admission.h). One LIST+WATCH loop keeps the NADs; a
// NAD not in the cache yet (created a moment before the pod) is read from the API before
// the pod is refused for it. The server is kube/server.h: bounded in size, time and
// concurrency; SIGTERM stops it cleanly.
#include <CLI/CLI.hpp>

#include <malloc.h>

#include <mutex>
#include <stdexcept>

#include "base/log.h"
#include "base/stop_signal.h"
#include "cluster/cmd/api_credentials.h"
#include "cluster/cmd/commands.h"
#include "cluster/cmd/cluster_service.h"
#include "cluster/admission.h"
#include "cluster/nad_informer.h"
#include "cni/error.h"
#include "kube/client.h"
#include "kube/error.h"
#include "kube/store.h"

namespace cluster::cmd {

namespace {

using json = nlohmann::json;

constexpr size_t kTrimAfterBytes = 1u << 20;

struct WebhookFlags {
    ServiceFlags service;
    std::string path = "/mutate";
    std::string dra_claims = "off";   ///< off, existing, create
    std::string driver = "topocni.io";
};

constexpr const char* kTemplatesPath = "/apis/resource.k8s.io/v1/resourceclaimtemplates";

/// The ResourceClaimTemplates (one LIST+WATCH, all namespaces), and with --dra-claims create
/// the API to make a missing one.
class Templates {
public:
    Templates(kube::Kubeconfig kc, std::chrono::milliseconds timeout, bool create)
        : kc_(std::move(kc)), timeout_(timeout), create_(create) {}

    kube::Store& store() { return store_; }

    std::optional<std::string> template_for(const std::string& ns, const json& object, bool dry_run) {
        const std::string name = object["metadata"]["name"].get<std::string>();
        if (store_.get(ns + "/" + name)) return name;
        if (!create_) return std::nullopt;
        if (dry_run) return name;   // what the pod would claim; a dry run creates nothing
        std::lock_guard<std::mutex> l(mu_);
        try {
            if (!client_) client_ = std::make_unique<kube::Client>(kc_, timeout_);
            client_->create("/apis/resource.k8s.io/v1/namespaces/" + kube::url_escape(ns) + "/resourceclaimtemplates", object,
                            "resourceclaimtemplate " + ns + "/" + name, "resourceclaimtemplates");
            base::log::info("created resourceclaimtemplate " + ns + "/" + name);
            return name;
        } catch (const kube::Error& e) {
            if (e.http_status == 409) return name;   // made meanwhile (another replica, or the watch is behind)
            client_.reset();
            // The pod goes on with extended resources rather than a claim on nothing.
            base::log::warn("resourceclaimtemplate " + ns + "/" + name + " could not be created: " + e.what());
            return std::nullopt;
        }
    }

private:
    kube::Kubeconfig kc_;
    std::chrono::milliseconds timeout_;
    bool create_;
    kube::Store store_;
    std::mutex mu_;
    std::unique_ptr<kube::Client> client_;
};

/// The API did not answer for a NAD: the webhook fails (HTTP 503), and the configuration's
/// failurePolicy decides, rather than refusing a pod for a NAD that may well exist.
struct NadUnreadable : std::runtime_error {
    using std::runtime_error::runtime_error;
};

/// The NADs (the shared informer: each parsed once per version), and the API for one not
/// in it yet.
class NadCache {
public:
    NadCache(kube::Kubeconfig kc, std::chrono::milliseconds timeout) : kc_(std::move(kc)), timeout_(timeout) {}

    cluster::NadInformer& informer() { return nads_; }

    cluster::PodNetwork lookup(const cluster::NetworkSelection& s) {
        if (auto n = nads_.find(s)) return *n;
        return read_live(s);
    }

private:
    /// Not in the cache: created a moment ago, or the watch is behind. Only a NAD the API
    /// does not have either refuses the pod.
    cluster::PodNetwork read_live(const cluster::NetworkSelection& s) {
        std::lock_guard<std::mutex> l(live_mu_);
        try {
            if (!client_) client_ = std::make_unique<kube::Client>(kc_, timeout_);
            json nad = client_->get("/apis/k8s.cni.cncf.io/v1/namespaces/" + kube::url_escape(s.namespace_) +
                                        "/network-attachment-definitions/" + kube::url_escape(s.name),
                                    "network-attachment-definition " + s.namespace_ + "/" + s.name,
                                    "network-attachment-definitions");
            return cluster::pod_network(s, &nad);
        } catch (const kube::Error& e) {
            if (e.http_status == 404) return cluster::pod_network(s, nullptr);
            client_.reset();
            throw NadUnreadable("network-attachment-definition " + s.namespace_ + "/" + s.name + " could not be read: " + e.what());
        }
    }

    kube::Kubeconfig kc_;
    std::chrono::milliseconds timeout_;
    std::mutex live_mu_;
    cluster::NadInformer nads_;
    std::unique_ptr<kube::Client> client_;
};

}  // namespace

void add_admission_webhook(CLI::App& app, int& status) {
    auto o = std::make_shared<WebhookFlags>();
    o->service.server.listen = "0.0.0.0:8443";
    o->service.server.max_body = 8u << 20;   // the API server's own limit on an object is 3 MiB
    // Below the example's timeoutSeconds (5): a review that waited longer has been given up.
    o->service.server.max_wait = std::chrono::milliseconds(4000);
    o->service.api_timeout = 5;
    auto* cmd = app.add_subcommand("admission-webhook",
                                   "Serve a mutating admission webhook: pods' topocni networks become requests and node affinity");
    add_service_flags(cmd, o->service, "PEM certificate chain (the API server calls webhooks over HTTPS only)",
                      "seconds per API request (a NAD not cached yet)");
    cmd->add_option("--kubeconfig", o->service.kubeconfig,
                    "kubeconfig (default: the pod's service account, else topocni's or Multus's on the node)");
    cmd->add_option("--path", o->path, "the path the webhook configuration calls")->capture_default_str();
    cmd->add_option("--dra-claims", o->dra_claims,
                    "off; existing: a network whose NAD has a ResourceClaimTemplate <nad>-topocni in the pod's namespace "
                    "gets a claim on it instead of extended resources; create: the webhook also creates a missing one "
                    "(the configuration then needs sideEffects: NoneOnDryRun)")
        ->check(CLI::IsMember({"off", "existing", "create"}))->capture_default_str();
    cmd->add_option("--dra-driver-name", o->driver, "the DRA driver the devices are published under")->capture_default_str();
    cmd->footer("Example:\n  topocni admission-webhook --listen 0.0.0.0:8443 --tls-cert tls.crt --tls-key tls.key\n"
                "See examples/admission-webhook.yaml and the README's admission webhook section.");
    cmd->callback([o, &status] {
        base::stop_on_signal();
        base::log::configure("info", "");
        // A NAD not cached yet is read from the API inside the handler: one thread per
        // connection, so that a caller waiting on that read never holds up the others, and
        // one more that accepts, queues and answers 503 while every handler waits.
        o->service.server.threads = o->service.server.max_connections + 1;
        kube::Kubeconfig kc = pick_kubeconfig(o->service.kubeconfig, !o->service.kubeconfig.empty());
        NadCache nads(kc, o->service.api_timeout_ms());
        Watch w{cluster::kNadPath, cluster::kNadResource, nads.informer().store().handlers()};
        cluster::NadLookup lookup = [&](const cluster::NetworkSelection& s) { return nads.lookup(s); };
        std::vector<Watch> watches{std::move(w)};
        Templates templates(kc, o->service.api_timeout_ms(), o->dra_claims == "create");
        cluster::DraClaims dra;
        dra.driver = o->driver;
        if (o->dra_claims != "off") {
            watches.push_back({kTemplatesPath, "resourceclaimtemplates", templates.store().handlers()});
            dra.template_for = [&](const cluster::PodNetwork&, const std::string& ns, const json& object, bool dry_run) {
                return templates.template_for(ns, object, dry_run);
            };
        }
        const cluster::DraClaims* claims = o->dra_claims != "off" ? &dra : nullptr;
        auto handler = [&](kube::server::Request r) -> kube::server::Response {
            std::string path = r.target.substr(0, r.target.find('?'));
            if (path != o->path) return {404, R"({"error":"no such path"})"};
            if (r.method != "POST") return {405, R"({"error":"POST an AdmissionReview"})"};
            // A review is a few KiB; what a bigger one freed goes back to the system at once
            // (a thread's arena would keep it, and each of --max-connections threads has one),
            // its body included: declared after `trim`, the body is freed before it runs.
            struct Trim {
                size_t size;
                ~Trim() {
                    if (size > kTrimAfterBytes) ::malloc_trim(0);
                }
            } trim{r.body.size()};
            const std::string body = std::move(r.body);
            try {
                return {200, cluster::review(body, lookup, claims)};
            } catch (const base::Error& e) {
                return {400, json({{"error", e.what()}}).dump()};
            } catch (const NadUnreadable& e) {
                base::log::warn(e.what());
                return {503, json({{"error", e.what()}}).dump()};
            }
        };
        run_service(o->service, kc, "admission webhook", std::move(watches), handler);
        status = 0;
    });
}

}  // namespace cluster::cmd
