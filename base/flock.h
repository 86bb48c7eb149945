// One way to wait for a lock, for every lock topocni takes (the IPAM store's lock file,
// a network's records directory, a VF's sysfs directory): flock with LOCK_NB, polled
// with a growing, jittered pause until a deadline.
//
// Polling rather than a blocking flock interrupted by a timer: a timer needs a
// process-wide signal handler, which does not belong in a process that switches network
// namespaces, and polling leaves nothing armed behind. The cost is some latency (at most
// the longest pause, 20 ms) after the holder lets go; the first try costs nothing.
#pragma once
#include <chrono>
#include <string>

#include "base/fd.h"

namespace base {

using Deadline = std::chrono::steady_clock::time_point;

inline Deadline deadline_after(std::chrono::milliseconds timeout) { return std::chrono::steady_clock::now() + timeout; }

/// flock(fd, op) with op LOCK_EX or LOCK_SH, retried until `deadline`. False when the
/// deadline passed with the lock still held by someone else; FileError naming `shown` on
/// any other failure.
bool flock_until(int fd, int op, Deadline deadline, const std::string& shown);

/// An exclusive flock on an existing directory (a device's sysfs directory, a cache's
/// directory), held for the object's lifetime: nothing is created for the lock.
class DirLock {
public:
    /// Waits at most `timeout`, then throws LockTimeout naming `what`.
    DirLock(const std::string& path, const std::string& what, std::chrono::milliseconds timeout);

private:
    UniqueFd fd_;
};

/// "1.5s": how timeout messages give a timeout.
std::string seconds_text(std::chrono::milliseconds d);

}  // namespace base
