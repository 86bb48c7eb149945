#include "ipam/lock.h"

#include <cerrno>
#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>

#include "base/error.h"
#include "base/files.h"
#include "base/flock.h"

namespace ipam {


// The wait is base::flock_until's (base/flock.h).
//
// A failed first ADD removes the store it created, lock file included (see
// HostLocal::undo), while it holds the lock; a waiter then holds a lock on a file that has
// no name any more. So after every acquisition the name is checked to still be this file,
// and the lock is taken again on the new one if not. A missing directory is reported
// (ENOENT) for the caller to create it again.
FileLock::FileLock(const std::string& path, std::chrono::milliseconds timeout) {
    fd_ = base::UniqueFd(::open(path.c_str(), O_RDONLY | O_CREAT | O_CLOEXEC, 0600));
    if (!fd_) base::fs::fail_io("open lock file", path, errno);
    const auto deadline = base::deadline_after(timeout);
    for (;;) {
        if (!base::flock_until(fd_.get(), LOCK_EX, deadline, path))
            throw base::LockTimeout("timed out after " + base::seconds_text(timeout) + " waiting for lock '" + path + "'");
        struct stat held, named;
        if (::fstat(fd_.get(), &held) == 0 && ::stat(path.c_str(), &named) == 0 && held.st_ino == named.st_ino &&
            held.st_dev == named.st_dev)
            return;
        fd_ = base::UniqueFd(::open(path.c_str(), O_RDONLY | O_CREAT | O_CLOEXEC, 0600));
        if (!fd_) base::fs::fail_io("open lock file", path, errno);
    }
}

}  // namespace ipam
