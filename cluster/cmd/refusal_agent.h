// `topocni refusal-agent`: what happens on this node after ADD refused a pod (code 100).
//
// ADD makes no API call for it: it leaves the pod's refusal record
// (placement/refusal_record.h). The agent watches those records (inotify on
// <stateDir>/refused, and every `resync` seconds) and, for each:
//   - keeps one core/v1 Event on the pod, reason TopocniPlacementRefused, type Warning,
//     naming the network, the node, the failed constraints and their evidence; repeats
//     PATCH its count, lastTimestamp and message, as client-go's recorder does;
//   - when the network asks for it (onRefusal: evict) and the pod was refused
//     evictAfterRefusals times within evictWindowSeconds, evicts it through the Eviction
//     API (PodDisruptionBudgets hold: 429 is retried later), but only a pod with a
//     controller that would replace it elsewhere: never a bare pod, a DaemonSet pod or a
//     static pod; at most `owner_max` evictions per controller within `owner_window`
//     seconds (the loop guard), and it says so in an Event when it stops;
//   - removes the record once the pod is gone (404, or another pod of the same name).
// API failures are logged and retried with base/backoff.h's back-off (0.8 s doubling to
// 30 s, jittered) on a new connection; SIGTERM or SIGINT end it with status 0.
#pragma once
#include <atomic>
#include <string>

namespace cluster::cmd {

struct RefusalAgentOptions {
    std::string state_dir = "/var/lib/cni/topocni";
    std::string node;                 ///< this Node's name: the Events' source.host
    std::string kubeconfig;           ///< empty: in-cluster, else topocni's, else Multus's
    bool kubeconfig_set = false;
    double api_timeout = 10;          ///< seconds per API request
    double resync = 60;               ///< seconds: every record (and whether its pod is still there) at least this often
    double settle = 0.2;              ///< seconds to wait after a change for the rest of it
    int owner_max = 3;                ///< the loop guard: evictions per controller ...
    double owner_window = 3600;       ///< ... within this many seconds
    double blocked_retry = 10;        ///< seconds before asking again after a PodDisruptionBudget said no
};

/// Runs until `stop` (set by the signal handler); 0 on a clean stop.
int refusal_agent(const RefusalAgentOptions& o, const std::atomic<bool>& stop);

}  // namespace cluster::cmd
