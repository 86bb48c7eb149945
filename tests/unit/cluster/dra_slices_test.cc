// The node's DRA devices from its facts document: what is offered (and what pods that did
// not come through DRA already hold, subtracted), names and limits as resource.k8s.io/v1
// validates them, and the split into slices of one pool.
#include <doctest/doctest.h>

#include <set>

#include "base/error.h"
#include "cluster/dra_slices.h"
#include "cluster/dra_sync.h"

using nlohmann::json;
using namespace cluster::dra;

namespace {

/// PF 0000:af:00.0 (ens2f0, 25 Gb/s, NUMA 1) with 4 VFs, the first `used` in use; master
/// eth1 (10 Gb/s, NUMA 0) with 3 macvlans on it; network "blue" with an IPv4 set of 254
/// addresses, `taken` taken, and an IPv6 /64.
placement::NodeFacts facts(int used = 1, long long taken = 10) {
    placement::NodeFacts f;
    f.node = "w1";
    placement::PfFacts pf;
    pf.pci = "0000:af:00.0";
    pf.netdev = "ens2f0";
    pf.numa = 1;
    pf.speed_mbps = 25000;
    pf.resource_name = "intel.com/sriov";
    pf.total_vfs = 8;
    for (int i = 0; i < 4; ++i) pf.vfs.push_back({"0000:af:02." + std::to_string(i), 1, i < used, ""});
    f.pfs.push_back(pf);
    placement::LinkFacts pf_link;
    pf_link.name = "ens2f0";
    pf_link.pf = "0000:af:00.0";
    pf_link.speed_mbps = 25000;
    f.links.push_back(pf_link);
    placement::LinkFacts l;
    l.name = "eth1";
    l.numa = 0;
    l.speed_mbps = 10000;
    l.link_count = 3;
    f.links.push_back(l);
    placement::NetworkFacts n;
    n.name = "blue";
    n.sets.push_back({"10.1.0.0/24", 254, static_cast<unsigned __int128>(taken), false});
    n.sets.push_back({"fd00::/64", (unsigned __int128)1 << 64, 0, false});
    f.networks.push_back(n);
    return f;
}

const json* find(const std::vector<json>& ds, const std::string& name) {
    for (const auto& d : ds)
        if (d["name"] == name) return &d;
    return nullptr;
}

std::string str(const json& d, const std::string& attr) { return d["attributes"][attr]["string"].get<std::string>(); }
long long num(const json& d, const std::string& attr) { return d["attributes"][attr]["int"].get<long long>(); }
std::string cap(const json& d, const std::string& name) { return d["capacity"][name]["value"].get<std::string>(); }

}  // namespace

TEST_CASE("a free VF is a device with the standard, Multus and topocni attributes; a VF in use is not offered") {
    SliceOptions o;
    o.kernel_driver = [](const std::string&) { return std::optional<std::string>("iavf"); };
    o.pcie_root = [](const std::string& pci) { return pci == "0000:af:02.1" ? std::optional<std::string>("pci0000:ae") : std::nullopt; };
    auto ds = devices(facts(1), o);
    CHECK(find(ds, "vf-0000-af-02-0") == nullptr);
    const json* vf = find(ds, "vf-0000-af-02-1");
    REQUIRE(vf);
    CHECK(str(*vf, "resource.kubernetes.io/pciBusID") == "0000:af:02.1");
    CHECK(str(*vf, "k8s.cni.cncf.io/deviceID") == "0000:af:02.1");
    CHECK(str(*vf, "k8s.cni.cncf.io/resourceName") == "intel.com/sriov");
    CHECK(num(*vf, "resource.kubernetes.io/numaNode") == 1);
    CHECK(str(*vf, "resource.kubernetes.io/pcieRoot") == "pci0000:ae");
    CHECK(str(*vf, "pf") == "0000:af:00.0");
    CHECK(str(*vf, "pfNetdev") == "ens2f0");
    CHECK(num(*vf, "vfIndex") == 1);
    CHECK(num(*vf, "linkSpeedMbps") == 25000);
    CHECK(str(*vf, "driver") == "iavf");
    CHECK(str(*vf, "type") == "vf");
    CHECK_FALSE(vf->contains("allowMultipleAllocations"));   // a VF goes to one claim
    CHECK_FALSE(find(ds, "vf-0000-af-02-2")->at("attributes").contains("resource.kubernetes.io/pcieRoot"));
}

TEST_CASE("the operator's resourceName for a PF wins over the device plugin's") {
    SliceOptions o;
    o.resource_names = {{"ens2f0", "example.com/fast"}};
    auto ds = devices(facts(), o);
    CHECK(str(*find(ds, "vf-0000-af-02-3"), "k8s.cni.cncf.io/resourceName") == "example.com/fast");
}

