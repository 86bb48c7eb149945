// parse_config: the host-local "ipam" object into ipam::Config, validated the way the
// reference plugin's LoadIPAMConfig + Canonicalize do, but with every error naming the
// key path it is about ("ipam.ranges[0][1].rangeEnd: ...").
#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdio>

#include <nlohmann/json.hpp>

#include "ipam/error.h"
#include "ipam/host_local.h"
#include "ipam/range.h"

namespace ipam {

namespace {

using json = nlohmann::json;

[[noreturn]] void bad(const std::string& path, const std::string& msg) { fail_invalid(path + ": " + msg); }

// The member `key`, or nullptr when it is absent or null (Go leaves those unset).
const json* member(const json& obj, const std::string& key) {
    auto it = obj.find(key);
    return it == obj.end() || it->is_null() ? nullptr : &*it;
}

const json& expect_list(const json& j, const std::string& path) {
    if (!j.is_array()) bad(path, "expected a list");
    return j;
}

std::optional<std::string> opt_string(const json& obj, const std::string& key, const std::string& path) {
    const json* v = member(obj, key);
    if (!v) return std::nullopt;
    if (!v->is_string()) bad(path, "expected a string");
    return v->get<std::string>();
}

// An optional address; "" counts as unset, as in Go's net.IP.UnmarshalText.
std::optional<base::IpAddr> opt_ip(const json& obj, const std::string& key, const std::string& path) {
    auto s = opt_string(obj, key, path);
    if (!s || s->empty()) return std::nullopt;
    auto ip = base::IpAddr::parse(*s);
    if (!ip) bad(path, "invalid IP address '" + *s + "'");
    return ip;
}

base::IpNet req_cidr(const json& obj, const std::string& key, const std::string& path) {
    auto s = opt_string(obj, key, path);
    if (!s) bad(path, "missing");
    auto n = base::IpNet::parse(*s);
    if (!n) bad(path, "invalid CIDR '" + *s + "'");
    return *n;
}

std::optional<int> opt_int(const json& obj, const std::string& key, const std::string& path, long long lo,
                           long long hi) {
    const json* v = member(obj, key);
    if (!v) return std::nullopt;
    if (!v->is_number_integer()) bad(path, "expected an integer");
    // Range-checked before narrowing: a huge value must not wrap into a valid-looking one.
    if (v->is_number_unsigned() ? v->get<unsigned long long>() > static_cast<unsigned long long>(hi)
                                : (v->get<long long>() < lo || v->get<long long>() > hi))
        bad(path, "must be between " + std::to_string(lo) + " and " + std::to_string(hi));
    return static_cast<int>(v->get<long long>());
}

// Checks the subnet the way Range.Canonicalize does: room for at least two addresses,
// and no host bits.
base::IpNet checked_subnet(const json& j, const std::string& path) {
    base::IpNet n = req_cidr(j, "subnet", path);
    if (n.prefix > n.addr.bits() - 2) bad(path, "network " + n.str() + " too small to allocate from");
    if (n.network() != n)
        bad(path, "network " + n.str() + " has host bits set; the network address is " + n.network().str());
    return n;
}

std::optional<base::IpAddr> ip_in(const json& j, const std::string& key, const std::string& path, const base::IpNet& subnet) {
    auto ip = opt_ip(j, key, path + "." + key);
    if (ip && !subnet.contains(*ip)) bad(path + "." + key, ip->str() + " is not in network " + subnet.str());
    return ip;
}

// The default end excludes the v4 broadcast address but not the v6 all-ones one.
base::IpAddr default_end(const base::IpNet& subnet) {
    base::IpAddr last = subnet.last();
    return last.is_v4() ? last.prev() : last;
}

Range parse_range(const json& j, const std::string& path) {
    if (!j.is_object()) bad(path, "expected an object");
    Range r;
    r.subnet = checked_subnet(j, path + ".subnet");
    base::IpAddr first = r.subnet.addr.next();
    r.gateway = ip_in(j, "gateway", path, r.subnet).value_or(first);
    r.start = ip_in(j, "rangeStart", path, r.subnet).value_or(first);
    r.end = ip_in(j, "rangeEnd", path, r.subnet).value_or(default_end(r.subnet));
    if (r.end < r.start) bad(path + ".rangeEnd", r.end.str() + " is before rangeStart " + r.start.str());
    return r;
}

// A set parsed from the config, with the path each part came from for later messages.
struct SourcedSet {
    RangeSet set;
    std::string path;
    std::vector<std::string> range_paths;
};

void check_set(const SourcedSet& s) {
    for (size_t i = 0; i < s.set.size(); ++i) {
        for (size_t k = 0; k < i; ++k) {
            const Range& a = s.set[k];
            const Range& b = s.set[i];
            if (a.subnet.addr.family != b.subnet.addr.family)
                bad(s.range_paths[i], "mixed address families in one range set (" + b.subnet.str() + " and " +
                                          a.subnet.str() + ")");
            if (overlaps(a, b))
                bad(s.range_paths[i], "range " + to_string({b}) + " overlaps with " + s.range_paths[k] + " (" +
                                          to_string({a}) + ")");
        }
    }
}

SourcedSet parse_set(const json& j, const std::string& path) {
    if (!j.is_array()) bad(path, "expected a list of ranges");
    if (j.empty()) bad(path, "empty range set");
    SourcedSet s{{}, path, {}};
    for (size_t i = 0; i < j.size(); ++i) {
        s.range_paths.push_back(path + "[" + std::to_string(i) + "]");
        s.set.push_back(parse_range(j[i], s.range_paths.back()));
    }
    check_set(s);
    return s;
}

void append_sets(std::vector<SourcedSet>& out, const json& j, const std::string& path) {
    expect_list(j, path);
    for (size_t i = 0; i < j.size(); ++i) out.push_back(parse_set(j[i], path + "[" + std::to_string(i) + "]"));
}

bool iequals(std::string_view a, std::string_view b) {
    return a.size() == b.size() && std::equal(a.begin(), a.end(), b.begin(), [](char x, char y) {
               return std::tolower(static_cast<unsigned char>(x)) == std::tolower(static_cast<unsigned char>(y));
           });
}

// runtimeConfig keys are matched case-insensitively (Go's encoding/json does that).
void runtime_sets(std::vector<SourcedSet>& out, const json& whole) {
    const json* rc = member(whole, "runtimeConfig");
    if (!rc) return;
    if (!rc->is_object()) bad("runtimeConfig", "expected an object");
    for (auto& [key, value] : rc->items())
        if (iequals(key, "ipRanges") && !value.is_null()) return append_sets(out, value, "runtimeConfig." + key);
}

// The legacy single range at the ipam top level (ipam.subnet, ipam.rangeStart...).
void legacy_set(std::vector<SourcedSet>& out, const json& ipam) {
    if (!member(ipam, "subnet")) {
        for (const char* k : {"rangeStart", "rangeEnd", "gateway"})
            if (member(ipam, k)) bad(std::string("ipam.") + k, "given without ipam.subnet");
        return;
    }
    out.push_back({{parse_range(ipam, "ipam")}, "ipam", {"ipam"}});
}

// "0.2.0" < "0.3.0"; anything that does not parse counts as old, as in the reference.
bool before_0_3_0(const std::string& v) {
    int major = 0, minor = 0;
    if (std::sscanf(v.c_str(), "%d.%d", &major, &minor) != 2) return true;
    return major == 0 && minor < 3;
}

void check_sets(const std::vector<SourcedSet>& sets, const std::string& cni_version) {
    if (sets.empty()) bad("ipam.ranges", "no IP ranges specified");
    size_t v4 = 0, v6 = 0;
    for (auto& s : sets) (s.set[0].subnet.addr.is_v4() ? v4 : v6)++;
    if ((v4 > 1 || v6 > 1) && before_0_3_0(cni_version))
        bad("ipam.ranges", "cniVersion " + cni_version + " allows at most one IPv4 and one IPv6 range set");
    for (size_t j = 1; j < sets.size(); ++j)
        for (size_t i = 0; i < j; ++i)
            if (overlaps(sets[i].set, sets[j].set)) {
                std::string where = sets[i].path == "ipam.ranges[" + std::to_string(i) + "]" ? "" : " (" + sets[i].path + ")";
                bad(sets[j].path, "range set " + std::to_string(j) + " overlaps with range set " + std::to_string(i) + where);
            }
}

base::Route parse_route(const json& j, const std::string& path) {
    if (!j.is_object()) bad(path, "expected an object");
    base::Route r;
    r.dst = req_cidr(j, "dst", path + ".dst");
    r.gw = opt_ip(j, "gw", path + ".gw");
    r.mtu = opt_int(j, "mtu", path + ".mtu", 0, 65535);
    r.advmss = opt_int(j, "advmss", path + ".advmss", 0, 65535);
    r.priority = opt_int(j, "priority", path + ".priority", 0, 0x7fffffff);
    r.table = opt_int(j, "table", path + ".table", 0, 0x7fffffff);
    r.scope = opt_int(j, "scope", path + ".scope", 0, 255);
    return r;
}

std::vector<base::Route> parse_routes(const json& ipam) {
    std::vector<base::Route> out;
    const json* routes = member(ipam, "routes");
    if (!routes) return out;
    expect_list(*routes, "ipam.routes");
    for (size_t i = 0; i < routes->size(); ++i)
        out.push_back(parse_route((*routes)[i], "ipam.routes[" + std::to_string(i) + "]"));
    return out;
}

std::chrono::milliseconds parse_lock_timeout(const json& ipam) {
    const json* v = member(ipam, "lockTimeout");
    if (!v) return Config{}.lock_timeout;
    if (!v->is_number()) bad("ipam.lockTimeout", "expected a number of seconds");
    double s = v->get<double>();
    if (!(s > 0) || s > 3600) bad("ipam.lockTimeout", "must be more than 0 and at most 3600 seconds");
    // Rounded up by hand rather than with std::ceil: this was the binary's only use of
    // libm, which then no longer has to be loaded by every plugin run.
    double ms = s * 1000;
    auto whole = static_cast<long long>(ms);
    return std::chrono::milliseconds(whole + (static_cast<double>(whole) < ms ? 1 : 0));
}

void parse_files(Config& c, const json& ipam) {
    if (auto d = opt_string(ipam, "dataDir", "ipam.dataDir"); d && !d->empty()) {
        if ((*d)[0] != '/') bad("ipam.dataDir", "must be an absolute path, got '" + *d + "'");
        c.data_dir = *d;
    }
    if (auto r = opt_string(ipam, "resolvConf", "ipam.resolvConf"); r && !r->empty()) c.resolv_conf = *r;
    if (const json* f = member(ipam, "fsync")) {
        if (!f->is_boolean()) bad("ipam.fsync", "expected true or false");
        c.fsync = f->get<bool>();
    }
}

}  // namespace

Config parse_config(const nlohmann::json& whole, const std::string& cni_version) {
    if (!whole.is_object()) bad("config", "expected an object");
    const json* ipam = member(whole, "ipam");
    if (!ipam) bad("ipam", "missing");
    if (!ipam->is_object()) bad("ipam", "expected an object");

    // Order matters: it fixes each set's index, hence its last_reserved_ip.<index> file.
    std::vector<SourcedSet> sets;
    runtime_sets(sets, whole);
    legacy_set(sets, *ipam);
    if (const json* ranges = member(*ipam, "ranges")) append_sets(sets, *ranges, "ipam.ranges");
    check_sets(sets, cni_version);

    Config c;
    for (auto& s : sets) c.ranges.push_back(std::move(s.set));
    c.routes = parse_routes(*ipam);
    parse_files(c, *ipam);
    c.lock_timeout = parse_lock_timeout(*ipam);
    return c;
}

}  // namespace ipam
