#include "placement/node_facts.h"

#include <algorithm>
#include <set>

#include "placement/error.h"

namespace placement {

namespace {

using json = nlohmann::json;

// ---- writing ----

json opt_int(const std::optional<int>& v) { return v ? json(*v) : json(nullptr); }
json opt_ll(const std::optional<long long>& v) { return v ? json(*v) : json(nullptr); }

/// Counts up to 2^64-1 as numbers; a bigger IPv6 pool as a decimal string.
json count(unsigned __int128 v) {
    if (v <= static_cast<unsigned __int128>(UINT64_MAX)) return json(static_cast<uint64_t>(v));
    std::string s;
    while (v) {
        s.insert(s.begin(), char('0' + int(v % 10)));
        v /= 10;
    }
    return s;
}

json entry_json(const ledger::Entry& e) {
    return {{"network", e.network}, {"containerID", e.container_id}, {"ifname", e.ifname}, {"pod", e.pod},
            {"egressBps", e.egress_bps}, {"ingressBps", e.ingress_bps}};
}

// ---- reading, strictly ----

[[noreturn]] void bad(const std::string& path, const std::string& why) {
    throw Error(Error::Kind::Decoding, "facts document: " + path + ": " + why);
}

void only(const json& j, const std::string& path, std::initializer_list<const char*> keys) {
    if (!j.is_object()) bad(path.empty() ? "(top)" : path, "expected an object");
    std::set<std::string> known(keys.begin(), keys.end());
    for (auto it = j.begin(); it != j.end(); ++it)
        if (!known.count(it.key())) bad(path + (path.empty() ? "" : ".") + it.key(), "unknown member");
}

const json& member(const json& j, const std::string& path, const char* key) {
    auto it = j.find(key);
    if (it == j.end()) bad(path + (path.empty() ? "" : ".") + key, "missing");
    return *it;
}

std::string at(const std::string& path, const char* key) { return path + (path.empty() ? "" : ".") + key; }

std::string str(const json& j, const std::string& path, const char* key) {
    auto& v = member(j, path, key);
    if (!v.is_string()) bad(at(path, key), "expected a string");
    return v.get<std::string>();
}

long long integer(const json& j, const std::string& path, const char* key, long long lo, long long hi) {
    auto& v = member(j, path, key);
    if (!v.is_number_integer()) bad(at(path, key), "expected an integer");
    long long n = v.is_number_unsigned() && v.get<uint64_t>() > uint64_t(INT64_MAX) ? hi + 1 : v.get<long long>();
    if (n < lo || n > hi) bad(at(path, key), "out of range " + std::to_string(lo) + ".." + std::to_string(hi));
    return n;
}

uint64_t u64(const json& j, const std::string& path, const char* key) {
    auto& v = member(j, path, key);
    if (!v.is_number_unsigned() && !(v.is_number_integer() && v.get<long long>() >= 0))
        bad(at(path, key), "expected a non-negative integer");
    return v.get<uint64_t>();
}

template <class T>
std::optional<T> nullable(const json& j, const std::string& path, const char* key, long long lo, long long hi) {
    auto& v = member(j, path, key);
    if (v.is_null()) return std::nullopt;
    return static_cast<T>(integer(j, path, key, lo, hi));
}

bool boolean(const json& j, const std::string& path, const char* key) {
    auto& v = member(j, path, key);
    if (!v.is_boolean()) bad(at(path, key), "expected true or false");
    return v.get<bool>();
}

unsigned __int128 big(const json& j, const std::string& path, const char* key) {
    auto& v = member(j, path, key);
    if (v.is_number_unsigned() || (v.is_number_integer() && v.get<long long>() >= 0)) return v.get<uint64_t>();
    if (!v.is_string() || v.get<std::string>().empty() || v.get<std::string>().size() > 39)
        bad(at(path, key), "expected a count");
    unsigned __int128 n = 0;
    for (char ch : v.get<std::string>()) {
        if (ch < '0' || ch > '9') bad(at(path, key), "expected a count");
        n = n * 10 + unsigned(ch - '0');
    }
    return n;
}

const json& array(const json& j, const std::string& path, const char* key) {
    auto& v = member(j, path, key);
    if (!v.is_array()) bad(at(path, key), "expected an array");
    return v;
}

std::string idx(const std::string& path, const char* key, size_t i) { return at(path, key) + "[" + std::to_string(i) + "]"; }

constexpr long long kMaxNuma = 1023;

}  // namespace

const PfFacts* NodeFacts::pf(const std::string& pci) const {
    for (auto& p : pfs)
        if (p.pci == pci) return &p;
    return nullptr;
}

std::pair<const PfFacts*, const VfFacts*> NodeFacts::vf(const std::string& pci) const {
    for (auto& p : pfs)
        for (auto& v : p.vfs)
            if (v.pci == pci) return {&p, &v};
    return {nullptr, nullptr};
}

const LinkFacts* NodeFacts::link(const std::string& name) const {
    for (auto& l : links)
        if (l.name == name) return &l;
    return nullptr;
}

const LedgerFacts* NodeFacts::ledger_of(const std::string& link) const {
    for (auto& l : ledgers)
        if (l.link == link) return &l;
    return nullptr;
}

const NetworkFacts* NodeFacts::network(const std::string& name) const {
    for (auto& n : networks)
        if (n.name == name) return &n;
    return nullptr;
}

json to_json(const NodeFacts& f) {
    json numa = json::array(), pfs = json::array(), links = json::array(), ledgers = json::array(),
         networks = json::array(), attachments = json::array();
    for (auto& n : f.numa) numa.push_back({{"id", n.id}, {"cpus", n.cpus}});
    for (auto& p : f.pfs) {
        // Compact: 8 PFs of 64 VFs must leave the Node room for other annotations.
        json vfs = json::array(), numa = json::object(), in_use = json::object();
        for (auto& v : p.vfs) {
            vfs.push_back(v.pci);
            if (v.numa != p.numa) numa[v.pci] = opt_int(v.numa);
            if (v.in_use) in_use[v.pci] = v.pod_uid;
        }
        long long used = std::count_if(p.vfs.begin(), p.vfs.end(), [](auto& v) { return v.in_use; });
        pfs.push_back({{"pci", p.pci}, {"netdev", p.netdev}, {"numaNode", opt_int(p.numa)}, {"speedMbps", opt_ll(p.speed_mbps)},
                       {"resourceName", p.resource_name}, {"totalVFs", p.total_vfs}, {"usageKnown", p.usage_known},
                       {"configuredVFs", static_cast<long long>(p.vfs.size())}, {"inUseVFs", used},
                       {"freeVFs", static_cast<long long>(p.vfs.size()) - used}, {"vfs", vfs}, {"vfNumaNodes", numa},
                       {"vfsInUse", in_use}});
    }
    for (auto& l : f.links)
        links.push_back({{"name", l.name}, {"exists", l.exists}, {"pci", l.pci}, {"pf", l.pf}, {"hasDevice", l.has_device},
                         {"numaNode", opt_int(l.numa)}, {"speedMbps", opt_ll(l.speed_mbps)},
                         {"linksKind", l.links_kind}, {"linkCount", opt_ll(l.link_count)}, {"linkSample", l.link_sample}});
    for (auto& l : f.ledgers) {
        json entries = json::array();
        for (auto& x : l.sample) entries.push_back(entry_json(x));
        json cap = nullptr;
        if (l.capacity)
            cap = {{"bps", l.capacity->capacity_bps}, {"overcommit", l.capacity->overcommit},
                   {"source", l.capacity->capacity_source}, {"network", l.capacity->network}};
        ledgers.push_back({{"link", l.link}, {"capacity", cap}, {"committedEgressBps", l.egress_bps},
                           {"committedIngressBps", l.ingress_bps}, {"entryCount", l.count}, {"entries", entries}});
    }
    for (auto& n : f.networks) {
        json sets = json::array();
        for (auto& s : n.sets)
            sets.push_back({{"rangeSet", s.range_set}, {"size", count(s.size)}, {"used", count(s.used)},
                            {"free", count(s.size > s.used ? s.size - s.used : 0)}});
        networks.push_back({{"name", n.name}, {"rangeSets", sets}});
    }
    for (auto& a : f.attachments)
        attachments.push_back({{"network", a.network}, {"kind", a.kind}, {"link", a.link}, {"pods", a.pods}});
    return {{"version", f.version}, {"node", f.node},       {"takenAt", f.taken_at},   {"numaNodes", numa},
            {"pfs", pfs},           {"links", links},       {"ledgers", ledgers},      {"networks", networks},
            {"attachments", attachments}};
}

NodeFacts facts_from_json(const json& j) {
    only(j, "", {"version", "node", "takenAt", "numaNodes", "pfs", "links", "ledgers", "networks", "attachments"});
    NodeFacts f;
    f.version = static_cast<int>(integer(j, "", "version", 0, 1000000));
    if (f.version != kFactsVersion)
        bad("version", "version " + std::to_string(f.version) + " is not " + std::to_string(kFactsVersion) +
                           " (written by another topocni release)");
    f.node = str(j, "", "node");
    f.taken_at = str(j, "", "takenAt");
    auto& numa = array(j, "", "numaNodes");
    for (size_t i = 0; i < numa.size(); ++i) {
        std::string p = idx("", "numaNodes", i);
        only(numa[i], p, {"id", "cpus"});
        f.numa.push_back({static_cast<int>(integer(numa[i], p, "id", 0, kMaxNuma)), str(numa[i], p, "cpus")});
    }
    auto& pfs = array(j, "", "pfs");
    for (size_t i = 0; i < pfs.size(); ++i) {
        std::string p = idx("", "pfs", i);
        const json& x = pfs[i];
        only(x, p, {"pci", "netdev", "numaNode", "speedMbps", "resourceName", "totalVFs", "usageKnown", "configuredVFs", "inUseVFs",
                    "freeVFs", "vfs", "vfNumaNodes", "vfsInUse"});
        PfFacts pf;
        pf.pci = str(x, p, "pci");
        pf.netdev = str(x, p, "netdev");
        pf.numa = nullable<int>(x, p, "numaNode", -1, kMaxNuma);
        pf.speed_mbps = nullable<long long>(x, p, "speedMbps", 0, 100'000'000);
        pf.resource_name = str(x, p, "resourceName");
        pf.total_vfs = integer(x, p, "totalVFs", 0, 65535);
        pf.usage_known = boolean(x, p, "usageKnown");
        auto& vfs = array(x, p, "vfs");
        auto& numa_of = member(x, p, "vfNumaNodes");
        auto& in_use = member(x, p, "vfsInUse");
        if (!numa_of.is_object()) bad(p + ".vfNumaNodes", "expected an object");
        if (!in_use.is_object()) bad(p + ".vfsInUse", "expected an object");
        std::set<std::string> listed;
        for (size_t k = 0; k < vfs.size(); ++k) {
            if (!vfs[k].is_string()) bad(idx(p, "vfs", k), "expected a string");
            VfFacts v{vfs[k].get<std::string>(), pf.numa, false, ""};
            if (!listed.insert(v.pci).second) bad(idx(p, "vfs", k), "listed twice");
            if (numa_of.contains(v.pci)) v.numa = nullable<int>(numa_of, p + ".vfNumaNodes", v.pci.c_str(), -1, kMaxNuma);
            if (in_use.contains(v.pci)) {
                v.in_use = true;
                v.pod_uid = str(in_use, p + ".vfsInUse", v.pci.c_str());
            }
            pf.vfs.push_back(std::move(v));
        }
        for (auto it = numa_of.begin(); it != numa_of.end(); ++it)
            if (!listed.count(it.key())) bad(p + ".vfNumaNodes." + it.key(), "not among vfs");
        for (auto it = in_use.begin(); it != in_use.end(); ++it)
            if (!listed.count(it.key())) bad(p + ".vfsInUse." + it.key(), "not among vfs");
        long long used = std::count_if(pf.vfs.begin(), pf.vfs.end(), [](auto& v) { return v.in_use; });
        if (integer(x, p, "configuredVFs", 0, 65535) != static_cast<long long>(pf.vfs.size()))
            bad(p + ".configuredVFs", "is not the number of vfs");
        if (integer(x, p, "inUseVFs", 0, 65535) != used) bad(p + ".inUseVFs", "is not the number of vfs in use");
        if (integer(x, p, "freeVFs", 0, 65535) != static_cast<long long>(pf.vfs.size()) - used)
            bad(p + ".freeVFs", "is not the number of vfs not in use");
        f.pfs.push_back(std::move(pf));
    }
    auto& links = array(j, "", "links");
    for (size_t i = 0; i < links.size(); ++i) {
        std::string p = idx("", "links", i);
        const json& x = links[i];
        only(x, p, {"name", "exists", "pci", "pf", "hasDevice", "numaNode", "speedMbps", "linksKind", "linkCount",
                    "linkSample"});
        LinkFacts l;
        l.name = str(x, p, "name");
        l.exists = boolean(x, p, "exists");
        l.pci = str(x, p, "pci");
        l.pf = str(x, p, "pf");
        l.has_device = boolean(x, p, "hasDevice");
        l.numa = nullable<int>(x, p, "numaNode", -1, kMaxNuma);
        l.speed_mbps = nullable<long long>(x, p, "speedMbps", 0, 100'000'000);
        l.links_kind = str(x, p, "linksKind");
        l.link_count = nullable<long long>(x, p, "linkCount", 0, 1'000'000);
        auto& sample = array(x, p, "linkSample");
        if (sample.size() > kSample) bad(p + ".linkSample", "more than " + std::to_string(kSample) + " entries");
        for (size_t k = 0; k < sample.size(); ++k) {
            if (!sample[k].is_string()) bad(idx(p, "linkSample", k), "expected a string");
            l.link_sample.push_back(sample[k].get<std::string>());
        }
        f.links.push_back(std::move(l));
    }
    auto& ledgers = array(j, "", "ledgers");
    for (size_t i = 0; i < ledgers.size(); ++i) {
        std::string p = idx("", "ledgers", i);
        const json& x = ledgers[i];
        only(x, p, {"link", "capacity", "committedEgressBps", "committedIngressBps", "entryCount", "entries"});
        LedgerFacts l;
        l.link = str(x, p, "link");
        auto& cap = member(x, p, "capacity");
        if (!cap.is_null()) {
            std::string q = p + ".capacity";
            only(cap, q, {"bps", "overcommit", "source", "network"});
            ledger::Entry c;
            c.capacity_bps = u64(cap, q, "bps");
            auto& oc = member(cap, q, "overcommit");
            if (!oc.is_number() || oc.get<double>() <= 0 || oc.get<double>() > 1000) bad(q + ".overcommit", "expected a number in (0, 1000]");
            c.overcommit = oc.get<double>();
            c.capacity_source = str(cap, q, "source");
            c.network = str(cap, q, "network");
            l.capacity = c;
        }
        l.egress_bps = u64(x, p, "committedEgressBps");
        l.ingress_bps = u64(x, p, "committedIngressBps");
        l.count = integer(x, p, "entryCount", 0, 1'000'000);
        auto& entries = array(x, p, "entries");
        if (entries.size() > kSample || static_cast<long long>(entries.size()) > l.count)
            bad(p + ".entries", "more than entryCount or " + std::to_string(kSample));
        for (size_t k = 0; k < entries.size(); ++k) {
            std::string q = idx(p, "entries", k);
            only(entries[k], q, {"network", "containerID", "ifname", "pod", "egressBps", "ingressBps"});
            ledger::Entry en;
            en.network = str(entries[k], q, "network");
            en.container_id = str(entries[k], q, "containerID");
            en.ifname = str(entries[k], q, "ifname");
            en.pod = str(entries[k], q, "pod");
            en.egress_bps = u64(entries[k], q, "egressBps");
            en.ingress_bps = u64(entries[k], q, "ingressBps");
            l.sample.push_back(std::move(en));
        }
        f.ledgers.push_back(std::move(l));
    }
    auto& networks = array(j, "", "networks");
    for (size_t i = 0; i < networks.size(); ++i) {
        std::string p = idx("", "networks", i);
        only(networks[i], p, {"name", "rangeSets"});
        NetworkFacts n;
        n.name = str(networks[i], p, "name");
        auto& sets = array(networks[i], p, "rangeSets");
        for (size_t k = 0; k < sets.size(); ++k) {
            std::string q = idx(p, "rangeSets", k);
            only(sets[k], q, {"rangeSet", "size", "used", "free"});
            RangeSetFacts s{str(sets[k], q, "rangeSet"), big(sets[k], q, "size"), big(sets[k], q, "used"), false};
            if (big(sets[k], q, "free") != (s.size > s.used ? s.size - s.used : 0)) bad(q + ".free", "is not size - used");
            n.sets.push_back(std::move(s));
        }
        f.networks.push_back(std::move(n));
    }
    auto& atts = array(j, "", "attachments");
    for (size_t i = 0; i < atts.size(); ++i) {
        std::string p = idx("", "attachments", i);
        only(atts[i], p, {"network", "kind", "link", "pods"});
        AttachmentFacts a{str(atts[i], p, "network"), str(atts[i], p, "kind"), str(atts[i], p, "link"), {}};
        auto& pods = array(atts[i], p, "pods");
        for (size_t k = 0; k < pods.size(); ++k) {
            if (!pods[k].is_string()) bad(idx(p, "pods", k), "expected a string");
            a.pods.push_back(pods[k].get<std::string>());
        }
        f.attachments.push_back(std::move(a));
    }
    return f;
}

std::string facts_content(const NodeFacts& f) {
    json j = to_json(f);
    j.erase("takenAt");
    return j.dump();
}

}  // namespace placement
