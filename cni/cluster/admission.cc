#include "cni/cluster/admission.h"

#include <cmath>

#include "cni/cluster/parsed.h"
#include "cni/cluster/resources.h"
#include "cni/error.h"

namespace cni::cluster {

namespace {

using json = nlohmann::json;

std::string base64(const std::string& in) {
    static const char* kAlphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    std::string out;
    out.reserve((in.size() + 2) / 3 * 4);
    size_t i = 0;
    for (; i + 2 < in.size(); i += 3) {
        uint32_t v = uint32_t(uint8_t(in[i])) << 16 | uint32_t(uint8_t(in[i + 1])) << 8 | uint8_t(in[i + 2]);
        for (int s = 18; s >= 0; s -= 6) out += kAlphabet[(v >> s) & 63];
    }
    if (i < in.size()) {
        uint32_t v = uint32_t(uint8_t(in[i])) << 16 | (i + 1 < in.size() ? uint32_t(uint8_t(in[i + 1])) << 8 : 0);
        out += kAlphabet[(v >> 18) & 63];
        out += kAlphabet[(v >> 12) & 63];
        out += i + 1 < in.size() ? kAlphabet[(v >> 6) & 63] : '=';
        out += '=';
    }
    return out;
}

const json* member(const json& j, const char* key) {
    if (!j.is_object()) return nullptr;
    auto it = j.find(key);
    return it == j.end() || it->is_null() ? nullptr : &*it;
}

std::map<std::string, std::string> string_map(const json* j) {
    std::map<std::string, std::string> out;
    if (j && j->is_object())
        for (auto it = j->begin(); it != j->end(); ++it)
            if (it->is_string()) out[it.key()] = it->get<std::string>();
    return out;
}

bool requests_topocni(const json& containers) {
    for (auto& c : containers)
        if (auto* r = member(c, "resources"))
            for (const char* k : {"requests", "limits"})
                if (auto* m = member(*r, k); m && m->is_object())
                    for (auto it = m->begin(); it != m->end(); ++it)
                        if (is_topocni_resource(it.key())) return true;
    return false;
}

/// What a container already asks of `name`: its limit, else its request (for an extended
/// resource the two must be equal, and a limit alone is also the request).
long long already(const json& resources, const std::string& name) {
    for (const char* k : {"limits", "requests"})
        if (auto* m = member(resources, k); m && m->is_object())
            if (auto it = m->find(name); it != m->end()) {
                std::optional<double> q;
                if (it->is_string()) q = parse_quantity(it->get<std::string>());
                else if (it->is_number()) q = it->get<double>();
                if (!q || *q != std::floor(*q) || *q < 0)
                    throw Error(kInvalidConfig, "container resources." + std::string(k) + "." + name + ": not a whole number");
                return static_cast<long long>(*q);
            }
    return 0;
}

void add_resources(json& patch, const json& container, const Resources& want) {
    const std::string base = "/spec/containers/0/resources";
    const json* res = member(container, "resources");
    if (!res || !res->is_object()) {
        json r = json::object();
        for (auto& [k, v] : want) r[k] = std::to_string(v);
        patch.push_back({{"op", "add"}, {"path", base}, {"value", {{"requests", r}, {"limits", r}}}});
        return;
    }
    for (const char* k : {"requests", "limits"}) {
        const json* m = member(*res, k);
        json whole = m && m->is_object() ? *m : json::object();
        for (auto& [name, v] : want) whole[name] = std::to_string(already(*res, name) + v);
        patch.push_back({{"op", "add"}, {"path", base + "/" + k}, {"value", whole}});
    }
}

void add_affinity(json& patch, const json& spec, const json& reqs) {
    json term = {{"matchExpressions", reqs}};
    json required = {{"nodeSelectorTerms", json::array({term})}};
    const json* aff = member(spec, "affinity");
    if (!aff || !aff->is_object()) {
        patch.push_back({{"op", "add"}, {"path", "/spec/affinity"},
                         {"value", {{"nodeAffinity", {{"requiredDuringSchedulingIgnoredDuringExecution", required}}}}}});
        return;
    }
    const json* na = member(*aff, "nodeAffinity");
    if (!na || !na->is_object()) {
        patch.push_back({{"op", "add"}, {"path", "/spec/affinity/nodeAffinity"},
                         {"value", {{"requiredDuringSchedulingIgnoredDuringExecution", required}}}});
        return;
    }
    const std::string rpath = "/spec/affinity/nodeAffinity/requiredDuringSchedulingIgnoredDuringExecution";
    const json* req = member(*na, "requiredDuringSchedulingIgnoredDuringExecution");
    const json* terms = req ? member(*req, "nodeSelectorTerms") : nullptr;
    if (!terms || !terms->is_array() || terms->empty()) {
        patch.push_back({{"op", "add"}, {"path", rpath}, {"value", required}});
        return;
    }
    // Terms are ORed, the requirements inside one ANDed: each term gets all of ours.
    for (size_t i = 0; i < terms->size(); ++i) {
        std::string tpath = rpath + "/nodeSelectorTerms/" + std::to_string(i) + "/matchExpressions";
        const json* have = member((*terms)[i], "matchExpressions");
        json all = have && have->is_array() ? *have : json::array();
        for (auto& r : reqs) all.push_back(r);
        patch.push_back({{"op", "add"}, {"path", tpath}, {"value", all}});
    }
}

Mutation deny(std::string message) {
    Mutation m;
    m.allowed = false;
    m.message = "topocni: " + std::move(message);
    return m;
}

}  // namespace

json node_selector_requirements(const conf::LabelSelector& sel) {
    json out = json::array();
    for (auto& r : sel.requirements) {
        json e = {{"key", r.key}, {"operator", conf::op_name(r.op)}};
        if (!r.values.empty()) e["values"] = r.values;
        out.push_back(std::move(e));
    }
    return out;
}

Mutation mutate_pod(const json& pod, const std::string& ns, const NadLookup& nads) {
    const json* md = member(pod, "metadata");
    auto annotations = string_map(md ? member(*md, "annotations") : nullptr);
    if (annotations.count(kAdmittedAnnotation)) return {};   // admitted before: as it is
    auto sel = annotations.find(kNetworksAnnotation);
    if (sel == annotations.end() || sel->second.empty()) return {};
    Resources want;
    json reqs = json::array();
    std::string keys;
    Mutation m;
    try {
        for (auto& s : parse_networks(sel->second, ns)) {
            PodNetwork n = nads(s);
            if (!n.error.empty()) return deny(n.error);
            if (!n.parsed) continue;   // not topocni's
            Needs needs = needs_of(n, annotations);
            for (auto& [k, v] : needs.resources) want[k] += v;
            for (auto& w : needs.notes) m.warnings.push_back("topocni: " + w);
            if (n.parsed->conf.placement && n.parsed->conf.placement->node_selector)
                for (auto& r : node_selector_requirements(*n.parsed->conf.placement->node_selector)) reqs.push_back(r);
            keys += (keys.empty() ? "" : ",") + n.key();
        }
    } catch (const base::Error& e) {
        return deny(e.what());
    }
    if (want.empty() && reqs.empty()) return m;
    const json* spec = member(pod, "spec");
    const json* containers = spec ? member(*spec, "containers") : nullptr;
    if (!containers || !containers->is_array() || containers->empty()) return m;   // the API server refuses it anyway
    if (requests_topocni(*containers)) {
        m.warnings.push_back("topocni: the pod requests topocni resources already; left as it is");
        return m;
    }
    try {
        if (!want.empty()) add_resources(m.patch, (*containers)[0], want);
    } catch (const base::Error& e) {
        return deny(e.what());
    }
    if (!reqs.empty()) add_affinity(m.patch, *spec, reqs);
    if (md && member(*md, "annotations") && member(*md, "annotations")->is_object())
        m.patch.push_back({{"op", "add"}, {"path", "/metadata/annotations/" + pointer_token(kAdmittedAnnotation)}, {"value", keys}});
    else
        m.patch.push_back({{"op", "add"}, {"path", "/metadata/annotations"}, {"value", {{kAdmittedAnnotation, keys}}}});
    return m;
}

std::string review(const std::string& body, const NadLookup& nads) {
    json j = json::parse(body, nullptr, false);
    if (!j.is_object()) throw Error(kInvalidConfig, "not a JSON object");
    const json* req = member(j, "request");
    if (!req || !req->is_object()) throw Error(kInvalidConfig, "no request: not an AdmissionReview");
    const json* uid = member(*req, "uid");
    if (!uid || !uid->is_string()) throw Error(kInvalidConfig, "request.uid: expected a string");
    json response = {{"uid", *uid}, {"allowed", true}};
    const json* kind = member(*req, "kind");
    const json* op = member(*req, "operation");
    const json* object = member(*req, "object");
    bool pod_create = kind && kind->is_object() && kind->value("kind", json()) == "Pod" && kind->value("group", json("")) == "" &&
                      op && *op == "CREATE" && object && object->is_object();
    if (pod_create) {
        std::string ns;
        if (auto* n = member(*req, "namespace"); n && n->is_string()) ns = n->get<std::string>();
        if (ns.empty())
            if (auto* md = member(*object, "metadata"))
                if (auto* n = member(*md, "namespace"); n && n->is_string()) ns = n->get<std::string>();
        if (ns.empty()) ns = "default";
        Mutation m = mutate_pod(*object, ns, nads);
        response["allowed"] = m.allowed;
        if (!m.allowed) response["status"] = {{"status", "Failure"}, {"message", m.message}, {"code", 400}};
        if (!m.patch.empty()) {
            response["patchType"] = "JSONPatch";
            response["patch"] = base64(m.patch.dump());
        }
        if (!m.warnings.empty()) response["warnings"] = m.warnings;
    }
    json out = {{"apiVersion", "admission.k8s.io/v1"}, {"kind", "AdmissionReview"}, {"response", std::move(response)}};
    return out.dump();
}

}  // namespace cni::cluster
