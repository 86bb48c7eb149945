// SR-IOV VF attachment keys (sriov-cni's names and meanings).
#pragma once
#include <optional>
#include <string>

namespace conf {

struct NetConf;

struct SriovConf {
    std::string device_id;                ///< VF PCI address: deviceID, else pciBusID, else runtimeConfig.deviceID
};

/// Fills c.sriov when c.attachment is sriov; code 7 naming the key on bad values.
void parse_sriov(NetConf& c);

}  // namespace conf
