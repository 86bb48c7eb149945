// A NAD's topocni config as the scheduler side reads it: parsed once per NAD version, used
// for every node (scheduling.cc), every pod admitted (admission.cc) and every capacity
// published (resources.cc).
#pragma once
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "cni/attach/attachment.h"
#include "cluster/scheduling.h"
#include "conf/netconf.h"

namespace cluster {

struct PodNetwork::Parsed {
    // Made in place and never moved: a kind may keep a reference to its config.
    explicit Parsed(const std::string& text) : net(cni::read_network(text, {})), conf(net.conf), kind(net.kind) {}
    cni::Network net;
    const conf::NetConf& conf;
    const std::unique_ptr<cni::Attachment>& kind;
    std::string kind_name;
    std::optional<ipam::Config> pool;    ///< the host-local pool, read once
    placement::ScheduledDevice device;   ///< what the kind says it attaches (a VF, a master, none)
};

/// The PFs a NAD's VFs come from: those of its resource; every PF when the node does not
/// say which resource its PFs belong to.
std::vector<size_t> pool_pfs(const placement::NodeFacts& f, const std::string& resource);
/// A device on `master`, and a VF, as placement describes them.
placement::Device master_dev(const std::string& master);
placement::Device vf_device(const std::string& pci);
/// The network attaches a VF (sriov, or a delegate with a device plugin resource).
bool wants_vf(const PodNetwork::Parsed& p, const PodNetwork& n);

}  // namespace cluster
