// Placement validation at ADD (and CHECK): every constraint evaluated, all failures
// reported at once as code 100 ("placement constraint not met") with the evidence in
// details. `topocni explain` prints the same verdicts without changing anything.
#pragma once
#include <string>
#include <vector>

#include "cni/attach/attachment.h"
#include "cni/placement/ledger.h"

namespace cni {

/// The pod an attachment is for.
struct PodInfo {
    std::string uid;                        ///< K8S_POD_UID; empty when unknown
    std::string container_id, ifname;       ///< the attachment itself, which CHECK must not count
    const netns::Handle* netns = nullptr;   ///< the pod netns, when known
    std::string pod_namespace, pod_name;    ///< K8S_POD_NAMESPACE, K8S_POD_NAME: the API tells its node
};

/// The outcome of one constraint.
struct Verdict {
    std::string constraint;   ///< the config key: "nodeSelector", "topology.numaPolicy", ...
    bool pass = true;
    bool warning = false;     ///< passed but logged: a best-effort mismatch, unknown topology allowed
    std::string evidence;     ///< the facts it was decided on
};

struct EvalOptions {
    std::string node_labels_file;   ///< non-empty: the node's labels come from this file only
    bool write_cache = true;        ///< false: the label cache is read but never written
    bool collect_errors = false;    ///< a constraint that cannot be evaluated fails its verdict instead of throwing
};

/// Evaluates every constraint of c.placement (none: empty). Facts that cannot be read
/// (API unreachable: code 11; bad labels file: code 7) throw unless collect_errors.
std::vector<Verdict> evaluate_placement(const conf::NetConf& c, const PodInfo& pod, const EvalOptions& opt = {});

/// Throws Error(kPlacement, ...) when a constraint fails; no-op without constraints.
/// Warnings (best-effort, unknown topology allowed) are logged. ADD counts its refusals
/// (`count_refusals`); CHECK does not.
void check_placement(Context& ctx, bool count_refusals);

/// The "bandwidth" constraint: the link this attachment shares (a macvlan master, a VF's
/// PF), its capacity (topology.linkCapacityMbps, else the link speed) x
/// topology.bandwidthOvercommit, and what the ledger says is committed on it.
struct BandwidthAdmission {
    Verdict verdict;
    std::string link;        ///< ledger name of the shared link; empty when there is none
    ledger::Entry entry;     ///< what this attachment commits
    bool admitted = false;   ///< a known capacity has room for the request
};
BandwidthAdmission evaluate_bandwidth(const conf::NetConf& c, const PodInfo& pod);

/// ADD, after nothing-changed checks passed: re-evaluates under the link's ledger lock and
/// commits this attachment's rates (undo registered), so concurrent ADDs never overcommit.
void admit_bandwidth(Context& ctx, base::Rollback& undo);

/// The host-local pool the attachment draws from (its own ipam, or delegate.ipam), if any.
std::optional<ipam::Config> host_local_pool(const conf::NetConf& c);

/// The ledger name of the link the attachment uses ("" for none): for records and metrics.
std::string attachment_link(const conf::NetConf& c);

/// `topocni explain`: prints every constraint of the config in `config_path` (a CNI
/// config, a conflist, or a NetworkAttachmentDefinition in JSON or YAML whose
/// spec.config holds one) with PASS/FAIL/WARN and its evidence. `pod_uid` and
/// `node_labels_file` may be empty. Changes nothing. Returns 0 when all pass, 1 when
/// one fails, 2 when the config cannot be read.
int explain_main(const std::string& config_path, const std::string& pod_uid, const std::string& node_labels_file);

}  // namespace cni
