// For the kinds' device() (placement::Subject): the device an attachment uses on the
// node, as placement sees it.
#pragma once
#include <optional>
#include <string>

#include <nlohmann/json.hpp>

#include "placement/placement.h"
#include "conf/netconf.h"

namespace cni {

/// A PCI device (a VF) by address, labelled from sysfs; a VF in use has a state record.
placement::Device pci_device(const std::string& pci, const conf::NetConf& c);
/// A master interface on the node (none given and `default_route`: the interface of the
/// node's default route); `what` names the kind in the reasons there is none. `link_kind`
/// is the kind of link counted on the master.
placement::Device master_device(std::optional<std::string> master, const std::string& what, bool default_route, bool in_pod,
                     const std::string& link_kind);
/// The VF a config names: deviceID, pciBusID, runtimeConfig.deviceID (as given).
std::optional<std::string> device_id_in(const nlohmann::json& j);

}  // namespace cni
