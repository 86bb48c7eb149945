// The store's directory lock: flock(LOCK_EX) on "<dir>/lock", the same file and lock
// type the reference plugin uses, so both implementations exclude each other.
#pragma once
#include <chrono>
#include <string>

#include "base/fd.h"

namespace ipam {

/// Holds an exclusive flock for its lifetime. Waits at most `timeout` for it, then
/// throws base::LockTimeout naming the lock file.
class FileLock {
public:
    FileLock(const std::string& path, std::chrono::milliseconds timeout);

private:
    base::UniqueFd fd_;   // closing the only fd of the open file description drops the lock
};

}  // namespace ipam
