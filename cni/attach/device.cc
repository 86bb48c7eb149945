#include "cni/attach/device.h"

#include "cni/attach/sriov_state.h"
#include "conf/fields.h"
#include "netns/netlink.h"
#include "netns/sysfs.h"

namespace cni {

std::optional<std::string> device_id_in(const nlohmann::json& j) {
    auto text = [&](const nlohmann::json* v) -> std::optional<std::string> {
        if (!v || !v->is_string() || v->get<std::string>().empty()) return std::nullopt;
        return v->get<std::string>();
    };
    if (auto v = text(conf::member(j, "deviceID"))) return v;
    if (auto v = text(conf::member(j, "pciBusID"))) return v;
    if (auto* rc = conf::member(j, "runtimeConfig"); rc && rc->is_object()) return text(conf::member_ci(*rc, "deviceID"));
    return std::nullopt;
}

placement::Device pci_device(const std::string& pci, const conf::NetConf& c) {
    const std::string& sysfs = c.sysfs_root;
    placement::Device d;
    if (!netns::sysfs::is_pci_address(pci)) {
        d.none_why = "deviceID '" + pci + "' is not a PCI address";
        return d;
    }
    d.kind = placement::Device::Kind::Pci;
    d.name = pci;
    d.label = (netns::sysfs::Tree(sysfs).physfn(pci) ? "VF " : "PCI device ") + pci;
    // A VF in use has a state record, whichever network attached it.
    d.in_use_on_pf = [state_dir = c.state_dir, sysfs, pci](const std::string& pf) {
        return state::vfs_in_use(state_dir, sysfs, pf, pci);
    };
    return d;
}

placement::Device master_device(std::optional<std::string> master, const std::string& what, bool default_route, bool in_pod,
                     const std::string& link_kind) {
    placement::Device d;
    d.link_kind = link_kind;
    if (!master && default_route) {
        netns::nl::Socket s;
        master = netns::nl::default_route_interface(s);
        if (!master) {
            d.none_why = what + ": no master set and the node has no default route";
            return d;
        }
    }
    if (!master) {
        d.none_why = what + " names no device (no deviceID, pciBusID or master)";
        return d;
    }
    if (in_pod) {
        d.none_why = "master '" + *master + "' is in the pod netns (linkInContainer), out of the node's sysfs";
        return d;
    }
    d.kind = placement::Device::Kind::Master;
    d.name = *master;
    d.label = "master '" + *master + "'";
    return d;
}

}  // namespace cni
