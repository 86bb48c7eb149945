// Traffic shaping with tc, built with libnl-route-3's objects (qdisc, u32 classifier,
// mirred action, ifb link) rather than hand-made tc messages: each qdisc has its own
// nested options, rate tables and unit conversions that libnl has right. Every function
// acts in the network namespace of the calling thread (its socket is opened there), so
// a netns guard decides where.
//
// Errors are netns::Error Failed naming the object and the device, e.g.
// "tc: cannot add a tbf qdisc on 'veth1': Object exists (File exists: Exclusivity flag on,
// cannot modify)": libnl's text, then the kernel's errno text and extended ack. sys_errno
// is the kernel's errno when the kernel refused (ENODEV for a missing device).
#pragma once
#include <cstdint>
#include <optional>
#include <string>

namespace netns::tc {

/// bits per second, bits: the CNI bandwidth capability's units.
struct Tbf {
    uint64_t rate_bps = 0;
    uint64_t burst_bits = 0;
};

/// The highest rate a tbf takes through libnl (a 32-bit byte rate): ~17.1 Gb/s. Config
/// validation refuses more (conf/bandwidth.cc); here it throws.
constexpr uint64_t kMaxRateBps = 0x7fffffffULL * 8;

/// Root tbf on `dev`: limits what `dev` transmits. Rate bytes = rate/8, bucket bytes =
/// burst/8, latency 25 ms (limit = rate x 25 ms + bucket), as the reference bandwidth
/// plugin computes them. A bucket too large for tbf's buffer (a u32 of scheduler ticks,
/// ~274 s of traffic) at this rate is cut to the largest that fits: runtimes send a burst
/// of 2^32-1 bits, which at 1 Mb/s would wrap around to almost no bucket.
void add_root_tbf(const std::string& dev, const Tbf& t);

/// Limits what `dev` receives: creates ifb `ifb` (up, `dev`'s MTU, IFLA_IFALIAS `alias`
/// when given) with a root tbf, an ingress qdisc on `dev`, and a u32 match-all filter
/// (protocol all, prio 1) whose mirred action redirects every packet to the ifb: the
/// reference plugin's layout. When a step fails it removes what this call created (the
/// ifb, and the ingress qdisc if it added it) before throwing.
void add_ingress_shaping(const std::string& dev, const std::string& ifb, const Tbf& t,
                         const std::string& alias = "");

/// Deletes the root and the ingress qdisc of `dev`; a missing device or qdisc is fine.
void remove_shaping(const std::string& dev);

/// Deletes link `ifb` if it exists and is an ifb; true when it deleted one.
bool delete_ifb(const std::string& ifb);

/// What is on `dev` now (CHECK, tests). The rate reads back exactly (in whole bytes per
/// second); the burst as tbf keeps it (in scheduler ticks), so it may differ by rounding.
struct State {
    std::optional<Tbf> root_tbf;
    bool ingress_qdisc = false;
    std::optional<std::string> redirect_to;   ///< the link the ingress filter's mirred action redirects to
};
State read_state(const std::string& dev);

}  // namespace netns::tc
