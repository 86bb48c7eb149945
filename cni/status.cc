#include "cni/error.h"
#include "cni/ipam.h"
#include "cni/attach/delegate.h"
#include "cni/verbs.h"

namespace cni {

// STATUS: ready when IPAM can hand out an address (code 50 and why otherwise).
Output cmd_status(const Env& env, const conf::NetConf& c) {
    if (c.delegate) return meta_run(env, c);
    ipam_status(env, c);
    return std::nullopt;
}

}  // namespace cni
