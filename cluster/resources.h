// The scheduler's own books for topocni networks: what a node offers as extended resources
// (its Node's status.capacity, kept by `node-report --publish`) and what a pod's networks
// ask for (requests and limits the admission webhook writes into the pod). Both sides name
// a resource from the NAD alone, so one name means the same link or pool on every node:
//
//   bandwidth.topocni.io/macvlan.<master>.egress    Mb/s on the macvlan master a NAD names
//   bandwidth.topocni.io/sriov.<resourceName>.egress  Mb/s on the PFs of an SR-IOV resource
//   (and .ingress)                                   ("/" of the resourceName becomes "_")
//   addresses.topocni.io/<network>                   addresses of a built-in host-local pool
//
// A name part longer than Kubernetes allows (63), or with a character it does not, is cut
// and ends in 8 hex digits of its hash: stable across restarts and nodes.
#pragma once
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "cluster/scheduling.h"

namespace cluster {

inline constexpr const char* kBandwidthDomain = "bandwidth.topocni.io";
inline constexpr const char* kAddressesDomain = "addresses.topocni.io";
/// One per pod with topocni networks (the admission webhook adds it), so that the scheduler
/// extender, listing it in managedResources, is asked about those pods only
/// (kube-scheduler's HTTPExtender.IsInterested). ignoredByScheduler keeps NodeResourcesFit's
/// Filter from counting it, but not that plugin's queueing hint: kube-scheduler v1.37.2
/// judges "could this Node update make the pod fit" with every request counted
/// (noderesources.Fits passes no ignored resources), so on a node without the marker a pod
/// refused once (addresses not offered yet, say) would wait for the 5-minute flush of
/// unschedulable pods. Every node with a publisher therefore offers as many as it takes
/// pods (marker_capacity): counting it never refuses a pod, and kubelet's admission counts
/// it against that. The publisher always writes it and never removes it.
inline constexpr const char* kMarkerResource = "topocni.io/networks";

/// Resource name -> amount (Mb/s or addresses): whole numbers, as extended resources are.
using Resources = std::map<std::string, long long>;

/// The shared link a NAD's bandwidth is admitted on, named from the NAD alone:
/// "macvlan.<master>" or "sriov.<resourceName>"; empty, with `why`, when it has none.
struct LinkId {
    std::string id;
    std::string why;
};
LinkId link_of(const PodNetwork& n);

std::string bandwidth_resource(const std::string& link_id, bool egress);
std::string address_resource(const std::string& network);
/// One of the two domains above: topocni keeps it (adds, changes, removes).
bool is_topocni_resource(const std::string& name);
/// How many of the marker a node offers: its capacity of pods (a quantity, "110"), or
/// kubelet's default --max-pods (110) while the Node has none a whole number can be read from.
long long marker_capacity(const std::string& pods);
/// `name` as one reference token of a JSON pointer (RFC 6901: "~" as "~0", "/" as "~1"),
/// as a JSON patch names a resource or an annotation.
std::string pointer_token(const std::string& name);
/// Kubernetes' rules for an extended resource name (a DNS-subdomain prefix outside
/// kubernetes.io, "/", a qualified name of at most 63 characters). `why` says what is wrong.
bool valid_resource_name(const std::string& name, std::string* why = nullptr);

/// A Kubernetes quantity ("10M", "1.5Gi", "100k", "2500") as a number; nullopt when it is
/// none. Used for the pod's kubernetes.io/{ingress,egress}-bandwidth annotations (bits/s).
std::optional<double> parse_quantity(const std::string& s);

/// What one network of a pod needs from the node's books: its bandwidth (Mb/s, rounded
/// up) on its link and one address of its pool. `notes` say what is not counted, and why.
struct Needs {
    Resources resources;
    std::vector<std::string> notes;
};
/// `annotations`: the pod's, for the bandwidth capability (they win over the NAD's
/// "bandwidth", as runtimeConfig does at ADD). Throws code 7 for an annotation that is
/// no quantity.
Needs needs_of(const PodNetwork& n, const std::map<std::string, std::string>& annotations);

/// What this node offers for these NADs: for each NAD whose nodeSelector the node's labels
/// meet, the capacity x bandwidthOvercommit of its link per direction (Mb/s, rounded down;
/// the least when NADs sharing a link disagree; the sum over the PFs of an SR-IOV
/// resource) and the size of its host-local pool (the smallest range set).
Resources capacities(const std::vector<PodNetwork>& nads, const placement::NodeFacts& facts,
                     const std::map<std::string, std::string>& labels);

/// The addresses each network keeps free, by network name (the config's "name", as pools
/// are published): the largest topology.minFreeAddresses of the NADs naming it that can
/// land on this node (those `capacities` counts). ADD wants that many left after its own
/// address; the node publishes each pool less it (in the DRA slices,
/// dra::SliceOptions::address_reserve; in the extended resources, by `capacities`), and a
/// claim or pod takes one: the scheduler's count then stops where ADD will. A NAD asking
/// less than another NAD of its network is held to the larger reserve.
std::map<std::string, long long> address_reserves(const std::vector<PodNetwork>& nads,
                                                  const std::map<std::string, std::string>& labels);

/// The address pools of the NADs that can land on this node (their nodeSelector meets
/// `labels`) and that the facts do not know yet (no attachment here has used them): each
/// range set with what its store (dataDir) holds. The DRA devices offer them before the
/// first ADD.
std::vector<placement::NetworkFacts> unused_pools(const std::vector<PodNetwork>& nads, const placement::NodeFacts& facts,
                                                  const std::map<std::string, std::string>& labels);

/// The masters the NADs name: the facts must describe them even before a link is on them.
std::vector<std::string> masters_of(const std::vector<PodNetwork>& nads);

}  // namespace cluster
