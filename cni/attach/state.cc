#include "cni/attach/state.h"

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
#include "ipam/fs.h"
#include "netns/sysfs.h"

namespace cni::state {

namespace {

using json = nlohmann::json;
using base::UniqueFd;

[[noreturn]] void fail_io(const std::string& what, const std::string& path, int err) {
    throw Error(kIoFailure, "failed to " + what + " '" + path + "': " + std::generic_category().message(err), {}, err);
}

std::string parent_of(const std::string& path) {
    auto slash = path.rfind('/');
    return slash == 0 ? "/" : path.substr(0, slash);
}

void sync_dir(const std::string& dir) {
    UniqueFd fd(::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
    if (!fd) fail_io("open directory", dir, errno);
    if (::fsync(fd.get()) < 0) fail_io("sync directory", dir, errno);
}

void write_all(int fd, const std::string& data, const std::string& path) {
    size_t done = 0;
    while (done < data.size()) {
        ssize_t n = ::write(fd, data.data() + done, data.size() - done);
        if (n < 0 && errno == EINTR) continue;
        if (n < 0) fail_io("write", path, errno);
        done += size_t(n);
    }
}

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

namespace {

/// A complete, synced temp file beside `path`, holding `data` with exactly `mode` (not
/// umask's), in its directory, created (`dir_mode`) when missing; the directories
/// made are added to `created`. Returns its name.
std::string synced_temp_beside(const std::string& path, const std::string& data, unsigned mode, unsigned dir_mode,
                               std::vector<std::string>& created) {
    std::string dir = parent_of(path);
    for (auto& d : ipam::fs::make_dirs(dir, dir_mode)) created.push_back(d);
    std::string tmp = dir + "/." + path.substr(dir.size() + 1) + ".tmp." + std::to_string(::getpid());
    UniqueFd fd(::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, mode));
    if (!fd && errno == ENOENT) {
        // A failed ADD or a DEL elsewhere removed the directory it had created just now: again.
        for (auto& d : ipam::fs::make_dirs(dir, dir_mode)) created.push_back(d);
        fd = UniqueFd(::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, mode));
    }
    if (!fd) fail_io("create", tmp, errno);
    try {
        if (::fchmod(fd.get(), mode) < 0) fail_io("set the mode of", tmp, errno);
        write_all(fd.get(), data, tmp);
        if (::fsync(fd.get()) < 0) fail_io("sync", tmp, errno);
    } catch (...) {
        ::unlink(tmp.c_str());
        throw;
    }
    return tmp;
}

}  // namespace

std::vector<std::string> write_file(const std::string& path, const std::string& data, unsigned mode) {
    std::vector<std::string> created;
    std::string tmp = synced_temp_beside(path, data, mode, 0700, created);
    if (::rename(tmp.c_str(), path.c_str()) < 0) {
        int err = errno;
        ::unlink(tmp.c_str());
        fail_io("replace", path, err);
    }
    sync_dir(parent_of(path));
    return created;
}

bool create_once(const std::string& path, const std::string& data, unsigned mode, unsigned dir_mode) {
    std::vector<std::string> created;   // the caller knows them (state::missing_dirs) before
    // The mode is part of the contract (the device-info spec says 0444).
    std::string tmp = synced_temp_beside(path, data, mode, dir_mode, created);
    // link() fails with EEXIST instead of replacing, unlike rename(): a file that appeared
    // meanwhile (the runtime's copy of the device plugin's) wins.
    int rc = ::link(tmp.c_str(), path.c_str());
    int err = errno;
    ::unlink(tmp.c_str());
    if (rc < 0 && err == EEXIST) return false;
    if (rc < 0) fail_io("create", path, err);
    sync_dir(parent_of(path));
    return true;
}

std::optional<std::string> read_file(const std::string& path) {
    UniqueFd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW));
    if (!fd) {
        if (errno == ENOENT) return std::nullopt;
        fail_io("open", path, errno);
    }
    std::string out;
    char buf[8192];
    for (;;) {
        ssize_t n = ::read(fd.get(), buf, sizeof buf);
        if (n < 0 && errno == EINTR) continue;
        if (n < 0) fail_io("read", path, errno);
        if (n == 0) return out;
        out.append(buf, size_t(n));
        if (out.size() > (1u << 20)) throw Error(kIoFailure, "'" + path + "' is larger than 1 MiB");
    }
}

std::vector<std::string> missing_dirs(const std::string& dir) {
    std::vector<std::string> out;
    std::string d = dir;
    struct stat st;
    while (!d.empty() && d != "/" && ::stat(d.c_str(), &st) != 0 && errno == ENOENT) {
        out.insert(out.begin(), d);
        d = parent_of(d);
    }
    return out;
}

void remove_file(const std::string& path) {
    if (::unlink(path.c_str()) < 0) {
        if (errno == ENOENT) return;
        fail_io("remove", path, errno);
    }
    sync_dir(parent_of(path));
}

Lock::Lock(const std::string& path, const std::string& what, std::chrono::milliseconds timeout) {
    // An existing directory (a device's sysfs directory): nothing is created for the lock.
    fd_ = UniqueFd(::open(path.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
    if (!fd_) fail_io("open lock", path, errno);
    // Poll with LOCK_NB rather than block: a blocking flock cannot time out without a
    // signal or a thread, and neither belongs in a process that switches netns.
    auto deadline = std::chrono::steady_clock::now() + timeout;
    for (;;) {
        if (::flock(fd_.get(), LOCK_EX | LOCK_NB) == 0) return;
        if (errno != EWOULDBLOCK && errno != EINTR) fail_io("lock", path, errno);
        if (std::chrono::steady_clock::now() >= deadline)
            throw Error(kTryAgainLater, "timed out after " + std::to_string(timeout.count() / 1000) +
                                            " s waiting for the lock of " + what + " ('" + path + "')");
        std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
}

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
std::optional<Lock> VfStore::lock(const netns::sysfs::Tree& tree, const std::string& pci,
                                  std::chrono::milliseconds timeout) const {
    std::string dir = tree.pci_path(pci);
    struct stat st;
    if (::stat(dir.c_str(), &st) != 0 && errno == ENOENT) return std::nullopt;
    return Lock(dir, "VF " + pci, timeout);
}

std::optional<VfRecord> VfStore::read(const std::string& pci) const {
    auto text = read_file(path(pci));
    if (!text) return std::nullopt;
    auto j = json::parse(*text, nullptr, false);
    return vf_record_from_json(j, "'" + path(pci) + "'");
}

std::vector<std::string> VfStore::write(const VfRecord& r) const {
    return write_file(path(r.pci), to_json(r).dump(2) + "\n");
}

void VfStore::remove(const std::string& pci) const { remove_file(path(pci)); }

std::vector<VfRecord> VfStore::list() const {
    std::vector<std::string> names;
    if (DIR* d = ::opendir(dir_.c_str())) {
        while (auto* e = ::readdir(d)) {
            std::string n = e->d_name;
            if (n.size() > 5 && n[0] != '.' && n.ends_with(".json")) names.push_back(n.substr(0, n.size() - 5));
        }
        ::closedir(d);
    }
    std::sort(names.begin(), names.end());
    std::vector<VfRecord> out;
    for (auto& pci : names) {
        if (!netns::sysfs::is_pci_address(pci)) continue;
        try {
            if (auto r = read(pci)) out.push_back(std::move(*r));
        } catch (const Error& e) {
            base::log::warn(e.what());
        }
    }
    return out;
}

}  // namespace cni::state
