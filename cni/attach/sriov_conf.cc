#include "cni/attach/sriov_conf.h"

#include <algorithm>
#include <cctype>
#include <climits>

#include "conf/fields.h"
#include "conf/netconf.h"
#include "netns/sysfs.h"

namespace conf {

namespace {

std::string lower(std::string s) {
    std::transform(s.begin(), s.end(), s.begin(), [](unsigned char ch) { return std::tolower(ch); });
    return s;
}

/// The VF's PCI address from the first key that has one. It becomes part of sysfs and
/// state paths, so anything but the strict PCI form (a `../` say) is refused here.
std::optional<std::string> parse_device_id(const json& raw) {
    std::optional<std::string> id;
    std::string path;
    if ((id = opt_string(raw, "deviceID", ""))) path = "deviceID";
    else if ((id = opt_string(raw, "pciBusID", ""))) path = "pciBusID";
    else if (auto* rc = opt_object(raw, "runtimeConfig", "")) {
        if (auto* v = member_ci(*rc, "deviceID")) {
            path = "runtimeConfig.deviceID";
            if (!v->is_string()) bad(path, "expected a string, got " + std::string(v->type_name()));
            id = v->get<std::string>();
        }
    }
    if (!id) return std::nullopt;
    if (!netns::sysfs::is_pci_address(*id))
        bad(path, "'" + *id + "' is not a PCI address (dddd:bb:dd.f, e.g. 0000:af:06.0)");
    return lower(*id);
}

/// spoofchk and trust: "on" / "off"; "" means unset, as in sriov-cni.
std::optional<bool> on_off(const json& raw, const std::string& key) {
    auto s = opt_string(raw, key, "");
    if (!s || s->empty()) return std::nullopt;
    if (*s == "on") return true;
    if (*s == "off") return false;
    bad(key, "'" + *s + "' is not one of on, off");
}

std::optional<int> opt_small(const json& raw, const std::string& key, long long lo, long long hi) {
    if (auto v = opt_int(raw, key, "", lo, hi)) return static_cast<int>(*v);
    return std::nullopt;
}

}  // namespace

void parse_sriov(NetConf& c) {
    const json& raw = c.raw;
    if (c.attachment != Attachment::Sriov) {
        // deviceID and pciBusID are injected by Multus into any delegate: only the VF
        // settings themselves are a mistake elsewhere.
        for (auto key : {"vlan", "vlanQoS", "vlanProto", "spoofchk", "trust", "link_state", "min_tx_rate",
                         "max_tx_rate"})
            if (member(raw, key)) bad(key, "only valid with attachment sriov");
        return;
    }
    SriovConf s;
    s.device_id = parse_device_id(raw).value_or("");
    s.vlan = opt_small(raw, "vlan", 0, 4094);
    s.vlan_qos = opt_small(raw, "vlanQoS", 0, 7);
    if (auto p = opt_string(raw, "vlanProto", "")) {
        s.vlan_proto = lower(*p);
        if (*s.vlan_proto != "802.1q" && *s.vlan_proto != "802.1ad")
            bad("vlanProto", "'" + *p + "' is not one of 802.1q, 802.1ad");
    }
    if (!s.vlan) {
        if (s.vlan_qos) bad("vlanQoS", "needs vlan");
        if (s.vlan_proto) bad("vlanProto", "needs vlan");
    } else if (*s.vlan == 0) {
        // Untagged traffic has no priority field and no S-tag.
        if (s.vlan_qos.value_or(0) != 0) bad("vlanQoS", "needs a non-zero vlan");
        if (s.vlan_proto == "802.1ad") bad("vlanProto", "802.1ad needs a non-zero vlan");
    }
    s.spoofchk = on_off(raw, "spoofchk");
    s.trust = on_off(raw, "trust");
    if (auto l = opt_string(raw, "link_state", ""); l && !l->empty()) {
        if (*l != "auto" && *l != "enable" && *l != "disable")
            bad("link_state", "'" + *l + "' is not one of auto, enable, disable");
        s.link_state = *l;
    }
    s.min_tx_rate = opt_small(raw, "min_tx_rate", 0, INT_MAX);
    s.max_tx_rate = opt_small(raw, "max_tx_rate", 0, INT_MAX);
    if (s.min_tx_rate && s.max_tx_rate && *s.max_tx_rate != 0 && *s.min_tx_rate > *s.max_tx_rate)
        bad("min_tx_rate", std::to_string(*s.min_tx_rate) + " exceeds max_tx_rate " + std::to_string(*s.max_tx_rate));
    if (auto* rc = opt_object(raw, "runtimeConfig", "")) {
        if (auto* f = member_ci(*rc, "CNIDeviceInfoFile")) {
            const std::string path = "runtimeConfig.CNIDeviceInfoFile";
            if (!f->is_string()) bad(path, "expected a string, got " + std::string(f->type_name()));
            auto file = f->get<std::string>();
            if (file.empty() || file[0] != '/' || file.back() == '/') bad(path, "'" + file + "' must be an absolute file path");
            s.device_info_file = file;
        }
    }
    c.sriov = std::move(s);
}

}  // namespace conf
