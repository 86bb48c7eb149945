#include <doctest/doctest.h>

#include <fstream>
#include <sstream>

#include "cni/error.h"
#include "cni/attach/sriov.h"
#include "conf/netconf.h"

using nlohmann::json;

namespace {

json base_conf() { return {{"cniVersion", "1.1.0"}, {"name", "sriovnet"}, {"type", "topocni"}, {"attachment", "sriov"}}; }

conf::NetConf parse(const json& j, const conf::ArgsView& args = {}) { return cni::parse_config(j.dump(), args); }

/// The SR-IOV keys of a config that parses (the kind reads them).
cni::SriovKeys sriov_keys(const json& j, const conf::ArgsView& args = {}) { return cni::read_sriov_keys(parse(j, args)); }

/// The code-7 message of a config that must be refused; "" when it was accepted.
std::string refusal(const json& j) {
    try {
        parse(j);
    } catch (const base::Error& e) {
        CHECK(cni::code_of(e) == cni::kInvalidConfig);
        return e.what();
    }
    return "";
}

json with(json j, const json& extra) {
    j.update(extra);
    return j;
}

}  // namespace

TEST_CASE("sriov conf: deviceID wins over pciBusID, which wins over runtimeConfig.deviceID; stored lower case") {
    auto c = sriov_keys(with(base_conf(), {{"deviceID", "0000:AF:06.0"}, {"pciBusID", "0000:af:06.1"},
                                 {"runtimeConfig", {{"deviceID", "0000:af:06.2"}}}}));
    CHECK(c.device_id == "0000:af:06.0");
    CHECK(sriov_keys(with(base_conf(), {{"pciBusID", "0000:af:06.1"}, {"runtimeConfig", {{"deviceID", "0000:af:06.2"}}}})).device_id == "0000:af:06.1");
    CHECK(sriov_keys(with(base_conf(), {{"runtimeConfig", {{"DeviceID", "0000:af:06.2"}}}})).device_id == "0000:af:06.2");
    CHECK(sriov_keys(base_conf()).device_id.empty());   // DEL and CHECK work from state
}

TEST_CASE("sriov conf: anything but a PCI address is code 7 naming the key") {
    for (auto bad : {"../../etc", "0000:af:06.0/../x", "0000:af:06.8", "af:06.0", "0000:af:06", "0000:ag:06.0",
                     "0000:af:06.0 ", ""}) {
        CAPTURE(bad);
        CHECK(refusal(with(base_conf(), {{"deviceID", bad}})).starts_with("deviceID: "));
        CHECK(refusal(with(base_conf(), {{"pciBusID", bad}})).starts_with("pciBusID: "));
        CHECK(refusal(with(base_conf(), {{"runtimeConfig", {{"deviceID", bad}}}})).starts_with("runtimeConfig.deviceID: "));
    }
}

TEST_CASE("sriov conf: VF settings keep sriov-cni's names, ranges and dependencies") {
    auto n = parse(with(base_conf(), {{"vlan", 100}, {"vlanQoS", 3}, {"vlanProto", "802.1AD"}, {"spoofchk", "off"},
                                 {"trust", "on"}, {"link_state", "disable"}, {"min_tx_rate", 10},
                                 {"max_tx_rate", 1000}, {"mac", "CA:FE:C0:FF:EE:00"}}));
    const auto s = cni::read_sriov_keys(n);
    CHECK(s.vlan == 100);
    CHECK(s.vlan_qos == 3);
    CHECK(s.vlan_proto == "802.1ad");
    CHECK(s.spoofchk == false);
    CHECK(s.trust == true);
    CHECK(s.link_state == "disable");
    CHECK(s.min_tx_rate == 10);
    CHECK(s.max_tx_rate == 1000);
    CHECK(n.mac == "CA:FE:C0:FF:EE:00");

    SUBCASE("unset means untouched; empty strings too, as in sriov-cni") {
        auto u = sriov_keys(with(base_conf(), {{"spoofchk", ""}, {"trust", ""}, {"link_state", ""}}));
        CHECK_FALSE(u.vlan);
        CHECK_FALSE(u.spoofchk);
        CHECK_FALSE(u.trust);
        CHECK_FALSE(u.link_state);
        CHECK_FALSE(u.min_tx_rate);
    }
    SUBCASE("bad values name their key") {
        const std::pair<json, const char*> cases[] = {
            {{{"vlan", 4095}}, "vlan: "},
            {{{"vlan", -1}}, "vlan: "},
            {{{"vlan", "100"}}, "vlan: "},
            {{{"vlan", 1}, {"vlanQoS", 8}}, "vlanQoS: "},
            {{{"vlanQoS", 1}}, "vlanQoS: needs vlan"},
            {{{"vlanProto", "802.1q"}}, "vlanProto: needs vlan"},
            {{{"vlan", 0}, {"vlanQoS", 2}}, "vlanQoS: needs a non-zero vlan"},
            {{{"vlan", 0}, {"vlanProto", "802.1ad"}}, "vlanProto: 802.1ad needs a non-zero vlan"},
            {{{"vlan", 5}, {"vlanProto", "qinq"}}, "vlanProto: "},
            {{{"spoofchk", "true"}}, "spoofchk: "},
            {{{"trust", true}}, "trust: "},
            {{{"link_state", "up"}}, "link_state: "},
            {{{"min_tx_rate", -5}}, "min_tx_rate: "},
            {{{"max_tx_rate", 1.5}}, "max_tx_rate: "},
            {{{"min_tx_rate", 500}, {"max_tx_rate", 100}}, "min_tx_rate: 500 exceeds max_tx_rate 100"},
            {{{"runtimeConfig", {{"CNIDeviceInfoFile", "relative/path"}}}}, "runtimeConfig.CNIDeviceInfoFile: "},
        };
        for (auto& c : cases) {
            // Named copies: clang 14 cannot capture structured bindings (CAPTURE does).
            auto& extra = std::get<0>(c);
            auto& prefix = std::get<1>(c);
            CAPTURE(extra.dump());
            CHECK(refusal(with(base_conf(), extra)).starts_with(prefix));
        }
    }
}

