// The SR-IOV attachment against a recording fake PF: the PF-side paths no veth can take
// (settings applied in order, restored by DEL and by rollback, drift seen by CHECK), on
// real namespaces with veths as VF netdevs and a fake sysfs tree.
#include <doctest/doctest.h>
#include <linux/if_ether.h>
#include <linux/if_link.h>
#include <net/if.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>

#include "../netns/temp_netns.h"
#include "cni/attach/sriov.h"
#include "cni/verbs/ipam_step.h"
#include "cni/error.h"
#include "cni/attach/sriov_state.h"
#include "netns/netlink.h"
#include "netns/vf.h"


namespace fs = std::filesystem;
namespace vf = netns::vf;
using nlohmann::json;
using testing::TempNetns;

namespace {

/// What fn throws, from whichever layer, as the plugin would report it (its CNI code);
/// fails the test when it throws nothing.
template <class F>
cni::Error error_of(F&& fn) {
    try {
        fn();
    } catch (const base::Error& e) {
        return cni::to_cni(e);
    }
    FAIL("expected an error");
    return cni::Error(0, "");
}

constexpr const char* kPf = "0000:af:00.1";
constexpr const char* kVf = "0000:af:06.0";
constexpr const char* kVfMac = "02:5f:00:00:06:00";

/// A PF that keeps its VFs' settings in memory and logs every set, like sriov-cni's
/// MockNetlinkLib ("set vlan 100 (qos 0, proto 802.1q) of VF 0").
struct FakePf : vf::PfControl {
    std::map<int, vf::VfConfig> vfs;
    std::vector<std::string> calls;
    std::optional<vf::Setting> refuse;

    std::optional<vf::VfConfig> get(const std::string&, int n) override {
        if (!vfs.count(n)) return std::nullopt;
        return vfs[n];
    }
    void set(const std::string& pf, int n, vf::Setting s, const vf::VfConfig& c) override {
        if (refuse == s)
            throw cni::Error(cni::kInternal, "failed to set " + vf::describe(c, s) + " of VF " + std::to_string(n) +
                                                 " on PF '" + pf + "': Operation not supported", {}, EOPNOTSUPP);
        calls.push_back("set " + vf::describe(c, s) + " of VF " + std::to_string(n));
        auto& v = vfs[n];
        switch (s) {
            case vf::Setting::Vlan: v.vlan = c.vlan; v.qos = c.qos.value_or(0); v.vlan_proto = c.vlan_proto.value_or(ETH_P_8021Q); break;
            case vf::Setting::Mac: v.mac = c.mac; break;
            case vf::Setting::Rate: v.min_tx_rate = c.min_tx_rate.value_or(0); v.max_tx_rate = c.max_tx_rate.value_or(0); break;
            case vf::Setting::Spoofchk: v.spoofchk = c.spoofchk; break;
            case vf::Setting::Trust: v.trust = c.trust; break;
            case vf::Setting::LinkState: v.link_state = c.link_state; break;
        }
    }
};

const vf::VfConfig kFactory{.mac = "00:00:00:00:00:00", .vlan = 0, .qos = 0, .vlan_proto = ETH_P_8021Q,
                            .spoofchk = true, .trust = false, .link_state = IFLA_VF_LINK_STATE_AUTO,
                            .min_tx_rate = 5, .max_tx_rate = 0};

/// A node netns with veths named like the fake tree's PF and VF, a pod netns, temp dirs.
/// The fake PF as the attachment's PF control; the fixture keeps the fake across attachments.
struct PfRef : vf::PfControl {
    explicit PfRef(FakePf* f) : fake(f) {}
    std::optional<vf::VfConfig> get(const std::string& pf, int n) override { return fake->get(pf, n); }
    void set(const std::string& pf, int n, vf::Setting s, const vf::VfConfig& c) override { fake->set(pf, n, s, c); }
    FakePf* fake;
};

struct Fixture {
    TempNetns node{"tsrn"}, pod{"tsrp"};
    fs::path tmp;
    FakePf* pf = nullptr;
    std::unique_ptr<FakePf> fake_pf;
    /// The SR-IOV kind for config `c`, its VF settings made on the fake PF.
    std::unique_ptr<cni::Attachment> kind(conf::NetConf c) {
        return cni::make_sriov(c, conf::Purpose::Setup, std::make_unique<PfRef>(pf));
    }

