// The CNI spec's error codes, and the one place that maps every layer's error onto them.
// cni/ throws cni::Error with a code; the layers below throw their own types (base/error.h)
// and know nothing of codes. Whoever needs a code asks code_of; the dispatcher
// (cni/verbs/dispatch.cc) turns any base::Error into the spec's error JSON.
#pragma once
#include <string>

#include "base/error.h"

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

/// A failure the protocol layer decided the code of.
struct Error : base::Error {
    int code;

    Error(int code_, const std::string& msg, std::string details_ = {}, int err = 0)
        : base::Error(msg, std::move(details_), err), code(code_) {}
};

/// The CNI code of any error: cni::Error's own, and for the lower layers' errors the code
/// of what happened (a missing netns is 8, a file that cannot be written 5, a lock wait
/// that ran out 11, an exhausted pool 101...).
int code_of(const base::Error& e);
/// `e` as a cni::Error with its code, message, details and errno.
Error to_cni(const base::Error& e);

/// Shorthands for the common cases; each names the thing that was wrong.
[[noreturn]] inline void fail_config(const std::string& msg) { throw Error(kInvalidConfig, msg); }
[[noreturn]] inline void fail_internal(const std::string& msg, int err = 0) { throw Error(kInternal, msg, {}, err); }

}  // namespace cni
