// Test helpers: a throwaway named netns per test (deleted even when the test fails)
// and a way to catch the cni::Error a call throws.
#pragma once
#include <doctest/doctest.h>
#include <unistd.h>

#include <cstdlib>
#include <string>

#include "netns/error.h"
#include "netns/netns.h"

namespace testing {

/// `ip netns add <prefix>-<pid>`, opened as a Handle; `ip netns del` on scope exit.
struct TempNetns {
    struct Registration {
        std::string name;
        ~Registration() { (void)std::system(("ip netns del " + name + " 2>/dev/null").c_str()); }
    } reg;
    netns::Handle handle;

    explicit TempNetns(const std::string& prefix) : reg{prefix + "-" + std::to_string(::getpid())} {
        (void)std::system(("ip netns del " + reg.name + " 2>/dev/null").c_str());   // left by a crashed run
        REQUIRE(std::system(("ip netns add " + reg.name).c_str()) == 0);
        handle = netns::Handle::open("/run/netns/" + reg.name);
    }
};

/// The netns::Error that fn throws; fails the test when it throws nothing.
template <class F>
netns::Error error_of(F&& fn) {
    try {
        fn();
    } catch (const netns::Error& e) {
        return e;
    }
    FAIL("expected a netns::Error");
    return netns::Error(netns::Error::Kind::Failed, "");
}

}  // namespace testing
