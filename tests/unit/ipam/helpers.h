// Shared helpers for the ipam unit tests: a self-removing temp directory, file
// access, a config built from JSON, and address shorthands.
#pragma once
#include <sys/stat.h>
#include <doctest/doctest.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "ipam/error.h"
#include "ipam/host_local.h"
#include "../support.h"

namespace ipam_test {

using support::TempDir;

inline base::IpAddr ip(const char* s) {
    auto a = base::IpAddr::parse(s);
    REQUIRE(a);
    return *a;
}

inline bool exists(const std::string& p) { return std::filesystem::exists(std::filesystem::symlink_status(p)); }

inline std::string read_file(const std::string& p) {
    std::ifstream in(p, std::ios::binary);
    std::ostringstream s;
    s << in.rdbuf();
    return s.str();
}

/// Names in a directory, sorted; empty when it does not exist.
inline std::vector<std::string> list_dir(const std::string& p) {
    std::vector<std::string> out;
    std::error_code ec;
    for (auto& e : std::filesystem::directory_iterator(p, ec)) out.push_back(e.path().filename());
    std::sort(out.begin(), out.end());
    return out;
}

/// Every path under `root` (files and directories), relative, sorted.
inline std::vector<std::string> tree(const std::string& root) {
    std::vector<std::string> out;
    std::error_code ec;
    for (auto& e : std::filesystem::recursive_directory_iterator(root, ec))
        out.push_back(std::filesystem::relative(e.path(), root).string());
    std::sort(out.begin(), out.end());
    return out;
}

inline void write_file(const std::string& p, const std::string& content) {
    std::filesystem::create_directories(std::filesystem::path(p).parent_path());
    std::ofstream(p, std::ios::binary) << content;
}

/// A full network config around `ipam`, with dataDir pointing into `dir`.
inline nlohmann::json net_config(nlohmann::json ipam, const std::string& data_dir, const std::string& name = "net1") {
    ipam["type"] = "host-local";
    ipam["dataDir"] = data_dir;
    return {{"cniVersion", "1.0.0"}, {"name", name}, {"type", "bridge"}, {"ipam", ipam}};
}

/// A HostLocal over `ipam` (ranges etc.) storing under `dir`.
inline ipam::HostLocal host_local(const nlohmann::json& ipam, const std::string& dir, const std::string& name = "net1") {
    return ipam::HostLocal(ipam::parse_config(net_config(ipam, dir, name), "1.0.0"), name);
}

/// What `f` failed with, in IPAM's terms: "invalid", "exhausted", "taken", "not reserved",
/// "unavailable" (ipam::Error), "lock timeout", "file"; "" when it did not throw.
template <typename F>
std::string failure(F&& f, std::string* msg = nullptr) {
    try {
        f();
    } catch (const ipam::Error& e) {
        if (msg) *msg = e.what();
        switch (e.kind) {
            case ipam::Error::Kind::Invalid: return "invalid";
            case ipam::Error::Kind::Exhausted: return "exhausted";
            case ipam::Error::Kind::Taken: return "taken";
            case ipam::Error::Kind::NotReserved: return "not reserved";
            case ipam::Error::Kind::Unavailable: return "unavailable";
        }
    } catch (const base::LockTimeout& e) {
        if (msg) *msg = e.what();
        return "lock timeout";
    } catch (const base::FileError& e) {
        if (msg) *msg = e.what();
        return "file";
    }
    return "";
}

}  // namespace ipam_test
