// The interface every attachment kind implements, and the table that makes them.
#pragma once
#include <memory>
#include <optional>

#include "base/rollback.h"
#include "cni/error.h"
#include "cni/context.h"
#include "placement/placement.h"
#include "cni/result.h"
#include "conf/netconf.h"
#include "netns/netns.h"

namespace cni {

/// One attachment kind: everything topocni knows about one way to attach a pod, in one
/// file each (veth.cc, macvlan.cc, sriov.cc, delegate.cc): its config keys, read and
/// validated when the kind is made; the device it uses, for placement; and its part of
/// each verb. The verbs (cni/verbs/add.cc, ...) own the order of steps, IPAM and the result.
class Attachment : public placement::Subject {
public:
    virtual ~Attachment() = default;
    /// Whether topocni runs the config's IPAM for this kind. A delegate's plugin runs its
    /// own, and its result is the attachment's result.
    virtual bool runs_ipam() const { return true; }
    /// The IPAM object the attachment draws from, and the key it is under.
    virtual const nlohmann::json* ipam_config(const conf::NetConf& c) const;
    virtual std::string ipam_key() const { return "ipam"; }
    // Placement's questions (Subject): the device the attachment uses on the node (see
    // attach/device.h), the host-local pool it draws from, the link records name when the
    // device shares none.
    /// ADD: what needs the node but changes nothing (the master exists, the VF is free, the
    /// MTU fits...). The verb has checked already that the pod's interface name is free.
    virtual void preflight(Context&) {}
    /// Creates the pod interface, applies `ipam` (addresses, routes) inside the pod, and
    /// appends what it created to `result.interfaces`. Registers undo steps on `undo`.
    /// Returns the index of the interface the addresses are on (none: a DPDK VF); the verb
    /// copies IPAM's ips, routes and dns into the result.
    virtual std::optional<int> add(Context&, const Result& ipam, Result& result, base::Rollback& undo) = 0;
    /// Removes what add created. Must succeed when it is already gone.
    virtual void del(Context&) = 0;
    /// Verifies the pod and host against prevResult; throws kCheckFailed naming the difference.
    virtual void check(Context&, const Result& prev) = 0;
    /// GC, before topocni looks at its own state: a delegate forwards GC to its plugin.
    virtual void collect(Context&) {}
    /// GC: removes what the kind left on the node for the attachments in ctx.stale.
    virtual void gc(Context&) {}
    /// STATUS, after IPAM's: a delegate asks its plugin.
    virtual void status(Context&) {}
};

/// The kind c.kind names (code 7 for an unknown one), its keys read from the config:
/// code 7 naming a bad key, or a key of another kind. For Teardown, keys it cannot read
/// are treated as absent (defaults) and named in c.ignored, as conf::parse does.
std::unique_ptr<Attachment> make_attachment(conf::NetConf& c, conf::Purpose purpose);

// The kinds (kinds.cc holds the table). Each reads its own keys from c.raw.
std::unique_ptr<Attachment> make_veth(conf::NetConf& c, conf::Purpose purpose);
std::unique_ptr<Attachment> make_macvlan(conf::NetConf& c, conf::Purpose purpose);
std::unique_ptr<Attachment> make_sriov(conf::NetConf& c, conf::Purpose purpose);
std::unique_ptr<Attachment> make_delegate(conf::NetConf& c, conf::Purpose purpose);

/// A network as the plugin reads it: the config (conf::parse with the protocol's versions
/// and result reader) and its attachment kind with the kind's keys read.
struct Network {
    conf::NetConf conf;
    std::unique_ptr<Attachment> kind;
};
Network read_network(const std::string& text, const conf::ArgsView& args, conf::Purpose purpose = conf::Purpose::Setup);
/// The same, for callers that only need the config validated as ADD would validate it.
conf::NetConf parse_config(const std::string& text, const conf::ArgsView& args,
                           conf::Purpose purpose = conf::Purpose::Setup);

/// For a kind's make_X: its keys read by `read`, or for Teardown, when they cannot be read
/// (code 7), the defaults with the error kept in c.ignored.
template <class Keys, class Read>
Keys read_keys(conf::NetConf& c, conf::Purpose purpose, Read read) {
    if (purpose != conf::Purpose::Teardown) return read();
    try {
        return read();
    } catch (const base::Error& e) {
        if (code_of(e) != kInvalidConfig) throw;
        c.ignored.push_back(e.what());
        return Keys{};
    }
}

}  // namespace cni
