// kubelet's two calls to a DRA driver, NodePrepareResources and NodeUnprepareResources
// (kubelet/ serves them over gRPC), over plain structs: for each claim, read it from the
// API, take the devices the scheduler allocated from this node's pool to driver
// topocni.io, check each against the node as it is now with placement's evaluation (the
// one ADD runs), and record durably what the claim holds (placement/prepared_claims.h):
// the VF, the link bandwidth it consumes (a ledger entry), its pods. ADD then attaches
// exactly that VF for exactly those pods.
//
// Every outcome is per claim: a claim that is gone, replaced, allocated elsewhere or that
// no longer fits gets an error naming why (kubelet shows it as the pod's
// FailedPrepareDynamicResources event) and leaves nothing. A repeated call answers from
// the record, with no API call. Each write is a step named by the record's state, so a
// crash anywhere is rolled back (preparing) or forward (unpreparing) by recover().
#pragma once
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "placement/node_facts.h"
#include "placement/prepared_claims.h"

namespace cluster::claims {

/// A claim as kubelet names it (namespace, UID, name: all required by the API).
struct ClaimRef {
    std::string ns, uid, name;
};

/// One prepared device, as kubelet's Device message carries it.
struct PreparedDevice {
    std::vector<std::string> request_names;
    std::string pool, device;
    std::optional<std::string> share_id;
};

/// NodePrepareResourceResponse: devices, or an error (then devices are ignored).
struct Answer {
    std::vector<PreparedDevice> devices;
    std::string error;
};

// --- the ResourceClaim (resource.k8s.io/v1), as far as preparing needs it ---

struct AllocationResult {
    std::string request, driver, pool, device;
    std::optional<std::string> share_id;
    std::map<std::string, std::string> consumed_capacity;   ///< name -> quantity
};

struct ReservedFor {
    std::string api_group, resource, name, uid;
};

struct Claim {
    std::string ns, name, uid;
    std::map<std::string, std::string> annotations;
    /// spec.devices.requests[].exactly.capacity.requests, by request name.
    std::map<std::string, std::map<std::string, std::string>> requested_capacity;
    bool allocated = false;   ///< status.allocation is set
    std::vector<AllocationResult> results;
    std::vector<ReservedFor> reserved_for;
};

/// Strict: the members used must have the API's types; base::Error naming the member
/// ("status.allocation.devices.results[0].pool: expected a string") otherwise.
Claim read_claim(const nlohmann::json& j);

/// A capacity quantity as a whole number ("100", "1k", "2M", "1Gi"); nullopt when it is
/// none (negative, fractional, too large, unknown suffix).
std::optional<uint64_t> quantity_value(const std::string& q);

// --- preparing ---

/// The API's answer to a GET: status 0 when there was none (unreachable; `error` says why).
struct ApiAnswer {
    int status = 0;
    nlohmann::json body;
    std::string error;
};

struct PrepareOptions {
    std::string node;                       ///< this node: its pool's name
    std::string driver = "topocni.io";
    std::string state_dir = "/var/lib/cni/topocni";
    /// GET of an API path (a claim, a NAD).
    std::function<ApiAnswer(const std::string& path)> get;
    /// The NAD "<namespace>/<name>" from a watch cache, if the caller keeps one and it has
    /// the NAD (else null: it is read with `get`). A NAD changes rarely and the publisher
    /// watches them anyway: a GET fewer per prepare.
    std::function<std::shared_ptr<const nlohmann::json>(const std::string& key)> cached_nad;
    /// This node's sysfs: the claimed devices are read there, live, as ADD reads them.
    std::string sysfs_root = "/sys";
    /// A link's capacity when no ADD recorded one: its speed x this, as the slices offer it
    /// (dra-driver's --bandwidth-overcommit).
    double bandwidth_overcommit = 1.0;
};

class Preparer {
public:
    explicit Preparer(PrepareOptions o) : o_(std::move(o)) {}
    /// NodePrepareResources for one claim.
    Answer prepare(const ClaimRef& ref);
    /// NodeUnprepareResources for one claim: "" on success (an unknown claim included).
    std::string unprepare(const ClaimRef& ref);
    /// Rolls back claims caught preparing and forward claims caught unpreparing (a crash),
    /// and removes index files and ledger entries no record names. Returns what it did.
    std::vector<std::string> recover();
    /// Releases prepared claims the API no longer has (404, or another UID under the name)
    /// whose VFs no attachment holds: a claim deleted while the plugin was down is never
    /// unprepared by kubelet. The API unreachable: nothing is concluded.
    std::vector<std::string> sweep();

private:
    Answer prepare_fresh(const ClaimRef& ref);
    Answer hold(placement::prepared_claims::Record& rec,
                const std::vector<std::pair<placement::prepared_claims::Device, std::optional<long long>>>& planned);
    /// Unprepare: the record marked unpreparing, its holds dropped, the record removed.
    void release(const placement::prepared_claims::Record& r);
    /// The VF holds, ledger entries and pod index entries of `r` (those it holds), nothing else.
    void drop_holds(const placement::prepared_claims::Record& r);
    PrepareOptions o_;
};

/// The answer a prepared record gives (the same bytes every time).
Answer answer_of(const placement::prepared_claims::Record& r);

}  // namespace cluster::claims
