// The node facts document: what it holds survives printing and parsing, a parser that
// refuses what it does not know, and its size on a big node.
#include <doctest/doctest.h>

#include <cstdio>

#include "cni/error.h"
#include "placement/facts.h"
#include "placement/node_facts.h"

using nlohmann::json;

namespace {

std::string error_of(const json& j) {
    try {
        placement::facts_from_json(j);
    } catch (const base::Error& e) {
        return std::to_string(cni::code_of(e)) + " " + e.what();
    }
    return "";
}

/// A big node: 8 PFs of 64 VFs (half in use) on two NUMA nodes, 200 attachments, a ledger
/// entry each on 4 masters, 4 pools.
placement::NodeFacts big_node() {
    placement::NodeFacts f;
    f.node = "worker-with-a-rather-long-name.example.com";
    f.taken_at = "2026-12-04T13:00:00Z";
    f.numa = {{0, "0-31,64-95"}, {1, "32-63,96-127"}};
    char pci[16], uid[40], cid[80];
    for (int p = 0; p < 8; ++p) {
        placement::PfFacts pf;
        std::snprintf(pci, sizeof pci, "0000:%02x:00.0", 0x3b + p);
        pf.pci = pci;
        pf.netdev = "ens" + std::to_string(p) + "f0np0";
        pf.numa = p % 2;
        pf.speed_mbps = 100000;
        pf.resource_name = "intel.com/intel_sriov_netdevice_" + std::to_string(p);
        pf.total_vfs = 64;
        for (int v = 0; v < 64; ++v) {
            std::snprintf(pci, sizeof pci, "0000:%02x:%02x.%d", 0x3b + p, 2 + v / 8, v % 8);
            std::snprintf(uid, sizeof uid, "%08x-0000-4000-8000-%012x", p, v);
            pf.vfs.push_back({pci, p % 2, v % 2 == 0, v % 2 == 0 ? uid : ""});
        }
        f.pfs.push_back(pf);
    }
    for (int m = 0; m < 4; ++m) {
        placement::LinkFacts l;
        l.name = "bond" + std::to_string(m);
        l.numa = m % 2;
        l.speed_mbps = 25000;
        l.link_count = 50;
        placement::LedgerFacts led{l.name, std::nullopt};
        for (int i = 0; i < 50; ++i) {
            std::snprintf(cid, sizeof cid, "%064x", m * 100 + i);
            if (i < 4) l.link_sample.push_back(std::string("/run/netns/cni-") + std::string(cid).substr(28));
            led.egress_bps += 100'000'000;
            led.ingress_bps += 100'000'000;
            if (++led.count <= 4)
                led.sample.push_back({"macvlan-net-" + std::to_string(m), cid, "net1", 100'000'000, 100'000'000, 0, 1.0, ""});
        }
        f.links.push_back(l);
        f.ledgers.push_back(led);
        f.networks.push_back({"macvlan-net-" + std::to_string(m), {{"10.56.0.1-10.56.3.254", 1020, 50, false}}});
    }
    for (int m = 0; m < 4; ++m) f.attachments.push_back({"macvlan-net-" + std::to_string(m), "macvlan", "bond" + std::to_string(m), {}});
    for (int a = 0; a < 200; ++a) {
        std::snprintf(uid, sizeof uid, "%08x-0000-4000-8000-%012x", a, a);
        f.attachments[a % 4].pods.push_back(uid);
    }
    return f;
}

}  // namespace

TEST_CASE("a facts document prints and parses back to the same facts") {
    placement::NodeFacts f = big_node();
    f.networks[0].sets.push_back({"fd00::1-fd00::ffff:ffff:ffff:ffff", (static_cast<unsigned __int128>(1) << 80), 7, false});
    json j = placement::to_json(f);
    placement::NodeFacts back = placement::facts_from_json(j);
    CHECK(placement::facts_content(back) == placement::facts_content(f));
    CHECK(back.pfs[3].vfs[10].pod_uid == f.pfs[3].vfs[10].pod_uid);
    CHECK(back.networks[0].sets[1].size == (static_cast<unsigned __int128>(1) << 80));
    CHECK(j["pfs"][0]["freeVFs"] == 32);
    CHECK(j["ledgers"][0]["committedEgressBps"] == 50 * 100'000'000ull);
    // takenAt alone does not make facts differ: a heartbeat is not a change.
    back.taken_at = "2026-12-04T14:00:00Z";
    CHECK(placement::facts_content(back) == placement::facts_content(f));
    back.pfs[0].vfs[1].in_use = true;
    CHECK(placement::facts_content(back) != placement::facts_content(f));
}

