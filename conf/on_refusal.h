// What happens to a pod after ADD refused it (code 100): the NAD keys onRefusal,
// evictAfterRefusals and evictWindowSeconds. ADD only writes them into the pod's refusal
// record (placement/refusal_record.h); the node's refusal agent
// (`topocni refusal-agent`) acts on them.
#pragma once

namespace conf {

struct NetConf;

struct OnRefusal {
    /// "evict": the agent evicts the pod (Eviction API) once it was refused `after`
    /// times within `window_seconds`; "wait" (default): it only records the reason.
    bool evict = false;
    int after = 3;               ///< evictAfterRefusals: 1-100
    int window_seconds = 300;    ///< evictWindowSeconds: 10-86400
};

/// Fills c.on_refusal; code 7 naming the key ("onRefusal: 'x' is not one of wait, evict").
void parse_on_refusal(NetConf& c);

}  // namespace conf
