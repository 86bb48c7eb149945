#include <doctest/doctest.h>
#include <linux/if_ether.h>
#include <linux/if_link.h>
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>

#include "cni/error.h"
#include "base/files.h"
#include "cni/attach/sriov_state.h"
#include "../support.h"

namespace fs = std::filesystem;
using cni::state::VfRecord;
using cni::state::VfStore;

namespace {


VfRecord sample() {
    VfRecord r;
    r.pci = "0000:af:06.0";
    r.pf_pci = "0000:af:00.1";
    r.pf = "enp175s0f1";
    r.vf_index = 0;
    r.owner = {"sriovnet", "c1", "net1", "/run/netns/p1"};
    r.netdev = "enp175s6";
    r.mac = "02:00:00:00:00:06";
    r.mtu = 1500;
    r.up = true;
    r.original = {.mac = "00:00:00:00:00:00", .vlan = 0, .qos = 0, .vlan_proto = ETH_P_8021Q, .spoofchk = true,
                  .trust = false, .link_state = IFLA_VF_LINK_STATE_AUTO, .min_tx_rate = 0, .max_tx_rate = 0};
    r.applied = {.vlan = 100, .qos = 0, .vlan_proto = ETH_P_8021AD, .spoofchk = false};
    r.device_info_file = "/run/devinfo/x.json";
    return r;
}

}  // namespace

TEST_CASE("state: a VF record survives a round trip through its file, in sriov-cni's key names") {
    support::TempDir d("state");
    VfStore store(d.path());
    auto r = sample();
    store.write(r);
    CHECK(fs::exists(d.dir() / "sriov" / "0000:af:06.0.json"));
    CHECK((fs::status(d.dir() / "sriov").permissions() & fs::perms::all) == fs::perms::owner_all);
    auto back = store.read(r.pci);
    REQUIRE(back);
    CHECK(back->pf == r.pf);
    CHECK(back->pf_pci == r.pf_pci);
    CHECK(back->owner.same_attachment(r.owner));
    CHECK(back->owner.netns == r.owner.netns);
    CHECK(back->netdev == r.netdev);
    CHECK(back->mac == r.mac);
    CHECK(back->mtu == 1500);
    CHECK(back->up);
    CHECK(back->original == r.original);
    CHECK(back->applied == r.applied);
    CHECK(back->device_info_file == r.device_info_file);
    auto j = cni::state::to_json(r);
    CHECK(j["mode"] == "kernel");
    CHECK(j["pfApplied"] == nlohmann::json{{"vlan", 100}, {"vlanQoS", 0}, {"vlanProto", "802.1ad"}, {"spoofchk", "off"}});

    SUBCASE("a DPDK record has no netdev") {
        r.dpdk = true;
        store.write(r);
        CHECK_FALSE(cni::state::to_json(r).contains("netdev"));
        CHECK(store.read(r.pci)->dpdk);
    }
    SUBCASE("remove and list") {
        auto other = sample();
        other.pci = "0000:af:06.1";
        store.write(other);
        std::ofstream(d.dir() / "sriov" / "garbage.json") << "{";
        std::ofstream(d.dir() / "sriov" / "0000:af:06.2.json") << "{\"pciAddress\": 1}";
        auto all = store.list();   // unreadable records are skipped
        REQUIRE(all.size() == 2);
        CHECK(all[0].pci == "0000:af:06.0");
        CHECK(all[1].pci == "0000:af:06.1");
        store.remove(r.pci);
        store.remove(r.pci);   // missing is fine
        CHECK_FALSE(store.read(r.pci));
        CHECK(cni::state::VfStore(d.path()).list().size() == 1);
    }
}

TEST_CASE("state: an unreadable record is an error naming the file, not a free VF") {
    support::TempDir d("state");
    VfStore store(d.path());
    fs::create_directories(d.dir() / "sriov");
    std::ofstream(d.dir() / "sriov" / "0000:af:06.0.json") << "{\"pciAddress\": \"0000:af:06.0\"}";
    try {
        store.read("0000:af:06.0");
        FAIL("expected an error");
    } catch (const base::Error& e) {
        CHECK(cni::code_of(e) == cni::kDecodingFailure);
        CHECK(std::string(e.what()).find("0000:af:06.0.json") != std::string::npos);
    }
}

TEST_CASE("files: write_file replaces atomically and leaves no temp file behind") {
    support::TempDir d("state");
    auto p = (d.dir() / "a" / "b" / "f.json").string();
    base::fs::write_file(p, "one");
    base::fs::write_file(p, "two");
    CHECK(base::fs::read_file(p) == "two");
    CHECK(std::distance(fs::directory_iterator(d.dir() / "a" / "b"), fs::directory_iterator()) == 1);
    CHECK_FALSE(base::fs::read_file((d.dir() / "missing").string()));
}

TEST_CASE("state: create_once never replaces a file and sets the exact mode") {
    support::TempDir d("state");
    auto p = (d.dir() / "devinfo" / "cni" / "x.json").string();
    mode_t old = ::umask(077);
    CHECK(base::fs::create_once(p, "mine", 0444, 0755));
    ::umask(old);
    CHECK((fs::status(p).permissions() & fs::perms::all) ==
          (fs::perms::owner_read | fs::perms::group_read | fs::perms::others_read));
    CHECK_FALSE(base::fs::create_once(p, "theirs", 0444, 0755));
    CHECK(base::fs::read_file(p) == "mine");
    CHECK(std::distance(fs::directory_iterator(d.dir() / "devinfo" / "cni"), fs::directory_iterator()) == 1);
}

TEST_CASE("state: a VF lock held elsewhere times out with code 11 naming the VF") {
    support::TempDir d("state");
    VfStore store((d.dir() / "state").string());
    for (auto* vf : {"0000:af:06.0", "0000:af:06.1"}) fs::create_directories(d.dir() / "sys/bus/pci/devices" / vf);
    netns::sysfs::Tree tree((d.dir() / "sys").string());
    auto held = store.lock(tree, "0000:af:06.0");
    REQUIRE(held);
    auto start = std::chrono::steady_clock::now();
    try {
        store.lock(tree, "0000:af:06.0", std::chrono::milliseconds(200));
        FAIL("expected a timeout");
    } catch (const base::Error& e) {
        CHECK(cni::code_of(e) == cni::kTryAgainLater);
        CHECK(std::string(e.what()).find("VF 0000:af:06.0") != std::string::npos);
    }
    CHECK(std::chrono::steady_clock::now() - start >= std::chrono::milliseconds(200));
    auto other = store.lock(tree, "0000:af:06.1", std::chrono::milliseconds(200));   // other VFs are independent
    CHECK(other);
    CHECK_FALSE(store.lock(tree, "0000:af:07.0"));   // no such VF: nothing to lock
    CHECK_FALSE(fs::exists(d.dir() / "state"));        // the lock is the VF's sysfs directory: no file
}
