// `topocni node-report --publish`: keeps this node's facts document (node_facts.h) on its
// Node object as the annotation topocni.io/facts, for the scheduler side to read.
//
// Fresh without an API call inside ADD: the publisher watches the state directory
// (inotify on the attachment records, SR-IOV records and bandwidth ledgers every ADD, DEL
// and GC writes), reads the facts again a moment after a change and at least every
// `interval` seconds, and PATCHes the annotation only when the facts differ from what the
// Node already carries, or when `heartbeat` seconds have passed since (so that a consumer
// can tell live facts from those of a dead node); it wakes for whichever of the interval
// and the heartbeat is due first. Failures (401, 403, 404, 409, 429, 5xx, time-outs, a
// dropped connection) are logged and retried with base/backoff.h's back-off; nothing but
// SIGTERM or SIGINT ends it.
//
// `topocni dra-driver` runs the same loop for this node's ResourceSlices (Dynamic Resource
// Allocation): the devices of the facts document, written when they change.
//
// It also keeps the node's extended resources (cluster/resources.h) in the Node's
// status.capacity, for every topocni NAD that can land on the node: it watches the NADs
// and its own Node, and sends a JSON patch on nodes/status when they differ from what the
// facts and NADs make them (kubelet zeroes them on a recreated Node; a NAD removed takes
// its resources with it).
#pragma once
#include <atomic>
#include <memory>
#include <string>

#include "cluster/dra_slices.h"
#include "cluster/cmd/node_facts.h"
#include "cluster/nad_informer.h"

namespace cluster::cmd {

struct PublishOptions {
    FactsOptions facts;
    std::string kubeconfig;          ///< empty: in-cluster, else topocni's, else Multus's
    bool kubeconfig_set = false;     ///< --kubeconfig given
    double interval = 60;            ///< seconds: read the facts at least this often
    double heartbeat = 300;          ///< seconds: send unchanged facts again after this long
    double settle = 0.3;             ///< seconds to wait after a change for the rest of it
    double api_timeout = 10;         ///< seconds per API request
    bool once = false;               ///< publish (if needed) and return
    bool capacities = true;          ///< keep the extended resources too (needs list/watch of NADs)
    bool annotation = true;          ///< keep the facts annotation (node-report --publish)
    /// `topocni dra-driver`: keep this node's ResourceSlices (cluster/dra_sync.h), made from
    /// the same facts, instead of or beside the annotation.
    bool slices = false;
    std::string driver = cluster::dra::kDriver;
    cluster::dra::SliceOptions devices;
    /// Where the publisher keeps the NADs it watches: shared with another reader in the
    /// process (topocni-dra's kubelet plugin re-checks a claim's NAD from it instead of a
    /// GET). Made by publish() when null.
    std::shared_ptr<cluster::NadInformer> nads;
};

/// Runs until `stop` (set by the signal handler); 0 on a clean stop. With `once`, 0 when
/// the Node carries the facts afterwards, 1 when it does not.
int publish(const PublishOptions& o, const std::atomic<bool>& stop);

/// publish() until SIGTERM or SIGINT, logging at info level: what `node-report --publish`
/// and `dra-driver` run.
int publish_until_signal(const PublishOptions& o);

}  // namespace cluster::cmd
