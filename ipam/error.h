// What went wrong in host-local IPAM, in its own words: a bad range or request, a pool
// with nothing left, an address someone else holds, a store that cannot be used. File
// errors are base::FileError, lock waits base::LockTimeout; cni/error.cc picks the code.
#pragma once
#include "base/error.h"

namespace ipam {

struct Error : base::Error {
    enum class Kind {
        Invalid,       ///< the ipam config or a requested address is not usable
        Exhausted,     ///< a range set has no free address left
        Taken,         ///< a requested address is reserved by another attachment
        NotReserved,   ///< the attachment holds no address (CHECK)
        Unavailable,   ///< the store cannot be used (STATUS, ADD)
    };
    Kind kind;

    Error(Kind k, const std::string& msg, std::string details_ = {}, int err = 0)
        : base::Error(msg, std::move(details_), err), kind(k) {}
};

[[noreturn]] inline void fail_invalid(const std::string& msg) { throw Error(Error::Kind::Invalid, msg); }

}  // namespace ipam
