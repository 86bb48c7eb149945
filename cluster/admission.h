// The mutating admission webhook's answer (`topocni admission-webhook`): a pod's topocni
// networks written into the pod itself, so that the default scheduler, unmodified, counts
// them in its own books and honours their nodeSelector.
//
// For each topocni NAD of the pod (every form of k8s.v1.cni.cncf.io/networks), the first
// container gets requests = limits (extended resources cannot be overcommitted) of the
// NAD's bandwidth and one address of its pool (resources.h names them), summed over the
// pod's networks and added to what the container already asks; each NAD's nodeSelector
// becomes requirements ANDed into every required nodeAffinity term. Every pod with a
// topocni network also asks for one kMarkerResource (resources.h): the scheduler extender's
// managedResources, so that kube-scheduler asks the extender about such pods only. The
// pod is marked with
// the annotation topocni.io/admitted: a pod carrying it (re-admission) is left as it is.
#pragma once
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "cluster/scheduling.h"
#include "conf/placement.h"

namespace cluster {

inline constexpr const char* kAdmittedAnnotation = "topocni.io/admitted";

/// The NAD a selection names, resolved and parsed (pod_network); its `error` says when it
/// is missing or does not parse.
using NadLookup = std::function<PodNetwork(const NetworkSelection&)>;

struct Mutation {
    bool allowed = true;
    std::string message;                 ///< why not
    nlohmann::json patch = nlohmann::json::array();   ///< RFC 6902 operations; empty: leave the pod
    std::vector<std::string> warnings;   ///< shown by kubectl: what is not counted, and why
};

/// Dynamic Resource Allocation (`admission-webhook --dra-claims`): a network whose NAD needs
/// devices (dra_claims.h) gets the pod a claim from its ResourceClaimTemplate instead of
/// extended resources: the pod's spec.resourceClaims entry and its first container's
/// resources.claims reference, both named <nad>-topocni, each added only when missing.
struct DraClaims {
    std::string driver = "topocni.io";
    /// The template of network `n`'s claim in the pod's namespace `ns`: its name when it
    /// exists (or was made now), nullopt when the network goes without a claim. `dry_run`:
    /// the API server's dry run, which must change nothing.
    std::function<std::optional<std::string>(const PodNetwork& n, const std::string& ns, const nlohmann::json& template_object,
                                             bool dry_run)>
        template_for;
};

/// The mutation of a pod being created in `ns`; `claims` null: no DRA claims.
Mutation mutate_pod(const nlohmann::json& pod, const std::string& ns, const NadLookup& nads,
                    const DraClaims* claims = nullptr, bool dry_run = false);

/// A nodeSelector as node selector requirements (matchExpressions of a nodeSelectorTerm).
nlohmann::json node_selector_requirements(const conf::LabelSelector& sel);

/// The most JSON text of a pod that review() builds a tree of: the pod's container resources,
/// affinity and the few annotations it reads (the rest of the request is read without one).
/// A tree costs up to 30 times its text, so this bounds a request's memory whatever its size.
inline constexpr size_t kMaxPodPartsBytes = 1u << 20;

/// The AdmissionReview (admission.k8s.io/v1) to send back for `body`. Throws code 7 for a
/// body that is no AdmissionReview with a request, for containers nested deeper than
/// base::json_text::kMaxDepth, and for pod parts over kMaxPodPartsBytes (the server answers 400).
std::string review(const std::string& body, const NadLookup& nads, const DraClaims* claims = nullptr);

}  // namespace cluster
