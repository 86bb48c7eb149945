// What the Kubernetes client reports: the API (or the way to it) is unavailable for now,
// or what was asked is wrong and asking again will not help. cni/error.cc maps these onto
// CNI codes (11 and 7); long-running consumers (the node publisher) retry the first kind
// with back-off and log the second.
#pragma once
#include <string>

#include "base/error.h"

namespace kube {

struct Error : base::Error {
    enum class Kind {
        Unavailable,   ///< unreachable, timed out, truncated, 429, 5xx, an answer that is not the object
        Invalid,       ///< refused credentials, not allowed, not found, a bad kubeconfig or certificate
        Internal,      ///< a library could not start
    };
    Kind kind;
    int http_status;   ///< the API server's status when it answered, else 0

    Error(Kind k, const std::string& msg, int status = 0) : base::Error(msg), kind(k), http_status(status) {}
};

}  // namespace kube
