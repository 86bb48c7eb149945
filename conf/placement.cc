#include "conf/placement.h"

#include <cerrno>
#include <cstdlib>

#include "conf/fields.h"
#include "conf/known_keys.h"
#include "conf/netconf.h"

namespace conf {

namespace {

bool alnum(char ch) { return (ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') || (ch >= '0' && ch <= '9'); }

/// apimachinery's qualified-name part and label-value rule:
/// ([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9], at most 63 characters.
std::string name_problem(const std::string& s, bool empty_ok) {
    if (s.empty()) return empty_ok ? "" : "must not be empty";
    if (s.size() > 63) return "must be at most 63 characters";
    if (!alnum(s.front()) || !alnum(s.back())) return "must begin and end with a letter or digit";
    for (char ch : s)
        if (!alnum(ch) && ch != '-' && ch != '_' && ch != '.')
            return "may contain only letters, digits, '-', '_' and '.'";
    return "";
}

/// DNS-1123 subdomain: lower-case alphanumerics, '-' and '.', at most 253 characters.
std::string subdomain_problem(const std::string& s) {
    if (s.empty() || s.size() > 253) return "must be 1 to 253 characters";
    size_t start = 0;
    for (;;) {
        size_t dot = s.find('.', start);
        std::string part = s.substr(start, dot == std::string::npos ? std::string::npos : dot - start);
        if (part.empty()) return "has an empty DNS label";
        for (char ch : part)
            if (!((ch >= 'a' && ch <= 'z') || (ch >= '0' && ch <= '9') || ch == '-'))
                return "may contain only lower-case letters, digits, '-' and '.'";
        if (part.front() == '-' || part.back() == '-') return "has a DNS label that begins or ends with '-'";
        if (dot == std::string::npos) break;
        start = dot + 1;
    }
    return "";
}

void check_label_key(const std::string& key, const std::string& path) {
    auto slash = key.find('/');
    if (slash != std::string::npos) {
        if (auto why = subdomain_problem(key.substr(0, slash)); !why.empty())
            bad(path, "label key '" + key + "': prefix " + why);
        if (auto why = name_problem(key.substr(slash + 1), false); !why.empty())
            bad(path, "label key '" + key + "': name " + why);
    } else if (auto why = name_problem(key, false); !why.empty()) {
        bad(path, "label key '" + key + "' " + why);
    }
}

void check_label_value(const std::string& value, const std::string& path) {
    if (auto why = name_problem(value, true); !why.empty()) bad(path, "label value '" + value + "' " + why);
}

std::string string_value(const json& v, const std::string& path) {
    if (!v.is_string()) bad(path, "expected a string, got " + std::string(v.type_name()));
    return v.get<std::string>();
}

/// A label map ({"key": "value"}), each pair becoming `key In [value]`.
void parse_label_map(const json& j, const std::string& path, LabelSelector& out) {
    for (auto it = j.begin(); it != j.end(); ++it) {
        std::string p = label(path, it.key());
        // {"matchLabel": {...}} is a selector with a typo, not a label whose value is an object.
        if (!it->is_string())
            if (auto m = near_miss(it.key(), {"matchLabels", "matchExpressions"}); !m.empty())
                bad(join(path, it.key()), "unknown key in a label selector (did you mean \"" + m + "\"?)");
        check_label_key(it.key(), p);
        std::string v = string_value(*it, p);
        check_label_value(v, p);
        out.requirements.push_back({it.key(), LabelRequirement::Op::In, {v}});
    }
}

LabelRequirement::Op parse_op(const json& j, const std::string& path) {
    auto* v = member(j, "operator");
    if (!v) bad(join(path, "operator"), "missing (one of In, NotIn, Exists, DoesNotExist, Gt, Lt)");
    std::string s = string_value(*v, join(path, "operator"));
    using Op = LabelRequirement::Op;
    for (Op op : {Op::In, Op::NotIn, Op::Exists, Op::DoesNotExist, Op::Gt, Op::Lt})
        if (s == op_name(op)) return op;
    bad(join(path, "operator"), "'" + s + "' is not one of In, NotIn, Exists, DoesNotExist, Gt, Lt");
}

bool parse_int64(const std::string& s) {
    if (s.empty()) return false;
    errno = 0;
    char* end = nullptr;
    (void)std::strtoll(s.c_str(), &end, 10);
    return errno == 0 && *end == '\0' && s.find_first_of(" \t\n+") == std::string::npos;
}

LabelRequirement parse_expression(const json& j, const std::string& path) {
    if (!j.is_object()) bad(path, "expected an object with key, operator and values");
    for (auto it = j.begin(); it != j.end(); ++it)
        if (it.key() != "key" && it.key() != "operator" && it.key() != "values")
            bad(join(path, it.key()), "unknown key" + did_you_mean(it.key(), {"key", "operator", "values"}) +
                                          " (expected key, operator, values)");
    LabelRequirement r;
    auto key = opt_string(j, "key", path);
    if (!key) bad(join(path, "key"), "missing");
    check_label_key(*key, join(path, "key"));
    r.key = *key;
    r.op = parse_op(j, path);
    r.values = opt_strings(j, "values", path);
    std::string vpath = join(path, "values");
    using Op = LabelRequirement::Op;
    switch (r.op) {
        case Op::In:
        case Op::NotIn:
            if (r.values.empty()) bad(vpath, std::string("must not be empty for ") + op_name(r.op));
            for (size_t i = 0; i < r.values.size(); ++i) check_label_value(r.values[i], index(vpath, i));
            break;
        case Op::Exists:
        case Op::DoesNotExist:
            if (!r.values.empty()) bad(vpath, std::string("must be empty for ") + op_name(r.op));
            break;
        case Op::Gt:
        case Op::Lt:
            if (r.values.size() != 1) bad(vpath, std::string("must hold exactly one integer for ") + op_name(r.op));
            if (!parse_int64(r.values[0])) bad(index(vpath, 0), "'" + r.values[0] + "' is not a 64-bit integer");
            break;
    }
    return r;
}

std::optional<std::string> abs_path(const json& j, const std::string& key) {
    auto v = opt_string(j, key, "");
    if (v && (v->empty() || (*v)[0] != '/')) bad(key, "'" + *v + "' must be an absolute path");
    return v;
}

Topology parse_topology(const json& t) {
    static const char* kKeys[] = {"numaPolicy", "numaNode", "unknownTopology", "minLinkSpeedMbps",
                                  "maxAttachmentsPerMaster", "minFreeAddresses", "linkCapacityMbps",
                                  "bandwidthOvercommit"};
    for (auto it = t.begin(); it != t.end(); ++it) {
        bool known = false;
        for (auto* k : kKeys) known = known || it.key() == k;
        if (!known)
            bad(join("topology", it.key()), "unknown key" +
                                                did_you_mean(it.key(), {"numaPolicy", "numaNode", "unknownTopology",
                                                                        "minLinkSpeedMbps", "maxAttachmentsPerMaster",
                                                                        "minFreeAddresses", "linkCapacityMbps",
                                                                        "bandwidthOvercommit"}) +
                                                " (expected numaPolicy, numaNode, unknownTopology, "
                                                "minLinkSpeedMbps, maxAttachmentsPerMaster, minFreeAddresses, "
                                                "linkCapacityMbps, bandwidthOvercommit)");
    }
    Topology out;
    if (auto p = opt_string(t, "numaPolicy", "topology")) {
        bool found = false;
        for (auto pol : {NumaPolicy::None, NumaPolicy::BestEffort, NumaPolicy::Restricted, NumaPolicy::SingleNumaNode})
            if (*p == numa_policy_name(pol)) { out.numa_policy = pol; found = true; }
        if (!found)
            bad("topology.numaPolicy", "'" + *p + "' is not one of none, best-effort, restricted, single-numa-node");
    }
    if (auto n = opt_int(t, "numaNode", "topology", 0, 1023)) out.numa_node = static_cast<int>(*n);
    if (auto u = opt_string(t, "unknownTopology", "topology")) {
        if (*u != "allow" && *u != "deny") bad("topology.unknownTopology", "'" + *u + "' is not one of allow, deny");
        out.deny_unknown = *u == "deny";
    }
    out.min_link_speed_mbps = opt_int(t, "minLinkSpeedMbps", "topology", 1, 100'000'000);
    out.max_attachments_per_master = opt_int(t, "maxAttachmentsPerMaster", "topology", 1, 1'000'000);
    out.min_free_addresses = opt_int(t, "minFreeAddresses", "topology", 0, 1LL << 62);
    out.link_capacity_mbps = opt_int(t, "linkCapacityMbps", "topology", 1, 100'000'000);
    if (auto o = opt_number(t, "bandwidthOvercommit", "topology", 0.01, 1000)) out.bandwidth_overcommit = *o;
    return out;
}

}  // namespace

const char* op_name(LabelRequirement::Op op) {
    switch (op) {
        case LabelRequirement::Op::In: return "In";
        case LabelRequirement::Op::NotIn: return "NotIn";
        case LabelRequirement::Op::Exists: return "Exists";
        case LabelRequirement::Op::DoesNotExist: return "DoesNotExist";
        case LabelRequirement::Op::Gt: return "Gt";
        case LabelRequirement::Op::Lt: return "Lt";
    }
    return "?";
}

const char* numa_policy_name(NumaPolicy p) {
    switch (p) {
        case NumaPolicy::None: return "none";
        case NumaPolicy::BestEffort: return "best-effort";
        case NumaPolicy::Restricted: return "restricted";
        case NumaPolicy::SingleNumaNode: return "single-numa-node";
    }
    return "?";
}

LabelSelector parse_label_selector(const json& j, const std::string& path) {
    if (!j.is_object()) bad(path, "expected an object: a label map or {matchLabels, matchExpressions}");
    LabelSelector out;
    bool selector_form = j.contains("matchLabels") || j.contains("matchExpressions");
    if (!selector_form) {
        parse_label_map(j, path, out);
        return out;
    }
    for (auto it = j.begin(); it != j.end(); ++it)
        if (it.key() != "matchLabels" && it.key() != "matchExpressions")
            bad(join(path, it.key()), "unknown key in a label selector" +
                                          did_you_mean(it.key(), {"matchLabels", "matchExpressions"}) +
                                          " (expected matchLabels, matchExpressions)");
    if (auto* ml = opt_object(j, "matchLabels", path)) parse_label_map(*ml, join(path, "matchLabels"), out);
    if (auto* me = opt_array(j, "matchExpressions", path))
        for (size_t i = 0; i < me->size(); ++i)
            out.requirements.push_back(parse_expression((*me)[i], index(join(path, "matchExpressions"), i)));
    return out;
}

void parse_placement(NetConf& c) {
    const json& j = c.raw;
    static const char* kKeys[] = {"nodeSelector", "nodeName", "nodeLabelsFile", "kubeconfig",
                                  "nodeLabelsTTL", "apiTimeout", "topology", "kubeletRootDir"};
    bool any = false;
    for (auto* k : kKeys) any = any || member(j, k);
    if (!any) return;

    Placement p;
    if (auto* sel = member(j, "nodeSelector")) p.node_selector = parse_label_selector(*sel, "nodeSelector");
    if (auto n = opt_string(j, "nodeName", "")) {
        if (auto why = subdomain_problem(*n); !why.empty()) bad("nodeName", "'" + *n + "' " + why);
        p.node_name = *n;
    }
    p.node_labels_file = abs_path(j, "nodeLabelsFile");
    if (auto k = opt_string(j, "kubeconfig", "")) {
        if (!k->empty() && (*k)[0] != '/')
            bad("kubeconfig", "'" + *k + "' must be an absolute path (or \"\" for no API)");
        p.kubeconfig = *k;
    }
    if (auto ttl = opt_number(j, "nodeLabelsTTL", "", 0, 86400)) p.node_labels_ttl = *ttl;
    if (auto t = opt_number(j, "apiTimeout", "", 0.1, 60)) p.api_timeout = *t;
    if (auto* t = opt_object(j, "topology", "")) p.topology = parse_topology(*t);
    if (auto d = abs_path(j, "kubeletRootDir")) p.kubelet_root_dir = *d;

    // A veth has no device: its NUMA node, link speed and master are unknown topology,
    // and unknownTopology decides (placement/), so one NAD template with topology
    // constraints works for every attachment kind. That minFreeAddresses has a host-local
    // pool to count is checked with the kind, which knows where its IPAM is (cni/attach/).
    c.placement = std::move(p);
}

}  // namespace conf
