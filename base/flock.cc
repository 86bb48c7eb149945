#include "base/flock.h"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <random>
#include <thread>

#include "base/error.h"
#include "base/files.h"

namespace base {

namespace {

using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;

// Random jitter so that many waiters started together do not poll in lock step.
std::chrono::microseconds jitter(std::chrono::microseconds upto) {
    static std::minstd_rand rng(static_cast<unsigned>(::getpid()) ^
                                static_cast<unsigned>(Clock::now().time_since_epoch().count()));
    return std::chrono::microseconds(rng() % static_cast<unsigned>(upto.count() + 1));
}

}  // namespace

bool flock_until(int fd, int op, Deadline deadline, const std::string& shown) {
    std::chrono::microseconds pause = 200us;
    for (;;) {
        if (::flock(fd, op | LOCK_NB) == 0) return true;
        if (errno == EINTR) continue;
        if (errno != EWOULDBLOCK) fs::fail_io("lock", shown, errno);
        const auto now = Clock::now();
        if (now >= deadline) return false;
        auto left = std::chrono::duration_cast<std::chrono::microseconds>(deadline - now);
        std::this_thread::sleep_for(std::min(pause + jitter(pause / 2), left));
        pause = std::min<std::chrono::microseconds>(pause * 2, 20ms);
    }
}

DirLock::DirLock(const std::string& path, const std::string& what, std::chrono::milliseconds timeout) : dir_(path) {
    // An existing directory (a device's sysfs directory): nothing is created for the lock.
    fd_ = UniqueFd(::open(path.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
    if (!fd_) fs::fail_io("open lock", path, errno);
    if (!flock_until(fd_.get(), LOCK_EX, deadline_after(timeout), path))
        throw LockTimeout("timed out after " + seconds_text(timeout) + " waiting for the lock of " + what + " ('" +
                          path + "')");
}

DirLock DirLock::create(const std::string& path, const std::string& owned_root, Mode mode,
                        std::chrono::milliseconds timeout, const std::string& busy) {
    DirLock l;
    l.dir_ = path;
    const auto deadline = deadline_after(timeout);
    for (int attempt = 0;; ++attempt) {
        // Only owned_root and below are ours to take away again (see release_created()).
        for (auto& d : fs::make_dirs(path, 0700))
            if (d == owned_root || d.rfind(owned_root + "/", 0) == 0) l.created_.push_back(d);
        l.fd_ = UniqueFd(::open(path.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
        if (!l.fd_) {
            if (errno == ENOENT && attempt < 5) continue;
            fs::fail_io("open", path, errno);
        }
        if (!flock_until(l.fd_.get(), mode == Shared ? LOCK_SH : LOCK_EX, deadline, path))
            throw LockTimeout("timed out after " + seconds_text(timeout) + " waiting for lock '" + path + "' (" + busy + ")");
        struct stat st;
        if (::fstat(l.fd_.get(), &st) == 0 && st.st_nlink > 0) return l;
        l.fd_.reset();
        if (attempt >= 5) throw LockTimeout("'" + path + "' keeps being removed while we wait for it");
    }
}

void DirLock::release_created() noexcept {
    if (!fd_ || created_.empty()) return;
    // Only while nobody else holds the lock (another ADD of the network shares it and is
    // about to write its record here): then the directory is ours to take away.
    if (::flock(fd_.get(), LOCK_EX | LOCK_NB) != 0) return;
    if (fs::is_empty_dir(dir_)) fs::remove_dirs(created_);
}

std::string seconds_text(std::chrono::milliseconds d) {
    char buf[32];
    std::snprintf(buf, sizeof buf, "%gs", static_cast<double>(d.count()) / 1000.0);
    return buf;
}

}  // namespace base
