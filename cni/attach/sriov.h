// Attachment sriov: an SR-IOV VF picked by PCI address. Its keys have sriov-cni's names and meanings, so a NAD ports over by
// changing "type"). Every VF setting is optional: unset means untouched on ADD and DEL.
#pragma once
#include <memory>
#include <optional>
#include <string>

#include "cni/attach/attachment.h"
#include "netns/vf.h"

namespace cni {


struct SriovKeys {
    /// VF PCI address, lower case: deviceID (as Multus injects it), else pciBusID, else
    /// runtimeConfig.deviceID; "" when none is given. Required by ADD only: DEL and CHECK
    /// find the VF from its state record.
    std::string device_id;
    std::optional<int> vlan;              ///< vlan: 0-4094 (0 clears the tag)
    std::optional<int> vlan_qos;          ///< vlanQoS: 0-7, needs vlan
    std::optional<std::string> vlan_proto;    ///< vlanProto: "802.1q" or "802.1ad", needs vlan
    std::optional<bool> spoofchk;         ///< spoofchk: "on" / "off"
    std::optional<bool> trust;            ///< trust: "on" / "off"
    std::optional<std::string> link_state;    ///< link_state: auto, enable, disable
    std::optional<int> min_tx_rate;       ///< min_tx_rate: Mbps, 0 = no limit
    std::optional<int> max_tx_rate;       ///< max_tx_rate: Mbps, 0 = no limit
    std::optional<std::string> device_info_file;  ///< runtimeConfig.CNIDeviceInfoFile
};

/// The keys of attachment sriov: code 7 naming the key on bad values, or on egressRate
/// together with max_tx_rate.
SriovKeys read_sriov_keys(const conf::NetConf& c);

/// The SR-IOV kind with its keys read from `c` and VF settings made through `pf` (the
/// kernel's, or a test's stand-in).
std::unique_ptr<Attachment> make_sriov(conf::NetConf& c, conf::Purpose purpose, std::unique_ptr<netns::vf::PfControl> pf);

}  // namespace cni