TEST_CASE("a PF is one shared link device whose bandwidth is its capacity less what the ledger holds") {
    auto f = facts();
    placement::LedgerFacts l;
    l.link = "0000:af:00.0";
    l.egress_bps = 4'000'000'000;
    l.ingress_bps = 1'000'000'000;
    f.ledgers.push_back(l);
    SliceOptions o;
    o.bandwidth_overcommit = 2.0;
    auto ds = devices(f, o);
    const json* pf = find(ds, "pf-0000-af-00-0");
    REQUIRE(pf);
    CHECK((*pf)["allowMultipleAllocations"] == true);
    CHECK(str(*pf, "type") == "link");
    CHECK(str(*pf, "pf") == "0000:af:00.0");   // what a VF's claim matches the PF's on
    CHECK(cap(*pf, "egressMbps") == "46000");     // 25,000 x 2 - 4,000
    CHECK(cap(*pf, "ingressMbps") == "49000");
    // A claim that names no bandwidth takes none (without a policy it would take it all).
    CHECK((*pf)["capacity"]["egressMbps"]["requestPolicy"]["default"] == "0");
    CHECK_FALSE(pf->at("capacity").contains("attachments"));
    CHECK(find(ds, "link-ens2f0") == nullptr);   // the PF's netdev is not offered twice

    SUBCASE("the capacity an admission recorded (linkCapacityMbps, its overcommit) wins over the speed") {
        placement::ledger::Entry cap_entry;
        cap_entry.capacity_bps = 5'000'000'000;
        f.ledgers.back().capacity = cap_entry;
        auto again = devices(f, o);
        CHECK(cap(*find(again, "pf-0000-af-00-0"), "egressMbps") == "1000");
        f.ledgers.back().capacity->overcommit = 1.5;   // 7,500 counted, 4,000 committed
        CHECK(cap(*find(devices(f, o), "pf-0000-af-00-0"), "egressMbps") == "3500");
    }
    SUBCASE("a link fully committed offers 0 and no policy that the API would refuse") {
        f.ledgers.back().egress_bps = 60'000'000'000;
        auto again = devices(f, o);
        const json& c = find(again, "pf-0000-af-00-0")->at("capacity");
        CHECK(c["egressMbps"]["value"] == "0");
        CHECK_FALSE(c["egressMbps"].contains("requestPolicy"));
    }
}

TEST_CASE("a macvlan master offers its bandwidth and the attachments left, one per claim, and is not offered when full") {
    SliceOptions o;
    o.max_attachments_per_master = 4;
    auto ds = devices(facts(), o);
    const json* m = find(ds, "link-eth1");
    REQUIRE(m);
    CHECK(cap(*m, "attachments") == "1");
    CHECK((*m)["capacity"]["attachments"]["requestPolicy"]["validRange"] == json{{"min", "1"}, {"max", "1"}});
    CHECK(cap(*m, "egressMbps") == "10000");
    CHECK(num(*m, "resource.kubernetes.io/numaNode") == 0);
    o.max_attachments_per_master = 3;
    CHECK(find(devices(facts(), o), "link-eth1") == nullptr);
}

TEST_CASE("a host-local range set offers its free addresses; an exhausted one is not offered; a /64 fits a quantity") {
    auto ds = devices(facts(1, 10), {});
    const json* v4 = nullptr;
    const json* v6 = nullptr;
    for (const auto& d : ds) {
        if (d["attributes"]["type"]["string"] != "pool") continue;
        (str(d, "rangeSet") == "10.1.0.0/24" ? v4 : v6) = &d;
        CHECK(str(d, "network") == "blue");
    }
    REQUIRE(v4);
    REQUIRE(v6);
    CHECK(cap(*v4, "addresses") == "244");
    CHECK(cap(*v6, "addresses") == "4611686018427387904");   // 2^62: an int64 quantity holds no 2^64
    CHECK((*v4)["capacity"]["addresses"]["requestPolicy"]["default"] == "1");
    CHECK((*v4)["name"] != (*v6)["name"]);
    auto full = devices(facts(1, 254), {});
    int pools = 0;
    for (const auto& d : full) pools += d["attributes"]["type"]["string"] == "pool";
    CHECK(pools == 1);
}

TEST_CASE("a range set offers its free addresses less its network's reserve, and nothing when the reserve takes them all") {
    SliceOptions o;
    o.address_reserve = {{"blue", 4}};
    auto pools = [&](const SliceOptions& with, int used) {
        std::vector<std::string> out;
        for (const auto& d : devices(facts(1, used), with))
            if (d["attributes"]["type"]["string"] == "pool" && str(d, "rangeSet") == "10.1.0.0/24") out.push_back(cap(d, "addresses"));
        return out;
    };
    CHECK((pools(o, 10) == std::vector<std::string>{"240"}));
    CHECK((pools(o, 249) == std::vector<std::string>{"1"}));   // 254 - 249 = 5 free: one more may take an address
    CHECK((pools(o, 250) == std::vector<std::string>{}));
    o.address_reserve = {{"red", 4}};   // another network's reserve changes nothing here
    CHECK((pools(o, 10) == std::vector<std::string>{"244"}));
}

