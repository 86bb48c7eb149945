// The CNI `bandwidth` capability: what a pod may send and receive on its attachment,
// from the pod's point of view (egress = what the pod sends). The same object is read
// from runtimeConfig.bandwidth (kubelet's pod annotations, Multus's network selection
// element) and from a top-level "bandwidth" key (the NAD's default); runtimeConfig wins.
#pragma once
#include <cstdint>
#include <optional>
#include <string>

#include <nlohmann/json.hpp>

namespace conf {

struct NetConf;

/// One direction: rate in bits per second, burst (the token bucket) in bits.
struct RateLimit {
    uint64_t rate_bps = 0;
    uint64_t burst_bits = 0;
};

struct Bandwidth {
    std::optional<RateLimit> ingress;   ///< traffic to the pod
    std::optional<RateLimit> egress;    ///< traffic from the pod
    std::string source;                 ///< "bandwidth" or "runtimeConfig.bandwidth": the key errors name
    bool empty() const { return !ingress && !egress; }
};

/// The burst a rate without one gets: 100 ms of traffic at the rate, and never less
/// than 128 Kibit, so that a full-size (even a 9000-byte jumbo) frame fits the bucket;
/// a bucket smaller than a frame drops every frame of that size.
uint64_t default_burst(uint64_t rate_bps);

/// Parses a bandwidth object found at `path`. Code 7 naming the key: a value that is no
/// non-negative integer, a rate from 1 to 7 bits/s, a burst without a rate, a burst of
/// 4 GB or more (tbf's limit, as the reference plugin says). Rates of 0 mean "no limit" in
/// that direction. `any_case`: keys match whatever their case (runtimeConfig: containerd
/// sends "IngressRate").
Bandwidth parse_bandwidth_object(const nlohmann::json& j, const std::string& path, bool any_case);

/// Fills c.bandwidth from runtimeConfig.bandwidth, else from "bandwidth".
void parse_bandwidth(NetConf& c);
/// Code 7 naming `key` when the rate is more than tc's tbf can shape: for the directions a
/// kind shapes with tbf (ingress always; egress unless the kind limits it elsewhere).
void require_tbf_rate(const Bandwidth& b, const std::optional<RateLimit>& r, const char* key);

}  // namespace conf
