// What a verb works on: the environment, the network's config, and the namespaces. The
// verbs build it; placement and the attachment kinds take it.
#pragma once
#include <vector>

#include "cni/env.h"
#include "cni/records.h"
#include "conf/netconf.h"
#include "netns/netns.h"

namespace cni {

struct Context {
    const Env& env;
    const conf::NetConf& conf;
    const netns::Handle& host;                ///< the netns the plugin was started in
    const netns::Handle* pod = nullptr;       ///< nullptr on DEL when the netns is gone
    /// GC only: attachment records of this network whose owner is not in the valid list.
    const std::vector<Record>* stale = nullptr;
};

}  // namespace cni
