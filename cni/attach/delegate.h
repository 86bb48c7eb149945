// Meta-plugin mode: "delegate": {...} wraps any CNI plugin; topocni checks placement,
// then runs the wrapped plugin from CNI_PATH and converts its result.
#pragma once
#include "cni/verbs.h"

namespace cni {

Output meta_run(const Env& env, const conf::NetConf& c);

}  // namespace cni
