// The pod's refusal record: what a refused ADD (code 100) leaves for the node's refusal
// agent (`topocni refusal-agent`, cni/cli/refusal_agent.h) and `topocni explain --pod`.
// One small JSON file per pod, <stateDir>/refused/<namespace>_<name>.json, rewritten
// whole (temp file, rename) on every refusal of the pod, so it never grows: the evidence
// is cut to 1 KiB and only the times of the last evictAfterRefusals refusals are kept.
// ADD makes no API call for it; the agent turns it into an Event (and an eviction, when
// the NAD asks), and removes it once the pod is gone.
#pragma once
#include <cstdint>
#include <ctime>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace placement::refusal_record {

inline constexpr size_t kMaxEvidence = 1024;   ///< bytes of evidence kept (an Event message holds 1024)
inline constexpr size_t kMaxRecords = 4096;    ///< records on a node; a refusal past it is logged, not recorded

struct Record {
    int version = 1;
    std::string pod_namespace, pod_name, pod_uid;   ///< CNI_ARGS K8S_POD_*; the uid may be empty
    std::string network;                            ///< the network's name (under Multus, the NAD's)
    std::string node;                               ///< as placement names it; may be empty
    std::vector<std::string> constraints;           ///< the failed ones, by config key
    std::string evidence;                           ///< "<constraint>: <evidence> | ...", at most kMaxEvidence bytes
    int64_t first = 0, last = 0;                    ///< unix seconds of the first and last refusal of this pod uid
    uint64_t count = 0;                             ///< refusals of this pod uid so far
    bool evict = false;                             ///< onRefusal: evict
    int after = 3, window_seconds = 300;            ///< evictAfterRefusals, evictWindowSeconds
    std::vector<int64_t> recent;                    ///< times of the last `after` refusals, oldest first
};

/// What ADD knows of one refusal.
struct Refusal {
    std::string pod_namespace, pod_name, pod_uid, network, node;
    std::vector<std::string> constraints;
    std::string evidence;
    bool evict = false;
    int after = 3, window_seconds = 300;
};

std::string dir(const std::string& state_dir);
/// "<namespace>_<name>.json" (a namespace has no '_'); nullopt when either is not a valid
/// Kubernetes name (nothing is recorded then). Names too long for a file name are cut and
/// given 16 hex digits of their hash.
std::optional<std::string> file_name(const std::string& pod_namespace, const std::string& pod_name);

/// ADD: counts the refusal in the pod's record (a new record when there is none, or when
/// it was for another pod uid). Never throws: a record must not change the verdict
/// (failures are logged).
void note(const std::string& state_dir, const Refusal& r, std::time_t now);

/// `r` with `refusal` counted at `now`: the pure part of note.
Record counted(std::optional<Record> r, const Refusal& refusal, std::time_t now);

/// Refusals in `recent` within the last window_seconds before `now`.
size_t refusals_within(const Record& r, std::time_t now);
/// Whether the agent should evict now: onRefusal evict, and evictAfterRefusals refusals
/// within evictWindowSeconds.
bool eviction_due(const Record& r, std::time_t now);

nlohmann::json to_json(const Record& r);
/// Strict: every member present with its type and within its bounds, nothing unknown;
/// throws placement::Error (Invalid) naming the member otherwise.
Record parse(const std::string& text);

/// The file names of the records (sorted).
std::vector<std::string> list(const std::string& state_dir);
/// The record in file `name` under dir(); nullopt when it does not exist. Throws when it is no record.
std::optional<Record> read(const std::string& state_dir, const std::string& name);
/// The text of the record in file `name`; nullopt when it does not exist.
std::optional<std::string> read_text(const std::string& state_dir, const std::string& name);
/// Removes the record in file `name` if it still holds `text` (an ADD may have rewritten it
/// for a new pod of the same name since it was read); a missing file is fine.
void remove_if_same(const std::string& state_dir, const std::string& name, const std::string& text);

}  // namespace placement::refusal_record