    Fixture() {
        char tmpl[] = "/tmp/topocni-sriov-XXXXXX";
        REQUIRE(::mkdtemp(tmpl));
        tmp = tmpl;
        auto sys = tmp / "sys", devs = sys / "devices/pci0000:00";
        for (auto [bdf, net] : {std::pair{kPf, "fpf0"}, std::pair{kVf, "fvf0"}}) {
            fs::create_directories(devs / bdf / "net" / net);
            fs::create_directories(sys / "bus/pci/devices");
            fs::create_directory_symlink(fs::path("../../../devices/pci0000:00") / bdf, sys / "bus/pci/devices" / bdf);
        }
        fs::create_directory_symlink(std::string("../") + kVf, devs / kPf / "virtfn0");
        fs::create_directory_symlink(std::string("../") + kPf, devs / kVf / "physfn");
        netns::with(node.handle, [&] {
            netns::nl::Socket s;
            s.create_veth({.name = "fpf0", .peer_name = "fpf1"});
            s.create_veth({.name = "fvf0", .peer_name = "fvf1", .mtu = 1500, .mac = kVfMac});
        });
        auto fake = std::make_unique<FakePf>();
        fake->vfs[0] = kFactory;
        pf = fake.get();
        fake_pf = std::move(fake);
    }
    ~Fixture() { fs::remove_all(tmp); }

    conf::NetConf conf(json extra = json::object()) {
        json j = {{"cniVersion", "1.1.0"}, {"name", "sriovnet"}, {"type", "topocni"}, {"attachment", "sriov"},
                  {"deviceID", kVf}, {"sysfsRoot", (tmp / "sys").string()}, {"stateDir", (tmp / "state").string()}};
        j.update(extra);
        return cni::parse_config(j.dump(), {});
    }
    cni::Env env(const std::string& cid = "c1") {
        cni::Env e;
        e.container_id = cid;
        e.netns = "/run/netns/" + pod.reg.name;
        e.ifname = "net1";
        return e;
    }

    /// Runs one verb as the plugin would: from inside the node netns.
    template <class F>
    void in_node(const conf::NetConf& c, const cni::Env& e, bool with_pod, F&& fn) {
        netns::with(node.handle, [&] {
            auto host = netns::Handle::current();
            cni::Context ctx{e, c, host, with_pod ? &pod.handle : nullptr};
            fn(ctx);
        });
    }
    base::Result add(const conf::NetConf& c, const base::Result& ipam = {}) {
        base::Result r;
        in_node(c, env(), true, [&](cni::Context& ctx) {
            auto k = kind(c);   // outlives the undo steps it registers, as in the plugin
            base::Rollback undo;
            cni::take_ipam_result(r, ipam, k->add(ctx, ipam, r, undo), {});
            undo.dismiss();
        });
        return r;
    }
    void del(const conf::NetConf& c) { in_node(c, env(), true, [&](cni::Context& ctx) { kind(c)->del(ctx); }); }

    std::optional<netns::nl::Link> link(const netns::Handle& ns, const std::string& name) {
        return netns::with(ns, [&] { return netns::nl::Socket().get_link(name); });
    }
    bool has_record() { return fs::exists(tmp / "state/sriov" / (std::string(kVf) + ".json")); }
};

}  // namespace

