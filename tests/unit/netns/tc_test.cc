// netns/tc.cc against the kernel: each test works inside its own throwaway netns on a
// veth pair it creates there, and reads back what it made both through libnl
// (read_state) and through iproute2's `tc`, an independent reader.
#include <doctest/doctest.h>

#include <cerrno>
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

/// A netns with the veth pair "tcA" / "tcB" (MTU 1400), both up; the netns goes when the
/// test ends, failed or not, and with it every link the test made.
struct Bench {
    TempNetns ns{"tctc"};
    Bench() {
        netns::with(ns.handle, [] {
            netns::nl::Socket s;
            s.create_veth({.name = "tcA", .peer_name = "tcB", .mtu = 1400});
            s.set_up(s.get_link("tcA")->index);
            s.set_up(s.get_link("tcB")->index);
        });
    }
    /// A command's output, run inside the netns.
    std::string sh(const std::string& cmd) const { return run("ip netns exec " + ns.reg.name + " " + cmd + " 2>&1"); }
    template <class F>
    auto in(F&& fn) const {
        return netns::with(ns.handle, fn);
    }
    netns::tc::State state(const std::string& dev) const {
        return in([&] { return netns::tc::read_state(dev); });
    }
};

}  // namespace

TEST_CASE("tc: a root tbf shapes at the rate and burst asked, as tc shows it") {
    Bench b;
    b.in([] { netns::tc::add_root_tbf("tcA", {10'000'000, 1'000'000}); });
    std::string q = b.sh("tc qdisc show dev tcA");
    CHECK(has(q, "qdisc tbf 1: root"));
    CHECK(has(q, "rate 10Mbit"));
    CHECK(has(q, "burst 125000b"));
    CHECK(has(q, "lat 25"));   // limit = 25 ms at the rate + the bucket, as the reference plugin
    auto st = b.state("tcA");
    REQUIRE(st.root_tbf);
    CHECK(st.root_tbf->rate_bps == 10'000'000);
    CHECK(st.root_tbf->burst_bits == 1'000'000);
    CHECK_FALSE(st.ingress_qdisc);
    CHECK_FALSE(st.redirect_to);
}

TEST_CASE("tc: ingress shaping redirects everything the device receives to an ifb that is up and shaped") {
    Bench b;
    b.in([] { netns::tc::add_ingress_shaping("tcA", "ifbtest0", {20'000'000, 2'000'000}, "topocni n c i"); });
    std::string link = b.sh("ip -d link show ifbtest0");
    CHECK(has(link, "\n    link/ether"));
    CHECK(has(link, "ifb"));
    CHECK(has(link, ",UP,"));
    CHECK(has(link, "mtu 1400 "));   // the device's
    CHECK(has(link, "alias topocni n c i"));
    CHECK(has(b.sh("tc qdisc show dev ifbtest0"), "rate 20Mbit"));
    CHECK(has(b.sh("tc qdisc show dev tcA"), "qdisc ingress ffff:"));
    std::string f = b.sh("tc filter show dev tcA ingress");
    CHECK(has(f, "protocol all pref 1 u32"));
    CHECK(has(f, "match 00000000/00000000 at 0"));
    CHECK(has(f, "action order 1: mirred (Egress Redirect to device ifbtest0) stolen"));
    auto st = b.state("tcA");
    CHECK(st.ingress_qdisc);
    CHECK(st.redirect_to == std::optional<std::string>("ifbtest0"));
    CHECK_FALSE(st.root_tbf);
    auto ifb = b.state("ifbtest0");
    REQUIRE(ifb.root_tbf);
    CHECK(ifb.root_tbf->rate_bps == 20'000'000);
}

TEST_CASE("tc: remove_shaping and delete_ifb leave only the default qdisc and no ifb, and repeating them is fine") {
    Bench b;
    b.in([] {
        netns::tc::add_root_tbf("tcA", {10'000'000, 1'000'000});
        netns::tc::add_ingress_shaping("tcA", "ifbtest1", {10'000'000, 1'000'000});
        netns::tc::remove_shaping("tcA");
        CHECK(netns::tc::delete_ifb("ifbtest1"));
        netns::tc::remove_shaping("tcA");
        CHECK_FALSE(netns::tc::delete_ifb("ifbtest1"));
        netns::tc::remove_shaping("nosuchdev");
    });
    CHECK(b.sh("tc qdisc show dev tcA") == "qdisc noqueue 0: root refcnt 2 \n");
    CHECK(b.sh("tc filter show dev tcA ingress").empty());
    CHECK_FALSE(has(b.sh("ip link show"), "ifbtest1"));
    auto st = b.state("tcA");
    CHECK_FALSE(st.root_tbf);
    CHECK_FALSE(st.ingress_qdisc);
    CHECK_FALSE(st.redirect_to);
}

