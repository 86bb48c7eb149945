#include "cni/shaping.h"

#include "cni/host_name.h"
#include "cni/log.h"
#include "netns/tc.h"

namespace cni {

namespace {

netns::tc::Tbf tbf(const conf::RateLimit& r) { return {r.rate_bps, r.burst_bits}; }

}  // namespace

void shape_host_end(Context& ctx, const std::string& host_end, Rollback& undo) {
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
    log::info("shaped on '" + host_end + "'");
}

void shape_in_pod(Context& ctx, bool egress, Rollback& undo) {
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
    log::info("shaped '" + dev + "' in the pod");
}

void unshape(const Context& ctx, bool in_pod) {
    std::string ifb = ifb_link_name(ctx.env.container_id, ctx.env.ifname);
    netns::tc::delete_ifb(ifb);
    if (in_pod && ctx.pod) netns::with(*ctx.pod, [&] { netns::tc::delete_ifb(ifb); });
}

}  // namespace cni
