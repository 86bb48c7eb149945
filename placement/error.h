// What placement reports: a constraint that is not met (the refusal, with its evidence),
// a config or node file that is not valid, a document that cannot be decoded, a fact that
// is not there yet. cni/error.cc maps these onto CNI codes (100, 7, 6, 11); the cluster
// side answers with them as they are (a scheduler verdict, a webhook message).
#pragma once
#include <string>

#include "base/error.h"

namespace placement {

struct Error : base::Error {
    enum class Kind {
        Refused,    ///< a constraint is not met: the message names every one, details hold the evidence
        Invalid,    ///< a key, a labels file or a record is not valid
        Decoding,   ///< a facts document or the kubelet's state file cannot be read as one
        NotYet,     ///< a fact is not there yet (a labels file not written yet): asking later may work
    };
    Kind kind;

    Error(Kind k, const std::string& msg, std::string details_ = {}, int err = 0)
        : base::Error(msg, std::move(details_), err), kind(k) {}
};

/// The API or a lock is unavailable for now (kube::Error::Unavailable, base::LockTimeout,
/// Kind::NotYet): what a caller with another source of facts may read past.
bool is_unavailable(const base::Error& e);

}  // namespace placement
