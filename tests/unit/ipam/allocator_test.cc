#include "helpers.h"
#include "ipam/allocator.h"
#include "mem_store.h"

using ipam_test::ip;
using json = nlohmann::json;

namespace {

// Config ranges for tests: a small v4 set, optionally a small v6 set.
std::vector<ipam::RangeSet> sets(const json& ranges) {
    return ipam::parse_config(json{{"ipam", {{"ranges", ranges}}}}, "1.0.0").ranges;
}

const json kV4 = json::parse(R"([{"subnet": "10.0.0.0/29", "rangeStart": "10.0.0.2", "rangeEnd": "10.0.0.5"}])");
const json kV6 = json::parse(R"([{"subnet": "fd00::/120", "rangeStart": "fd00::2", "rangeEnd": "fd00::3"}])");

std::string addr(ipam::Store& s, const std::vector<ipam::RangeSet>& rs, const std::string& cid) {
    auto out = ipam::Allocator(rs, s).allocate({cid, "eth0"}, {});
    REQUIRE(out.size() == 1);
    return out[0].address.addr.str();
}

}  // namespace

TEST_CASE("allocator: round robin does not reuse a freed address until it wraps around") {
    ipam_test::MemStore store;
    auto rs = sets(json::array({kV4}));
    CHECK(addr(store, rs, "a") == "10.0.0.2");
    CHECK(addr(store, rs, "b") == "10.0.0.3");
    store.release({"a", "eth0"});
    CHECK(addr(store, rs, "c") == "10.0.0.4");
    CHECK(addr(store, rs, "d") == "10.0.0.5");
    CHECK(addr(store, rs, "e") == "10.0.0.2");   // wrapped: .2 is free again
    CHECK(store.cursors[0] == ip("10.0.0.2"));
}

TEST_CASE("allocator: the gateway is never handed out") {
    ipam_test::MemStore store;
    auto rs = sets(json::parse(R"([[{"subnet": "10.0.0.0/29", "rangeStart": "10.0.0.2", "rangeEnd": "10.0.0.4",
                                       "gateway": "10.0.0.3"}]])"));
    CHECK(addr(store, rs, "a") == "10.0.0.2");
    CHECK(addr(store, rs, "b") == "10.0.0.4");
    CHECK(ipam_test::failure([&] { addr(store, rs, "c"); }) == "exhausted");
}

TEST_CASE("allocator: the result carries the subnet prefix and the range gateway") {
    ipam_test::MemStore store;
    auto out = ipam::Allocator(sets(json::array({kV4, kV6})), store).allocate({"a", "eth0"}, {});
    REQUIRE(out.size() == 2);
    CHECK(out[0].address.str() == "10.0.0.2/29");
    CHECK(out[0].gateway == ip("10.0.0.1"));
    CHECK_FALSE(out[0].interface);
    CHECK(out[1].address.str() == "fd00::2/120");
    CHECK(out[1].gateway == ip("fd00::1"));
    CHECK(store.files.size() == 2);
}

TEST_CASE("allocator: exhaustion is code 101 and leaves nothing reserved by the failing call") {
    ipam_test::MemStore store;
    auto rs = sets(json::array({kV4, kV6}));
    ipam::Allocator(rs, store).allocate({"a", "eth0"}, {});
    ipam::Allocator(rs, store).allocate({"b", "eth0"}, {});   // v6 set now full
    auto before = store.files.size();
    std::string msg;
    CHECK(ipam_test::failure([&] { ipam::Allocator(rs, store).allocate({"c", "eth0"}, {}); }, &msg) ==
          "exhausted");
    CHECK(msg == "no IP addresses available in range set: fd00::2-fd00::3");
    CHECK(store.files.size() == before);
    CHECK(store.find({"c", "eth0"}).empty());
}

TEST_CASE("allocator: a failing call keeps the owner's earlier reservations") {
    ipam_test::MemStore store;
    auto rs = sets(json::array({kV4, kV6}));
    store.reserve(ip("10.0.0.4"), {"a", "eth0"});                  // from an earlier, partial ADD
    store.reserve(ip("fd00::2"), {"x", "eth0"});
    store.reserve(ip("fd00::3"), {"y", "eth0"});
    CHECK(ipam_test::failure([&] { ipam::Allocator(rs, store).allocate({"a", "eth0"}, {}); }) == "exhausted");
    CHECK(store.holder(ip("10.0.0.4"))->container_id == "a");
}

