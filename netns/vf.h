// PF-side control of SR-IOV VFs over rtnetlink: every VF setting is an RTM_SETLINK on
// the PF carrying IFLA_VFINFO_LIST > IFLA_VF_INFO > one setting, and the current values
// come from RTM_GETLINK on the PF with IFLA_EXT_MASK = RTEXT_FILTER_VF. The messages are
// built apart from sending them, so unit tests decode the bytes; the attachment only sees
// the small PfControl interface (a PF without SR-IOV, like the veths of the tests, rejects
// every set and reports no VF info).
#pragma once
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "netns/netlink.h"

namespace netns::vf {

/// One VF's PF-side settings. As a request every unset field is left alone; as read from
/// the kernel, unset means the PF did not report it.
struct VfConfig {
    std::optional<std::string> mac;       ///< administrative MAC ("00:00:00:00:00:00" = none)
    std::optional<int> vlan;              ///< 0-4094, 0 = untagged
    std::optional<int> qos;               ///< 0-7
    std::optional<uint16_t> vlan_proto;   ///< ETH_P_8021Q or ETH_P_8021AD (host order)
    std::optional<bool> spoofchk;
    std::optional<bool> trust;
    std::optional<uint32_t> link_state;   ///< IFLA_VF_LINK_STATE_AUTO/ENABLE/DISABLE
    std::optional<uint32_t> min_tx_rate;  ///< Mbps, 0 = no limit
    std::optional<uint32_t> max_tx_rate;  ///< Mbps, 0 = no limit
    bool operator==(const VfConfig&) const = default;
};

/// The settings one request changes, in the order sriov-cni applies them.
enum class Setting { Vlan, Mac, Rate, Spoofchk, Trust, LinkState };
inline constexpr Setting kAllSettings[] = {Setting::Vlan, Setting::Mac, Setting::Rate,
                                           Setting::Spoofchk, Setting::Trust, Setting::LinkState};

/// Whether `c` has a value for the setting (Vlan: vlan; Rate: min or max rate).
bool has(const VfConfig& c, Setting s);
/// The config's key for a setting, for messages and state records ("vlan", "spoofchk"...).
const char* setting_name(Setting s);
/// "vlan 100 (qos 0, proto 802.1q)", "spoofchk on"...: one setting's values, for messages.
std::string describe(const VfConfig& c, Setting s);
/// "802.1q" / "802.1ad" and back; nullopt for anything else.
std::optional<uint16_t> vlan_proto_value(const std::string& name);
std::string vlan_proto_name(uint16_t proto);
/// "auto", "enable", "disable" and back.
std::optional<uint32_t> link_state_value(const std::string& name);
std::string link_state_name(uint32_t state);

// --- messages (bytes, one netlink message each) ---

/// RTM_SETLINK on PF `pf_index` changing setting `s` of VF `vf` to the values in `c`.
/// Vlan sends vlan, qos (default 0) and proto (default 802.1Q) together as
/// IFLA_VF_VLAN_LIST > IFLA_VF_VLAN_INFO; Rate sends min and max (an unset one as 0).
std::vector<uint8_t> build_set(int pf_index, int vf, Setting s, const VfConfig& c);
/// RTM_GETLINK of link `pf_index` asking for VF info without statistics.
std::vector<uint8_t> build_get(int pf_index);
/// The VFs reported in an RTM_NEWLINK reply, by VF index; empty when it has no VF info.
std::map<int, VfConfig> parse_vfs(const nlmsghdr* reply);
/// IFLA_PARENT_DEV_NAME of an RTM_NEWLINK message: the PCI address of a PCI netdev
/// (kernel 5.15+); nullopt for virtual links and older kernels.
std::optional<std::string> parse_parent_device(const nlmsghdr* reply);

// --- the interface the attachment uses ---

class PfControl {
public:
    virtual ~PfControl() = default;
    /// VF `vf`'s current settings on PF `pf` (in the calling thread's netns); nullopt
    /// when the PF reports no VF info for it (no SR-IOV PF, or no such VF).
    virtual std::optional<VfConfig> get(const std::string& pf, int vf) = 0;
    /// Changes one setting; throws netns::Error "failed to set <setting> of VF <n> on PF
    /// '<pf>': <errno text>[: <extack>]" with the errno kept.
    virtual void set(const std::string& pf, int vf, Setting s, const VfConfig& c) = 0;
};

/// The real one: rtnetlink in the calling thread's netns.
std::unique_ptr<PfControl> netlink_pf();

/// The link in the socket's netns whose parent device is PCI address `pci`; nullopt when
/// none (or the kernel does not report parent devices).
std::optional<nl::Link> find_by_parent(nl::Socket& s, const std::string& pci);
/// Parent device (PCI address) of link `index` in the socket's netns; nullopt if none.
std::optional<std::string> parent_device(nl::Socket& s, int index);

}  // namespace netns::vf
