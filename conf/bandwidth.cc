#include "conf/bandwidth.h"

#include <algorithm>
#include <cctype>
#include <cstring>

#include "conf/fields.h"
#include "conf/known_keys.h"
#include "conf/netconf.h"

namespace conf {

namespace {

// tbf keeps its bucket in bytes in a u32; the reference plugin refuses burst/8 >= 2^32.
constexpr long long kMaxBurstBits = (1LL << 32) * 8 - 8;
// netns::tc::kMaxRateBps: 2^31-1 bytes per second.
constexpr uint64_t kMaxShapedRate = 0x7fffffffULL * 8;
// 1 Pb/s: far above any NIC, far below where bits-to-bytes arithmetic could overflow.
constexpr long long kMaxRate = 1'000'000'000'000'000LL;

bool equal_ci(const std::string& a, const char* b) {
    size_t n = std::strlen(b);
    if (a.size() != n) return false;
    for (size_t i = 0; i < n; ++i)
        if (std::tolower(static_cast<unsigned char>(a[i])) != std::tolower(static_cast<unsigned char>(b[i]))) return false;
    return true;
}

std::optional<RateLimit> direction(const json& j, const std::string& path, const std::string& rate_key,
                                   const std::string& burst_key) {
    auto rate = opt_int(j, rate_key, path, 0, kMaxRate);
    auto burst = opt_int(j, burst_key, path, 0, kMaxBurstBits);
    if (burst && *burst > 0 && (!rate || *rate == 0))
        bad(join(path, burst_key), "is set, so " + rate_key + " must be set too");
    if (!rate || *rate == 0) return std::nullopt;
    // tc's rates are bytes per second.
    if (*rate < 8) bad(join(path, rate_key), std::to_string(*rate) + " is below the smallest rate tc shapes (8 bits/s)");
    uint64_t r = static_cast<uint64_t>(*rate);
    return RateLimit{r, burst && *burst > 0 ? static_cast<uint64_t>(*burst) : default_burst(r)};
}

}  // namespace

uint64_t default_burst(uint64_t rate_bps) { return std::max<uint64_t>(rate_bps / 10, 128 * 1024); }

Bandwidth parse_bandwidth_object(const json& j, const std::string& path, bool any_case) {
    if (!j.is_object()) bad(path, "expected an object with ingressRate, ingressBurst, egressRate, egressBurst");
    // The keys as sent: containerd's go-cni has no JSON tags and sends "IngressRate"; Go
    // plugins read either, as encoding/json ignores case.
    static const char* kKeys[] = {"ingressRate", "ingressBurst", "egressRate", "egressBurst"};
    std::string sent[4] = {kKeys[0], kKeys[1], kKeys[2], kKeys[3]};
    bool seen[4] = {};
    for (auto it = j.begin(); it != j.end(); ++it) {
        const std::string& k = it.key();
        bool known = false;
        for (int i = 0; i < 4; ++i) {
            if (k == kKeys[i] || (any_case && equal_ci(k, kKeys[i]))) {
                if (seen[i]) bad(join(path, k), "given twice (keys that differ only in case)");
                seen[i] = known = true;
                sent[i] = k;
            }
        }
        if (!known)
            bad(join(path, k), "unknown key" +
                                   did_you_mean(k, {"ingressRate", "ingressBurst", "egressRate", "egressBurst"}) +
                                   " (expected ingressRate, ingressBurst, egressRate, egressBurst)");
    }
    Bandwidth b;
    b.source = path;
    b.ingress = direction(j, path, sent[0], sent[1]);
    b.egress = direction(j, path, sent[2], sent[3]);
    return b;
}

void parse_bandwidth(NetConf& c) {
    const json* rc = opt_object(c.raw, "runtimeConfig", "");
    const json* from_runtime = rc ? member_ci(*rc, "bandwidth") : nullptr;
    const json* from_config = member(c.raw, "bandwidth");
    if (from_runtime) c.bandwidth = parse_bandwidth_object(*from_runtime, "runtimeConfig.bandwidth", true);
    else if (from_config) c.bandwidth = parse_bandwidth_object(*from_config, "bandwidth", false);
    if (c.bandwidth && c.bandwidth->empty()) c.bandwidth.reset();
    if (!c.bandwidth) return;
    // Every kind shapes ingress with tc's tbf; egress too unless the kind limits it
    // elsewhere (a VF's rate, through the PF): see require_tbf_egress.
    require_tbf_rate(*c.bandwidth, c.bandwidth->ingress, "ingressRate");
}

// tc's tbf takes the rate as 32-bit bytes per second (netns/tc.h).
void require_tbf_rate(const Bandwidth& b, const std::optional<RateLimit>& r, const char* key) {
    if (r && r->rate_bps > kMaxShapedRate)
        bad(join(b.source, key), std::to_string(r->rate_bps) + " is more than tc's tbf can shape (" +
                                     std::to_string(kMaxShapedRate) + " bits/s)");
}

}  // namespace conf