TEST_CASE("a big node's facts stay well inside the Node's 256 KiB of annotations") {
    std::string text = placement::to_json(big_node()).dump();
    MESSAGE("8 PFs x 64 VFs, 200 attachments: " << text.size() << " bytes");
    CHECK(text.size() < 48 * 1024);
}

TEST_CASE("the parser refuses what the schema does not say, naming the member") {
    json j = placement::to_json(big_node());
    CHECK(error_of(j).empty());
    auto with = [&](auto change) {
        json c = j;
        change(c);
        return error_of(c);
    };
    CHECK(with([](json& c) { c["version"] = 2; }).find("6 facts document: version: version 2 is not 1") == 0);
    CHECK(with([](json& c) { c["surprise"] = 1; }).find("surprise: unknown member") != std::string::npos);
    CHECK(with([](json& c) { c["pfs"][2]["vfNumaNodes"]["0000:3d:02.0"] = "0"; })
              .find("pfs[2].vfNumaNodes.0000:3d:02.0: expected an integer") != std::string::npos);
    CHECK(with([](json& c) { c["pfs"][2]["vfs"][1] = "0000:3d:02.0"; }).find("pfs[2].vfs[1]: listed twice") != std::string::npos);
    CHECK(with([](json& c) { c["pfs"][0]["freeVFs"] = 33; }).find("pfs[0].freeVFs: is not the number of vfs not in use") !=
          std::string::npos);
    CHECK(with([](json& c) { c["ledgers"][1]["entryCount"] = 3; }).find("ledgers[1].entries: more than entryCount") !=
          std::string::npos);
    CHECK(with([](json& c) { c["pfs"][1]["vfsInUse"]["0000:00:00.9"] = ""; }).find("pfs[1].vfsInUse.0000:00:00.9: not among vfs") !=
          std::string::npos);
    CHECK(with([](json& c) { c["networks"][0]["rangeSets"][0]["free"] = 1; }).find("is not size - used") != std::string::npos);
    CHECK(with([](json& c) { c.erase("links"); }).find("links: missing") != std::string::npos);
    CHECK(with([](json& c) { c["numaNodes"][0]["id"] = 5000; }).find("out of range") != std::string::npos);
    CHECK(with([](json& c) { c["links"][0]["linkCount"] = "3"; }).find("links[0].linkCount: expected an integer") !=
          std::string::npos);
}

TEST_CASE("the words for a device come from the document alone") {
    placement::NodeFacts f = big_node();
    placement::Device vf;
    vf.kind = placement::Device::Kind::Pci;
    vf.name = f.pfs[1].vfs[3].pci;
    vf.label = "VF " + vf.name;
    CHECK(placement::device_numa(f, vf).text == "VF " + vf.name + " is on NUMA node 1");
    CHECK(placement::link_speed(f, vf).text == "PF 'ens1f0np0' of VF " + vf.name + " runs at 100000 Mb/s");
    auto use = placement::device_use(f, vf);
    REQUIRE(use.used);
    CHECK(*use.used == 32);
    CHECK(use.text.find("has 32 VFs in use (") != std::string::npos);
    CHECK(use.text.find(", ...)") != std::string::npos);
    CHECK(placement::shared_link(f, vf).key == f.pfs[1].pci);
    placement::Device m;
    m.kind = placement::Device::Kind::Master;
    m.name = "bond2";
    m.label = "master 'bond2'";
    CHECK(placement::device_use(f, m).text.rfind("master 'bond2' already has 50 macvlan links (", 0) == 0);
    m.name = "nosuch";
    CHECK_FALSE(placement::device_use(f, m).used);
    CHECK(placement::device_use(f, m).text == "master 'bond2' does not exist on this node");
    placement::Device lost = vf;
    lost.name = "0000:ff:00.1";
    CHECK(placement::device_numa(f, lost).text == "VF 0000:3c:02.3 has no NUMA node in sysfs (a virtual device?)");
}