TEST_CASE("sriov conf: a zero max_tx_rate means no limit, so any min_tx_rate goes with it") {
    auto c = sriov_keys(with(base_conf(), {{"min_tx_rate", 500}, {"max_tx_rate", 0}}));
    CHECK(c.min_tx_rate == 500);
    CHECK(c.max_tx_rate == 0);
}

TEST_CASE("sriov conf: the device-info path comes from runtimeConfig, in any capitalisation") {
    auto c = sriov_keys(with(base_conf(), {{"runtimeConfig", {{"cniDeviceInfoFile", "/var/run/k8s.cni.cncf.io/devinfo/cni/x"}}}}));
    CHECK(c.device_info_file == "/var/run/k8s.cni.cncf.io/devinfo/cni/x");
}

TEST_CASE("sriov conf: VF settings with another attachment are refused, deviceID is not (Multus injects it)") {
    json veth = {{"cniVersion", "1.1.0"}, {"name", "n"}, {"type", "topocni"}, {"bridge", "br0"}};
    CHECK(refusal(with(veth, {{"vlan", 5}})) == "vlan: only valid with attachment sriov");
    CHECK(refusal(with(veth, {{"spoofchk", "on"}})) == "spoofchk: only valid with attachment sriov");
    auto c = parse(with(veth, {{"deviceID", "0000:af:06.0"}}));
    CHECK(c.kind == "veth");
}

namespace {

std::string example(const std::string& name) {
    std::string here = __FILE__;   // tests/unit/attach/sriov_keys_test.cc
    std::ifstream in(here.substr(0, here.rfind("/tests/")) + "/examples/" + name);
    REQUIRE_MESSAGE(in, "missing example " << name);
    return std::string(std::istreambuf_iterator<char>(in), {});
}

/// The block under "config: |" of a NetworkAttachmentDefinition (no YAML parser needed).
std::string nad_config(const std::string& yaml) {
    auto at = yaml.find("config: |\n");
    REQUIRE(at != std::string::npos);
    std::istringstream in(yaml.substr(at + 10));
    std::string line, out;
    while (std::getline(in, line) && (line.empty() || line.starts_with("    "))) out += line + "\n";
    return out;
}

}  // namespace

TEST_CASE("sriov conf: the SR-IOV and macvlan examples parse") {
    auto sriov = cni::read_sriov_keys(cni::parse_config(example("sriov.conf"), {}));
    CHECK(sriov.device_id == "0000:af:06.0");
    CHECK(sriov.vlan == 1000);
    auto nad_conf = cni::parse_config(nad_config(example("sriov-nad.yaml")), {});
    CHECK(nad_conf.kind == "sriov");
    auto nad = cni::read_sriov_keys(nad_conf);
    CHECK(nad.spoofchk == true);
    CHECK(nad.device_id.empty());   // Multus adds it
    CHECK(example("sriov-nad.yaml").find("k8s.v1.cni.cncf.io/resourceName: intel.com/intel_sriov_netdevice") !=
          std::string::npos);
    auto macvlan = cni::parse_config(example("macvlan.conf"), {});
    CHECK(macvlan.kind == "macvlan");
    CHECK(macvlan.raw["master"] == "eth1");
    auto macvlan_nad = cni::parse_config(nad_config(example("macvlan-nad.yaml")), {});
    CHECK(macvlan_nad.kind == "macvlan");
    CHECK(macvlan_nad.raw.value("mode", "bridge") == "bridge");
}
