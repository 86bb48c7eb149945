#include "ipam/lock.h"

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <fcntl.h>
#include <random>
#include <sys/file.h>
#include <sys/stat.h>
#include <thread>

#include "cni/error.h"
#include "ipam/fs.h"

namespace ipam {

namespace {

using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;

std::string seconds(std::chrono::milliseconds d) {
    char buf[32];
    std::snprintf(buf, sizeof buf, "%gs", static_cast<double>(d.count()) / 1000.0);
    return buf;
}

// Random jitter so that many waiters started together do not poll in lock step.
std::chrono::microseconds jitter(std::chrono::microseconds upto) {
    static std::minstd_rand rng(static_cast<unsigned>(::getpid()) ^
                                static_cast<unsigned>(Clock::now().time_since_epoch().count()));
    return std::chrono::microseconds(rng() % static_cast<unsigned>(upto.count() + 1));
}

}  // namespace

// We poll with LOCK_NB and a capped exponential back-off instead of a blocking flock
// interrupted by a timer: a timer needs a process-wide signal handler, which a library
// should not install, and polling cannot leave anything armed behind. The cost is some
// latency (at most ~32 ms) after the holder lets go.
//
// A failed first ADD removes the store it created, lock file included (see
// HostLocal::undo), while it holds the lock; a waiter then holds a lock on a file that has
// no name any more. So after every acquisition the name is checked to still be this file,
// and the lock is taken again on the new one if not. A missing directory is reported
// (ENOENT) for the caller to create it again.
FileLock::FileLock(const std::string& path, std::chrono::milliseconds timeout) {
    fd_ = base::UniqueFd(::open(path.c_str(), O_RDONLY | O_CREAT | O_CLOEXEC, 0600));
    if (!fd_) fs::fail_io("open lock file", path, errno);
    const auto deadline = Clock::now() + timeout;
    std::chrono::microseconds pause = 500us;
    for (;;) {
        if (::flock(fd_.get(), LOCK_EX | LOCK_NB) == 0) {
            struct stat held, named;
            if (::fstat(fd_.get(), &held) == 0 && ::stat(path.c_str(), &named) == 0 && held.st_ino == named.st_ino &&
                held.st_dev == named.st_dev)
                return;
            fd_ = base::UniqueFd(::open(path.c_str(), O_RDONLY | O_CREAT | O_CLOEXEC, 0600));
            if (!fd_) fs::fail_io("open lock file", path, errno);
            continue;
        }
        if (errno == EINTR) continue;
        if (errno != EWOULDBLOCK) fs::fail_io("lock", path, errno);
        const auto now = Clock::now();
        if (now >= deadline)
            throw cni::Error(cni::kTryAgainLater, "timed out after " + seconds(timeout) + " waiting for lock '" + path + "'");
        auto left = std::chrono::duration_cast<std::chrono::microseconds>(deadline - now);
        std::this_thread::sleep_for(std::min(pause + jitter(pause / 2), left));
        pause = std::min<std::chrono::microseconds>(pause * 2, 32ms);
    }
}

}  // namespace ipam
