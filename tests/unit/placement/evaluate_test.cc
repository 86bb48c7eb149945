// Placement's judgement over facts made by hand: no sysfs, no API, no state directory.
// Each verdict here is what ADD would refuse or admit on a node with these facts.
#include <doctest/doctest.h>

#include "placement/evaluate.h"

using namespace placement;
using Op = conf::LabelRequirement::Op;

namespace {

placement::NodeLabels node(Labels labels) {
    placement::NodeLabels n;
    n.labels = std::move(labels);
    n.sources = "file '/x'";
    n.node = "worker-1";
    return n;
}

placement::Fact known(long long v, std::string text) { return {v, std::move(text)}; }
placement::Fact unknown_fact(std::string text) { return {std::nullopt, std::move(text)}; }

placement::PodNuma pod_on(std::set<int> nodes) {
    placement::PodNuma p;
    p.known = true;
    p.nodes = std::move(nodes);
    p.text = "pod CPUs on NUMA nodes";
    return p;
}

placement::ledger::Entry entry(std::string cid, uint64_t egress, uint64_t ingress) {
    placement::ledger::Entry e;
    e.network = "net1";
    e.container_id = std::move(cid);
    e.ifname = "net1";
    e.egress_bps = egress;
    e.ingress_bps = ingress;
    return e;
}

placement::BandwidthFacts link_of(double capacity_bps, std::vector<placement::ledger::Entry> others) {
    placement::BandwidthFacts f;
    f.link = {"eth1", "master 'eth1'", ""};
    f.capacity.bps = capacity_bps;
    f.capacity.source = "topology.linkCapacityMbps";
    for (auto& e : others) {
        f.others_egress += e.egress_bps;
        f.others_ingress += e.ingress_bps;
    }
    f.others_count = static_cast<long long>(others.size());
    if (others.size() > placement::kSample) others.resize(placement::kSample);
    f.others = std::move(others);
    return f;
}

conf::Bandwidth egress(uint64_t bps) {
    conf::Bandwidth b;
    b.egress = conf::RateLimit{bps, 1'000'000};
    return b;
}

}  // namespace

TEST_CASE("a selector that one label fails names the wanted and the found value") {
    conf::LabelSelector sel{{{"zone", Op::In, {"a"}}, {"sriov", Op::Exists, {}}}};
    placement::Verdict v = placement::evaluate_selector(sel, node({{"zone", "b"}, {"sriov", "true"}}));
    CHECK_FALSE(v.pass);
    CHECK(v.constraint == "nodeSelector");
    CHECK(v.evidence.find("worker-1") != std::string::npos);
    CHECK(v.evidence.find("zone") != std::string::npos);
    CHECK(v.evidence.find("b") != std::string::npos);
    CHECK(placement::evaluate_selector(sel, node({{"zone", "a"}, {"sriov", "true"}})).pass);
}

TEST_CASE("single-numa-node passes only when every pod CPU is on the device's node") {
    conf::Topology t;
    t.numa_policy = conf::NumaPolicy::SingleNumaNode;
    placement::Fact dev = known(1, "VF on NUMA node 1");
    CHECK(placement::evaluate_numa_policy(t, dev, pod_on({1})).pass);
    CHECK_FALSE(placement::evaluate_numa_policy(t, dev, pod_on({0, 1})).pass);
    t.numa_policy = conf::NumaPolicy::Restricted;
    CHECK(placement::evaluate_numa_policy(t, dev, pod_on({0, 1})).pass);
    CHECK_FALSE(placement::evaluate_numa_policy(t, dev, pod_on({0})).pass);
}

TEST_CASE("best-effort tolerates a NUMA mismatch with a warning") {
    conf::Topology t;
    t.numa_policy = conf::NumaPolicy::BestEffort;
    placement::Verdict v = placement::evaluate_numa_policy(t, known(1, "VF on NUMA node 1"), pod_on({0}));
    CHECK(v.pass);
    CHECK(v.warning);
}

TEST_CASE("an unknown fact is decided by unknownTopology and says so") {
    conf::Topology t;
    t.numa_node = 0;
    placement::Verdict allowed = placement::evaluate_numa_node(t, unknown_fact("no numa_node file"));
    CHECK(allowed.pass);
    CHECK(allowed.warning);
    CHECK(allowed.evidence.find("unknownTopology allow") != std::string::npos);
    t.deny_unknown = true;
    placement::Verdict denied = placement::evaluate_numa_node(t, unknown_fact("no numa_node file"));
    CHECK_FALSE(denied.pass);
    CHECK(denied.evidence.find("unknownTopology deny") != std::string::npos);
}