TEST_CASE("tc: a failing step of ingress shaping takes back only what that call created") {
    Bench b;
    b.in([] { netns::tc::add_ingress_shaping("tcA", "ifbfirst", {10'000'000, 1'000'000}); });
    // tcA has an ingress qdisc now: the kernel refuses a second one.
    auto e = error_of([&] {
        b.in([] { netns::tc::add_ingress_shaping("tcA", "ifbsecond", {10'000'000, 1'000'000}); });
    });
    CHECK(e.kind == netns::Error::Kind::Failed);
    CHECK(e.sys_errno == EEXIST);
    CHECK(has(e.what(), "tc: failed to add an ingress qdisc on 'tcA': "));
    CHECK(has(e.what(), "(File exists"));   // the kernel's own errno, not only libnl's code
    CHECK_FALSE(has(b.sh("ip link show"), "ifbsecond"));
    // The first attachment's ifb, ingress qdisc and filter are untouched.
    CHECK(has(b.sh("ip link show"), "ifbfirst"));
    CHECK(b.state("tcA").redirect_to == std::optional<std::string>("ifbfirst"));
    // A step after the ifb: an alias longer than the kernel's 255 characters.
    e = error_of([&] {
        b.in([] { netns::tc::add_ingress_shaping("tcB", "ifbthird", {10'000'000, 1'000'000}, std::string(300, 'a')); });
    });
    CHECK(has(e.what(), "tc: failed to set the alias of 'ifbthird': "));
    CHECK_FALSE(has(b.sh("ip link show"), "ifbthird"));
    CHECK(b.sh("tc qdisc show dev tcB ingress").empty());
}

TEST_CASE("tc: a kernel refusal names the object and the device and keeps the kernel's errno and reason") {
    Bench b;
    b.in([] { netns::tc::add_root_tbf("tcA", {10'000'000, 1'000'000}); });
    auto e = error_of([&] { b.in([] { netns::tc::add_root_tbf("tcA", {20'000'000, 1'000'000}); }); });
    CHECK(e.kind == netns::Error::Kind::Failed);
    CHECK(e.sys_errno == EEXIST);
    CHECK(std::string(e.what()).rfind("tc: failed to add a tbf qdisc on 'tcA': Object exists (File exists", 0) == 0);
    CHECK(has(b.sh("tc qdisc show dev tcA"), "rate 10Mbit"));
}

TEST_CASE("tc: a missing device is named, and delete_ifb never deletes a link that is no ifb") {
    Bench b;
    auto e = error_of([&] { b.in([] { netns::tc::add_root_tbf("nosuch0", {1'000'000, 100'000}); }); });
    CHECK(e.kind == netns::Error::Kind::Failed);
    CHECK(e.sys_errno == ENODEV);
    CHECK(std::string(e.what()) == "tc: device 'nosuch0' does not exist");
    e = error_of([&] { b.in([] { netns::tc::add_ingress_shaping("nosuch1", "ifbtest2", {1'000'000, 100'000}); }); });
    CHECK(std::string(e.what()) == "tc: device 'nosuch1' does not exist");
    CHECK_FALSE(has(b.sh("ip link show"), "ifbtest2"));
    e = error_of([&] { b.state("nosuch2"); });
    CHECK(has(e.what(), "'nosuch2'"));
    b.in([] { CHECK_FALSE(netns::tc::delete_ifb("tcB")); });
    CHECK(has(b.sh("ip link show"), "tcB"));
}

TEST_CASE("tc: a burst of 2^32-1 bits at 1 Mbit/s, what runtimes send, is cut to what tbf can hold") {
    Bench b;
    b.in([] { netns::tc::add_root_tbf("tcA", {1'000'000, 4'294'967'295ULL}); });
    auto st = b.state("tcA");
    REQUIRE(st.root_tbf);
    CHECK(st.root_tbf->rate_bps == 1'000'000);
    // ~274.9 s of traffic: the most a u32 of 15.625 ticks per microsecond holds. Wrapped
    // around, as the reference plugin's arithmetic does, it would be a fraction of that.
    CHECK(st.root_tbf->burst_bits <= 274'878'000ULL);
    CHECK(st.root_tbf->burst_bits >= 274'870'000ULL);
    CHECK(has(b.sh("tc qdisc show dev tcA"), "rate 1Mbit burst 34359"));
}

TEST_CASE("tc: a rate tbf cannot take is refused before anything is created") {
    Bench b;
    for (uint64_t rate : {uint64_t(7), netns::tc::kMaxRateBps + 8}) {
        CAPTURE(rate);
        auto e = error_of([&] { b.in([&] { netns::tc::add_ingress_shaping("tcA", "ifbtest3", {rate, 1'000}); }); });
        CHECK(has(e.what(), "tc: failed to shape 'ifbtest3' at "));
        CHECK_FALSE(has(b.sh("ip link show"), "ifbtest3"));
    }
    b.in([] { netns::tc::add_root_tbf("tcA", {netns::tc::kMaxRateBps, 1'000'000}); });
    auto st = b.state("tcA");
    REQUIRE(st.root_tbf);
    CHECK(st.root_tbf->rate_bps == netns::tc::kMaxRateBps);
}
