#include "cni/records.h"

#include <dirent.h>
#include <fcntl.h>
#include <stdio.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <fstream>
#include <sstream>

#include "base/clock.h"
#include "base/error.h"
#include "base/files.h"
#include "base/flock.h"
#include "base/log.h"

namespace cni {

namespace {

std::string file_for(const std::string& state_dir, const std::string& network, const std::string& cid,
                     const std::string& ifname) {
    return records_dir(state_dir, network) + "/" + cid + "_" + ifname + ".json";
}

std::optional<Record> parse(const std::string& text) {
    auto j = nlohmann::json::parse(text, nullptr, false);
    if (!j.is_object()) return std::nullopt;
    Record r;
    r.network = j.value("network", "");
    r.container_id = j.value("containerID", "");
    r.ifname = j.value("ifname", "");
    r.netns = j.value("netns", "");
    r.completed_ns = j.value("completedBoottimeNs", int64_t{0});
    if (j.contains("result")) r.result = j["result"];
    if (j.contains("config") && j["config"].is_object()) r.config = j["config"];
    r.cni_path = j.value("cniPath", "");
    r.cni_args = j.value("cniArgs", "");
    r.link = j.value("link", "");
    if (r.container_id.empty() || r.ifname.empty()) return std::nullopt;
    return r;
}

}  // namespace

nlohmann::json record_config(const nlohmann::json& raw) {
    nlohmann::json c = raw;
    for (const char* key : {"prevResult", "cni.dev/valid-attachments", "cni.dev/attachments"}) c.erase(key);
    return c;
}

std::string records_dir(const std::string& state_dir, const std::string& network) {
    return state_dir + "/attachments/" + network;
}

void write_record(const std::string& state_dir, const Record& r) {
    std::string dir = records_dir(state_dir, r.network);
    try {
        base::fs::mkdir_p(dir, 0700);
    } catch (const base::Error& e) {
        base::log::warn(e.what());
        return;
    }
    nlohmann::json j = {{"network", r.network}, {"containerID", r.container_id}, {"ifname", r.ifname},
                        {"netns", r.netns}, {"result", r.result}};
    if (!r.result.is_null()) j["completedBoottimeNs"] = base::boottime_ns();
    if (!r.config.is_null()) j["config"] = r.config;
    if (!r.cni_path.empty()) j["cniPath"] = r.cni_path;
    if (!r.cni_args.empty()) j["cniArgs"] = r.cni_args;
    if (!r.link.empty()) j["link"] = r.link;
    std::string final_path = file_for(state_dir, r.network, r.container_id, r.ifname);
    std::string text = j.dump();
    // A record of less than a page is written in place with one write() at offset 0: a
    // kill cannot tear it (the kernel checks for fatal signals between pages only), so the
    // file holds the old record or the new one. A temp file per write would cost an
    // inode allocation each, ~0.5 ms on ext4 without a journal under pod churn. The
    // intent record is written before anything is acquired, so a torn one (over a stale
    // record of the same name) stands for nothing; the completion record is longer than
    // the intent it replaces, so it needs no truncate (which on ext4 would start writeback).
    if (text.size() <= 4096) {
        try {
            base::fs::write_in_place(AT_FDCWD, final_path, text, final_path);
        } catch (const base::Error& e) {
            base::log::warn(e.what());
        }
        return;
    }
    // Bigger (a result with very many routes): a temp file, then an exchange of names
    // rather than rename() over the intent, which on ext4 would start writeback
    // (auto_da_alloc). Either way the final name holds one whole record at every moment.
    std::string tmp = dir + "/.tmp-" + std::to_string(getpid()) + "-" + r.container_id;
    int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    if (fd < 0) { base::log::warn("failed to write '" + tmp + "': " + strerror(errno)); return; }
    bool ok = ::write(fd, text.data(), text.size()) == static_cast<ssize_t>(text.size());
    ::close(fd);
    if (ok && ::renameat2(AT_FDCWD, tmp.c_str(), AT_FDCWD, final_path.c_str(), RENAME_EXCHANGE) == 0) {
        ::unlink(tmp.c_str());   // now the intent record
        return;
    }
    if (!ok || ::rename(tmp.c_str(), final_path.c_str()) < 0) {
        base::log::warn("failed to write '" + final_path + "': " + strerror(errno));
        ::unlink(tmp.c_str());
    }
}

void remove_record(const std::string& state_dir, const std::string& network, const std::string& container_id,
                   const std::string& ifname) {
    ::unlink(file_for(state_dir, network, container_id, ifname).c_str());
}

std::optional<Record> read_record(const std::string& state_dir, const std::string& network,
                                  const std::string& container_id, const std::string& ifname) {
    std::ifstream in(file_for(state_dir, network, container_id, ifname));
    if (!in) return std::nullopt;
    std::stringstream ss;
    ss << in.rdbuf();
    return parse(ss.str());
}

std::vector<Record> list_records(const std::string& state_dir, const std::string& network) {
    std::vector<Record> out;
    std::string dir = records_dir(state_dir, network);
    DIR* d = ::opendir(dir.c_str());
    if (!d) return out;
    while (auto* e = ::readdir(d)) {
        std::string n = e->d_name;
        if (n.empty() || n[0] == '.' || n.size() < 6 || n.substr(n.size() - 5) != ".json") continue;
        std::ifstream in(dir + "/" + n);
        std::stringstream ss;
        ss << in.rdbuf();
        if (auto r = parse(ss.str())) out.push_back(*r);
    }
    ::closedir(d);
    return out;
}

// The lock is the records directory itself, flocked: no lock file to outlive the
// network's last attachment. A failed first ADD removes the directory it created
// (DirLock::release_created()).
base::DirLock lock_network(const std::string& state_dir, const std::string& network, base::DirLock::Mode mode,
                           int timeout_ms) {
    return base::DirLock::create(records_dir(state_dir, network), state_dir, mode, std::chrono::milliseconds(timeout_ms),
                                 "a GC or ADD of this network is running");
}


}  // namespace cni
