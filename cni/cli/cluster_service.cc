#include "cni/cli/cluster_service.h"

#include <atomic>
#include <csignal>
#include <thread>

#include "base/log.h"
#include "kube/client.h"

namespace cni::cli {

namespace {

std::atomic<bool> g_stop{false};
void on_signal(int) { g_stop = true; }

}  // namespace

void add_service_flags(CLI::App* cmd, ServiceFlags& f, const std::string& tls_cert_help,
                       const std::string& api_timeout_help) {
    cmd->add_option("--listen", f.server.listen, "address:port to listen on ([v6]:port for IPv6)")->capture_default_str();
    cmd->add_option("--tls-cert", f.server.tls_cert, tls_cert_help);
    cmd->add_option("--tls-key", f.server.tls_key, "PEM private key");
    cmd->add_option("--max-body", f.server.max_body, "bytes: a bigger request is refused (413)")->capture_default_str();
    cmd->add_option("--max-connections", f.server.max_connections, "connections served at once (one more: 503)")
        ->check(CLI::Range(1, 256))
        ->capture_default_str();
    cmd->add_option("--api-timeout", f.api_timeout, api_timeout_help)->capture_default_str();
}

void handle_stop_signals() {
    struct sigaction sa {};
    sa.sa_handler = on_signal;
    ::sigaction(SIGTERM, &sa, nullptr);
    ::sigaction(SIGINT, &sa, nullptr);
}

void run_service(const ServiceFlags& f, const kube::Kubeconfig& kc, const std::string& name,
                 std::vector<Watch> watches, const kube::server::Handler& handler) {
    auto stop = [] { return g_stop.load(); };
    std::vector<std::thread> loops;
    for (auto& w : watches) {
        if (!w.handlers.trouble) w.handlers.trouble = [r = w.resource](const std::string& what) { base::log::warn(r + ": " + what); };
        loops.emplace_back([&kc, &f, w = std::move(w), stop] {
            kube::Client client(kc, f.api_timeout_ms());
            kube::reflect(client, w.path, w.resource, w.handlers, stop);
        });
    }
    auto join = [&] {
        g_stop = true;
        for (auto& t : loops) t.join();
    };
    try {
        kube::server::serve(f.server, handler, g_stop,
                            [&](int port) { base::log::info(name + " listening on port " + std::to_string(port)); });
    } catch (...) {
        join();
        throw;
    }
    join();
    base::log::info(name + " stopped");
}

}  // namespace cni::cli