TEST_CASE("device names are DNS labels, one to one for PCI addresses, hashed for names that are not") {
    CHECK(device_name("vf", "0000:03:02.1") == "vf-0000-03-02-1");
    std::string a = device_name("link", "Eth_1.100"), b = device_name("link", "eth-1-100");
    CHECK(a != b);
    CHECK(a.size() <= 63);
    std::string longer = device_name("pool", std::string(100, 'x'));
    CHECK(longer.size() == 63);
    CHECK(longer != device_name("pool", std::string(101, 'x')));
    for (const auto& n : {a, b, longer}) CHECK_NOTHROW(validate_device({{"name", n}}));
}

TEST_CASE("a device the API server would refuse is refused before anything is sent") {
    json d = {{"name", "vf-1"}, {"attributes", json::object()}};
    for (int i = 0; i < 33; ++i) d["attributes"]["a" + std::to_string(i)] = {{"int", i}};
    CHECK_THROWS_WITH_AS(validate_device(d), doctest::Contains("must not exceed 32"), base::Error);
    CHECK_THROWS_WITH_AS(validate_device({{"name", "Vf_1"}}), doctest::Contains("DNS label"), base::Error);
    CHECK_THROWS_WITH_AS(validate_device({{"name", "d"}, {"attributes", {{"a/b/c", {{"int", 1}}}}}}),
                         doctest::Contains("qualified name"), base::Error);
    CHECK_THROWS_WITH_AS(validate_device({{"name", "d"}, {"attributes", {{"x", {{"int", 1}, {"bool", true}}}}}}),
                         doctest::Contains("exactly one value"), base::Error);
    CHECK_THROWS_WITH_AS(validate_device({{"name", "d"}, {"attributes", {{"x", {{"string", std::string(65, 'a')}}}}}}),
                         doctest::Contains("64"), base::Error);
    CHECK_THROWS_WITH_AS(validate_device({{"name", "d"}, {"capacity", {{"c", {{"value", "1"}, {"requestPolicy", json::object()}}}}}}),
                         doctest::Contains("allowMultipleAllocations"), base::Error);
}

TEST_CASE("the devices are split into slices of at most 128, each naming the pool's generation and slice count") {
    std::vector<json> ds;
    for (int i = 0; i < 300; ++i) ds.push_back({{"name", "d" + std::to_string(i)}});
    auto slices = slice_specs(ds, "w1", kDriver, 7);
    REQUIRE(slices.size() == 3);
    std::set<std::string> names;
    size_t total = 0;
    for (const auto& s : slices) {
        CHECK(s["driver"] == "topocni.io");
        CHECK(s["nodeName"] == "w1");
        CHECK(s["pool"] == json{{"name", "w1"}, {"generation", 7}, {"resourceSliceCount", 3}});
        CHECK(s["devices"].size() <= kMaxDevicesPerSlice);
        for (const auto& d : s["devices"]) names.insert(d["name"].get<std::string>());
        total += s["devices"].size();
    }
    CHECK(total == 300);
    CHECK(names.size() == 300);
    auto none = slice_specs({}, "w1", kDriver, 1);
    REQUIRE(none.size() == 1);   // the pool stays visible, with no device
    CHECK(none[0]["devices"].empty());
    CHECK(none[0]["pool"]["resourceSliceCount"] == 1);
}

TEST_CASE("the slices read back: ours by index, strays named otherwise, the devices only when one whole generation") {
    cluster::dra::SliceSync sync("w1", "topocni.io");
    auto slice = [](const std::string& name, long long gen, long long count, json devices) {
        return json{{"metadata", {{"name", name}}},
                    {"spec", {{"driver", "topocni.io"}, {"nodeName", "w1"},
                              {"pool", {{"name", "w1"}, {"generation", gen}, {"resourceSliceCount", count}}},
                              {"devices", devices}}}};
    };
    json a = json::array({json{{"name", "vf-a"}}}), b = json::array({json{{"name", "vf-b"}}});
    auto whole = sync.read_held({slice("w1-topocni.io-1", 4, 2, b), slice("w1-topocni.io-0", 4, 2, a)});
    CHECK(whole.generation == 4);
    CHECK(whole.strays.empty());
    CHECK(whole.content == R"([{"name":"vf-a"},{"name":"vf-b"}])");
    auto mixed = sync.read_held({slice("w1-topocni.io-0", 4, 2, a), slice("w1-topocni.io-1", 3, 2, b)});
    CHECK(mixed.content.empty());   // a write was cut short: written again
    auto stray = sync.read_held({slice("w1-topocni.io-0", 4, 1, a), slice("w1-topocni.io-00", 5, 1, b)});
    REQUIRE(stray.strays.size() == 1);
    CHECK(stray.generation == 5);   // the next write goes past it
    CHECK(stray.content.empty());
    auto others = sync.read_held({json{{"spec", {{"driver", "topocni.io"}, {"pool", {{"name", "w2"}}}}}}, json(42),
                                  json{{"metadata", 1}}});
    CHECK(others.slices.empty());
    CHECK(others.strays.empty());
}
