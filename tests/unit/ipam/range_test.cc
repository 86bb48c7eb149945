#include "helpers.h"
#include "ipam/range.h"

using ipam_test::ip;

namespace {

ipam::Range range(const char* subnet, const char* start, const char* end, const char* gw) {
    return {*base::IpNet::parse(subnet), ip(start), ip(end), ip(gw)};
}

std::vector<std::string> walk(const ipam::RangeSet& set, std::optional<base::IpAddr> last) {
    std::vector<std::string> out;
    ipam::RangeIter it(set, last);
    while (auto a = it.next()) {
        out.push_back(a->str());
        REQUIRE(out.size() < 100);
    }
    return out;
}

using V = std::vector<std::string>;

}  // namespace

TEST_CASE("range: a walk starts at rangeStart, skips the gateway and visits every address once") {
    ipam::RangeSet set{range("10.0.0.0/29", "10.0.0.1", "10.0.0.6", "10.0.0.1")};
    CHECK(walk(set, std::nullopt) == V{"10.0.0.2", "10.0.0.3", "10.0.0.4", "10.0.0.5", "10.0.0.6"});
}

TEST_CASE("range: a walk resumes after the cursor and wraps around") {
    ipam::RangeSet set{range("10.0.0.0/29", "10.0.0.1", "10.0.0.6", "10.0.0.3")};
    CHECK(walk(set, ip("10.0.0.4")) == V{"10.0.0.5", "10.0.0.6", "10.0.0.1", "10.0.0.2", "10.0.0.4"});
    SUBCASE("a cursor outside the set restarts at the beginning") {
        CHECK(walk(set, ip("10.9.0.4")).front() == "10.0.0.1");
        CHECK(walk(set, ip("fd00::4")).front() == "10.0.0.1");
    }
}

TEST_CASE("range: a walk jumps from one range's end to the next range's start") {
    ipam::RangeSet set{range("10.0.0.0/24", "10.0.0.10", "10.0.0.11", "10.0.0.1"),
                       range("10.0.1.0/24", "10.0.1.20", "10.0.1.21", "10.0.1.1")};
    CHECK(walk(set, std::nullopt) == V{"10.0.0.10", "10.0.0.11", "10.0.1.20", "10.0.1.21"});
    // A cursor on a range's end: the reference never stops when the set is full here.
    CHECK(walk(set, ip("10.0.0.11")) == V{"10.0.1.20", "10.0.1.21", "10.0.0.10", "10.0.0.11"});
    CHECK(walk(set, ip("10.0.1.21")) == V{"10.0.0.10", "10.0.0.11", "10.0.1.20", "10.0.1.21"});
}

TEST_CASE("range: a set made only of its gateway yields nothing") {
    ipam::RangeSet set{range("10.0.0.0/24", "10.0.0.1", "10.0.0.1", "10.0.0.1")};
    CHECK(walk(set, std::nullopt).empty());
    CHECK(walk(set, ip("10.0.0.1")).empty());
}

TEST_CASE("range: membership, overlap and free addresses") {
    auto a = range("10.0.0.0/24", "10.0.0.10", "10.0.0.20", "10.0.0.1");
    auto b = range("10.0.0.0/24", "10.0.0.20", "10.0.0.30", "10.0.0.1");
    auto c = range("10.0.0.0/24", "10.0.0.21", "10.0.0.30", "10.0.0.1");
    CHECK(a.contains(ip("10.0.0.10")));
    CHECK_FALSE(a.contains(ip("10.0.0.9")));
    CHECK_FALSE(a.contains(ip("10.0.0.21")));
    CHECK(ipam::overlaps(a, b));
    CHECK_FALSE(ipam::overlaps(a, c));
    CHECK(ipam::to_string({a, c}) == "10.0.0.10-10.0.0.20,10.0.0.21-10.0.0.30");

    auto small = range("10.0.0.0/29", "10.0.0.1", "10.0.0.3", "10.0.0.1");   // usable: .2 .3
    CHECK(ipam::has_free({small}, {}));
    CHECK(ipam::has_free({small}, {ip("10.0.0.2")}));
    CHECK_FALSE(ipam::has_free({small}, {ip("10.0.0.2"), ip("10.0.0.3")}));
    // Files outside the range (e.g. left from an older config) do not count.
    CHECK(ipam::has_free({small}, {ip("10.0.0.1"), ip("10.0.0.2"), ip("10.0.0.5")}));
    // A /64 never looks full.
    CHECK(ipam::has_free({range("fd00::/64", "fd00::1", "fd00::ffff:ffff:ffff:ffff", "fd00::1")}, {ip("fd00::2")}));
}
