#include "cluster/cmd/cluster_service.h"

#include <nlohmann/json.hpp>

#include <atomic>
#include <csignal>
#include <memory>
#include <optional>
#include <thread>

#include "base/log.h"
#include "base/stop_signal.h"
#include "kube/client.h"

namespace cluster::cmd {

namespace {

/// Which caches have applied their first LIST. A replica answering before then would judge
/// from empty caches (the extender: no facts, so `unknownTopology`; the webhook: a NAD read
/// from the API per pod), so it is not ready: the Service sends nothing to it yet.
class Readiness {
public:
    explicit Readiness(const std::vector<Watch>& watches) : listed_(watches.size()) {
        for (auto& w : watches) names_.push_back(w.resource);
    }

    /// `w`'s replace, which also marks its cache listed once it has been applied.
    void track(size_t i, Watch& w) {
        w.handlers.replace = [this, i, inner = std::move(w.handlers.replace)](const std::vector<nlohmann::json>& items,
                                                                             const std::string& rv) {
            if (inner) inner(items, rv);
            listed_[i] = true;
        };
    }

    /// The probes' answer, or none for any other request.
    std::optional<kube::server::Response> probe(const kube::server::Request& r) const {
        if (r.method != "GET") return std::nullopt;
        std::string path = r.target.substr(0, r.target.find('?'));
        if (path == "/livez") return kube::server::Response{200, R"({"status":"ok"})"};
        if (path != "/readyz" && path != "/healthz") return std::nullopt;
        nlohmann::json waiting = nlohmann::json::array();
        for (size_t i = 0; i < names_.size(); ++i)
            if (!listed_[i]) waiting.push_back(names_[i]);
        if (waiting.empty()) return kube::server::Response{200, R"({"status":"ok"})"};
        return kube::server::Response{503, nlohmann::json{{"status", "not ready"}, {"notListedYet", waiting}}.dump()};
    }

private:
    std::vector<std::string> names_;
    std::vector<std::atomic<bool>> listed_;
};

}  // namespace

void add_service_flags(CLI::App* cmd, ServiceFlags& f, const std::string& tls_cert_help,
                       const std::string& api_timeout_help) {
    cmd->add_option("--listen", f.server.listen, "address:port to listen on ([v6]:port for IPv6)")->capture_default_str();
    cmd->add_option("--tls-cert", f.server.tls_cert, tls_cert_help);
    cmd->add_option("--tls-key", f.server.tls_key, "PEM private key");
    cmd->add_option("--max-body", f.server.max_body, "bytes: a bigger request is refused (413)")->capture_default_str();
    cmd->add_option("--max-connections", f.server.max_connections, "connections served at once (more wait: --max-queue)")
        ->check(CLI::Range(1, 256))
        ->capture_default_str();
    cmd->add_option("--max-queue", f.server.max_queue,
                    "connections waiting for a place, oldest first, each at most --max-wait (one more, or one that "
                    "waited longer: 503)")
        ->check(CLI::Range(0, 65536))
        ->capture_default_str();
    // Seconds on the command line, kept in the server's milliseconds.
    cmd->add_option_function<double>(
           "--max-wait",
           [&f](double s) { f.server.max_wait = std::chrono::milliseconds(static_cast<long long>(s * 1000)); },
           "seconds a connection may wait for a place (keep it below the caller's time-out), default " +
               std::to_string(f.server.max_wait.count()) + " ms")
        ->check(CLI::Range(0.0, 600.0));
    cmd->add_option("--api-timeout", f.api_timeout, api_timeout_help)->capture_default_str();
}

void run_service(const ServiceFlags& f, const kube::Kubeconfig& kc, const std::string& name,
                 std::vector<Watch> watches, const kube::server::Handler& handler) {
    auto& stopping = base::stop_on_signal();
    auto stop = [&stopping] { return stopping.load(); };
    Readiness ready(watches);
    for (size_t i = 0; i < watches.size(); ++i) ready.track(i, watches[i]);
    auto serve = [&](kube::server::Request r) {
        if (auto probe = ready.probe(r)) return std::move(*probe);
        return handler(std::move(r));
    };
    std::vector<std::thread> loops;
    for (auto& w : watches) {
        if (!w.handlers.trouble) w.handlers.trouble = [r = w.resource](const std::string& what) { base::log::warn(r + ": " + what); };
        loops.emplace_back([&kc, &f, w = std::move(w), stop] {
            kube::Client client(kc, f.api_timeout_ms());
            kube::reflect(client, w.path, w.resource, w.handlers, stop);
        });
    }
    auto join = [&] {
        stopping = true;
        for (auto& t : loops) t.join();
    };
    try {
        kube::server::serve(f.server, serve, stopping,
                            [&](int port) { base::log::info(name + " listening on port " + std::to_string(port)); });
    } catch (...) {
        join();
        throw;
    }
    join();
    base::log::info(name + " stopped");
}

}  // namespace cluster::cmd
