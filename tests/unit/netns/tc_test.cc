// netns/tc.cc against the kernel: each test works inside its own throwaway netns on a
// veth pair it creates there, and reads back what it made both through libnl
// (read_state) and through iproute2's `tc`, an independent reader.
#include <doctest/doctest.h>

#include <cstdio>
#include <memory>
#include <string>

#include "netns/netlink.h"
#include "netns/tc.h"
#include "temp_netns.h"

using testing::error_of;
using testing::TempNetns;

namespace {

std::string run(const std::string& cmd) {
    std::string out;
    std::unique_ptr<FILE, int (*)(FILE*)> p(::popen(cmd.c_str(), "r"), ::pclose);
    REQUIRE(p);
    char buf[512];
    while (std::fgets(buf, sizeof buf, p.get())) out += buf;
    return out;
}

bool has(const std::string& s, const std::string& part) { return s.find(part) != std::string::npos; }

/// A netns with the veth pair "tcA" / "tcB", both up, entered by the calling thread.
struct Bench {
    TempNetns ns{"tctest"};
    std::string in() const { return "ip netns exec " + ns.reg.name + " "; }
    Bench() {
        netns::with(ns.handle, [] {
            netns::nl::Socket s;
            s.create_veth({.name = "tcA", .peer_name = "tcB"});
            s.set_up(s.get_link("tcA")->index);
            s.set_up(s.get_link("tcB")->index);
        });
    }
};

}  // namespace

TEST_CASE("tc: a root tbf shapes at the rate and burst asked, as tc shows it") {
    Bench b;
    netns::with(b.ns.handle, [] { netns::tc::add_root_tbf("tcA", {10'000'000, 1'000'000}); });
    std::string q = run(b.in() + "tc qdisc show dev tcA");
    CHECK(has(q, "qdisc tbf 1: root"));
    CHECK(has(q, "rate 10Mbit"));
    CHECK(has(q, "burst 125000b"));
    CHECK(has(q, "lat 25"));   // limit = 25 ms at the rate + the bucket, as the reference plugin
    netns::tc::State st;
    netns::with(b.ns.handle, [&] { st = netns::tc::read_state("tcA"); });
    REQUIRE(st.root_tbf);
    CHECK(st.root_tbf->rate_bps == 10'000'000);
    CHECK(st.root_tbf->burst_bits == 1'000'000);
    CHECK_FALSE(st.ingress_qdisc);
}

TEST_CASE("tc: ingress shaping redirects everything the device receives to an ifb that is up and shaped") {
    Bench b;
    netns::with(b.ns.handle, [] { netns::tc::add_ingress_shaping("tcA", "ifbtest0", {20'000'000, 2'000'000}, "topocni n c i"); });
    std::string links = run(b.in() + "ip -d link show ifbtest0");
    CHECK(has(links, "ifb"));
    CHECK(has(links, "state UNKNOWN"));   // up: an ifb has no carrier state of its own
    CHECK(has(links, "alias topocni n c i"));
    CHECK(has(run(b.in() + "tc qdisc show dev ifbtest0"), "rate 20Mbit"));
    CHECK(has(run(b.in() + "tc qdisc show dev tcA"), "qdisc ingress ffff:"));
    std::string f = run(b.in() + "tc filter show dev tcA ingress");
    CHECK(has(f, "u32"));
    CHECK(has(f, "match 00000000/00000000 at 0"));
    CHECK(has(f, "Egress Redirect to device ifbtest0"));
    netns::tc::State st;
    netns::with(b.ns.handle, [&] { st = netns::tc::read_state("tcA"); });
    CHECK(st.ingress_qdisc);
    CHECK(st.redirect_to == std::optional<std::string>("ifbtest0"));

    SUBCASE("remove_shaping and delete_ifb leave the device as it was, and repeating them is fine") {
        netns::with(b.ns.handle, [] {
            netns::tc::remove_shaping("tcA");
            CHECK(netns::tc::delete_ifb("ifbtest0"));
            netns::tc::remove_shaping("tcA");
            CHECK_FALSE(netns::tc::delete_ifb("ifbtest0"));
            netns::tc::remove_shaping("nosuchdev");
        });
        CHECK_FALSE(has(run(b.in() + "tc qdisc show dev tcA"), "ingress"));
        CHECK_FALSE(has(run(b.in() + "ip link show"), "ifbtest0"));
    }
}

TEST_CASE("tc: a failing step of ingress shaping takes back the ifb it created") {
    Bench b;
    netns::with(b.ns.handle, [] { netns::tc::add_ingress_shaping("tcA", "ifbfirst", {10'000'000, 1'000'000}); });
    // tcA has an ingress qdisc now: a second one is refused by the kernel.
    auto e = error_of([&] {
        netns::with(b.ns.handle, [] { netns::tc::add_ingress_shaping("tcA", "ifbsecond", {10'000'000, 1'000'000}); });
    });
    CHECK(e.code == cni::kInternal);
    CHECK(has(e.what(), "ingress qdisc on 'tcA'"));
    CHECK_FALSE(has(run(b.in() + "ip link show"), "ifbsecond"));
    CHECK(has(run(b.in() + "ip link show"), "ifbfirst"));
}

TEST_CASE("tc: a missing device is named, and delete_ifb never deletes a link that is no ifb") {
    Bench b;
    auto e = error_of([&] { netns::with(b.ns.handle, [] { netns::tc::add_root_tbf("nosuch0", {1'000'000, 100'000}); }); });
    CHECK(has(e.what(), "'nosuch0' does not exist"));
    netns::with(b.ns.handle, [] { CHECK_FALSE(netns::tc::delete_ifb("tcB")); });
    CHECK(has(run(b.in() + "ip link show"), "tcB"));
}

TEST_CASE("tc: a burst of 2^32-1 bits at 1 Mbit/s, what runtimes send, is cut to what tbf can hold") {
    Bench b;
    netns::with(b.ns.handle, [] { netns::tc::add_root_tbf("tcA", {1'000'000, 4'294'967'295ULL}); });
    netns::tc::State st;
    netns::with(b.ns.handle, [&] { st = netns::tc::read_state("tcA"); });
    REQUIRE(st.root_tbf);
    CHECK(st.root_tbf->rate_bps == 1'000'000);
    CHECK(st.root_tbf->burst_bits <= 250ULL * 1'000'000);
    CHECK(st.root_tbf->burst_bits > 0);
}
