#include "cni/meta.h"

#include "cni/error.h"

namespace cni {

Output meta_run(const Env& env, const conf::NetConf& c) {
    (void)env; (void)c;
    throw Error(kInvalidConfig, "delegate: not supported yet");
}

}  // namespace cni
