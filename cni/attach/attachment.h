// One attachment kind per file (veth.cc, macvlan.cc, sriov.cc) behind this interface;
// the verbs (add.cc, del.cc, ...) own the order of steps, IPAM and the result.
#pragma once
#include <memory>
#include <optional>

#include "base/cleanup.h"
#include "cni/env.h"
#include "cni/records.h"
#include "cni/result.h"
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

class Attachment {
public:
    virtual ~Attachment() = default;
    /// Checks that need the node but change nothing (master exists, MTU fits...).
    virtual void preflight(Context&) {}
    /// Creates the pod interface, applies `ipam` (addresses, routes) and fills `result`
    /// (interfaces, ips with interface index, routes). Registers undo steps on `undo`.
    virtual void add(Context&, const Result& ipam, Result& result, base::Rollback& undo) = 0;
    /// Removes what add created. Must succeed when it is already gone.
    virtual void del(Context&) = 0;
    /// Verifies the pod and host against prevResult; throws kCheckFailed naming the difference.
    virtual void check(Context&, const Result& prev) = 0;
    /// Removes host-side leftovers of attachments not in the valid list.
    virtual void gc(Context&) {}
};

/// CHECK: the prevResult interface named CNI_IFNAME in sandbox CNI_NETNS (kCheckFailed if none).
const Interface& expected_pod_interface(const Context& ctx, const Result& prev);

std::unique_ptr<Attachment> make_attachment(const conf::NetConf& c);
std::unique_ptr<Attachment> make_veth();
std::unique_ptr<Attachment> make_macvlan();
std::unique_ptr<Attachment> make_sriov();

}  // namespace cni
