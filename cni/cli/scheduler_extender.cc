// `topocni scheduler-extender`: kube-scheduler's extender (filter and prioritize) for
// topocni's networks. Three LIST+WATCH loops keep its caches (NADs, Nodes with their
// published facts, pods bound to a node and still pending); an HTTP(S) server answers the
// scheduler from them, bounded in size, time and concurrency.
#include <CLI/CLI.hpp>

#include <malloc.h>

#include <atomic>
#include <csignal>
#include <thread>

#include "base/log.h"
#include "cni/cli/cli.h"
#include "cni/cluster/extender.h"
#include "cni/error.h"
#include "kube/client.h"
#include "kube/kubeconfig.h"
#include "kube/reflector.h"
#include "kube/server.h"

namespace cni::cli {

namespace {

std::atomic<bool> g_extender_stop{false};
void on_extender_signal(int) { g_extender_stop = true; }

struct ExtenderFlags {
    kube::server::Options server;
    cluster::ExtenderOptions ext;
    std::string kubeconfig;
    double api_timeout = 10;
    bool node_cache = true;
};

kube::Kubeconfig kubeconfig_of(const std::string& path) {
    if (!path.empty()) return kube::load_kubeconfig(path);
    if (auto in = kube::in_cluster_config()) return *in;
    throw Error(kInvalidConfig, "no kubeconfig: not in a pod; pass --kubeconfig");
}

}  // namespace

void add_scheduler_extender(CLI::App& app, int& status) {
    auto o = std::make_shared<ExtenderFlags>();
    o->server.listen = "0.0.0.0:8443";
    o->server.max_body = 256u << 20;
    auto* cmd = app.add_subcommand("scheduler-extender",
                                   "Serve kube-scheduler's extender verbs: filter and prioritize nodes by topocni's networks");
    cmd->add_option("--listen", o->server.listen, "address:port to listen on ([v6]:port for IPv6)")->capture_default_str();
    cmd->add_option("--tls-cert", o->server.tls_cert, "PEM certificate chain (with --tls-key: HTTPS)");
    cmd->add_option("--tls-key", o->server.tls_key, "PEM private key");
    cmd->add_option("--kubeconfig", o->kubeconfig, "kubeconfig (default: the pod's service account)");
    cmd->add_option("--url-prefix", o->ext.url_prefix, "path before /filter and /prioritize, as urlPrefix's path");
    cmd->add_option("--max-facts-age", o->ext.judge.max_facts_age,
                    "seconds: older published facts count as none (the NAD's unknownTopology decides)")
        ->check(CLI::Range(10.0, 86400.0))
        ->capture_default_str();
    cmd->add_option("--pending-seconds", o->ext.pending_seconds,
                    "seconds a pod bound to a node counts against it until the node's facts include it")
        ->check(CLI::Range(1.0, 3600.0))
        ->capture_default_str();
    cmd->add_option("--max-body", o->server.max_body, "bytes: a bigger request is refused (413)")->capture_default_str();
    cmd->add_option("--max-connections", o->server.max_connections, "connections served at once (one more: 503)")
        ->check(CLI::Range(1, 256))
        ->capture_default_str();
    cmd->add_option("--threads", o->server.threads,
                    "threads answering requests (default: one per CPU the process may run on, at most --max-connections)")
        ->check(CLI::Range(0, 256));
    cmd->add_option("--api-timeout", o->api_timeout, "seconds per API request")->capture_default_str();
    cmd->footer("Example:\n  topocni scheduler-extender --listen 0.0.0.0:8443 --tls-cert tls.crt --tls-key tls.key "
                "--url-prefix /scheduler\nSee examples/scheduler-extender.yaml and the README's scheduler extender section.");
    cmd->callback([o, &status] {
        base::log::configure("info", "");
        // A request with full Nodes is an 11 MB block (5,000 nodes). By default glibc gives
        // each worker thread an arena that keeps such blocks once freed (740 MiB peak), or,
        // tuned to map and unmap them, faults their pages in again for every request (3,000
        // faults, ~45 ms on a VM). One arena, the main heap, that keeps big blocks for reuse:
        // 70 MiB peak, and no faults once its heap has grown to the high-water mark in the
        // first requests. (With a second arena, whose heaps hold only five such blocks each,
        // a new heap was still mapped and faulted in now and then, long after warm-up.)
        ::mallopt(M_ARENA_MAX, 1);
        ::mallopt(M_MMAP_THRESHOLD, 32 << 20);
        ::mallopt(M_TRIM_THRESHOLD, 64 << 20);
        struct sigaction sa {};
        sa.sa_handler = on_extender_signal;
        ::sigaction(SIGTERM, &sa, nullptr);
        ::sigaction(SIGINT, &sa, nullptr);
        kube::Kubeconfig kc = kubeconfig_of(o->kubeconfig);
        cluster::Extender ext(o->ext);
        auto stop = [] { return g_extender_stop.load(); };
        auto timeout = std::chrono::milliseconds(static_cast<long long>(o->api_timeout * 1000));
        auto loop = [&, kc, timeout](std::string path, std::string resource, auto replace, auto event) {
            return std::thread([=, &ext] {
                kube::Client client(kc, timeout);
                kube::ReflectorHandlers h;
                h.replace = [&](const std::vector<nlohmann::json>& items, const std::string&) { (ext.*replace)(items); };
                h.event = [&](const kube::Event& e) { (ext.*event)(e); };
                h.trouble = [resource](const std::string& what) { base::log::warn(resource + ": " + what); };
                kube::reflect(client, path, resource, h, stop);
            });
        };
        std::vector<std::thread> loops;
        loops.push_back(loop("/apis/k8s.cni.cncf.io/v1/network-attachment-definitions", "network-attachment-definitions",
                             &cluster::Extender::replace_nads, &cluster::Extender::nad_event));
        loops.push_back(loop("/api/v1/nodes", "nodes", &cluster::Extender::replace_nodes, &cluster::Extender::node_event));
        loops.push_back(loop("/api/v1/pods?fieldSelector=status.phase%3DPending", "pods", &cluster::Extender::replace_pods,
                             &cluster::Extender::pod_event));
        try {
            kube::server::serve(
                o->server,
                [&](kube::server::Request r) {
                    auto reply = ext.handle(r.method, r.target, std::move(r.body));
                    kube::server::Response out{reply.status, std::move(reply.body)};
                    out.pieces = std::move(reply.pieces);
                    out.keep = std::move(reply.keep);
                    return out;
                },
                g_extender_stop, [](int port) { base::log::info("scheduler extender listening on port " + std::to_string(port)); });
        } catch (...) {
            g_extender_stop = true;
            for (auto& t : loops) t.join();
            throw;
        }
        g_extender_stop = true;
        for (auto& t : loops) t.join();
        base::log::info("scheduler extender stopped");
        status = 0;
    });
}

}  // namespace cni::cli
