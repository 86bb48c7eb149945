// What the unit tests share: a temporary directory that goes away with the test (and a
// fake sysfs tree in it), and an error as the plugin would report it. Header-only, so each test binary links only the
// part it tests (coded_error is instantiated only where used, in the CNI stack's tests).
#pragma once
#include <doctest/doctest.h>
#include <stdlib.h>

#include <filesystem>
#include <fstream>
#include <string>
#include <system_error>

#include "base/error.h"
#include "cni/error.h"

namespace support {

/// mkdtemp under /tmp, removed with everything in it when the test ends.
class TempDir {
public:
    explicit TempDir(const std::string& tag = "unit") {
        std::string tmpl = "/tmp/topocni-" + tag + "-XXXXXX";
        REQUIRE(::mkdtemp(tmpl.data()) != nullptr);
        path_ = tmpl;
    }
    ~TempDir() {
        std::error_code ec;
        std::filesystem::remove_all(path_, ec);
    }
    TempDir(const TempDir&) = delete;
    TempDir& operator=(const TempDir&) = delete;

    const std::string& path() const { return path_; }
    std::filesystem::path dir() const { return path_; }
    /// `rel` under the directory, as a string (a config's sysfsRoot, stateDir...).
    std::string p(const std::string& rel) const { return (dir() / rel).string(); }
    /// Writes `text` to `rel` under the directory, creating what is missing on the way.
    void write(const std::string& rel, const std::string& text) const {
        std::filesystem::create_directories((dir() / rel).parent_path());
        std::ofstream(dir() / rel) << text;
    }

    // A sysfs tree under <dir>/sys as placement reads it, PCI devices as plain directories
    // under bus/pci/devices (tests/integration/fakesysfs.py builds the kernel's full layout).

    /// A PF with netdev `ifname` on NUMA node `numa`, its link at `speed` Mbps.
    void fake_pf(const std::string& pci, const std::string& ifname, int numa, const std::string& speed) const {
        write("sys/bus/pci/devices/" + pci + "/numa_node", std::to_string(numa) + "\n");
        std::filesystem::create_directories(dir() / "sys/bus/pci/devices" / pci / "net" / ifname);
        write("sys/class/net/" + ifname + "/speed", speed + "\n");
    }
    /// A VF of `pf` on NUMA node `numa`.
    void fake_vf(const std::string& pci, const std::string& pf, int numa) const {
        write("sys/bus/pci/devices/" + pci + "/numa_node", std::to_string(numa) + "\n");
        std::filesystem::create_directory_symlink("../" + pf, dir() / "sys/bus/pci/devices" / pci / "physfn");
    }

private:
    std::string path_;
};

/// What fn throws, as the plugin would report it: "<CNI code> <message>"; "" when it
/// throws nothing.
template <class F>
std::string coded_error(F&& fn) {
    try {
        fn();
    } catch (const base::Error& e) {
        return std::to_string(cni::code_of(e)) + " " + e.what();
    }
    return "";
}

}  // namespace support
