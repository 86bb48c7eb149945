// Placement: every constraint of a network evaluated over a node's facts, the one
// evaluation that ADD and CHECK (cni/verbs/placement_step.cc: a refusal is code 100 with
// the evidence in details), `topocni explain`, and the cluster side (cluster/) all call.
// Facts are gathered by facts.cc and judged by evaluate.cc, which touches no node;
// placement knows no attachment kind: the kind describes its device in a Subject.
#pragma once
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "base/error.h"
#include "netns/netns.h"
#include "conf/netconf.h"
#include "placement/ledger.h"
#include "ipam/host_local.h"

namespace placement {

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

/// The device an attachment uses: a PCI device (a VF) or a master interface on the node.
struct Device {
    enum class Kind { None, Pci, Master } kind = Kind::None;
    std::string name;                 ///< PCI address or interface name
    std::string link_kind = "macvlan";   ///< links counted on a master
    std::string none_why;             ///< Kind::None: why there is no device to look at
    std::string label;                ///< "VF 0000:03:02.1", "master 'eth1'"
    /// Kind::Pci: the other devices of PF `pf_pci` that attachments hold, as the kind that
    /// records them knows (the SR-IOV state records); unset when nothing records them.
    std::function<std::vector<std::string>(const std::string& pf_pci)> in_use_on_pf;
};

/// What placement needs of an attachment: every attachment kind (cni/attach/) is one.
/// What the scheduler side can name of an attachment's device from its config alone, before
/// a node is chosen and without the node's kernel: a VF of the NAD's device-plugin
/// resource, a master link by name, or nothing. Each kind answers for its own keys, as it
/// does for ADD (Subject::device).
struct ScheduledDevice {
    enum class Kind { None, Vf, Master };
    Kind kind = Kind::None;
    std::optional<std::string> master;   ///< Master: the link the config names; unset: the default route's, known at ADD
    bool master_in_pod = false;          ///< Master: looked up in the pod netns (linkInContainer)
    bool chosen_at_add = false;          ///< None: there is a device, but only ADD learns which
    std::string none_why;                ///< None: why there is nothing to name
};

class Subject {
public:
    virtual ~Subject() = default;
    /// The device as the scheduler side can name it (ScheduledDevice). `resource_name`: the
    /// NAD's k8s.v1.cni.cncf.io/resourceName, "" when it has none. By default: none.
    virtual ScheduledDevice scheduled_device(const conf::NetConf& c, const std::string& resource_name) const;
    /// The device the attachment uses on the node (a PCI device, a master). Asked when a
    /// constraint first needs it (it may ask the kernel); may throw.
    virtual Device device(const conf::NetConf& c) const = 0;
    /// The host-local pool the attachment draws from, if any; may throw (code 7).
    virtual std::optional<ipam::Config> pool(const conf::NetConf& c) const { return c.host_local; }
    /// The link records name when the device shares none (a veth's bridge), else "".
    virtual std::string unshared_link() const { return ""; }
};

struct EvalOptions {
    std::string node_labels_file;   ///< non-empty: the node's labels come from this file only
    bool write_cache = true;        ///< false: the label cache is read but never written
    bool collect_errors = false;    ///< a constraint that cannot be evaluated fails its verdict instead of throwing
    /// With collect_errors: the code the caller answers such an error with (explain names
    /// the CNI code ADD would return: cni::code_of), shown in the verdict's evidence.
    int (*code_of)(const base::Error&) = nullptr;
};

struct NodeLabels;
struct NodeFacts;
struct PodNuma;

/// Where the evaluation takes its facts from: this node read live (ADD, CHECK, explain),
/// or a facts document published by a node (node_facts.h). Each call may read.
class FactSource {
public:
    virtual ~FactSource() = default;
    virtual NodeLabels labels() = 0;
    virtual const Device& device() = 0;
    /// The document, holding at least the device's part; with `count_links`, the links on
    /// its master too.
    virtual const NodeFacts& device_facts(bool count_links) = 0;
    /// The document, holding at least the ledger of `link`.
    virtual const NodeFacts& ledger_facts(const std::string& link) = 0;
    /// The document, holding at least the pool of the network.
    virtual const NodeFacts& pool_facts(const ipam::Config& pool) = 0;
    virtual PodNuma pod_numa() = 0;
    virtual std::optional<ipam::Config> pool() = 0;
};

/// The one evaluation: every constraint of c.placement and the bandwidth request (none:
/// empty), over the facts `src` gives. ADD, CHECK and explain call it on this node's facts
/// read live; explain --facts and the scheduler side on a published document. Facts that
/// cannot be read (API unreachable: code 11; bad labels file: code 7) throw unless
/// collect_errors.
std::vector<Verdict> evaluate_on(const conf::NetConf& c, FactSource& src, const PodInfo& pod, const EvalOptions& opt = {});

/// evaluate_on this node's facts, read live.
std::vector<Verdict> evaluate_placement(const conf::NetConf& c, const Subject& s, const PodInfo& pod,
                                        const EvalOptions& opt = {});

/// A published facts document as a FactSource: the device as the attachment's kind
/// describes it, the node's labels and the pod's NUMA nodes as the caller knows them.
std::unique_ptr<FactSource> published_facts(const NodeFacts& doc, Device device, const NodeLabels& labels,
                                            const PodNuma& pod, std::optional<ipam::Config> pool);

/// The "bandwidth" constraint: the link this attachment shares (a macvlan master, a VF's
/// PF), its capacity (topology.linkCapacityMbps, else the link speed) x
/// topology.bandwidthOvercommit, and what the ledger says is committed on it.
struct BandwidthAdmission {
    Verdict verdict;
    std::string link;        ///< ledger name of the shared link; empty when there is none
    ledger::Entry entry;     ///< what this attachment commits
    bool admitted = false;   ///< a known capacity has room for the request
};
BandwidthAdmission evaluate_bandwidth(const conf::NetConf& c, const Subject& s, const PodInfo& pod);

/// The ledger name of the link the attachment uses ("" for none): for records and metrics.
std::string attachment_link(const conf::NetConf& c, const Subject& s);

/// The Node this is, as placement names it: nodeName, else the host name lower-cased as
/// kubelet does (code 7 when that is no valid node name).
std::string node_name(const conf::Placement& p);

}  // namespace placement
