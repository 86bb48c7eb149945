// The bandwidth capability's config (conf/bandwidth.cc) and its admission against the
// ledger (evaluate_bandwidth) on a fake node: a sysfs tree with a PF and its VFs, and
// ledger entries written as other ADDs would. Shaping needs namespaces: integration tests.
#include <doctest/doctest.h>

#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "cni/error.h"
#include "cni/attach/attachment.h"
#include "placement/ledger.h"
#include "placement/placement.h"
#include "conf/netconf.h"
#include "../support.h"

namespace fs = std::filesystem;
using nlohmann::json;

namespace {

struct Node : support::TempDir {
    Node() : TempDir("bw") {
        fake_pf("0000:03:00.0", "ens1f0", 0, "25000");
        for (const char* vf : {"0000:03:02.0", "0000:03:02.1"}) fake_vf(vf, "0000:03:00.0", 0);
    }
    json conf(const json& extra, const std::string& vf = "0000:03:02.0") const {
        json c = {{"cniVersion", "1.0.0"}, {"name", "bwnet"},          {"type", "topocni"}, {"attachment", "sriov"},
                  {"deviceID", vf},        {"sysfsRoot", p("sys")}, {"stateDir", p("state")}};
        c.update(extra);
        return c;
    }
    void commit(const std::string& cid, uint64_t egress, uint64_t ingress, const std::string& net = "other") const {
        fs::create_directories(placement::ledger::dir(p("state"), "0000:03:00.0"));
        placement::ledger::commit(p("state"), "0000:03:00.0", {net, cid, "net1", egress, ingress, 25'000'000'000, 1.0, "x"});
    }
};

conf::NetConf parse(const json& c) { return cni::parse_config(c.dump(), {}); }

std::string error_of(const json& c) {
    try {
        parse(c);
    } catch (const base::Error& e) {
        CHECK(cni::code_of(e) == cni::kInvalidConfig);
        return e.what();
    }
    return "";
}

placement::BandwidthAdmission admit(const json& c, const std::string& cid = "c1") {
    auto net = cni::read_network(c.dump(), {});
    return placement::evaluate_bandwidth(net.conf, *net.kind, {"", cid, "net1", nullptr});
}

bool has(const std::string& s, const std::string& part) { return s.find(part) != std::string::npos; }

constexpr uint64_t G = 1'000'000'000;

}  // namespace

TEST_CASE("a rate without a burst gets 100 ms of traffic, and never less than 128 Kibit") {
    Node n;
    auto c = parse(n.conf({{"bandwidth", {{"egressRate", 10'000'000}}}}));
    REQUIRE(c.bandwidth);
    CHECK(c.bandwidth->egress->burst_bits == 1'000'000);
    CHECK_FALSE(c.bandwidth->ingress);
    CHECK(conf::default_burst(100'000) == 128 * 1024);
    auto given = parse(n.conf({{"bandwidth", {{"ingressRate", 5'000'000}, {"ingressBurst", 64'000}}}}));
    CHECK(given.bandwidth->ingress->burst_bits == 64'000);
}

TEST_CASE("runtimeConfig.bandwidth replaces the config's bandwidth object as a whole") {
    Node n;
    auto c = parse(n.conf({{"bandwidth", {{"egressRate", 10'000'000}}},
                           {"runtimeConfig", {{"bandwidth", {{"ingressRate", 20'000'000}}}}}}));
    CHECK(c.bandwidth->source == "runtimeConfig.bandwidth");
    CHECK_FALSE(c.bandwidth->egress);
    CHECK(c.bandwidth->ingress->rate_bps == 20'000'000);
    auto zero = parse(n.conf({{"runtimeConfig", {{"bandwidth", {{"ingressRate", 0}}}}}}));
    CHECK_FALSE(zero.bandwidth);
}

TEST_CASE("bad bandwidth values are code 7 naming the key") {
    Node n;
    CHECK(has(error_of(n.conf({{"bandwidth", {{"egressRate", -5}}}})), "bandwidth.egressRate"));
    CHECK(has(error_of(n.conf({{"bandwidth", {{"egressBurst", 1000}}}})), "bandwidth.egressBurst: is set, so egressRate"));
    CHECK(has(error_of(n.conf({{"bandwidth", {{"rate", 1}}}})), "bandwidth.rate: unknown key"));
    CHECK(has(error_of(n.conf({{"bandwidth", {{"ingressRate", 1}, {"ingressBurst", 1ULL << 40}}}})), "bandwidth.ingressBurst"));
    CHECK(has(error_of(n.conf({{"max_tx_rate", 5}, {"bandwidth", {{"egressRate", 1'000'000}}}})), "max_tx_rate"));
    CHECK(has(error_of(n.conf({{"topology", {{"bandwidthOvercommit", 0}}}})), "topology.bandwidthOvercommit"));
}

TEST_CASE("a VF is admitted on its PF against the PF's link speed and what other attachments committed") {
    Node n;
    n.commit("a", 10 * G, 1 * G);
    n.commit("b", 5 * G, 0);
    auto fits = admit(n.conf({{"bandwidth", {{"egressRate", 10 * G}}}}));
    CHECK(fits.admitted);
    CHECK(fits.link == "0000:03:00.0");
    CHECK(fits.entry.capacity_bps == 25 * G);
    CHECK(has(fits.verdict.evidence, "PF 0000:03:00.0 of VF 0000:03:02.0: capacity 25 Gb/s (link speed)"));
    CHECK(has(fits.verdict.evidence, "committed egress 15 Gb/s, ingress 1 Gb/s by other/a/net1 (egress 10 Gb/s, ingress 1 Gb/s)"));

    auto over = admit(n.conf({{"bandwidth", {{"egressRate", 10 * G + 1}}}}));
    CHECK_FALSE(over.admitted);
    CHECK_FALSE(over.verdict.pass);
    CHECK(has(over.verdict.evidence, "egress would reach"));

    SUBCASE("linkCapacityMbps overrides the driver, and overcommit scales it") {
        auto small = admit(n.conf({{"bandwidth", {{"ingressRate", 1 * G}}}, {"topology", {{"linkCapacityMbps", 1500}}}}));
        CHECK_FALSE(small.admitted);
        CHECK(has(small.verdict.evidence, "ingress would reach 2 Gb/s > 1500 Mb/s"));
        CHECK_FALSE(has(small.verdict.evidence, "egress would reach"));   // it asks no egress
        auto oc = admit(n.conf({{"bandwidth", {{"ingressRate", 1 * G}}},
                                {"topology", {{"linkCapacityMbps", 1500}, {"bandwidthOvercommit", 2}}}}));
        CHECK(oc.admitted);
        CHECK(has(oc.verdict.evidence, "x bandwidthOvercommit 2 = 3 Gb/s"));
    }
    SUBCASE("the attachment's own entry is not counted against it (CHECK)") {
        n.commit("c1", 10 * G, 0, "bwnet");
        CHECK(admit(n.conf({{"bandwidth", {{"egressRate", 10 * G}}}})).admitted);
        CHECK_FALSE(admit(n.conf({{"bandwidth", {{"egressRate", 10 * G}}}}), "c2").admitted);
    }
}

TEST_CASE("without a known capacity unknownTopology decides, and nothing is committed") {
    Node n;
    fs::remove(n.p("sys/class/net/ens1f0/speed"));
    auto allow = admit(n.conf({{"bandwidth", {{"egressRate", G}}}}));
    CHECK(allow.verdict.pass);
    CHECK(allow.verdict.warning);
    CHECK(allow.entry.capacity_bps == 0);
    CHECK(has(allow.verdict.evidence, "reports no link speed"));
    auto deny = admit(n.conf({{"bandwidth", {{"egressRate", G}}}, {"topology", {{"unknownTopology", "deny"}}}}));
    CHECK_FALSE(deny.verdict.pass);
}

TEST_CASE("containerd's capitalised bandwidth keys are read from runtimeConfig, not from the config") {
    Node n;
    auto c = parse(n.conf({{"runtimeConfig", {{"bandwidth", {{"IngressRate", 10'000'000}, {"IngressBurst", 4294967295ULL},
                                                             {"EgressRate", 0}, {"EgressBurst", 0}}}}}}));
    REQUIRE(c.bandwidth);
    CHECK(c.bandwidth->ingress->rate_bps == 10'000'000);
    CHECK(c.bandwidth->ingress->burst_bits == 4294967295ULL);
    CHECK_FALSE(c.bandwidth->egress);
    CHECK(has(error_of(n.conf({{"runtimeConfig", {{"bandwidth", {{"IngressRate", 1000}, {"ingressrate", 1000}}}}}})),
              "given twice"));
    CHECK(has(error_of(n.conf({{"runtimeConfig", {{"bandwidth", {{"EgressRate", "x"}}}}}})),
              "runtimeConfig.bandwidth.EgressRate"));
    CHECK(has(error_of(n.conf({{"bandwidth", {{"EgressRate", 1000}}}})), "bandwidth.EgressRate: unknown key"));
    CHECK(has(error_of(n.conf({{"bandwidth", {{"egressRate", 7}}}})), "bandwidth.egressRate: 7 is below"));
}

TEST_CASE("a PF used as a macvlan master shares one ledger with its VFs") {
    Node n;
    fs::create_directory_symlink("../../../bus/pci/devices/0000:03:00.0", n.dir() / "sys/class/net/ens1f0/device");
    n.write("sys/bus/pci/devices/0000:03:00.0/sriov_totalvfs", "8\n");
    n.commit("vfpod", 20 * G, 0);   // a VF's attachment, under the PF's PCI address
    json mv = n.conf({{"attachment", "macvlan"}, {"master", "ens1f0"}, {"bandwidth", {{"egressRate", 6 * G}}}});
    mv.erase("deviceID");
    auto a = admit(mv);
    CHECK(a.link == "0000:03:00.0");
    CHECK(has(a.verdict.evidence, "master 'ens1f0' (PF 0000:03:00.0)"));
    CHECK_FALSE(a.admitted);   // 20 + 6 > 25
}

TEST_CASE("ledger entries of attachments whose names differ only by where '_' is are two entries") {
    Node n;
    std::string sd = n.p("state");
    fs::create_directories(placement::ledger::dir(sd, "l"));
    placement::ledger::commit(sd, "l", {"a_b", "c", "net1", 1, 0, 0, 1.0, ""});
    placement::ledger::commit(sd, "l", {"a", "b_c", "net1", 2, 0, 0, 1.0, ""});
    CHECK(placement::ledger::entries(sd, "l").size() == 2);
    CHECK(placement::ledger::remove(sd, "l", "a", "b_c", "net1"));
    auto left = placement::ledger::entries(sd, "l");
    REQUIRE(left.size() == 1);
    CHECK(left[0].network == "a_b");
}
