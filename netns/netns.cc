// Namespace handles and the enter/leave guard. See netns.h for the contract.
#include "netns/netns.h"

#include <fcntl.h>
#include <linux/magic.h>
#include <linux/nsfs.h>
#include <sched.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <sys/vfs.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <system_error>

#include "netns/error.h"

namespace netns {
namespace {

// Our own thread's namespace: with setns() per thread, /proc/self would name the
// main thread's, which need not be ours.
constexpr const char* kThreadNetns = "/proc/thread-self/ns/net";

std::string errno_text(int err) { return std::generic_category().message(err); }

[[noreturn]] void fail_open(const std::string& path, int err) {
    // A missing path is its own case: DEL treats a netns that is already gone as done.
    if (err == ENOENT) throw netns::Error(netns::Error::Kind::NoNamespace, "netns '" + path + "' does not exist", {}, ENOENT);
    throw netns::Error(netns::Error::Kind::NoNamespace, "failed to open netns '" + path + "': " + errno_text(err), {}, err);
}

[[noreturn]] void fail_not_netns(const std::string& path) {
    throw netns::Error(netns::Error::Kind::NoNamespace, "'" + path + "' is not a network namespace");
}

}  // namespace

Handle Handle::open(const std::string& path) {
    // Check the filesystem before open(): only nsfs (or procfs, on kernels before 3.19)
    // holds namespaces, and opening anything else could block (a FIFO) or act on a
    // stale bind mount that now points at an ordinary file.
    struct statfs fs {};
    if (::statfs(path.c_str(), &fs) < 0) fail_open(path, errno);
    if (fs.f_type != NSFS_MAGIC && fs.f_type != PROC_SUPER_MAGIC) fail_not_netns(path);

    Handle h;
    h.path_ = path;
    h.fd_ = base::UniqueFd(::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NOCTTY));
    if (!h.fd_) fail_open(path, errno);

    struct stat st {};
    if (::fstat(h.fd(), &st) < 0) fail_open(path, errno);
    if (S_ISDIR(st.st_mode)) fail_not_netns(path);   // e.g. /proc/self
    // nsfs inodes look like regular files, so ask the kernel (4.11+) what this is. Older
    // kernels answer ENOTTY even for namespaces; there only nsfs itself is trusted.
    int type = ::ioctl(h.fd(), NS_GET_NSTYPE);
    if (type >= 0 ? type != CLONE_NEWNET : fs.f_type != NSFS_MAGIC) fail_not_netns(path);
    return h;
}

Handle Handle::current() {
    Handle h;
    h.path_ = kThreadNetns;
    h.fd_ = base::UniqueFd(::open(kThreadNetns, O_RDONLY | O_CLOEXEC));
    if (!h.fd_) {
        int err = errno;
        throw netns::Error(netns::Error::Kind::Failed, "failed to open current netns: " + errno_text(err), {}, err);
    }
    return h;
}

bool Handle::same_as(const Handle& other) const {
    struct stat a {}, b {};
    if (::fstat(fd(), &a) < 0 || ::fstat(other.fd(), &b) < 0) return false;
    return a.st_dev == b.st_dev && a.st_ino == b.st_ino;
}

Guard::Guard(const Handle& target) {
    saved_ = base::UniqueFd(::open(kThreadNetns, O_RDONLY | O_CLOEXEC));
    if (!saved_) {
        int err = errno;
        throw netns::Error(netns::Error::Kind::Failed, "failed to open current netns: " + errno_text(err), {}, err);
    }
    if (::setns(target.fd(), CLONE_NEWNET) < 0) {
        int err = errno;
        throw netns::Error(netns::Error::Kind::NoNamespace, "failed to enter netns '" + target.path() + "': " + errno_text(err), {},
                         err);
    }
}

Guard::~Guard() {
    if (::setns(saved_.get(), CLONE_NEWNET) == 0) return;
    // Every later step (rollback, host-side links, IPAM release) would silently act on
    // the container's namespace instead of ours; stopping is the only safe option.
    std::fprintf(stderr, "topocni: failed to return to the original netns: %s\n", errno_text(errno).c_str());
    std::abort();
}

}  // namespace netns
