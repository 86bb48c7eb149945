// A config that cannot be read (not JSON, too deep) or a key whose value is not valid.
// cni/error.cc maps these onto the spec's codes 6 and 7.
#pragma once
#include "base/error.h"

namespace conf {

struct Error : base::Error {
    enum class Kind {
        Decoding,   ///< the text is no JSON object
        Invalid,    ///< a key is missing, of the wrong type or out of range
    };
    Kind kind;

    Error(Kind k, const std::string& msg, std::string details_ = {}, int err = 0)
        : base::Error(msg, std::move(details_), err), kind(k) {}
};

/// An invalid value, wherever below the protocol it was found (conf, ipam, netns): what
/// a teardown reads past, keeping the key's default.
bool is_invalid_config(const base::Error& e);

}  // namespace conf
