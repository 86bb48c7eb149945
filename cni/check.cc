#include "cni/attach/attachment.h"
#include "cni/error.h"
#include "cni/ipam.h"
#include "cni/placement/placement.h"
#include "cni/pod_netns.h"
#include "cni/verbs.h"
#include "cni/version.h"

namespace cni {

// CHECK verifies the attachment against prevResult: pod interface, addresses, routes,
// the host side, and that IPAM still holds the addresses.
Output cmd_check(const Env& env, const conf::NetConf& c, Attachment& kind) {
    if (!c.prev_result) throw Error(kInvalidConfig, "prevResult: required for CHECK");
    auto host = netns::Handle::current();
    auto pod = open_pod_netns(env.netns, host);
    Context ctx{env, c, host, &pod};
    check_placement(ctx, placement_subject(c, kind), false);   // a violation that appeared since ADD is reported
    if (kind.runs_ipam()) ipam_check(env, c, *c.prev_result);
    kind.check(ctx, *c.prev_result);
    return std::nullopt;
}

}  // namespace cni
