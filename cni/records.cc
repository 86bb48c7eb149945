#include "cni/records.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/file.h>
#include <time.h>
#include <sys/stat.h>
#include <sys/vfs.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <sstream>

#include "base/flock.h"
#include "cni/error.h"
#include "base/log.h"
#include "base/files.h"

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
    if (!r.result.is_null()) j["completedBoottimeNs"] = boottime_ns();
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
    if (fd < 0) { base::log::warn("cannot write '" + tmp + "': " + strerror(errno)); return; }
    bool ok = ::write(fd, text.data(), text.size()) == static_cast<ssize_t>(text.size());
    ::close(fd);
    if (ok && ::renameat2(AT_FDCWD, tmp.c_str(), AT_FDCWD, final_path.c_str(), RENAME_EXCHANGE) == 0) {
        ::unlink(tmp.c_str());   // now the intent record
        return;
    }
    if (!ok || ::rename(tmp.c_str(), final_path.c_str()) < 0) {
        base::log::warn("cannot write '" + final_path + "': " + strerror(errno));
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
// network's last attachment. A failed first ADD removes the directory it created (see
// release_created()), so whoever gets the lock checks that the directory still has a name
// (link count above zero) and otherwise starts over.
NetworkLock::NetworkLock(const std::string& state_dir, const std::string& network, Mode mode, int timeout_ms)
    : NetworkLock(records_dir(state_dir, network), state_dir, mode, timeout_ms, "a GC or ADD of this network is running",
                  0) {}

NetworkLock NetworkLock::on_dir(const std::string& dir, const std::string& state_dir, Mode mode, int timeout_ms,
                                const std::string& busy) {
    return NetworkLock(dir, state_dir, mode, timeout_ms, busy, 0);
}

NetworkLock::NetworkLock(const std::string& dir, const std::string& state_dir, Mode mode, int timeout_ms,
                         const std::string& busy, int) {
    dir_ = dir;
    int op = mode == Shared ? LOCK_SH : LOCK_EX;
    const auto deadline = base::deadline_after(std::chrono::milliseconds(timeout_ms));
    for (int attempt = 0;; ++attempt) {
        // Only stateDir and below are ours to take away again (see release_created()).
        for (auto& d : base::fs::make_dirs(dir_, 0700))
            if (d == state_dir || d.rfind(state_dir + "/", 0) == 0) created_.push_back(d);
        fd_ = ::open(dir_.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        if (fd_ < 0) {
            if (errno == ENOENT && attempt < 5) continue;
            throw Error(kIoFailure, "cannot open '" + dir_ + "': " + strerror(errno), {}, errno);
        }
        bool locked = false;
        try {
            locked = base::flock_until(fd_, op, deadline, dir_);
        } catch (...) {
            ::close(fd_);
            fd_ = -1;
            throw;
        }
        if (!locked) {
            ::close(fd_);
            fd_ = -1;
            throw base::LockTimeout("timed out after " + base::seconds_text(std::chrono::milliseconds(timeout_ms)) +
                                    " waiting for lock '" + dir_ + "' (" + busy + ")");
        }
        struct stat st;
        if (::fstat(fd_, &st) == 0 && st.st_nlink > 0) return;
        ::close(fd_);
        fd_ = -1;
        if (attempt >= 5) throw Error(kTryAgainLater, "'" + dir_ + "' keeps being removed while we wait for it");
    }
}

void NetworkLock::release_created() noexcept {
    if (fd_ < 0 || created_.empty()) return;
    // Only while nobody else holds the lock (another ADD of the network shares it and
    // is about to write its record here): then the directory is ours to take away. (A
    // failed conversion drops the shared lock too, as flock(2) says: this is always the
    // last thing done under it.)
    if (::flock(fd_, LOCK_EX | LOCK_NB) != 0) return;
    if (base::fs::is_empty_dir(dir_)) base::fs::remove_dirs(created_);
}

NetworkLock::~NetworkLock() {
    if (fd_ >= 0) ::close(fd_);
}

int64_t boottime_ns() {
    timespec ts;
    clock_gettime(CLOCK_BOOTTIME, &ts);
    return int64_t(ts.tv_sec) * 1000000000 + ts.tv_nsec;
}

namespace {
// Taken during static initialisation, before main: precise to the nanosecond.
const int64_t g_static_init_ns = boottime_ns();

// When the kernel started this process (fork), from /proc/self/stat: boot-time clock
// ticks (10 ms), rounded down. nullopt if unreadable.
std::optional<int64_t> kernel_start_ns() {
    int fd = ::open("/proc/self/stat", O_RDONLY | O_CLOEXEC);
    if (fd < 0) return std::nullopt;
    char buf[1024];
    ssize_t n = ::read(fd, buf, sizeof buf - 1);
    ::close(fd);
    if (n <= 0) return std::nullopt;
    buf[n] = '\0';
    const char* p = std::strrchr(buf, ')');   // the command name may hold spaces and ')'
    if (!p) return std::nullopt;
    // Fields after the name start at 3 (state); starttime is field 22.
    unsigned long long ticks = 0;
    int field = 2;
    for (const char* q = p + 1; *q; ++q) {
        if (*q != ' ') continue;
        if (++field == 22) {
            ticks = std::strtoull(q + 1, nullptr, 10);
            break;
        }
    }
    long hz = ::sysconf(_SC_CLK_TCK);
    if (field != 22 || hz <= 0) return std::nullopt;
    return static_cast<int64_t>(ticks) * (1000000000 / hz);
}
}  // namespace

// Static initialisation, unless start-up was slow. Normally it comes within a few ms of
// the fork and is the precise moment; the fork time from /proc is rounded down to a 10 ms
// tick, so using it would keep attachments whose ADD completed just before GC started. But
// a slow start-up (a loaded node; ASan's runtime takes ~70 ms here) moves static
// initialisation well past the fork, and GC would then release an attachment whose ADD
// began after the runtime took its valid list: then the (early) fork tick is the safe side.
int64_t process_start_ns() {
    constexpr int64_t kSlowStartNs = 20'000'000;
    static const int64_t start = [] {
        auto k = kernel_start_ns();
        return k && g_static_init_ns - *k > kSlowStartNs ? *k : g_static_init_ns;
    }();
    return start;
}

bool netns_gone(const std::string& path) {
    struct stat st;
    if (path.empty() || path[0] != '/' || ::stat(path.c_str(), &st) == 0 || errno != ENOENT) return false;
    std::string dir = path.rfind("/proc/", 0) == 0 ? "/proc/self" : path.substr(0, path.rfind('/'));
    return !dir.empty() && ::stat(dir.c_str(), &st) == 0 && S_ISDIR(st.st_mode);
}

bool netns_exists(const std::string& path) {
    if (path.empty()) return false;
    struct statfs fs;
    if (::statfs(path.c_str(), &fs) < 0) return false;
    return fs.f_type == 0x6e736673 /* NSFS_MAGIC */ || fs.f_type == 0x9fa0 /* PROC_SUPER_MAGIC */;
}

}  // namespace cni
