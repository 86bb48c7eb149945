// The Eviction API as kubectl drain and the descheduler use it: POST
// /api/v1/namespaces/<ns>/pods/<name>/eviction with a policy/v1 Eviction, so that
// PodDisruptionBudgets are respected (429 while a budget forbids it), and the part of a
// Pod an evicter must read first: its uid and its controller (ownerReferences). Wire
// formats: kubernetes/api policy/v1 types.go, pkg/registry/core/pod/storage/eviction.go.
#pragma once
#include <optional>
#include <string>

#include <nlohmann/json.hpp>

#include "kube/https.h"

namespace kube {

/// A Pod's ownerReference.
struct OwnerRef {
    std::string api_version, kind, name, uid;
};

/// What an evicter reads of a Pod object.
struct PodView {
    std::string pod_namespace, name, uid;
    bool terminating = false;            ///< metadata.deletionTimestamp is set
    std::optional<OwnerRef> controller;  ///< the ownerReference with controller: true; none for a bare pod
};

/// Reads a Pod object (GET /api/v1/namespaces/<ns>/pods/<name>). Throws kube::Error
/// (Invalid) naming the member when it is not a Pod with a name and uid, or an
/// ownerReference lacks its kind, name or uid; members it does not need are not looked at.
PodView pod_view(const nlohmann::json& pod);

std::string eviction_path(const std::string& ns, const std::string& name);
/// {"apiVersion":"policy/v1","kind":"Eviction","metadata":{"name","namespace"}}: the
/// pod's own grace period applies.
nlohmann::json eviction_body(const std::string& ns, const std::string& name);

struct EvictionAnswer {
    enum class Outcome {
        Evicted,   ///< 2xx: the pod is being deleted gracefully
        Blocked,   ///< 429: a PodDisruptionBudget forbids it now; try again later
        Gone,      ///< 404: the pod does not exist (any more)
        Failed,    ///< anything else (403, 500 for several budgets, 5xx...)
    } outcome;
    int status = 0;
    std::string message;            ///< the Status message, with the budget's cause for 429
    int retry_after_seconds = 0;    ///< details.retryAfterSeconds, when the server gave one
};
EvictionAnswer eviction_answer(const https::Response& r);

}  // namespace kube
