// The node's facts as one document: what placement decides on, for every device, link and
// pool of the node. ADD and CHECK read the part they need live (facts.cc) into this same
// structure; `topocni node-report --publish` reads all of it and publishes it on the Node
// as the annotation topocni.io/facts; a consumer elsewhere (the scheduler extender,
// `topocni explain --facts`) parses it back. One structure, so one evaluation
// (placement.h, evaluate_on) judges both, with the same verdicts and the same words.
#pragma once
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "placement/ledger.h"

namespace placement {

/// The document's schema version: a consumer refuses another major version.
inline constexpr int kFactsVersion = 1;
/// The Node annotation the document is published as.
inline constexpr const char* kFactsAnnotation = "topocni.io/facts";

struct NumaFacts {
    int id = 0;
    std::string cpus;                          ///< "0-3,8-11", as sysfs cpulist
};

/// A virtual function of a PF.
struct VfFacts {
    std::string pci;
    std::optional<int> numa;                   ///< its numa_node (-1: no affinity); unset: no file
    bool in_use = false;                       ///< a topocni attachment holds it
    std::string pod_uid;                       ///< whose, when known
};

struct PfFacts {
    std::string pci, netdev;                   ///< netdev empty: the PF has none in sysfs
    std::optional<int> numa;
    std::optional<long long> speed_mbps;       ///< unset: link down or no speed
    std::string resource_name;                 ///< the SR-IOV device plugin's, from kubelet's checkpoint
    long long total_vfs = 0;                   ///< sriov_totalvfs
    bool usage_known = true;                   ///< false: nothing records which VFs are in use
    bool vfs_listed = true;                    ///< read live for one device: every VF read yet (never published)
    std::vector<VfFacts> vfs;                  ///< configured VFs (sriov_numvfs), in virtfn order
};

/// A netdev of the node that attachments use as a master (or a physical link).
struct LinkFacts {
    std::string name;                          ///< netdev
    std::string pci;                           ///< its PCI device, if any
    std::string pf;                            ///< the SR-IOV PF behind it (itself or a VF's PF), if any
    bool has_device = false;                   ///< class/net/<name>/device exists
    std::optional<int> numa;
    std::optional<long long> speed_mbps;
    /// How many links of `links_kind` are on it (in the node and in pod namespaces); unset:
    /// not counted. `link_sample`: where the first few are.
    std::optional<long long> link_count;
    std::vector<std::string> link_sample;
    std::string links_kind = "macvlan";
    bool exists = true;                        ///< false: no such netdev (a master named in a config)
};

/// The bandwidth ledger of one shared link (a master by name, a PF by PCI address).
struct LedgerFacts {
    std::string link;
    std::optional<ledger::Entry> capacity;     ///< what the last admission counted against
    uint64_t egress_bps = 0, ingress_bps = 0;  ///< committed, all entries
    /// Of those, what DRA claims booked (prepared_claims.h), read live only (never
    /// published): the scheduler counts a claim's consumedCapacity itself, so the DRA
    /// driver's slices must not subtract it again.
    uint64_t claimed_egress_bps = 0, claimed_ingress_bps = 0;
    long long count = 0;                       ///< entries
    std::vector<ledger::Entry> sample;         ///< the first few, to name them
};

/// How many of a list evidence names before it says "and N more".
inline constexpr size_t kSample = 4;

struct RangeSetFacts {
    std::string range_set;
    unsigned __int128 size = 0, used = 0;
    bool held_by_pod = false;                  ///< read live for one attachment: it holds one of `used` (never published)
};

struct NetworkFacts {
    std::string name;
    std::vector<RangeSetFacts> sets;
};

/// The attachments of one network, kind and link, by their pods' UIDs ("" when unknown).
struct AttachmentFacts {
    std::string network, kind, link;
    std::vector<std::string> pods;
};

struct NodeFacts {
    int version = kFactsVersion;
    std::string node;
    std::string taken_at;                      ///< RFC 3339, UTC
    std::vector<NumaFacts> numa;
    std::vector<PfFacts> pfs;
    std::vector<LinkFacts> links;
    std::vector<LedgerFacts> ledgers;
    std::vector<NetworkFacts> networks;
    std::vector<AttachmentFacts> attachments;

    const PfFacts* pf(const std::string& pci) const;
    /// The PF holding VF `pci`, and the VF.
    std::pair<const PfFacts*, const VfFacts*> vf(const std::string& pci) const;
    const LinkFacts* link(const std::string& name) const;
    const LedgerFacts* ledger_of(const std::string& link) const;
    const NetworkFacts* network(const std::string& name) const;
};

nlohmann::json to_json(const NodeFacts& f);
/// Strict: every member of the schema's type, unknown members refused, numbers in range;
/// conf-style error naming the member ("pfs[2].vfs[0].numaNode: expected an integer").
NodeFacts facts_from_json(const nlohmann::json& j);
/// The document without takenAt: two documents with equal content are equal facts.
std::string facts_content(const NodeFacts& f);

}  // namespace placement
