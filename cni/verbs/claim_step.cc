#include "cni/verbs/claim_step.h"

#include <sys/stat.h>

#include <optional>

#include "base/error.h"
#include "base/log.h"
#include "cni/error.h"
#include "cni/verbs/placement_step.h"
#include "placement/prepared_claims.h"

namespace cni {

namespace pc = placement::prepared_claims;

namespace {

/// Code 100 when VF `pci` is held by a claim that is not this pod's; the claim otherwise.
std::optional<pc::Record> vf_claim(const Context& ctx, const std::string& pci) {
    const conf::NetConf& c = ctx.conf;
    auto holder = pc::vf_holder(c.state_dir, pci);
    if (!holder) return std::nullopt;
    std::optional<pc::Record> r;
    try {
        r = pc::read(c.state_dir, *holder);
    } catch (const base::Error&) {
        // Being written this moment (pc::create): held all the same, by a claim not read yet.
    }
    const std::string& pod = ctx.env.args.pod_uid;
    if (r && r->state == "prepared" && r->holds_pod(pod)) return r;
    std::string whose;
    if (r)
        for (const auto& p : r->pods) whose += (whose.empty() ? "" : ", ") + r->ns + "/" + p.name;
    // A refusal like any placement refusal: code 100, counted, recorded for the refusal agent.
    enforce(ctx, {{"dra", false, false,
                   "deviceID " + pci + " is held by ResourceClaim " + (r ? r->key() : std::string("?")) + " (uid " +
                       *holder + ")" + (whose.empty() ? "" : " prepared for pod " + whose) +
                       (pod.empty() ? "; this ADD names no pod (K8S_POD_UID)" : "; not for pod uid " + pod)}},
            true);
    return std::nullopt;   // not reached: enforce threw
}

}  // namespace

ClaimHold check_claim(const Context& ctx, const placement::Subject& s) {
    const conf::NetConf& c = ctx.conf;
    struct stat st {};
    if (::stat(pc::root(c.state_dir).c_str(), &st) != 0) return {};   // no claim was ever prepared here
    ClaimHold h;
    placement::Device d = s.device(c);
    if (d.kind == placement::Device::Kind::Pci)
        if (auto r = vf_claim(ctx, d.name)) {
            h.held = true;
            h.claim = r->key() + " (uid " + r->uid + ")";
            base::log::info("VF " + d.name + " is ResourceClaim " + h.claim + "'s, prepared for this pod");
        }
    // The pod's claims that book bandwidth on the link this attachment shares (a VF's PF, a
    // macvlan master): the claim's booking is the attachment's, not one more.
    std::string link;
    for (const auto& uid : pc::pod_claims(c.state_dir, ctx.env.args.pod_uid)) {
        auto r = pc::read(c.state_dir, uid);
        if (!r || r->state != "prepared") continue;
        for (const auto& dev : r->devices) {
            if (!dev.books_bandwidth()) continue;
            if (link.empty()) link = placement::attachment_link(c, s);
            if (dev.link != link) continue;
            h.bandwidth_booked = true;
            base::log::info("bandwidth on " + link + " is booked by ResourceClaim " + r->key() + " (uid " + uid + ")");
        }
    }
    return h;
}

}  // namespace cni
