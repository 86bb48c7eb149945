// The root of every error topocni throws. Each layer reports what happened in its own
// type (netns::Error, ipam::Error, conf::Error, the file and lock errors below), with the
// errno and the kernel's text where there is one; only cni/ knows the CNI spec's codes
// and maps these onto them, in one place (cni/error.cc).
#pragma once
#include <stdexcept>
#include <string>

namespace base {

struct Error : std::runtime_error {
    std::string details;   ///< more context for the operator (the spec's "details")
    int sys_errno = 0;     ///< errno or netlink error of the call that failed, so callers can test it

    explicit Error(const std::string& msg, std::string details_ = {}, int err = 0)
        : std::runtime_error(msg), details(std::move(details_)), sys_errno(err) {}
};

/// A file system call on a path failed (open, read, write, rename, fsync...).
struct FileError : Error {
    using Error::Error;
};

/// A bounded wait for a lock ran out: someone else holds it; trying again later may work.
struct LockTimeout : Error {
    using Error::Error;
};

}  // namespace base
