// `topocni node-report`: this node's secondary-network resources as a Node Feature
// Discovery local feature file ("key=value" lines), so NFD turns them into node labels
// the scheduler can select on. It closes the scheduler's blind spot for VFs per NUMA
// node and NIC speeds.
#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <CLI/CLI.hpp>

#include <cerrno>
#include <cstring>
#include <fstream>
#include <map>
#include <set>
#include <sstream>

#include "cni/cli.h"
#include "cni/error.h"

namespace cni::cli {

namespace {

constexpr const char* kPrefix = "topocni.io/";

std::string read_trim(const std::string& path) {
    std::ifstream in(path);
    std::string s;
    if (!in || !std::getline(in, s)) return {};
    while (!s.empty() && (s.back() == '\n' || s.back() == ' ')) s.pop_back();
    return s;
}

std::vector<std::string> entries(const std::string& dir) {
    std::vector<std::string> out;
    if (DIR* d = ::opendir(dir.c_str())) {
        while (auto* e = ::readdir(d))
            if (e->d_name[0] != '.') out.push_back(e->d_name);
        ::closedir(d);
    }
    std::sort(out.begin(), out.end());
    return out;
}

bool exists(const std::string& p) {
    struct stat st;
    return ::lstat(p.c_str(), &st) == 0;
}

std::string basename_of_link(const std::string& p) {
    char buf[4096];
    ssize_t n = ::readlink(p.c_str(), buf, sizeof buf - 1);
    if (n <= 0) return {};
    buf[n] = 0;
    std::string s = buf;
    return s.substr(s.rfind('/') + 1);
}

/// Label-safe name: [A-Za-z0-9][-A-Za-z0-9_.]*, at most 63 bytes.
std::string label_name(std::string s) {
    for (auto& ch : s)
        if (!std::isalnum(static_cast<unsigned char>(ch)) && ch != '-' && ch != '_' && ch != '.') ch = '_';
    return s.substr(0, 63);
}

int numa_of(const std::string& dev_dir) {
    auto s = read_trim(dev_dir + "/numa_node");
    return s.empty() ? -1 : std::atoi(s.c_str());
}

std::string numa_key(int n) { return n < 0 ? "numa-unknown" : "numa" + std::to_string(n); }

struct Options {
    std::string output, sysfs_root = "/sys", state_dir = "/var/lib/cni/topocni";
};

std::string report(const Options& o) {
    std::ostringstream out;
    out << "# topocni node-report: secondary-network resources of this node\n";
    auto nodes = entries(o.sysfs_root + "/devices/system/node");
    int numa_count = 0;
    for (auto& n : nodes) numa_count += n.rfind("node", 0) == 0 && n.size() > 4 && std::isdigit(n[4]);
    out << kPrefix << "numa-nodes=" << numa_count << "\n";

    std::set<std::string> used_vfs;   // VF PCI addresses with a topocni state record
    for (auto& f : entries(o.state_dir + "/sriov"))
        if (f.size() > 5 && f.substr(f.size() - 5) == ".json") used_vfs.insert(f.substr(0, f.size() - 5));

    std::map<int, int> free_per_numa, total_per_numa;
    int pfs = 0;
    std::string net = o.sysfs_root + "/class/net";
    for (auto& ifname : entries(net)) {
        std::string dev = net + "/" + ifname + "/device";
        if (!exists(dev)) continue;                       // virtual device
        if (exists(dev + "/physfn")) continue;            // a VF, counted under its PF
        std::string name = label_name(ifname);
        auto speed = read_trim(net + "/" + ifname + "/speed");
        if (!speed.empty() && speed[0] != '-') out << kPrefix << "link." << name << ".speed-mbps=" << speed << "\n";
        auto total = read_trim(dev + "/sriov_totalvfs");
        if (total.empty() || total == "0") continue;
        ++pfs;
        int numa = numa_of(dev);
        int configured = std::atoi(read_trim(dev + "/sriov_numvfs").c_str());
        int free_vfs = 0;
        for (int i = 0; i < configured; ++i) {
            auto vf = basename_of_link(dev + "/virtfn" + std::to_string(i));
            if (!vf.empty() && !used_vfs.count(vf)) ++free_vfs;
        }
        out << kPrefix << "sriov-pf." << name << ".total-vfs=" << total << "\n";
        out << kPrefix << "sriov-pf." << name << ".configured-vfs=" << configured << "\n";
        out << kPrefix << "sriov-pf." << name << ".free-vfs=" << free_vfs << "\n";
        out << kPrefix << "sriov-pf." << name << ".numa-node=" << numa << "\n";
        total_per_numa[numa] += configured;
        free_per_numa[numa] += free_vfs;
    }
    out << kPrefix << "sriov-capable=" << (pfs > 0 ? "true" : "false") << "\n";
    for (auto& [numa, n] : total_per_numa) {
        out << kPrefix << "sriov-" << numa_key(numa) << ".configured-vfs=" << n << "\n";
        out << kPrefix << "sriov-" << numa_key(numa) << ".free-vfs=" << free_per_numa[numa] << "\n";
    }
    return out.str();
}

/// Dot-file then rename: NFD ignores dot-files, so it never reads a half-written file.
void write_atomically(const std::string& path, const std::string& text) {
    auto slash = path.rfind('/');
    std::string dir = slash == std::string::npos ? "." : path.substr(0, slash);
    std::string base = slash == std::string::npos ? path : path.substr(slash + 1);
    std::string tmp = dir + "/." + base + ".tmp";
    int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (fd < 0) throw Error(kIoFailure, "cannot write '" + tmp + "': " + strerror(errno));
    bool ok = ::write(fd, text.data(), text.size()) == static_cast<ssize_t>(text.size()) && ::fsync(fd) == 0;
    ::close(fd);
    if (!ok || ::rename(tmp.c_str(), path.c_str()) < 0) {
        int e = errno;
        ::unlink(tmp.c_str());
        throw Error(kIoFailure, "cannot write '" + path + "': " + strerror(e));
    }
}

}  // namespace

void add_node_report(CLI::App& app, int& status) {
    auto o = std::make_shared<Options>();
    auto* cmd = app.add_subcommand("node-report", "Report this node's network resources as NFD feature labels");
    cmd->add_option("--output", o->output, "write the feature file here atomically (default: stdout)");
    cmd->add_option("--sysfs-root", o->sysfs_root, "sysfs mount point")->capture_default_str();
    cmd->add_option("--state-dir", o->state_dir, "topocni stateDir (VFs in use)")->capture_default_str();
    cmd->footer("Examples:\n  topocni node-report\n"
                "  topocni node-report --output /etc/kubernetes/node-feature-discovery/features.d/topocni\n"
                "Labels (prefix topocni.io/): numa-nodes, sriov-capable, sriov-pf.<pf>.{total,configured,free}-vfs,\n"
                "sriov-pf.<pf>.numa-node, sriov-numa<N>.{configured,free}-vfs, link.<if>.speed-mbps.");
    cmd->callback([o, &status] {
        auto text = report(*o);
        if (o->output.empty()) std::fwrite(text.data(), 1, text.size(), stdout);
        else write_atomically(o->output, text);
        status = 0;
    });
}


}  // namespace cni::cli
