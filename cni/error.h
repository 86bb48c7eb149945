// One error type for the whole plugin. Every layer throws cni::Error; the dispatcher
// (cni/dispatch.cc) is the one place that turns it into the spec's error JSON.
#pragma once
#include <string>
#include <stdexcept>

namespace cni {

/// Error codes of the CNI spec (§Error) plus libcni's 8 and 999, and our own 100+.
enum Code : int {
    kIncompatibleVersion = 1,
    kUnsupportedField = 2,
    kUnknownContainer = 3,
    kInvalidEnv = 4,
    kIoFailure = 5,
    kDecodingFailure = 6,
    kInvalidConfig = 7,
    kInvalidNetns = 8,
    kTryAgainLater = 11,
    kNotAvailable = 50,
    kLimitedConnectivity = 51,
    // plugin specific (100+)
    kPlacement = 100,           ///< a placement constraint (nodeSelector, topology) is not met
    kIpamExhausted = 101,       ///< no free address left in a range set
    kAddressTaken = 102,        ///< a requested address is reserved by someone else
    kCheckFailed = 103,         ///< CHECK found a difference against prevResult
    kDelegateFailed = 104,      ///< an external IPAM plugin failed (its code is in details)
    kLinkExists = 105,          ///< CNI_IFNAME already exists in the pod netns
    kDeviceBusy = 106,          ///< the device (VF) is in use by another attachment
    kInternal = 999,
};

/// A failure that maps onto one CNI error code. `sys_errno` keeps the errno (or the
/// netlink error) of the syscall that failed so callers can test it (ENODEV, EEXIST...).
struct Error : std::runtime_error {
    int code;
    std::string details;
    int sys_errno = 0;

    Error(int code_, std::string msg, std::string details_ = {}, int err = 0)
        : std::runtime_error(std::move(msg)), code(code_), details(std::move(details_)), sys_errno(err) {}
};

/// Shorthands for the common cases; each names the thing that was wrong.
[[noreturn]] inline void fail_config(const std::string& msg) { throw Error(kInvalidConfig, msg); }
[[noreturn]] inline void fail_internal(const std::string& msg, int err = 0) { throw Error(kInternal, msg, {}, err); }

}  // namespace cni
