#include "cni/attach/attachment.h"
#include "cni/error.h"
#include "cni/verbs/ipam_step.h"
#include "cni/verbs/placement_step.h"
#include "cni/pod_netns.h"
#include "cni/records.h"
#include "cni/verbs/verbs.h"
#include "cni/version.h"

namespace cni {

// CHECK verifies the attachment against prevResult: pod interface, addresses, routes,
// the host side, and that IPAM still holds the addresses.
Output cmd_check(const Env& env, const conf::NetConf& c, Attachment& kind) {
    if (!c.prev_result) {
        // The runtime sends the ADD result it kept; without one, say whether there is an ADD
        // to check at all (a CHECK after DEL has none), not only which key is missing.
        auto rec = read_record(c.state_dir, c.name, env.container_id, env.ifname);
        if (!rec || rec->result.is_null())
            throw Error(kInvalidConfig, "prevResult: missing, and there is no ADD record for container '" +
                                            env.container_id + "' ifname '" + env.ifname + "' in network '" + c.name +
                                            "': nothing to CHECK (never added, or deleted since)");
        throw Error(kInvalidConfig, "prevResult: required for CHECK (the ADD result, which the runtime keeps)");
    }
    auto host = netns::Handle::current();
    auto pod = open_pod_netns(env.netns, host);
    Context ctx{env, c, host, &pod};
    check_placement(ctx, kind, false);   // a violation that appeared since ADD is reported
    if (kind.runs_ipam()) ipam_check(env, c, *c.prev_result);
    kind.check(ctx, *c.prev_result);
    return std::nullopt;
}

}  // namespace cni
