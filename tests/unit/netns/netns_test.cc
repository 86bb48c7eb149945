#include <doctest/doctest.h>
#include <unistd.h>

#include <cerrno>

#include "netns/netns.h"
#include "temp_netns.h"

using testing::error_of;
using testing::TempNetns;

TEST_CASE("netns: open rejects paths that are not network namespaces") {
    for (const char* path : {"/etc/hostname", "/proc/self", "/tmp", "/proc/self/status", "/proc/self/ns/uts"}) {
        CAPTURE(path);
        auto e = error_of([&] { netns::Handle::open(path); });
        CHECK(e.kind == netns::Error::Kind::NoNamespace);
        CHECK(e.sys_errno == 0);
        CHECK(std::string(e.what()) == "'" + std::string(path) + "' is not a network namespace");
    }
}

TEST_CASE("netns: a missing path is reported with ENOENT so DEL can treat it as gone") {
    std::string path = "/run/netns/tnsmissing-" + std::to_string(getpid());
    auto e = error_of([&] { netns::Handle::open(path); });
    CHECK(e.kind == netns::Error::Kind::NoNamespace);
    CHECK(e.sys_errno == ENOENT);
    CHECK(std::string(e.what()) == "netns '" + path + "' does not exist");
}

TEST_CASE("netns: a guard enters the namespace and always switches back") {
    TempNetns a("tns1");
    auto orig = netns::Handle::current();
    CHECK(netns::Handle::open("/proc/self/ns/net").same_as(orig));
    CHECK_FALSE(a.handle.same_as(orig));
    {
        netns::Guard g(a.handle);
        CHECK(netns::Handle::current().same_as(a.handle));
    }
    CHECK(netns::Handle::current().same_as(orig));

    // Also on the way out of an exception.
    CHECK_THROWS_AS(netns::with(a.handle, [&] {
        CHECK(netns::Handle::current().same_as(a.handle));
        throw std::runtime_error("boom");
    }), std::runtime_error);
    CHECK(netns::Handle::current().same_as(orig));
    CHECK(netns::with(a.handle, [] { return 42; }) == 42);
}
