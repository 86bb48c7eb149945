#include "cni/verbs/claim_step.h"

#include <sys/stat.h>

#include "base/log.h"
#include "cni/error.h"
#include "placement/prepared_claims.h"

namespace cni {

namespace pc = placement::prepared_claims;

ClaimHold check_claim(const Context& ctx, const placement::Subject& s) {
    const conf::NetConf& c = ctx.conf;
    struct stat st {};
    if (::stat((pc::root(c.state_dir) + "/devices").c_str(), &st) != 0) return {};   // no claim ever prepared here
    placement::Device d = s.device(c);
    if (d.kind != placement::Device::Kind::Pci) return {};
    auto holder = pc::vf_holder(c.state_dir, d.name);
    if (!holder) return {};
    auto r = pc::read(c.state_dir, *holder);
    std::string claim = (r ? r->key() : std::string("?")) + " (uid " + *holder + ")";
    const std::string& pod = ctx.env.args.pod_uid;
    if (!r || r->state != "prepared" || !r->holds_pod(pod)) {
        std::string whose;
        if (r)
            for (const auto& p : r->pods) whose += (whose.empty() ? "" : ", ") + r->ns + "/" + p.name;
        throw Error(kPlacement, "placement constraint not met: dra",
                    "dra: deviceID " + d.name + " is held by ResourceClaim " + claim +
                        (whose.empty() ? "" : " prepared for pod " + whose) +
                        (pod.empty() ? "; this ADD names no pod (K8S_POD_UID)" : "; not for pod uid " + pod));
    }
    ClaimHold h{true, false, claim};
    for (const auto& dev : r->devices)
        if (dev.kind == "link" && (dev.egress_bps || dev.ingress_bps)) h.bandwidth_booked = true;
    base::log::info("VF " + d.name + " is ResourceClaim " + claim + "'s, prepared for this pod");
    return h;
}

}  // namespace cni
