// What failed in a namespace, netlink, tc, sysctl or sysfs call: the kernel's errno and
// extended-ack text in the message, the errno in sys_errno. cni/error.cc picks the code.
#pragma once
#include "base/error.h"

namespace netns {

struct Error : base::Error {
    enum class Kind {
        NoNamespace,   ///< a netns path that does not exist, is no netns, or cannot be entered
        Invalid,       ///< a value the kernel cannot take as given (a MAC address, a setting)
        Failed,        ///< the call failed on the node (netlink, sysctl, tc)
    };
    Kind kind;

    Error(Kind k, const std::string& msg, std::string details_ = {}, int err = 0)
        : base::Error(msg, std::move(details_), err), kind(k) {}
};

[[noreturn]] inline void fail(const std::string& msg, int err = 0) { throw Error(Error::Kind::Failed, msg, {}, err); }
[[noreturn]] inline void fail_invalid(const std::string& msg) { throw Error(Error::Kind::Invalid, msg); }

}  // namespace netns