TEST_CASE("sriov attachment: PF settings are applied in sriov-cni's order and DEL puts every one back") {
    Fixture f;
    auto c = f.conf({{"vlan", 100}, {"vlanQoS", 2}, {"spoofchk", "off"}, {"trust", "on"}, {"link_state", "enable"},
                     {"max_tx_rate", 1000}, {"mac", "02:aa:bb:cc:dd:01"}});
    auto r = f.add(c);
    CHECK(f.pf->calls == std::vector<std::string>{
                             "set vlan 100 (qos 2, proto 802.1q) of VF 0",
                             "set mac 02:aa:bb:cc:dd:01 of VF 0",
                             "set tx rate (min_tx_rate 5, max_tx_rate 1000 Mbps) of VF 0",   // min kept as it was
                             "set spoofchk off of VF 0",
                             "set trust on of VF 0",
                             "set link_state enable of VF 0",
                         });
    auto in_pod = f.link(f.pod.handle, "net1");
    REQUIRE(in_pod);
    CHECK(in_pod->mac == "02:aa:bb:cc:dd:01");   // the netdev's own MAC too
    CHECK((in_pod->flags & IFF_UP) != 0);
    REQUIRE(r.interfaces.size() == 1);
    CHECK(r.interfaces[0].pci_id == kVf);
    CHECK(r.interfaces[0].mac == "02:aa:bb:cc:dd:01");

    auto rec = cni::state::VfStore((f.tmp / "state").string()).read(kVf);
    REQUIRE(rec);
    CHECK(rec->original == kFactory);
    CHECK(rec->applied.vlan == 100);
    CHECK(rec->mac == kVfMac);

    SUBCASE("CHECK sees the PF side drift") {
        base::Result prev = r;
        f.in_node(c, f.env(), true, [&](cni::Context& ctx) { f.kind(c)->check(ctx, prev); });
        f.pf->vfs[0].vlan = 7;
        auto e = error_of([&] {
            f.in_node(c, f.env(), true, [&](cni::Context& ctx) { f.kind(c)->check(ctx, prev); });
        });
        CHECK(cni::code_of(e) == cni::kCheckFailed);
        CHECK(std::string(e.what()).find("vlan 7") != std::string::npos);
        f.pf->vfs[0].vlan = 100;
    }

    f.pf->calls.clear();
    f.del(c);
    CHECK(f.pf->vfs[0] == kFactory);
    CHECK(f.pf->calls.size() == 6);
    auto home = f.link(f.node.handle, "fvf0");
    REQUIRE(home);
    CHECK(home->mac == kVfMac);
    CHECK_FALSE(f.link(f.pod.handle, "net1"));
    CHECK_FALSE(f.has_record());
    f.pf->calls.clear();
    f.del(c);   // again: nothing left, nothing done
    CHECK(f.pf->calls.empty());
}

TEST_CASE("sriov attachment: a setting the PF refuses rolls back the ones before it and the record") {
    Fixture f;
    f.pf->refuse = vf::Setting::Trust;
    auto c = f.conf({{"vlan", 100}, {"spoofchk", "off"}, {"trust", "on"}});
    auto e = error_of([&] { f.add(c); });
    CHECK(std::string(e.what()).find("trust on") != std::string::npos);
    CHECK(f.pf->vfs[0] == kFactory);
    CHECK(f.pf->calls == std::vector<std::string>{"set vlan 100 (qos 0, proto 802.1q) of VF 0", "set spoofchk off of VF 0",
                                                  "set spoofchk on of VF 0", "set vlan 0 (qos 0, proto 802.1q) of VF 0"});
    CHECK(f.link(f.node.handle, "fvf0"));
    CHECK_FALSE(f.has_record());
}

TEST_CASE("sriov attachment: a failure after the move brings the VF back with its name, MAC and MTU") {
    Fixture f;
    auto c = f.conf({{"mtu", 1400}});
    // A gateway that is not on-link: the route fails after addresses and MTU are set.
    base::Result ipam;
    ipam.ips.push_back({*base::IpNet::parse("10.1.0.5/24"), std::nullopt, 0});
    ipam.routes.push_back({*base::IpNet::parse("0.0.0.0/0"), base::IpAddr::parse("10.9.9.9")});
    auto e = error_of([&] { f.add(c, ipam); });
    CHECK(std::string(e.what()).find("route") != std::string::npos);
    auto home = f.link(f.node.handle, "fvf0");
    REQUIRE(home);
    CHECK(home->mac == kVfMac);
    CHECK(home->mtu == 1500);
    CHECK_FALSE(f.link(f.pod.handle, "net1"));
    CHECK_FALSE(f.has_record());
}

TEST_CASE("sriov attachment: DEL keeps the record when the VF cannot be restored, so a retry can") {
    Fixture f;
    auto c = f.conf();
    f.add(c);
    // Someone took the VF's name on the node meanwhile: the VF must stay where it is.
    netns::with(f.node.handle, [&] { netns::nl::Socket().create_veth({.name = "fvf0", .peer_name = "intruder"}); });
    auto e = error_of([&] { f.del(c); });
    CHECK(std::string(e.what()).find("another link has that name") != std::string::npos);
    CHECK(f.link(f.pod.handle, "net1"));
    CHECK(f.has_record());
    netns::with(f.node.handle, [&] { netns::nl::Socket().del_link("intruder"); });
    f.del(c);
    CHECK(f.link(f.node.handle, "fvf0"));
    CHECK_FALSE(f.has_record());
}