TEST_CASE("allocator: a retried allocate returns what the owner already holds") {
    ipam_test::MemStore store;
    auto rs = sets(json::array({kV4, kV6}));
    auto first = ipam::Allocator(rs, store).allocate({"a", "eth0"}, {});
    auto cursor = store.cursors;
    auto again = ipam::Allocator(rs, store).allocate({"a", "eth0"}, {});
    CHECK(again[0].address == first[0].address);
    CHECK(again[1].address == first[1].address);
    CHECK(store.files.size() == 2);
    CHECK(store.cursors == cursor);
    SUBCASE("another interface of the same container is another owner") {
        auto other = ipam::Allocator(rs, store).allocate({"a", "net1"}, {});
        CHECK(other[0].address != first[0].address);
    }
    SUBCASE("holding one set only: the missing set is allocated") {
        store.remove({first[1].address.addr, "a", "eth0"});
        auto fixed = ipam::Allocator(rs, store).allocate({"a", "eth0"}, {});
        CHECK(fixed[0].address == first[0].address);
        CHECK(fixed[1].address.addr == ip("fd00::3"));
    }
}

TEST_CASE("allocator: requested addresses") {
    ipam_test::MemStore store;
    auto rs = sets(json::array({kV4, kV6}));
    ipam::Allocator alloc(rs, store);
    std::string msg;
    SUBCASE("a free address in its set is reserved, the other set allocates normally") {
        auto out = alloc.allocate({"a", "eth0"}, {ip("10.0.0.4")});
        CHECK(out[0].address.str() == "10.0.0.4/29");
        CHECK(out[1].address.addr == ip("fd00::2"));
        CHECK(store.cursors[0] == ip("10.0.0.4"));
        SUBCASE("asking again for the same owner is fine") {
            CHECK(alloc.allocate({"a", "eth0"}, {ip("10.0.0.4")})[0].address.addr == ip("10.0.0.4"));
            CHECK(store.files.size() == 2);
        }
    }
    SUBCASE("one address per set") {
        auto out = alloc.allocate({"a", "eth0"}, {ip("fd00::3"), ip("10.0.0.5")});
        CHECK(out[0].address.addr == ip("10.0.0.5"));
        CHECK(out[1].address.addr == ip("fd00::3"));
    }
    SUBCASE("taken by another owner is code 102 naming the address") {
        store.reserve(ip("10.0.0.4"), {"b", "eth0"});
        CHECK(ipam_test::failure([&] { alloc.allocate({"a", "eth0"}, {ip("10.0.0.4")}); }, &msg) == "taken");
        CHECK(msg.find("10.0.0.4") != std::string::npos);
        CHECK(store.find({"a", "eth0"}).empty());
    }
    SUBCASE("the gateway is code 7") {
        CHECK(ipam_test::failure([&] { alloc.allocate({"a", "eth0"}, {ip("10.0.0.1")}); }) == "invalid");
    }
    SUBCASE("outside every set (or outside [rangeStart, rangeEnd]) is code 7") {
        CHECK(ipam_test::failure([&] { alloc.allocate({"a", "eth0"}, {ip("10.9.0.4")}); }) == "invalid");
        CHECK(ipam_test::failure([&] { alloc.allocate({"a", "eth0"}, {ip("10.0.0.6")}); }) == "invalid");
    }
    SUBCASE("two addresses for one set leave one unused: code 7") {
        CHECK(ipam_test::failure([&] { alloc.allocate({"a", "eth0"}, {ip("10.0.0.4"), ip("10.0.0.5")}); }, &msg) ==
              "invalid");
        CHECK(msg.find("10.0.0.5") != std::string::npos);
    }
    SUBCASE("a failure in a later set releases the requested address again") {
        store.reserve(ip("fd00::3"), {"b", "eth0"});
        CHECK(ipam_test::failure([&] { alloc.allocate({"a", "eth0"}, {ip("10.0.0.4"), ip("fd00::3")}); }) ==
              "taken");
        CHECK_FALSE(store.taken(ip("10.0.0.4")));
    }
    CHECK(store.find({"x", "eth0"}).empty());
}
