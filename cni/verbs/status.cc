#include "cni/error.h"
#include "cni/verbs/ipam_step.h"
#include "cni/attach/attachment.h"
#include "cni/verbs/verbs.h"

namespace cni {

// STATUS: ready when IPAM can hand out an address (code 50 and why otherwise), and a
// delegate's plugin says it is.
Output cmd_status(const Env& env, const conf::NetConf& c, Attachment& kind) {
    if (kind.runs_ipam()) ipam_status(env, c);
    auto host = netns::Handle::current();
    Context ctx{env, c, host};
    kind.status(ctx);
    return std::nullopt;
}

}  // namespace cni
