// `topocni scheduler-extender`: kube-scheduler's extender (filter and prioritize) for
// topocni's networks. Three LIST+WATCH loops keep its caches (NADs, Nodes with their
// published facts, pods bound to a node and still pending); an HTTP(S) server answers the
// scheduler from them, bounded in size, time and concurrency.
#include <CLI/CLI.hpp>

#include <malloc.h>

#include "base/log.h"
#include "base/stop_signal.h"
#include "cluster/cmd/commands.h"
#include "cluster/cmd/cluster_service.h"
#include "cluster/extender.h"
#include "cni/error.h"
#include "kube/kubeconfig.h"

namespace cluster::cmd {

using cni::Error;
using cni::kInvalidConfig;

namespace {

constexpr size_t kTrimAfterBytes = 16u << 20;

struct ExtenderFlags {
    ServiceFlags service;
    cluster::ExtenderOptions ext;
};

/// --kubeconfig, else the pod's service account; not the node's kubeconfigs that
/// pick_kubeconfig falls back to: their role has no list or watch on pods, and the pending
/// pods' watch would fail for ever while the extender looked healthy.
kube::Kubeconfig kubeconfig_of(const std::string& path) {
    if (!path.empty()) return kube::load_kubeconfig(path);
    if (auto in = kube::in_cluster_config()) return *in;
    throw Error(kInvalidConfig, "no kubeconfig: not in a pod; pass --kubeconfig");
}

/// A LIST+WATCH loop feeding one of the extender's caches.
Watch watch(cluster::Extender& ext, std::string path, std::string resource,
            void (cluster::Extender::*replace)(const std::vector<nlohmann::json>&),
            void (cluster::Extender::*event)(const kube::Event&)) {
    Watch w{std::move(path), std::move(resource), {}};
    w.handlers.replace = [&ext, replace](const std::vector<nlohmann::json>& items, const std::string&) { (ext.*replace)(items); };
    w.handlers.event = [&ext, event](const kube::Event& e) { (ext.*event)(e); };
    return w;
}

}  // namespace

void add_scheduler_extender(CLI::App& app, int& status) {
    auto o = std::make_shared<ExtenderFlags>();
    o->service.server.listen = "0.0.0.0:8443";
    o->service.server.max_body = 256u << 20;
    // Below the example's httpTimeout (2 s): a filter call that waited longer has been given up.
    o->service.server.max_wait = std::chrono::milliseconds(1500);
    auto* cmd = app.add_subcommand("scheduler-extender",
                                   "Serve kube-scheduler's extender verbs: filter and prioritize nodes by topocni's networks");
    add_service_flags(cmd, o->service, "PEM certificate chain (with --tls-key: HTTPS)", "seconds per API request");
    cmd->add_option("--kubeconfig", o->service.kubeconfig, "kubeconfig (default: the pod's service account)");
    cmd->add_option("--url-prefix", o->ext.url_prefix, "path before /filter and /prioritize, as urlPrefix's path");
    cmd->add_option("--max-facts-age", o->ext.judge.max_facts_age,
                    "seconds: older published facts count as none (the NAD's unknownTopology decides)")
        ->check(CLI::Range(10.0, 86400.0))
        ->capture_default_str();
    cmd->add_option("--pending-seconds", o->ext.pending_seconds,
                    "seconds a pod bound to a node counts against it until the node's facts include it")
        ->check(CLI::Range(1.0, 3600.0))
        ->capture_default_str();
    cmd->add_option("--threads", o->service.server.threads,
                    "threads answering requests (default: one per CPU the process may run on, at most --max-connections)")
        ->check(CLI::Range(0, 256));
    cmd->footer("Example:\n  topocni scheduler-extender --listen 0.0.0.0:8443 --tls-cert tls.crt --tls-key tls.key "
                "--url-prefix /scheduler\nSee examples/scheduler-extender.yaml and the README's scheduler extender section.");
    cmd->callback([o, &status] {
        base::stop_on_signal();
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
        kube::Kubeconfig kc = kubeconfig_of(o->service.kubeconfig);
        cluster::Extender ext(o->ext);
        std::vector<Watch> watches{
            watch(ext, "/apis/k8s.cni.cncf.io/v1/network-attachment-definitions", "network-attachment-definitions",
                  &cluster::Extender::replace_nads, &cluster::Extender::nad_event),
            watch(ext, "/api/v1/nodes", "nodes", &cluster::Extender::replace_nodes, &cluster::Extender::node_event),
            watch(ext, "/api/v1/pods?fieldSelector=status.phase%3DPending", "pods", &cluster::Extender::replace_pods,
                  &cluster::Extender::pod_event)};
        run_service(o->service, kc, "scheduler extender", std::move(watches), [&](kube::server::Request r) {
            size_t size = r.body.size();
            auto reply = ext.handle(r.method, r.target, std::move(r.body));
            // The heap above keeps what a request freed, for the next one. After a request
            // bigger than the scheduler sends at 5,000 nodes (11 MB of full Nodes), give the
            // pages back instead: such a request is rare, or hostile.
            if (size > kTrimAfterBytes) ::malloc_trim(0);
            kube::server::Response out{reply.status, std::move(reply.body)};
            out.pieces = std::move(reply.pieces);
            out.keep = std::move(reply.keep);
            return out;
        });
        status = 0;
    });
}

}  // namespace cluster::cmd
