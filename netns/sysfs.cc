#include "netns/sysfs.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <charconv>
#include <cstdlib>

#include "base/fd.h"
#include "base/files.h"

namespace netns::sysfs {
namespace {

/// A single path component that names something inside its directory.
bool plain_name(const std::string& s) {
    return !s.empty() && s.find('/') == std::string::npos && s != "." && s != "..";
}

/// Last component of a symlink's target; nullopt when `path` is no symlink.
std::optional<std::string> link_basename(const std::string& path) {
    char buf[4096];
    ssize_t n = ::readlink(path.c_str(), buf, sizeof buf);
    if (n <= 0 || size_t(n) == sizeof buf) return std::nullopt;
    std::string target(buf, size_t(n));
    while (target.size() > 1 && target.back() == '/') target.pop_back();
    return target.substr(target.rfind('/') + 1);
}

/// A small file's content without trailing whitespace.
std::optional<std::string> read_small(const std::string& path) {
    base::UniqueFd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NOCTTY));
    if (!fd) return std::nullopt;
    char buf[4096];
    ssize_t n = ::read(fd.get(), buf, sizeof buf);
    if (n < 0) return std::nullopt;
    std::string s(buf, size_t(n));
    while (!s.empty() && std::isspace(static_cast<unsigned char>(s.back()))) s.pop_back();
    return s;
}

}  // namespace

bool is_pci_address(const std::string& s) {
    // dddd:bb:dd.f, with f in 0-7
    if (s.size() != 12 || s[4] != ':' || s[7] != ':' || s[10] != '.' || s[11] < '0' || s[11] > '7') return false;
    for (size_t i : {0, 1, 2, 3, 5, 6, 8, 9})
        if (!std::isxdigit(static_cast<unsigned char>(s[i]))) return false;
    return true;
}

bool is_userspace_driver(const std::string& driver) {
    return driver == "vfio-pci" || driver == "uio_pci_generic" || driver == "igb_uio";
}

Tree::Tree(std::string root) : root_(std::move(root)) {
    while (root_.size() > 1 && root_.back() == '/') root_.pop_back();
}

std::string Tree::pci_path(const std::string& addr) const { return root_ + "/bus/pci/devices/" + addr; }

bool Tree::pci_exists(const std::string& addr) const {
    struct stat st {};
    return is_pci_address(addr) && ::stat(pci_path(addr).c_str(), &st) == 0 && S_ISDIR(st.st_mode);
}

std::vector<std::string> Tree::netdevs(const std::string& addr) const {
    if (!is_pci_address(addr)) return {};
    return base::fs::list_dir(pci_path(addr) + "/net");
}

std::optional<std::string> Tree::physfn(const std::string& addr) const {
    if (!is_pci_address(addr)) return std::nullopt;
    auto pf = link_basename(pci_path(addr) + "/physfn");
    if (!pf || !is_pci_address(*pf)) return std::nullopt;
    return pf;
}

std::optional<int> Tree::vf_index(const std::string& pf, const std::string& vf) const {
    if (!is_pci_address(pf)) return std::nullopt;
    for (auto& e : base::fs::list_dir(pci_path(pf))) {
        if (e.rfind("virtfn", 0) != 0) continue;
        int n = -1;
        auto [end, ec] = std::from_chars(e.data() + 6, e.data() + e.size(), n);
        if (ec != std::errc() || end != e.data() + e.size() || n < 0) continue;
        if (link_basename(pci_path(pf) + "/" + e) == vf) return n;
    }
    return std::nullopt;
}

std::optional<std::string> Tree::driver(const std::string& addr) const {
    if (!is_pci_address(addr)) return std::nullopt;
    return link_basename(pci_path(addr) + "/driver");
}

std::optional<std::string> Tree::pcie_root(const std::string& addr) const {
    if (!is_pci_address(addr)) return std::nullopt;
    char* real = ::realpath(pci_path(addr).c_str(), nullptr);
    if (!real) return std::nullopt;
    std::string path(real);
    std::free(real);
    // .../devices/pci0000:00/0000:00:01.0/0000:03:00.0: the root complex is "pci0000:00".
    for (size_t at = path.find("/pci"); at != std::string::npos; at = path.find("/pci", at + 1)) {
        std::string part = path.substr(at + 1, path.find('/', at + 1) - at - 1);
        if (part.size() == 10 && part[7] == ':' &&
            std::all_of(part.begin() + 3, part.end(), [](char c) { return c == ':' || std::isxdigit(static_cast<unsigned char>(c)); }))
            return part;
    }
    return std::nullopt;
}

std::optional<int> Tree::numa_node(const std::string& addr) const {
    auto s = attribute(addr, "numa_node");
    if (!s || s->empty()) return std::nullopt;
    int n = 0;
    auto [end, ec] = std::from_chars(s->data(), s->data() + s->size(), n);
    if (ec != std::errc() || end != s->data() + s->size()) return std::nullopt;
    return n;
}

std::vector<std::string> Tree::rdma_devices(const std::string& addr) const {
    if (!is_pci_address(addr)) return {};
    return base::fs::list_dir(pci_path(addr) + "/infiniband");
}

std::optional<std::string> Tree::attribute(const std::string& addr, const std::string& name) const {
    if (!is_pci_address(addr) || name.empty() || name.find('/') != std::string::npos || name[0] == '.')
        return std::nullopt;
    return read_small(pci_path(addr) + "/" + name);
}

std::optional<std::string> Tree::netdev_pci(const std::string& ifname) const {
    if (!plain_name(ifname)) return std::nullopt;
    auto pci = link_basename(root_ + "/class/net/" + ifname + "/device");
    if (!pci || !is_pci_address(*pci)) return std::nullopt;
    return pci;
}

std::optional<std::string> Tree::virtfn(const std::string& pf, int index) const {
    if (!is_pci_address(pf) || index < 0) return std::nullopt;
    auto vf = link_basename(pci_path(pf) + "/virtfn" + std::to_string(index));
    if (!vf || !is_pci_address(*vf)) return std::nullopt;
    return vf;
}

std::vector<std::string> Tree::netdev_names() const { return base::fs::list_dir(root_ + "/class/net"); }

bool Tree::netdev_has_device(const std::string& ifname) const {
    struct stat st {};
    return plain_name(ifname) && ::lstat((root_ + "/class/net/" + ifname + "/device").c_str(), &st) == 0;
}

std::optional<std::string> Tree::netdev_attribute(const std::string& ifname, const std::string& name) const {
    if (!plain_name(ifname) || !plain_name(name) || name[0] == '.') return std::nullopt;
    return read_small(root_ + "/class/net/" + ifname + "/" + name);
}

int Tree::numa_node_count() const {
    int n = 0;
    for (auto& e : base::fs::list_dir(root_ + "/devices/system/node"))
        n += e.rfind("node", 0) == 0 && e.size() > 4 && std::isdigit(static_cast<unsigned char>(e[4]));
    return n;
}

bool Tree::looks_like_sysfs() const {
    struct stat st {};
    for (const char* d : {"/devices", "/class", "/bus"})
        if (::lstat((root_ + d).c_str(), &st) == 0) return true;
    return false;
}

}  // namespace netns::sysfs
