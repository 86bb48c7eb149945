#include "cni/attach/sriov_state.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <system_error>
#include <thread>

#include "cni/error.h"
#include "base/log.h"
#include "base/files.h"
#include "base/flock.h"
#include "netns/sysfs.h"

namespace cni::state {

namespace {

using json = nlohmann::json;
using base::UniqueFd;

// --- VfConfig in sriov-cni's key names ---

json config_json(const netns::vf::VfConfig& c) {
    json j = json::object();
    if (c.mac) j["mac"] = *c.mac;
    if (c.vlan) j["vlan"] = *c.vlan;
    if (c.qos) j["vlanQoS"] = *c.qos;
    if (c.vlan_proto) j["vlanProto"] = netns::vf::vlan_proto_name(*c.vlan_proto);
    if (c.spoofchk) j["spoofchk"] = *c.spoofchk ? "on" : "off";
    if (c.trust) j["trust"] = *c.trust ? "on" : "off";
    if (c.link_state) j["link_state"] = netns::vf::link_state_name(*c.link_state);
    if (c.min_tx_rate) j["min_tx_rate"] = *c.min_tx_rate;
    if (c.max_tx_rate) j["max_tx_rate"] = *c.max_tx_rate;
    return j;
}

netns::vf::VfConfig config_from_json(const json& j) {
    netns::vf::VfConfig c;
    if (!j.is_object()) return c;
    auto str = [&](const char* k) -> std::optional<std::string> {
        if (j.contains(k) && j[k].is_string()) return j[k].get<std::string>();
        return std::nullopt;
    };
    auto num = [&](const char* k) -> std::optional<long long> {
        if (j.contains(k) && j[k].is_number_integer()) return j[k].get<long long>();
        return std::nullopt;
    };
    c.mac = str("mac");
    if (auto v = num("vlan")) c.vlan = int(*v);
    if (auto v = num("vlanQoS")) c.qos = int(*v);
    if (auto p = str("vlanProto")) c.vlan_proto = netns::vf::vlan_proto_value(*p);
    if (auto s = str("spoofchk")) c.spoofchk = *s == "on";
    if (auto s = str("trust")) c.trust = *s == "on";
    if (auto s = str("link_state")) c.link_state = netns::vf::link_state_value(*s);
    if (auto v = num("min_tx_rate")) c.min_tx_rate = uint32_t(*v);
    if (auto v = num("max_tx_rate")) c.max_tx_rate = uint32_t(*v);
    return c;
}

}  // namespace


// --- VF records ---

std::string Owner::str() const {
    return "container '" + container_id + "' interface '" + ifname + "' of network '" + network + "'";
}

json to_json(const VfRecord& r) {
    json j = {
        {"version", 1},
        {"pciAddress", r.pci},
        {"pfPciAddress", r.pf_pci},
        {"pf", r.pf},
        {"vfIndex", r.vf_index},
        {"mode", r.dpdk ? "dpdk" : "kernel"},
        {"owner", {{"network", r.owner.network}, {"containerID", r.owner.container_id},
                   {"ifname", r.owner.ifname}, {"netns", r.owner.netns}}},
        {"pfOriginal", config_json(r.original)},
        {"pfApplied", config_json(r.applied)},
    };
    if (!r.dpdk) j["netdev"] = {{"name", r.netdev}, {"mac", r.mac}, {"mtu", r.mtu}, {"up", r.up}};
    if (r.device_info_file) j["deviceInfoFile"] = *r.device_info_file;
    if (!r.device_info_dirs.empty()) j["deviceInfoDirs"] = r.device_info_dirs;
    return j;
}

VfRecord vf_record_from_json(const json& j, const std::string& what) {
    auto bad = [&](const std::string& why) -> Error {
        return Error(kDecodingFailure, "state record " + what + " is unreadable: " + why);
    };
    if (!j.is_object()) throw bad("not a JSON object");
    auto str = [&](const json& o, const char* k) {
        if (!o.contains(k) || !o[k].is_string()) throw bad(std::string("'") + k + "' missing");
        return o[k].get<std::string>();
    };
    VfRecord r;
    r.pci = str(j, "pciAddress");
    if (!netns::sysfs::is_pci_address(r.pci)) throw bad("'pciAddress' is not a PCI address");
    r.pf_pci = str(j, "pfPciAddress");
    r.pf = str(j, "pf");
    if (!j.contains("vfIndex") || !j["vfIndex"].is_number_integer()) throw bad("'vfIndex' missing");
    r.vf_index = j["vfIndex"].get<int>();
    auto mode = str(j, "mode");
    if (mode != "kernel" && mode != "dpdk") throw bad("'mode' is neither kernel nor dpdk");
    r.dpdk = mode == "dpdk";
    if (!j.contains("owner") || !j["owner"].is_object()) throw bad("'owner' missing");
    const json& o = j["owner"];
    r.owner = {str(o, "network"), str(o, "containerID"), str(o, "ifname"), str(o, "netns")};
    if (!r.dpdk) {
        if (!j.contains("netdev") || !j["netdev"].is_object()) throw bad("'netdev' missing");
        const json& n = j["netdev"];
        r.netdev = str(n, "name");
        r.mac = n.contains("mac") && n["mac"].is_string() ? n["mac"].get<std::string>() : "";
        r.mtu = n.contains("mtu") && n["mtu"].is_number_integer() ? n["mtu"].get<int>() : 0;
        r.up = n.contains("up") && n["up"].is_boolean() && n["up"].get<bool>();
    }
    if (j.contains("pfOriginal")) r.original = config_from_json(j["pfOriginal"]);
    if (j.contains("pfApplied")) r.applied = config_from_json(j["pfApplied"]);
    if (j.contains("deviceInfoFile") && j["deviceInfoFile"].is_string()) r.device_info_file = j["deviceInfoFile"];
    if (j.contains("deviceInfoDirs") && j["deviceInfoDirs"].is_array())
        for (auto& d : j["deviceInfoDirs"])
            if (d.is_string()) r.device_info_dirs.push_back(d.get<std::string>());
    return r;
}

VfStore::VfStore(const std::string& state_dir) : dir_(state_dir + "/sriov") {}

// The VF's own sysfs directory is what is locked: it exists exactly as long as the VF,
// and a lock on it leaves no file behind (a lock file per VF under stateDir outlived
// every attachment).
std::optional<base::DirLock> VfStore::lock(const netns::sysfs::Tree& tree, const std::string& pci,
                                  std::chrono::milliseconds timeout) const {
    std::string dir = tree.pci_path(pci);
    struct stat st;
    if (::stat(dir.c_str(), &st) != 0 && errno == ENOENT) return std::nullopt;
    return base::DirLock(dir, "VF " + pci, timeout);
}

bool VfStore::holds(const std::string& pci) const {
    struct stat st {};
    return ::stat(path(pci).c_str(), &st) == 0;
}

std::optional<VfRecord> VfStore::read(const std::string& pci) const {
    auto text = base::fs::read_file(path(pci));
    if (!text) return std::nullopt;
    auto j = json::parse(*text, nullptr, false);
    return vf_record_from_json(j, "'" + path(pci) + "'");
}

std::vector<std::string> VfStore::write(const VfRecord& r) const {
    return base::fs::write_file(path(r.pci), to_json(r).dump(2) + "\n");
}

void VfStore::remove(const std::string& pci) const { base::fs::remove_file(path(pci)); }

std::vector<std::string> VfStore::pcis() const {
    std::vector<std::string> names;
    if (DIR* d = ::opendir(dir_.c_str())) {
        while (auto* e = ::readdir(d)) {
            std::string n = e->d_name;
            if (n.size() > 5 && n[0] != '.' && n.ends_with(".json") &&
                netns::sysfs::is_pci_address(n.substr(0, n.size() - 5)))
                names.push_back(n.substr(0, n.size() - 5));
        }
        ::closedir(d);
    }
    std::sort(names.begin(), names.end());
    return names;
}

std::vector<VfRecord> VfStore::list() const {
    std::vector<VfRecord> out;
    for (auto& pci : pcis()) {
        try {
            if (auto r = read(pci)) out.push_back(std::move(*r));
        } catch (const base::Error& e) {
            base::log::warn(e.what());
        }
    }
    return out;
}

std::vector<std::string> vfs_in_use(const std::string& state_dir, const std::string& sysfs_root,
                                    const std::string& pf_pci, const std::string& vf) {
    std::vector<std::string> out;
    VfStore store(state_dir);
    netns::sysfs::Tree tree(sysfs_root);
    for (auto& pci : store.pcis()) {
        if (pci == vf) continue;
        // The record says which PF the VF was on when attached; a record that cannot be
        // read still marks the VF as used, and sysfs says its PF.
        std::optional<std::string> pf;
        try {
            if (auto r = store.read(pci)) pf = r->pf_pci;
        } catch (const base::Error&) {
        }
        if (!pf) pf = tree.physfn(pci);
        if (pf && *pf == pf_pci) out.push_back(pci);
    }
    return out;
}

}  // namespace cni::state
