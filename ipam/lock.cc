#include "ipam/lock.h"

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <fcntl.h>
#include <random>
#include <sys/file.h>
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
FileLock::FileLock(const std::string& path, std::chrono::milliseconds timeout) {
    fd_ = UniqueFd(::open(path.c_str(), O_RDONLY | O_CREAT | O_CLOEXEC, 0600));
    if (!fd_) fs::fail_io("open lock file", path, errno);
    const auto deadline = Clock::now() + timeout;
    std::chrono::microseconds pause = 500us;
    for (;;) {
        if (::flock(fd_.get(), LOCK_EX | LOCK_NB) == 0) return;
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
