#include "cni/result.h"

#include "conf/netconf.h"

#include "cni/error.h"
#include "base/text.h"
#include "cni/version.h"
#include "conf/fields.h"

namespace cni {

using nlohmann::json;

namespace {

json route_json(const Route& r, bool v11_fields) {
    json j = {{"dst", r.dst.str()}};
    if (r.gw) j["gw"] = r.gw->str();
    if (v11_fields) {
        if (r.mtu) j["mtu"] = *r.mtu;
        if (r.advmss) j["advmss"] = *r.advmss;
        if (r.priority) j["priority"] = *r.priority;
        if (r.table) j["table"] = *r.table;
        if (r.scope) j["scope"] = *r.scope;
    }
    return j;
}

json dns_json(const Dns& d) {
    json j = json::object();
    if (!d.nameservers.empty()) j["nameservers"] = d.nameservers;
    if (!d.domain.empty()) j["domain"] = d.domain;
    if (!d.search.empty()) j["search"] = d.search;
    if (!d.options.empty()) j["options"] = d.options;
    return j;
}

json legacy_json(const Result& r, const std::string& version) {
    json out = {{"cniVersion", version}};
    for (int family : {AF_INET, AF_INET6}) {
        const IpConfig* first = nullptr;
        for (auto& ip : r.ips)
            if (ip.address.addr.family == family) { first = &ip; break; }
        if (!first) continue;
        json j = {{"ip", first->address.str()}};
        if (first->gateway) j["gateway"] = first->gateway->str();
        json routes = json::array();
        for (auto& rt : r.routes)
            if (rt.dst.addr.family == family) routes.push_back(route_json(rt, false));
        if (!routes.empty()) j["routes"] = routes;
        out[family == AF_INET ? "ip4" : "ip6"] = j;
    }
    if (!out.contains("ip4") && !out.contains("ip6"))
        throw Error(kIncompatibleVersion, "failed to convert the result to cniVersion " + version + ": no IP addresses",
                    "an L2-only result (no ipam) needs cniVersion 0.3.0 or newer");
    out["dns"] = dns_json(r.dns);
    return out;
}

}  // namespace

json result_to_json(const Result& r, const std::string& version) {
    if (!at_least(version, "0.3.0")) return legacy_json(r, version);
    bool v1 = at_least(version, "1.0.0");
    bool v11 = at_least(version, "1.1.0");
    json out = {{"cniVersion", version}};
    json ifs = json::array();
    for (auto& i : r.interfaces) {
        json j = {{"name", i.name}};
        if (!i.mac.empty()) j["mac"] = i.mac;
        if (v11 && i.mtu) j["mtu"] = *i.mtu;
        if (!i.sandbox.empty()) j["sandbox"] = i.sandbox;
        if (v1 && !i.socket_path.empty()) j["socketPath"] = i.socket_path;
        if (v11 && !i.pci_id.empty()) j["pciID"] = i.pci_id;
        ifs.push_back(j);
    }
    if (!ifs.empty()) out["interfaces"] = ifs;
    json ips = json::array();
    for (auto& ip : r.ips) {
        json j;
        if (!v1) j["version"] = ip.address.addr.is_v4() ? "4" : "6";
        j["address"] = ip.address.str();
        if (ip.gateway) j["gateway"] = ip.gateway->str();
        if (ip.interface) j["interface"] = *ip.interface;
        ips.push_back(j);
    }
    if (!ips.empty()) out["ips"] = ips;
    json routes = json::array();
    for (auto& rt : r.routes) routes.push_back(route_json(rt, v11));
    if (!routes.empty()) out["routes"] = routes;
    // Go's 0.4.0 type always emits "dns": {}; 1.x omits it when empty.
    if (!v1 || !r.dns.empty()) out["dns"] = dns_json(r.dns);
    return out;
}

namespace {

base::IpAddr read_ip(const json& obj, const std::string& key, const std::string& path) {
    auto s = conf::opt_string(obj, key, path);
    if (!s) conf::bad(conf::join(path, key), "missing");
    auto a = base::IpAddr::parse(*s);
    if (!a) conf::bad(conf::join(path, key), "'" + *s + "' is not an IP address");
    return *a;
}

std::optional<base::IpAddr> read_opt_ip(const json& obj, const std::string& key, const std::string& path) {
    if (!conf::member(obj, key)) return std::nullopt;
    return read_ip(obj, key, path);
}

base::IpNet read_net(const json& obj, const std::string& key, const std::string& path) {
    auto s = conf::opt_string(obj, key, path);
    if (!s) conf::bad(conf::join(path, key), "missing");
    auto n = base::IpNet::parse(*s);
    if (!n) conf::bad(conf::join(path, key), "'" + *s + "' is not a CIDR (address/prefix)");
    return *n;
}

Route read_route(const json& j, const std::string& path) {
    if (!j.is_object()) conf::bad(path, "expected an object");
    Route r;
    r.dst = read_net(j, "dst", path);
    r.gw = read_opt_ip(j, "gw", path);
    auto i = [&](const char* k, long long hi) -> std::optional<int> {
        auto v = conf::opt_int(j, k, path, 0, hi);
        return v ? std::optional<int>(static_cast<int>(*v)) : std::nullopt;
    };
    r.mtu = i("mtu", 65535);
    r.advmss = i("advmss", 65535);
    r.priority = i("priority", 0x7fffffff);
    r.table = i("table", 0x7fffffff);
    r.scope = i("scope", 255);
    return r;
}

Dns read_dns(const json& j, const std::string& path) {
    Dns d;
    if (!j.is_object()) conf::bad(path, "expected an object");
    d.nameservers = conf::opt_strings(j, "nameservers", path);
    d.domain = conf::opt_string(j, "domain", path).value_or("");
    d.search = conf::opt_strings(j, "search", path);
    d.options = conf::opt_strings(j, "options", path);
    return d;
}

}  // namespace

Result result_from_json(const json& j, const std::string& path) {
    if (!j.is_object()) conf::bad(path, "expected an object");
    Result r;
    if (auto* dns = conf::member(j, "dns")) r.dns = read_dns(*dns, conf::join(path, "dns"));
    bool legacy = conf::member(j, "ip4") || conf::member(j, "ip6");
    if (legacy) {
        for (const char* key : {"ip4", "ip6"}) {
            auto* ipc = conf::opt_object(j, key, path);
            if (!ipc) continue;
            std::string p = conf::join(path, key);
            IpConfig c;
            c.address = read_net(*ipc, "ip", p);
            c.gateway = read_opt_ip(*ipc, "gateway", p);
            r.ips.push_back(c);
            if (auto* routes = conf::opt_array(*ipc, "routes", p))
                for (size_t i = 0; i < routes->size(); ++i)
                    r.routes.push_back(read_route((*routes)[i], conf::index(conf::join(p, "routes"), i)));
        }
        return r;
    }
    if (auto* ifs = conf::opt_array(j, "interfaces", path)) {
        for (size_t i = 0; i < ifs->size(); ++i) {
            auto& o = (*ifs)[i];
            std::string p = conf::index(conf::join(path, "interfaces"), i);
            if (!o.is_object()) conf::bad(p, "expected an object");
            Interface itf;
            itf.name = conf::opt_string(o, "name", p).value_or("");
            itf.mac = conf::opt_string(o, "mac", p).value_or("");
            if (auto m = conf::opt_int(o, "mtu", p, 0, 65535)) itf.mtu = static_cast<int>(*m);
            itf.sandbox = conf::opt_string(o, "sandbox", p).value_or("");
            itf.socket_path = conf::opt_string(o, "socketPath", p).value_or("");
            itf.pci_id = conf::opt_string(o, "pciID", p).value_or("");
            r.interfaces.push_back(itf);
        }
    }
    if (auto* ips = conf::opt_array(j, "ips", path)) {
        for (size_t i = 0; i < ips->size(); ++i) {
            auto& o = (*ips)[i];
            std::string p = conf::index(conf::join(path, "ips"), i);
            if (!o.is_object()) conf::bad(p, "expected an object");
            IpConfig c;
            c.address = read_net(o, "address", p);
            c.gateway = read_opt_ip(o, "gateway", p);
            if (auto idx = conf::opt_int(o, "interface", p, 0, 1 << 20)) {
                if (*idx >= static_cast<long long>(r.interfaces.size()))
                    conf::bad(conf::join(p, "interface"), "index " + std::to_string(*idx) + " has no interface");
                c.interface = static_cast<int>(*idx);
            }
            r.ips.push_back(c);
        }
    }
    if (auto* routes = conf::opt_array(j, "routes", path))
        for (size_t i = 0; i < routes->size(); ++i)
            r.routes.push_back(read_route((*routes)[i], conf::index(conf::join(path, "routes"), i)));
    return r;
}

json error_to_json(int code, const std::string& msg, const std::string& details, const std::string& version) {
    // Messages quote input (a config value, a path, a parser's view of the bytes), which
    // may be any bytes; the error object must still print as JSON.
    json j = {{"cniVersion", version.empty() || !base::valid_utf8(version) ? "1.1.0" : version},
              {"code", code},
              {"msg", base::utf8_escaped(msg)}};
    if (!details.empty()) j["details"] = base::utf8_escaped(details);
    return j;
}

const conf::Protocol kProtocol{require_supported, result_from_json};

const Interface& expected_pod_interface(const Result& prev, const std::string& ifname, const std::string& netns) {
    for (auto& i : prev.interfaces)
        if (i.name == ifname && i.sandbox == netns) return i;
    throw Error(kCheckFailed, "prevResult has no interface '" + ifname + "' in sandbox '" + netns + "'");
}

}  // namespace cni
