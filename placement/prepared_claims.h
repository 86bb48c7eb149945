// The node's record of the ResourceClaims kubelet asked topocni's DRA plugin to prepare
// (kubelet/, cluster/claim_prepare.h): what the scheduler allocated and the node checked,
// kept so that ADD attaches exactly that device and counts exactly that bandwidth, and so
// that a crash at any step loses nothing and leaks nothing.
//
// Under <stateDir>/dra/:
//   claims/<claimUID>.json   one record per claim: its state (prepared, unpreparing), its
//                            pods, its devices and what each books; written after the
//                            holds below, so a hold no record names is a crash's leftover.
//                            The one durable write of a prepare: the holds and the index
//                            are created atomically but not synced, and rebuilt from the
//                            records when the plugin starts (a power loss may lose them)
//   devices/<pci>            a VF held by a claim: a symlink to the claim's UID, created
//                            exclusively, so two claims can never hold one VF (an earlier
//                            version's regular file holding the UID is read too)
//   pods/<podUID>.<claimUID> the claims prepared for a pod that book bandwidth (empty
//                            files): what ADD looks up by pod, to count the claim's booking
//                            as its attachment's (a VF's is found by its deviceID instead).
//                            An earlier version's pods/<podUID>/<claimUID> goes at recovery
//                            (drop_nested_index), which indexes the records again
// A link device's bandwidth is an entry of the bandwidth ledger (ledger.h) under network
// kLedgerNetwork, container ID <claimUID>, ifname <request>: node-report, the publisher
// and ADD's admission count it like any attachment's. No CNI network may be called "dra"
// (conf refuses it), so DEL and GC of a network never touch a claim's entries.
#pragma once
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace placement::prepared_claims {

inline constexpr const char* kLedgerNetwork = "dra";

struct Device {
    std::string request, pool, device;   ///< the allocation result
    std::optional<std::string> share_id; ///< result.shareID (a shared device's allocation)
    std::string kind;                    ///< "vf", "link", "pool"
    std::string pci;                     ///< vf: the VF's PCI address
    std::string link;                    ///< link: its ledger name (a PF's PCI address, a master)
    uint64_t egress_bps = 0, ingress_bps = 0;   ///< link: what the claim consumes

    /// A link whose bandwidth the claim books in the ledger.
    bool books_bandwidth() const { return kind == "link" && (egress_bps || ingress_bps); }
};

struct Pod {
    std::string uid, name;   ///< status.reservedFor (the claim's namespace is the pod's)
};

struct Record {
    int version = 1;
    /// "prepared", or "unpreparing" while its holds go; "preparing" (an earlier version's
    /// mark before the holds) is read and rolled back.
    std::string state;
    std::string uid, ns, name;           ///< the claim
    std::string network;                 ///< "ns/nad" from the claim's topocni.io/network, if any
    std::vector<Pod> pods;
    std::vector<Device> devices;

    bool holds_pod(const std::string& pod_uid) const;
    /// A device of it books bandwidth: ADD of its pods looks it up by pod (the index).
    bool books_bandwidth() const;
    std::string key() const { return ns + "/" + name; }
};

std::string root(const std::string& state_dir);
/// A claim UID as it may name a file: 1-64 of [A-Za-z0-9-] (the API's are UUIDs).
bool valid_uid(const std::string& uid);

nlohmann::json to_json(const Record& r);
/// Strict; base::Error naming the member on a wrong shape.
Record record_from_json(const nlohmann::json& j);

/// nullopt: no record. A record that does not parse throws base::Error.
std::optional<Record> read(const std::string& state_dir, const std::string& uid);
/// Atomically and durably (temp file, fsync, rename, directory fsync).
void write(const std::string& state_dir, const Record& r);
/// A record's first write: created in place, exclusively, then synced with its directory.
/// One directory operation where write()'s temp file and rename are two. A reader may find
/// it empty for a moment (read() throws; ADD refuses the VF all the same), and a power loss
/// before the sync may leave it cut: kubelet never saw that prepare answered, and recovery
/// removes the record and what it held.
void create(const std::string& state_dir, const Record& r);
void remove(const std::string& state_dir, const std::string& uid);
/// Every record's UID (file names), sorted.
std::vector<std::string> uids(const std::string& state_dir);

/// Makes devices/<pci> name `uid`; the UID of the claim that holds it already otherwise
/// (nullopt: held by `uid` now).
std::optional<std::string> hold_vf(const std::string& state_dir, const std::string& pci, const std::string& uid);
/// The UID holding VF `pci`, if any. One openat on ADD's path: ENOENT is the common case.
std::optional<std::string> vf_holder(const std::string& state_dir, const std::string& pci);
/// Removes devices/<pci> when `uid` holds it.
void release_vf(const std::string& state_dir, const std::string& pci, const std::string& uid);
/// Every held VF: (pci, uid).
std::vector<std::pair<std::string, std::string>> held_vfs(const std::string& state_dir);

/// pods/<pod>.<claim> for each of the record's pods, when it books bandwidth (what ADD looks
/// up by pod; a VF's claim is found by its deviceID). Call under the records' lock.
void index_pods(const std::string& state_dir, const Record& r);
void unindex_pod(const std::string& state_dir, const std::string& pod_uid, const std::string& claim_uid);
/// The claims prepared for `pod_uid` (none: one failed opendir, or one read of pods/).
std::vector<std::string> pod_claims(const std::string& state_dir, const std::string& pod_uid);
/// Removes the temp files a killed writer left in `dir` (base::fs::write_file's
/// ".<name>.tmp.<pid>", whose pid is gone); returns them.
std::vector<std::string> remove_stale_temps(const std::string& dir);

/// Every (pod, claim) in the index.
std::vector<std::pair<std::string, std::string>> indexed_pods(const std::string& state_dir);
/// Removes an earlier version's index directories (pods/<pod>/); returns them.
std::vector<std::string> drop_nested_index(const std::string& state_dir);

}  // namespace placement::prepared_claims