TEST_CASE("a link below minLinkSpeedMbps and a master at maxAttachmentsPerMaster are refused") {
    conf::Topology t;
    t.min_link_speed_mbps = 25000;
    CHECK_FALSE(placement::evaluate_link_speed(t, known(10000, "eth1 at 10000 Mb/s")).pass);
    CHECK(placement::evaluate_link_speed(t, known(25000, "eth1 at 25000 Mb/s")).pass);
    t.max_attachments_per_master = 2;
    placement::DeviceUse two{2, "2 macvlan links on 'eth1'"};
    placement::DeviceUse one{1, "1 macvlan link on 'eth1'"};
    CHECK_FALSE(placement::evaluate_attachments(t, two).pass);
    CHECK(placement::evaluate_attachments(t, one).pass);
}

TEST_CASE("minFreeAddresses fails when any range set would fall below it") {
    conf::Topology t;
    t.min_free_addresses = 10;
    std::vector<placement::PoolSet> sets{{"10.1.0.0/24", 254, 10, 243}, {"fd00::/120", 255, 250, 4}};
    placement::Verdict v = placement::evaluate_free_addresses(t, sets);
    CHECK_FALSE(v.pass);
    CHECK(v.evidence.find("4 free after this allocation") != std::string::npos);
    sets.pop_back();
    CHECK(placement::evaluate_free_addresses(t, sets).pass);
}

TEST_CASE("bandwidth admits what fits the capacity and refuses what would exceed it, naming who holds it") {
    conf::Topology t;
    placement::BandwidthFacts f = link_of(100e6, {entry("aaaaaaaaaaaaaaaa", 40'000'000, 0), entry("bbbbbbbbbbbb", 40'000'000, 0)});
    placement::BandwidthAdmission fits = placement::evaluate_bandwidth_facts(egress(20'000'000), &t, entry("me", 0, 0), f);
    CHECK(fits.admitted);
    CHECK(fits.link == "eth1");
    CHECK(fits.entry.egress_bps == 20'000'000);
    placement::BandwidthAdmission over = placement::evaluate_bandwidth_facts(egress(21'000'000), &t, entry("me", 0, 0), f);
    CHECK_FALSE(over.admitted);
    CHECK_FALSE(over.verdict.pass);
    // Whole container IDs: derived ones differ only in their middle.
    CHECK(over.verdict.evidence.find("net1/aaaaaaaaaaaaaaaa/net1") != std::string::npos);
    CHECK(over.verdict.evidence.find("egress would reach 101 Mb/s > 100 Mb/s") != std::string::npos);
}

TEST_CASE("a bandwidth refusal names a holder by its pod when its ADD knew it") {
    conf::Topology t;
    auto holder = entry("cccccccccccccccc", 90'000'000, 0);
    holder.pod = "team-a/web-0";
    placement::BandwidthAdmission over = placement::evaluate_bandwidth_facts(egress(20'000'000), &t, entry("me", 0, 0), link_of(100e6, {holder}));
    CHECK_FALSE(over.admitted);
    CHECK(over.verdict.evidence.find("by pod team-a/web-0 net1/cccccccccccccccc/net1") != std::string::npos);
    auto me = entry("me", 0, 0);
    me.pod = "team-b/api-1";
    CHECK(placement::evaluate_bandwidth_facts(egress(5'000'000), &t, me, link_of(100e6, {holder})).entry.pod == "team-b/api-1");
}

TEST_CASE("bandwidthOvercommit raises the limit and an idle direction is never the one refused") {
    conf::Topology t;
    t.bandwidth_overcommit = 2.0;
    placement::BandwidthFacts f = link_of(100e6, {entry("a", 150'000'000, 300'000'000)});
    CHECK(placement::evaluate_bandwidth_facts(egress(50'000'000), &t, entry("me", 0, 0), f).admitted);
    CHECK_FALSE(placement::evaluate_bandwidth_facts(egress(51'000'000), &t, entry("me", 0, 0), f).admitted);
}

TEST_CASE("bandwidth without a known capacity follows unknownTopology and commits nothing") {
    conf::Topology t;
    placement::BandwidthFacts f;
    f.link = {"eth1", "master 'eth1'", ""};
    f.capacity.unknown = "no link speed for 'eth1'";
    placement::BandwidthAdmission a = placement::evaluate_bandwidth_facts(egress(1'000'000), &t, entry("me", 0, 0), f);
    CHECK(a.verdict.pass);
    CHECK_FALSE(a.admitted);
    t.deny_unknown = true;
    CHECK_FALSE(placement::evaluate_bandwidth_facts(egress(1'000'000), &t, entry("me", 0, 0), f).verdict.pass);
}

TEST_CASE("rates in evidence read as people write them") {
    CHECK(placement::rate_text(10e9) == "10 Gb/s");
    CHECK(placement::rate_text(12.5e6) == "12.5 Mb/s");
    CHECK(placement::rate_text(64e3) == "64 kb/s");
    CHECK(placement::rate_text(0) == "0 b/s");
}
