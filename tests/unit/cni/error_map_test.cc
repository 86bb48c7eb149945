// The one mapping from what a layer reports to the CNI spec's code (cni/error.cc).
#include <doctest/doctest.h>

#include <cerrno>

#include "cni/error.h"
#include "conf/error.h"
#include "ipam/error.h"
#include "netns/error.h"

TEST_CASE("each layer's error gets the CNI code of what happened") {
    using NK = netns::Error::Kind;
    using IK = ipam::Error::Kind;
    using CK = conf::Error::Kind;
    CHECK(cni::code_of(netns::Error(NK::NoNamespace, "x")) == cni::kInvalidNetns);
    CHECK(cni::code_of(netns::Error(NK::Invalid, "x")) == cni::kInvalidConfig);
    CHECK(cni::code_of(netns::Error(NK::Failed, "x")) == cni::kInternal);
    CHECK(cni::code_of(ipam::Error(IK::Invalid, "x")) == cni::kInvalidConfig);
    CHECK(cni::code_of(ipam::Error(IK::Exhausted, "x")) == cni::kIpamExhausted);
    CHECK(cni::code_of(ipam::Error(IK::Taken, "x")) == cni::kAddressTaken);
    CHECK(cni::code_of(ipam::Error(IK::NotReserved, "x")) == cni::kCheckFailed);
    CHECK(cni::code_of(ipam::Error(IK::Unavailable, "x")) == cni::kNotAvailable);
    CHECK(cni::code_of(conf::Error(CK::Decoding, "x")) == cni::kDecodingFailure);
    CHECK(cni::code_of(conf::Error(CK::Invalid, "x")) == cni::kInvalidConfig);
    CHECK(cni::code_of(base::FileError("x")) == cni::kIoFailure);
    CHECK(cni::code_of(base::LockTimeout("x")) == cni::kTryAgainLater);
    CHECK(cni::code_of(base::Error("x")) == cni::kInternal);
    CHECK(cni::code_of(cni::Error(cni::kPlacement, "x")) == cni::kPlacement);
}

TEST_CASE("converting to a cni::Error keeps the message, details and errno") {
    cni::Error e = cni::to_cni(netns::Error(netns::Error::Kind::NoNamespace, "netns '/x' does not exist", "d", ENOENT));
    CHECK(e.code == cni::kInvalidNetns);
    CHECK(std::string(e.what()) == "netns '/x' does not exist");
    CHECK(e.details == "d");
    CHECK(e.sys_errno == ENOENT);
}

TEST_CASE("a teardown reads past an invalid value from any layer but not a failure") {
    CHECK(conf::is_invalid_config(conf::Error(conf::Error::Kind::Invalid, "x")));
    CHECK(conf::is_invalid_config(ipam::Error(ipam::Error::Kind::Invalid, "x")));
    CHECK(conf::is_invalid_config(netns::Error(netns::Error::Kind::Invalid, "x")));
    CHECK_FALSE(conf::is_invalid_config(conf::Error(conf::Error::Kind::Decoding, "x")));
    CHECK_FALSE(conf::is_invalid_config(base::FileError("x")));
    CHECK_FALSE(conf::is_invalid_config(netns::Error(netns::Error::Kind::Failed, "x")));
}
