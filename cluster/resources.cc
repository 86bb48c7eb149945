#include "cluster/resources.h"

#include <algorithm>
#include <climits>
#include <cmath>
#include <cstdio>

#include "base/hash.h"
#include "cluster/parsed.h"
#include "cni/error.h"
#include "placement/evaluate.h"
#include "placement/facts.h"
#include "ipam/usage.h"

namespace cluster {

namespace {

using json = nlohmann::json;

bool alnum(char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9'); }
bool name_char(char c) { return alnum(c) || c == '-' || c == '_' || c == '.'; }

/// Kubernetes' qualified-name part: alphanumerics, '-', '_', '.', starting and ending
/// alphanumeric, at most `max` characters.
bool qualified(const std::string& s, size_t max) {
    return !s.empty() && s.size() <= max && alnum(s.front()) && alnum(s.back()) &&
           std::all_of(s.begin(), s.end(), name_char);
}

/// `s` as a name part of at most `max` characters: itself when it is one, else its valid
/// characters cut short and 8 hex digits of its hash, so that two links never share one.
std::string part(const std::string& s, size_t max) {
    if (qualified(s, max)) return s;
    std::string cut;
    for (char c : s) cut += name_char(c) ? c : '_';
    while (!cut.empty() && !alnum(cut.front())) cut.erase(0, 1);
    cut = cut.substr(0, max - 9);
    while (!cut.empty() && !alnum(cut.back())) cut.pop_back();
    char hash[9];
    std::snprintf(hash, sizeof hash, "%08x", base::fnv1a32(s));
    return (cut.empty() ? "x" : cut) + "-" + hash;
}

long long clamp_count(unsigned __int128 v) { return v > LLONG_MAX ? LLONG_MAX : static_cast<long long>(v); }

void keep_least(Resources& r, const std::string& name, long long v) {
    auto [it, fresh] = r.emplace(name, v);
    if (!fresh) it->second = std::min(it->second, v);
}

bool takes_bandwidth_capability(const conf::NetConf& c) {
    auto caps = c.raw.find("capabilities");
    if (caps == c.raw.end() || !caps->is_object()) return false;
    auto bw = caps->find("bandwidth");
    return bw != caps->end() && *bw == json(true);
}

/// The NAD's nodeSelector (if any) meets the node's labels: it can land there.
bool lands_on(const PodNetwork::Parsed& p, const placement::NodeLabels& labels) {
    return !p.conf.placement || !p.conf.placement->node_selector ||
           placement::evaluate_selector(*p.conf.placement->node_selector, labels).pass;
}

}  // namespace

LinkId link_of(const PodNetwork& n) {
    if (!n.parsed) return {"", "not a topocni network"};
    const auto& p = *n.parsed;
    if (wants_vf(p, n)) {
        if (n.resource_name.empty()) return {"", "the NAD names no " + std::string(kResourceNameAnnotation)};
        return {"sriov." + n.resource_name, ""};
    }
    if (p.device.kind == placement::ScheduledDevice::Kind::Master) {
        if (p.device.master_in_pod) return {"", "the master is in the pod (linkInContainer)"};
        if (!p.device.master) return {"", "the master is the node's default-route interface, known only at ADD"};
        return {"macvlan." + *p.device.master, ""};
    }
    return {"", "a " + p.kind_name + " attachment shares no link"};
}

std::string bandwidth_resource(const std::string& link_id, bool egress) {
    std::string id = link_id;
    std::replace(id.begin(), id.end(), '/', '_');
    return std::string(kBandwidthDomain) + "/" + part(id, 63 - 8) + (egress ? ".egress" : ".ingress");
}

std::string address_resource(const std::string& network) { return std::string(kAddressesDomain) + "/" + part(network, 63); }

std::string pointer_token(const std::string& name) {
    std::string out;
    for (char c : name) out += c == '~' ? "~0" : c == '/' ? "~1" : std::string(1, c);
    return out;
}

bool is_topocni_resource(const std::string& name) {
    auto slash = name.find('/');
    if (slash == std::string::npos) return false;
    auto domain = name.substr(0, slash);
    return domain == kBandwidthDomain || domain == kAddressesDomain;
}

long long marker_capacity(const std::string& pods) {
    auto n = parse_quantity(pods);
    if (!n || *n < 1 || *n > 1e9 || *n != std::floor(*n)) return 110;
    return static_cast<long long>(*n);
}

bool valid_resource_name(const std::string& name, std::string* why) {
    auto say = [&](const std::string& w) {
        if (why) *why = w;
        return false;
    };
    auto slash = name.find('/');
    if (slash == std::string::npos) return say("an extended resource name has a domain prefix and '/'");
    std::string prefix = name.substr(0, slash), rest = name.substr(slash + 1);
    if (prefix.empty() || prefix.size() > 253) return say("the prefix is empty or longer than 253 characters");
    size_t start = 0;
    while (true) {   // DNS-1123 subdomain: dot-separated labels of [a-z0-9-], alphanumeric at both ends
        size_t dot = prefix.find('.', start);
        std::string label = prefix.substr(start, dot == std::string::npos ? std::string::npos : dot - start);
        bool ok = !label.empty() && label.size() <= 63 && label.front() != '-' && label.back() != '-' &&
                  std::all_of(label.begin(), label.end(),
                              [](char c) { return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-'; });
        if (!ok) return say("the prefix '" + prefix + "' is no lower-case DNS subdomain");
        if (dot == std::string::npos) break;
        start = dot + 1;
    }
    if (prefix == "kubernetes.io" || (prefix.size() > 14 && prefix.compare(prefix.size() - 14, 14, ".kubernetes.io") == 0))
        return say("the kubernetes.io domain is Kubernetes' own");
    if (prefix.rfind("requests.", 0) == 0) return say("the prefix 'requests.' is reserved for quotas");
    if (!qualified(rest, 63)) return say("'" + rest + "' is no qualified name of at most 63 characters");
    return true;
}

std::optional<double> parse_quantity(const std::string& s) {
    size_t i = 0;
    while (i < s.size() && (std::isdigit(static_cast<unsigned char>(s[i])) || s[i] == '.')) ++i;
    std::string number = s.substr(0, i), suffix = s.substr(i);
    if (number.empty() || number == "." || std::count(number.begin(), number.end(), '.') > 1) return std::nullopt;
    double v = std::strtod(number.c_str(), nullptr);
    static const std::map<std::string, double> kSuffix = {
        {"", 1},         {"m", 1e-3},        {"k", 1e3},          {"M", 1e6},          {"G", 1e9},
        {"T", 1e12},     {"P", 1e15},        {"E", 1e18},         {"Ki", 1024.0},      {"Mi", 1048576.0},
        {"Gi", 1073741824.0}, {"Ti", 1099511627776.0}, {"Pi", 1125899906842624.0}, {"Ei", 1152921504606846976.0}};
    if (auto it = kSuffix.find(suffix); it != kSuffix.end()) return v * it->second;
    if (suffix.size() >= 2 && (suffix[0] == 'e' || suffix[0] == 'E')) {   // decimal exponent: "1e6"
        size_t j = 1;
        if (suffix[j] == '+' || suffix[j] == '-') ++j;
        if (j < suffix.size() && std::all_of(suffix.begin() + static_cast<long>(j), suffix.end(),
                                             [](char c) { return std::isdigit(static_cast<unsigned char>(c)); }) &&
            suffix.size() - j <= 3)
            return v * std::pow(10.0, std::atoi(suffix.c_str() + 1));
    }
    return std::nullopt;
}

Needs needs_of(const PodNetwork& n, const std::map<std::string, std::string>& annotations) {
    Needs out;
    if (!n.parsed) return out;
    const auto& p = *n.parsed;
    double egress = 0, ingress = 0;
    bool from_pod = false;
    if (takes_bandwidth_capability(p.conf)) {
        for (auto [key, rate] : {std::pair{"kubernetes.io/egress-bandwidth", &egress}, {"kubernetes.io/ingress-bandwidth", &ingress}})
            if (auto it = annotations.find(key); it != annotations.end()) {
                auto q = parse_quantity(it->second);
                if (!q) throw cni::Error(cni::kInvalidConfig, "annotation " + std::string(key) + ": '" + it->second + "' is no quantity");
                *rate = *q;
                from_pod = true;
            }
    }
    if (!from_pod && p.conf.bandwidth) {
        egress = p.conf.bandwidth->egress ? double(p.conf.bandwidth->egress->rate_bps) : 0;
        ingress = p.conf.bandwidth->ingress ? double(p.conf.bandwidth->ingress->rate_bps) : 0;
    }
    if (egress > 0 || ingress > 0) {
        LinkId link = link_of(n);
        if (link.id.empty()) {
            out.notes.push_back(n.key() + ": bandwidth not requested (" + link.why + "); the ledger still admits it at ADD");
        } else {
            // Rounded up: the scheduler never lets through what ADD's ledger, counting bits, refuses.
            if (egress > 0) out.resources[bandwidth_resource(link.id, true)] += static_cast<long long>(std::ceil(egress / 1e6));
            if (ingress > 0) out.resources[bandwidth_resource(link.id, false)] += static_cast<long long>(std::ceil(ingress / 1e6));
        }
    }
    if (p.pool) out.resources[address_resource(p.conf.name)] += 1;
    return out;
}

Resources capacities(const std::vector<PodNetwork>& nads, const placement::NodeFacts& f, const std::map<std::string, std::string>& labels) {
    Resources out;
    const auto reserves = address_reserves(nads, labels);
    placement::NodeLabels node_labels{labels, "the Node object", f.node, "the Node object"};
    for (auto& n : nads) {
        if (!n.parsed || !n.error.empty()) continue;
        const auto& p = *n.parsed;
        if (!lands_on(p, node_labels)) continue;
        const conf::Topology* t = p.conf.placement && p.conf.placement->topology ? &*p.conf.placement->topology : nullptr;
        LinkId link = link_of(n);
        if (!link.id.empty() && (p.conf.bandwidth || takes_bandwidth_capability(p.conf))) {
            std::optional<double> bps;
            if (p.device.kind == placement::ScheduledDevice::Kind::Master) {
                if (auto* l = f.link(*p.device.master); l && l->exists) bps = placement::link_capacity(t, f, master_dev(*p.device.master)).bps;
            } else {
                for (size_t i : pool_pfs(f, n.resource_name)) {
                    auto& pf = f.pfs[i];
                    if (pf.vfs.empty()) continue;
                    if (auto c = placement::link_capacity(t, f, vf_device(pf.vfs.front().pci)).bps) bps = bps.value_or(0) + *c;
                }
            }
            if (bps) {
                double overcommit = t ? t->bandwidth_overcommit : 1.0;
                auto mbps = static_cast<long long>(std::floor(*bps * overcommit / 1e6 + 1e-9));
                keep_least(out, bandwidth_resource(link.id, true), mbps);
                keep_least(out, bandwidth_resource(link.id, false), mbps);
            }
        }
        if (p.pool) {
            std::optional<unsigned __int128> least;
            for (auto& u : ipam::pool_usage(*p.pool, p.conf.name)) least = least ? std::min(*least, u.size) : u.size;
            // Every pod of the network requests one address: the pods the pool can take are
            // its size less the network's reserve, as the DRA slices publish it.
            auto r = reserves.find(p.conf.name);
            const unsigned __int128 reserve = r == reserves.end() ? 0 : static_cast<unsigned __int128>(r->second);
            if (least) keep_least(out, address_resource(p.conf.name), clamp_count(*least > reserve ? *least - reserve : 0));
        }
    }
    return out;
}

std::map<std::string, long long> address_reserves(const std::vector<PodNetwork>& nads,
                                                  const std::map<std::string, std::string>& labels) {
    std::map<std::string, long long> out;
    placement::NodeLabels node_labels{labels, "the Node object", "", "the Node object"};
    for (auto& n : nads) {
        if (!n.parsed || !n.error.empty()) continue;
        const auto& p = *n.parsed;
        if (!p.pool || !lands_on(p, node_labels)) continue;
        const auto& pl = p.conf.placement;
        if (!pl || !pl->topology || !pl->topology->min_free_addresses || *pl->topology->min_free_addresses <= 0) continue;
        auto& r = out[p.conf.name];
        r = std::max(r, *pl->topology->min_free_addresses);
    }
    return out;
}

std::vector<placement::NetworkFacts> unused_pools(const std::vector<PodNetwork>& nads, const placement::NodeFacts& f,
                                                  const std::map<std::string, std::string>& labels) {
    std::vector<placement::NetworkFacts> out;
    placement::NodeLabels node_labels{labels, "the Node object", f.node, "the Node object"};
    for (auto& n : nads) {
        if (!n.parsed || !n.error.empty() || !n.parsed->pool) continue;
        const auto& p = *n.parsed;
        if (f.network(p.conf.name) || std::any_of(out.begin(), out.end(), [&](auto& x) { return x.name == p.conf.name; }))
            continue;
        if (!lands_on(p, node_labels)) continue;
        placement::NetworkFacts net{p.conf.name, {}};
        // The store as ADD will find it: reservations another plugin or a crash left count.
        for (auto& u : ipam::pool_usage(*p.pool, p.conf.name)) net.sets.push_back({u.range_set, u.size, u.held.size(), false});
        out.push_back(std::move(net));
    }
    return out;
}

std::vector<std::string> masters_of(const std::vector<PodNetwork>& nads) {
    std::vector<std::string> out;
    for (auto& n : nads)
        if (n.parsed && n.parsed->device.master && !n.parsed->device.master_in_pod &&
            std::find(out.begin(), out.end(), *n.parsed->device.master) == out.end())
            out.push_back(*n.parsed->device.master);
    return out;
}

}  // namespace cluster
