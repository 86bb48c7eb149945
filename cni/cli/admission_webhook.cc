// `topocni admission-webhook`: the mutating admission webhook that writes a pod's topocni
// networks into the pod (cni/cluster/admission.h). One LIST+WATCH loop keeps the NADs; a
// NAD not in the cache yet (created a moment before the pod) is read from the API before
// the pod is refused for it. The server is kube/server.h: bounded in size, time and
// concurrency; SIGTERM stops it cleanly.
#include <CLI/CLI.hpp>

#include <atomic>
#include <csignal>
#include <mutex>
#include <stdexcept>
#include <thread>

#include "base/log.h"
#include "cni/cli/api_credentials.h"
#include "cni/cli/cli.h"
#include "cni/cluster/admission.h"
#include "cni/error.h"
#include "kube/client.h"
#include "kube/error.h"
#include "kube/reflector.h"
#include "kube/server.h"

namespace cni::cli {

namespace {

using json = nlohmann::json;

std::atomic<bool> g_webhook_stop{false};
void on_webhook_signal(int) { g_webhook_stop = true; }

constexpr const char* kNadPath = "/apis/k8s.cni.cncf.io/v1/network-attachment-definitions";

struct WebhookFlags {
    kube::server::Options server;
    std::string kubeconfig;
    std::string path = "/mutate";
    double api_timeout = 5;
};

/// The API did not answer for a NAD: the webhook fails (HTTP 503), and the configuration's
/// failurePolicy decides, rather than refusing a pod for a NAD that may well exist.
struct NadUnreadable : std::runtime_error {
    using std::runtime_error::runtime_error;
};

/// The NADs, each parsed once per version.
class NadCache {
public:
    NadCache(kube::Kubeconfig kc, std::chrono::milliseconds timeout) : kc_(std::move(kc)), timeout_(timeout) {}

    void replace(const std::vector<json>& items) {
        std::map<std::string, Entry> fresh;
        for (auto& n : items) fresh[cluster::object_key(n)].nad = n;
        std::lock_guard<std::mutex> l(mu_);
        for (auto& [k, e] : fresh)   // a parse of the same version is kept
            if (auto it = nads_.find(k); it != nads_.end() && version(it->second.nad) == version(e.nad)) e = it->second;
        nads_ = std::move(fresh);
    }
    void event(const kube::Event& e) {
        std::lock_guard<std::mutex> l(mu_);
        if (e.type == "DELETED") nads_.erase(cluster::object_key(e.object));
        else if (e.type == "ADDED" || e.type == "MODIFIED") nads_[cluster::object_key(e.object)] = Entry{e.object, std::nullopt};
    }

    cluster::PodNetwork lookup(const cluster::NetworkSelection& s) {
        const std::string key = s.namespace_ + "/" + s.name;
        {
            std::lock_guard<std::mutex> l(mu_);
            if (auto it = nads_.find(key); it != nads_.end()) {
                if (!it->second.parsed) it->second.parsed = cluster::pod_network(s, &it->second.nad);
                cluster::PodNetwork n = *it->second.parsed;
                n.selection = s;   // the interface asked for is the pod's
                return n;
            }
        }
        return read_live(s);
    }

private:
    struct Entry {
        json nad;
        std::optional<cluster::PodNetwork> parsed;
    };
    static std::string version(const json& nad) {
        return nad.value("metadata", json::object()).value("resourceVersion", std::string());
    }

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
    std::mutex mu_, live_mu_;
    std::map<std::string, Entry> nads_;
    std::unique_ptr<kube::Client> client_;
};

}  // namespace

void add_admission_webhook(CLI::App& app, int& status) {
    auto o = std::make_shared<WebhookFlags>();
    o->server.listen = "0.0.0.0:8443";
    o->server.max_body = 8u << 20;   // the API server's own limit on an object is 3 MiB
    auto* cmd = app.add_subcommand("admission-webhook",
                                   "Serve a mutating admission webhook: pods' topocni networks become requests and node affinity");
    cmd->add_option("--listen", o->server.listen, "address:port to listen on ([v6]:port for IPv6)")->capture_default_str();
    cmd->add_option("--tls-cert", o->server.tls_cert, "PEM certificate chain (the API server calls webhooks over HTTPS only)");
    cmd->add_option("--tls-key", o->server.tls_key, "PEM private key");
    cmd->add_option("--kubeconfig", o->kubeconfig, "kubeconfig (default: the pod's service account)");
    cmd->add_option("--path", o->path, "the path the webhook configuration calls")->capture_default_str();
    cmd->add_option("--max-body", o->server.max_body, "bytes: a bigger request is refused (413)")->capture_default_str();
    cmd->add_option("--max-connections", o->server.max_connections, "connections served at once (one more: 503)")
        ->check(CLI::Range(1, 256))
        ->capture_default_str();
    cmd->add_option("--api-timeout", o->api_timeout, "seconds per API request (a NAD not cached yet)")->capture_default_str();
    cmd->footer("Example:\n  topocni admission-webhook --listen 0.0.0.0:8443 --tls-cert tls.crt --tls-key tls.key\n"
                "See examples/admission-webhook.yaml and the README's admission webhook section.");
    cmd->callback([o, &status] {
        base::log::configure("info", "");
        // A NAD not cached yet is read from the API inside the handler: one thread per
        // connection, so that a caller waiting on that read never holds up the others.
        o->server.threads = o->server.max_connections;
        struct sigaction sa {};
        sa.sa_handler = on_webhook_signal;
        ::sigaction(SIGTERM, &sa, nullptr);
        ::sigaction(SIGINT, &sa, nullptr);
        kube::Kubeconfig kc = pick_kubeconfig(o->kubeconfig, !o->kubeconfig.empty());
        auto timeout = std::chrono::milliseconds(static_cast<long long>(o->api_timeout * 1000));
        NadCache nads(kc, timeout);
        std::thread loop([&, kc, timeout] {
            kube::Client client(kc, timeout);
            kube::ReflectorHandlers h;
            h.replace = [&](const std::vector<json>& items, const std::string&) { nads.replace(items); };
            h.event = [&](const kube::Event& e) { nads.event(e); };
            h.trouble = [](const std::string& what) { base::log::warn(std::string("network-attachment-definitions: ") + what); };
            kube::reflect(client, kNadPath, "network-attachment-definitions", h, [] { return g_webhook_stop.load(); });
        });
        cluster::NadLookup lookup = [&](const cluster::NetworkSelection& s) { return nads.lookup(s); };
        auto handler = [&](const kube::server::Request& r) -> kube::server::Response {
            std::string path = r.target.substr(0, r.target.find('?'));
            if (r.method == "GET" && (path == "/healthz" || path == "/readyz")) return {200, R"({"status":"ok"})"};
            if (path != o->path) return {404, R"({"error":"no such path"})"};
            if (r.method != "POST") return {405, R"({"error":"POST an AdmissionReview"})"};
            try {
                return {200, cluster::review(r.body, lookup)};
            } catch (const base::Error& e) {
                return {400, json({{"error", e.what()}}).dump()};
            } catch (const NadUnreadable& e) {
                base::log::warn(e.what());
                return {503, json({{"error", e.what()}}).dump()};
            }
        };
        try {
            kube::server::serve(o->server, handler, g_webhook_stop,
                                [](int port) { base::log::info("admission webhook listening on port " + std::to_string(port)); });
        } catch (...) {
            g_webhook_stop = true;
            loop.join();
            throw;
        }
        g_webhook_stop = true;
        loop.join();
        base::log::info("admission webhook stopped");
        status = 0;
    });
}

}  // namespace cni::cli
