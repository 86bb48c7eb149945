// Names derived by hashing must never change between releases: a DEL run by a newer
// topocni has to find the links and files an older one made. The values below were
// computed by the hash loops these names were first made with.
#include <doctest/doctest.h>

#include "base/hash.h"
#include "cni/attach/host_name.h"

TEST_CASE("the host veth and ifb names of an attachment are what earlier releases made") {
    CHECK(cni::host_link_name("c1", "net1") == "veth62b3aac2d87");
    CHECK(cni::ifb_link_name("c1", "net1") == "ifbc62b3aac2d87");
}

TEST_CASE("the name hash keeps the seed names on nodes were made with, and FNV-1a elsewhere") {
    CHECK((base::fnv1a64("c1/net1", base::kNameSeed) & 0xffffffffffffull) == 0xb19dedaac2baull);
    CHECK(base::fnv1a64("/run/netns/x", base::kNameSeed) == 0xfb3f36e15af966e1ull);
    std::string key("c1\0net1", 7);
    CHECK(base::fnv1a64(key) == 0x3a9e2c666410a33dull);
    CHECK(base::fnv1a64(key, 0x84222325cbf29ce4ull) == 0x9599c096a854e18aull);
    CHECK(base::fnv1a32("abc") == 0x1a47e90bu);
    // The published FNV-1a test vector, so the 64-bit function is the real FNV-1a.
    CHECK(base::fnv1a64("a") == 0xaf63dc4c8601ec8cull);
}
