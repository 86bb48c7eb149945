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
#include <vector>

#include "base/fd.h"

namespace base {

using Deadline = std::chrono::steady_clock::time_point;

inline Deadline deadline_after(std::chrono::milliseconds timeout) { return std::chrono::steady_clock::now() + timeout; }

/// flock(fd, op) with op LOCK_EX or LOCK_SH, retried until `deadline`. False when the
/// deadline passed with the lock still held by someone else; FileError naming `shown` on
/// any other failure.
bool flock_until(int fd, int op, Deadline deadline, const std::string& shown);

/// A flock on a directory, held for the object's lifetime. The lock is the directory
/// itself, so no lock file outlives what it guards.
class DirLock {
public:
    enum Mode { Shared, Exclusive };
    /// Exclusive, on a directory that exists (a device's sysfs directory, a cache's
    /// directory): nothing is created. Waits at most `timeout`, then throws LockTimeout
    /// naming `what`.
    DirLock(const std::string& path, const std::string& what, std::chrono::milliseconds timeout);
    /// Creates `path` when missing (the directories made under `owned_root` are the lock's
    /// to take away again: release_created()). Whoever gets the lock checks that the
    /// directory still has a name (a refused first ADD may have removed it meanwhile) and
    /// otherwise starts over. LockTimeout saying `busy` after `timeout`.
    static DirLock create(const std::string& path, const std::string& owned_root, Mode mode,
                          std::chrono::milliseconds timeout, const std::string& busy);
    /// Undo of a refused ADD: removes the directories create() made when they are empty
    /// and nobody else holds the lock. Always the last thing done under the lock (a failed
    /// conversion to exclusive drops a shared lock, as flock(2) says).
    void release_created() noexcept;

private:
    DirLock() = default;
    std::string dir_;
    std::vector<std::string> created_;
    UniqueFd fd_;
};

/// "1.5s": how timeout messages give a timeout.
std::string seconds_text(std::chrono::milliseconds d);

}  // namespace base
