#include "cni/error.h"

#include "conf/error.h"
#include "ipam/error.h"
#include "kube/error.h"
#include "netns/error.h"
#include "placement/error.h"

namespace cni {

namespace {

int code(netns::Error::Kind k) {
    switch (k) {
        case netns::Error::Kind::NoNamespace: return kInvalidNetns;
        case netns::Error::Kind::Invalid: return kInvalidConfig;
        case netns::Error::Kind::Failed: return kInternal;
    }
    return kInternal;
}

int code(ipam::Error::Kind k) {
    switch (k) {
        case ipam::Error::Kind::Invalid: return kInvalidConfig;
        case ipam::Error::Kind::Exhausted: return kIpamExhausted;
        case ipam::Error::Kind::Taken: return kAddressTaken;
        case ipam::Error::Kind::NotReserved: return kCheckFailed;
        case ipam::Error::Kind::Unavailable: return kNotAvailable;
    }
    return kInternal;
}

int code(conf::Error::Kind k) {
    switch (k) {
        case conf::Error::Kind::Decoding: return kDecodingFailure;
        case conf::Error::Kind::Invalid: return kInvalidConfig;
    }
    return kInternal;
}

int code(kube::Error::Kind k) {
    switch (k) {
        case kube::Error::Kind::Unavailable: return kTryAgainLater;
        case kube::Error::Kind::Invalid: return kInvalidConfig;
        case kube::Error::Kind::Internal: return kInternal;
    }
    return kInternal;
}

int code(placement::Error::Kind k) {
    switch (k) {
        case placement::Error::Kind::Refused: return kPlacement;
        case placement::Error::Kind::Invalid: return kInvalidConfig;
        case placement::Error::Kind::Decoding: return kDecodingFailure;
        case placement::Error::Kind::NotYet: return kTryAgainLater;
    }
    return kInternal;
}

}  // namespace

int code_of(const base::Error& e) {
    if (auto* c = dynamic_cast<const Error*>(&e)) return c->code;
    if (auto* n = dynamic_cast<const netns::Error*>(&e)) return code(n->kind);
    if (auto* i = dynamic_cast<const ipam::Error*>(&e)) return code(i->kind);
    if (auto* c = dynamic_cast<const conf::Error*>(&e)) return code(c->kind);
    if (auto* k = dynamic_cast<const kube::Error*>(&e)) return code(k->kind);
    if (auto* p = dynamic_cast<const placement::Error*>(&e)) return code(p->kind);
    if (dynamic_cast<const base::FileError*>(&e)) return kIoFailure;
    if (dynamic_cast<const base::LockTimeout*>(&e)) return kTryAgainLater;
    return kInternal;
}

Error to_cni(const base::Error& e) { return Error(code_of(e), e.what(), e.details, e.sys_errno); }

}  // namespace cni
