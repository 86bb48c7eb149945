#include "cluster/dra_slices.h"

#include <algorithm>
#include <cctype>
#include <cstdio>

#include "base/error.h"
#include "base/hash.h"

namespace cluster::dra {

using nlohmann::json;

namespace {

// Standard attributes (KEP-4381, KEP-6072) and Multus's (multus-cni PR #1492): a selector
// or a matchAttribute constraint written for another driver works on ours.
constexpr const char* kPciBusId = "resource.kubernetes.io/pciBusID";
constexpr const char* kPcieRoot = "resource.kubernetes.io/pcieRoot";
constexpr const char* kNumaNode = "resource.kubernetes.io/numaNode";
constexpr const char* kDeviceId = "k8s.cni.cncf.io/deviceID";
constexpr const char* kResourceName = "k8s.cni.cncf.io/resourceName";

// Largest count offered as a quantity: an IPv6 /64 has 2^64 addresses, int64 holds less.
constexpr unsigned __int128 kMaxCount = (unsigned __int128)1 << 62;

json text(const std::string& s) { return {{"string", s}}; }
json integer(long long v) { return {{"int", v}}; }

/// A Kubernetes quantity of whole units, as the API server prints it back.
std::string quantity(unsigned __int128 v) {
    if (v > kMaxCount) v = kMaxCount;
    return std::to_string(static_cast<unsigned long long>(v));
}

long long mbps(uint64_t bps) { return static_cast<long long>(bps / 1000000); }

void put_numa(json& attrs, std::optional<int> numa) {
    if (numa && *numa >= 0) attrs[kNumaNode] = integer(*numa);
}

/// Bandwidth a claim does not name costs it nothing (without a policy it would take all).
json bandwidth(long long free_mbps) {
    json c = {{"value", quantity(free_mbps > 0 ? free_mbps : 0)}};
    if (free_mbps > 0) c["requestPolicy"] = {{"default", "0"}, {"validRange", {{"min", "0"}}}};
    return c;
}

/// Exactly one per claim: one address from a range set, one link on a master.
json one_each(unsigned __int128 free) {
    return {{"value", quantity(free)}, {"requestPolicy", {{"default", "1"}, {"validRange", {{"min", "1"}, {"max", "1"}}}}}};
}

/// What is left of a shared link's capacity in each direction, in Mb/s: the capacity the
/// last admission counted against (it knows topology.linkCapacityMbps and the
/// overcommit), else the link speed x the overcommit; minus the ledger's commitments.
std::optional<std::pair<long long, long long>> free_bandwidth(const placement::NodeFacts& f, const std::string& ledger,
                                                              std::optional<long long> speed, double overcommit) {
    const placement::LedgerFacts* l = f.ledger_of(ledger);
    uint64_t capacity = 0;
    if (l && l->capacity && l->capacity->capacity_bps) {
        // What admission compares against: the capacity x the overcommit it was admitted with.
        capacity = static_cast<uint64_t>(static_cast<double>(l->capacity->capacity_bps) * l->capacity->overcommit);
    } else if (speed && *speed > 0) {
        capacity = static_cast<uint64_t>(static_cast<double>(*speed) * 1e6 * overcommit);
    } else {
        return std::nullopt;
    }
    // DRA claims' bookings are not subtracted: the scheduler subtracts their consumedCapacity.
    uint64_t eg = l ? l->egress_bps - l->claimed_egress_bps : 0, in = l ? l->ingress_bps - l->claimed_ingress_bps : 0;
    return std::pair{mbps(capacity > eg ? capacity - eg : 0), mbps(capacity > in ? capacity - in : 0)};
}

json vf_device(const placement::PfFacts& pf, size_t index, const placement::VfFacts& vf, const SliceOptions& o) {
    json attrs = {{"type", text("vf")}, {kPciBusId, text(vf.pci)}, {kDeviceId, text(vf.pci)}, {"pf", text(pf.pci)},
                  {"vfIndex", integer(static_cast<long long>(index))}};
    put_numa(attrs, vf.numa ? vf.numa : pf.numa);
    if (!pf.netdev.empty()) attrs["pfNetdev"] = text(pf.netdev);
    if (pf.speed_mbps) attrs["linkSpeedMbps"] = integer(*pf.speed_mbps);
    std::string resource = pf.resource_name;
    for (const auto& key : {pf.pci, pf.netdev})
        if (auto it = o.resource_names.find(key); !key.empty() && it != o.resource_names.end()) resource = it->second;
    if (!resource.empty()) attrs[kResourceName] = text(resource);
    if (o.kernel_driver)
        if (auto d = o.kernel_driver(vf.pci)) attrs["driver"] = text(*d);
    if (o.pcie_root)
        if (auto r = o.pcie_root(vf.pci)) attrs[kPcieRoot] = text(*r);
    return {{"name", device_name("vf", vf.pci)}, {"attributes", attrs}};
}

/// A shared link: its bandwidth (and, for a master, its attachments) consumed by many
/// claims at once (KEP-5075, allowMultipleAllocations).
json link_device(const std::string& name, json attrs, std::optional<std::pair<long long, long long>> free,
                 std::optional<unsigned __int128> attachments) {
    json caps = json::object();
    if (free) {
        caps["egressMbps"] = bandwidth(free->first);
        caps["ingressMbps"] = bandwidth(free->second);
    }
    if (attachments) caps["attachments"] = one_each(*attachments);
    attrs["type"] = text("link");
    return {{"name", name}, {"attributes", attrs}, {"capacity", caps}, {"allowMultipleAllocations", true}};
}

}  // namespace

std::string device_name(const std::string& prefix, const std::string& what) {
    std::string mapped = prefix + "-";
    bool exact = true;
    for (unsigned char c : what) {
        if (std::islower(c) || std::isdigit(c) || c == '-') {
            mapped += static_cast<char>(c);
        } else {
            mapped += std::isupper(c) ? static_cast<char>(std::tolower(c)) : '-';
            exact = exact && (c == ':' || c == '.');   // a PCI address maps one to one
        }
    }
    while (!mapped.empty() && mapped.back() == '-') {
        mapped.pop_back();
        exact = false;
    }
    if (exact && mapped.size() <= 63) return mapped;
    char hash[10];
    std::snprintf(hash, sizeof hash, "-%08x", base::fnv1a32(what));
    return mapped.substr(0, 63 - 9) + hash;
}

std::vector<json> devices(const placement::NodeFacts& f, const SliceOptions& o) {
    std::vector<json> out;
    for (const auto& pf : f.pfs)
        for (size_t i = 0; i < pf.vfs.size(); ++i)
            if (!pf.vfs[i].in_use && pf.usage_known) out.push_back(vf_device(pf, i, pf.vfs[i], o));
    for (const auto& pf : f.pfs) {
        if (pf.vfs.empty()) continue;
        json attrs = {{"pf", text(pf.pci)}, {kPciBusId, text(pf.pci)}};
        if (!pf.netdev.empty()) attrs["netdev"] = text(pf.netdev);
        if (pf.speed_mbps) attrs["linkSpeedMbps"] = integer(*pf.speed_mbps);
        put_numa(attrs, pf.numa);
        // The ledger names a PF by its PCI address.
        out.push_back(link_device(device_name("pf", pf.pci), attrs,
                                  free_bandwidth(f, pf.pci, pf.speed_mbps, o.bandwidth_overcommit), std::nullopt));
    }
    for (const auto& l : f.links) {
        if (!l.exists) continue;
        // A PF is offered above, a VF as itself: only other links here (a macvlan master).
        if (!l.pf.empty() && f.pf(l.pf) && f.pf(l.pf)->netdev == l.name) continue;
        if (!l.pci.empty() && (f.pf(l.pci) || f.vf(l.pci).second)) continue;
        json attrs = {{"netdev", text(l.name)}};
        if (l.speed_mbps) attrs["linkSpeedMbps"] = integer(*l.speed_mbps);
        if (!l.pf.empty()) attrs["pf"] = text(l.pf);
        put_numa(attrs, l.numa);
        std::optional<unsigned __int128> room;
        if (l.link_count) {
            long long max = o.max_attachments_per_master.value_or(1024);
            if (*l.link_count >= max) continue;   // no room: not offered at all
            room = static_cast<unsigned __int128>(max - *l.link_count);
        }
        out.push_back(link_device(device_name("link", l.name), attrs,
                                  free_bandwidth(f, l.name, l.speed_mbps, o.bandwidth_overcommit), room));
    }
    for (const auto& n : f.networks) {
        auto reserve = o.address_reserve.find(n.name);
        const unsigned __int128 keep = reserve == o.address_reserve.end() ? 0 : static_cast<unsigned __int128>(reserve->second);
        for (const auto& s : n.sets) {
            if (s.used >= s.size || s.size - s.used <= keep) continue;   // nothing a claim may take: not offered
            json attrs = {{"type", text("pool")}, {"network", text(n.name)}};
            if (s.range_set.size() <= kMaxAttributeValueLength) attrs["rangeSet"] = text(s.range_set);
            out.push_back({{"name", device_name("pool", n.name + "-" + s.range_set)},
                           {"attributes", attrs},
                           {"capacity", {{"addresses", one_each(s.size - s.used - keep)}}},
                           {"allowMultipleAllocations", true}});
        }
    }
    for (auto& d : out) validate_device(d);
    return out;
}

std::vector<json> slice_specs(const std::vector<json>& devices, const std::string& node, const std::string& driver,
                              long long generation) {
    size_t count = std::max<size_t>(1, (devices.size() + kMaxDevicesPerSlice - 1) / kMaxDevicesPerSlice);
    std::vector<json> out;
    for (size_t i = 0; i < count; ++i) {
        auto first = devices.begin() + static_cast<long>(std::min(devices.size(), i * kMaxDevicesPerSlice));
        auto last = devices.begin() + static_cast<long>(std::min(devices.size(), (i + 1) * kMaxDevicesPerSlice));
        out.push_back({{"driver", driver},
                       {"pool", {{"name", node}, {"generation", generation}, {"resourceSliceCount", static_cast<long long>(count)}}},
                       {"nodeName", node},
                       {"devices", json(std::vector<json>(first, last))}});
    }
    return out;
}

namespace {

bool dns_label(const std::string& s) {
    if (s.empty() || s.size() > 63 || s.front() == '-' || s.back() == '-') return false;
    return std::all_of(s.begin(), s.end(), [](unsigned char c) { return std::islower(c) || std::isdigit(c) || c == '-'; });
}

bool dns_subdomain(const std::string& s) {
    if (s.empty() || s.size() > 253) return false;
    size_t start = 0;
    while (true) {
        size_t dot = s.find('.', start);
        if (!dns_label(s.substr(start, dot - start))) return false;
        if (dot == std::string::npos) return true;
        start = dot + 1;
    }
}

bool c_identifier(const std::string& s) {
    if (s.empty() || s.size() > 32 || std::isdigit(static_cast<unsigned char>(s[0]))) return false;
    return std::all_of(s.begin(), s.end(), [](unsigned char c) { return std::isalnum(c) || c == '_'; });
}

/// QualifiedName: an identifier, or <DNS subdomain of at most 63>/<identifier>.
bool qualified_name(const std::string& s) {
    size_t slash = s.find('/');
    if (slash == std::string::npos) return c_identifier(s);
    std::string domain = s.substr(0, slash);
    return domain.size() <= 63 && dns_subdomain(domain) && c_identifier(s.substr(slash + 1));
}

[[noreturn]] void refuse(const json& d, const std::string& why) {
    throw base::Error("ResourceSlice device '" + d.value("name", std::string()) + "': " + why);
}

}  // namespace

void validate_device(const json& d) {
    if (!d.contains("name") || !d["name"].is_string() || !dns_label(d["name"].get<std::string>()))
        refuse(d, "the name is no DNS label");
    const json empty = json::object();
    const json& attrs = d.contains("attributes") ? d["attributes"] : empty;
    const json& caps = d.contains("capacity") ? d["capacity"] : empty;
    if (attrs.size() + caps.size() > kMaxAttributesAndCapacities)
        refuse(d, "the total number of attributes and capacities must not exceed 32");
    for (const auto& [name, v] : attrs.items()) {
        if (!qualified_name(name)) refuse(d, "attribute name '" + name + "' is no qualified name");
        int set = 0;
        for (const char* k : {"int", "bool", "string", "version"}) set += v.contains(k);
        if (set != 1 || v.size() != 1) refuse(d, "attribute '" + name + "': exactly one value must be specified");
        if (v.contains("string") && v["string"].get<std::string>().size() > kMaxAttributeValueLength)
            refuse(d, "attribute '" + name + "': longer than 64 characters");
    }
    for (const auto& [name, c] : caps.items()) {
        if (!qualified_name(name)) refuse(d, "capacity name '" + name + "' is no qualified name");
        if (!c.contains("value")) refuse(d, "capacity '" + name + "' has no value");
        if (c.contains("requestPolicy") && !d.value("allowMultipleAllocations", false))
            refuse(d, "capacity '" + name + "': a requestPolicy needs allowMultipleAllocations");
    }
}

}  // namespace cluster::dra
