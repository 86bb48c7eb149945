#include "cni/attach/shaping.h"

#include "cni/error.h"
#include "cni/attach/host_name.h"
#include "base/log.h"
#include "netns/tc.h"

namespace cni {

namespace {

netns::tc::Tbf tbf(const conf::RateLimit& r) { return {r.rate_bps, r.burst_bits}; }

}  // namespace

void shape_host_end(Context& ctx, const std::string& host_end, base::Rollback& undo) {
    const auto& c = ctx.conf;
    if (!c.bandwidth) return;
    const auto& bw = *c.bandwidth;
    // What the host end transmits is what the pod receives.
    if (bw.ingress) netns::tc::add_root_tbf(host_end, tbf(*bw.ingress));
    if (bw.egress) {
        std::string ifb = ifb_link_name(ctx.env.container_id, ctx.env.ifname);
        // Marked like the host end, so GC finds it when a crash left no record.
        netns::tc::add_ingress_shaping(host_end, ifb, tbf(*bw.egress),
                                       owner_alias(c.name, ctx.env.container_id, ctx.env.ifname));
        undo.add("ifb " + ifb, [ifb] { netns::tc::delete_ifb(ifb); });
    }
    base::log::info("shaped on '" + host_end + "'");
}

void shape_in_pod(Context& ctx, bool egress, base::Rollback& undo) {
    const auto& c = ctx.conf;
    if (!c.bandwidth) return;
    const auto& bw = *c.bandwidth;
    const std::string& dev = ctx.env.ifname;
    netns::with(*ctx.pod, [&] {
        if (egress && bw.egress) netns::tc::add_root_tbf(dev, tbf(*bw.egress));
        if (bw.ingress) {
            std::string ifb = ifb_link_name(ctx.env.container_id, ctx.env.ifname);
            netns::tc::add_ingress_shaping(dev, ifb, tbf(*bw.ingress));
            auto pod = ctx.pod;
            undo.add("ifb " + ifb + " in the pod", [pod, ifb] { netns::with(*pod, [&] { netns::tc::delete_ifb(ifb); }); });
        }
    });
    base::log::info("shaped '" + dev + "' in the pod");
}

namespace {

std::string rate_of(const netns::tc::Tbf& t) {
    return std::to_string(t.rate_bps) + " bits/s (burst " + std::to_string(t.burst_bits) + " bits)";
}

/// `dev` (in the calling thread's netns) sends at `want`, or sends unshaped when none.
void check_tbf(const netns::tc::State& st, const std::string& dev, const std::optional<conf::RateLimit>& want,
               const char* direction) {
    if (!want) return;
    if (!st.root_tbf)
        throw Error(kCheckFailed, std::string("the ") + direction + " of '" + dev + "' is not shaped (no tbf)");
    // tc keeps the rate in bytes per second and the bucket in scheduler ticks: compare what survives that.
    if (st.root_tbf->rate_bps / 8 != want->rate_bps / 8)
        throw Error(kCheckFailed, std::string("the ") + direction + " of '" + dev + "' is shaped to " +
                                      rate_of(*st.root_tbf) + ", the config asks " + std::to_string(want->rate_bps) +
                                      " bits/s");
}

/// `dev` redirects what it receives to the attachment's ifb, and the ifb sends at `want`.
void check_redirect(const netns::tc::State& st, const std::string& dev, const std::string& ifb,
                    const std::optional<conf::RateLimit>& want, const char* direction) {
    if (!want) return;
    if (!st.ingress_qdisc || st.redirect_to != std::optional<std::string>(ifb))
        throw Error(kCheckFailed, std::string("the ") + direction + " of '" + dev + "' is not redirected to '" + ifb + "'");
    check_tbf(netns::tc::read_state(ifb), ifb, want, direction);
}

}  // namespace

void check_host_end_shaping(const Context& ctx, const std::string& host_end) {
    const auto& c = ctx.conf;
    if (!c.bandwidth) return;
    auto st = netns::tc::read_state(host_end);
    check_tbf(st, host_end, c.bandwidth->ingress, "ingress");
    check_redirect(st, host_end, ifb_link_name(ctx.env.container_id, ctx.env.ifname), c.bandwidth->egress, "egress");
}

void check_pod_shaping(const Context& ctx, bool egress) {
    const auto& c = ctx.conf;
    if (!c.bandwidth) return;
    const auto& bw = *c.bandwidth;
    // Without egress (a VF's is the PF's), only ingress is shaped in the pod; a DPDK VF,
    // which can have nothing else, has no netdev to look at.
    if (!egress && !bw.ingress) return;
    std::string ifb = ifb_link_name(ctx.env.container_id, ctx.env.ifname);
    netns::with(*ctx.pod, [&] {
        auto st = netns::tc::read_state(ctx.env.ifname);
        if (egress) check_tbf(st, ctx.env.ifname, bw.egress, "egress");
        check_redirect(st, ctx.env.ifname, ifb, bw.ingress, "ingress");
    });
}

void unshape_pod(const std::string& netns_path, const std::string& container_id, const std::string& ifname) {
    auto pod = netns::Handle::open(netns_path);
    netns::with(pod, [&] { netns::tc::delete_ifb(ifb_link_name(container_id, ifname)); });
}

void unshape(const Context& ctx, bool in_pod) {
    std::string ifb = ifb_link_name(ctx.env.container_id, ctx.env.ifname);
    netns::tc::delete_ifb(ifb);
    if (in_pod && ctx.pod) netns::with(*ctx.pod, [&] { netns::tc::delete_ifb(ifb); });
}

}  // namespace cni
