#include "cluster/admission.h"

#include <algorithm>
#include <cmath>
#include <optional>
#include <set>

#include "base/json_text.h"

#include "cluster/dra_claims.h"
#include "cluster/parsed.h"
#include "cluster/resources.h"
#include "cni/error.h"

namespace cluster {

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

/// Whether any container asks (in requests or limits) for a resource `wanted` names.
template <class Wanted>
bool asks_for(const json& containers, Wanted wanted) {
    for (auto& c : containers)
        if (auto* r = member(c, "resources"))
            for (const char* k : {"requests", "limits"})
                if (auto* m = member(*r, k); m && m->is_object())
                    for (auto it = m->begin(); it != m->end(); ++it)
                        if (wanted(it.key())) return true;
    return false;
}

bool requests_topocni(const json& containers) {
    return asks_for(containers, [](const std::string& k) { return is_topocni_resource(k) || k == kMarkerResource; });
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
                    throw cni::Error(cni::kInvalidConfig, "container resources." + std::string(k) + "." + name + ": not a whole number");
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

/// The claims of `want` (name -> template) that the pod does not have yet: spec.resourceClaims
/// entries and the first container's resources.claims references. `resources_added`: the
/// patch made the container's resources object already.
void add_claims(json& patch, const json& spec, const json& container, bool resources_added,
                const std::map<std::string, std::string>& want) {
    auto names = [](const json* list) {
        std::set<std::string> out;
        if (list && list->is_array())
            for (auto& e : *list)
                if (e.is_object() && e.contains("name") && e["name"].is_string()) out.insert(e["name"].get<std::string>());
        return out;
    };
    const json* entries = member(spec, "resourceClaims");
    auto have = names(entries);
    json fresh = json::array();
    for (auto& [name, tmpl] : want)
        if (!have.count(name)) fresh.push_back({{"name", name}, {"resourceClaimTemplateName", tmpl}});
    if (!fresh.empty()) {
        if (!entries || !entries->is_array()) patch.push_back({{"op", "add"}, {"path", "/spec/resourceClaims"}, {"value", fresh}});
        else for (auto& e : fresh) patch.push_back({{"op", "add"}, {"path", "/spec/resourceClaims/-"}, {"value", e}});
    }
    const json* res = member(container, "resources");
    const json* refs = res ? member(*res, "claims") : nullptr;
    auto referenced = names(refs);
    json more = json::array();
    for (auto& [name, tmpl] : want)
        if (!referenced.count(name)) more.push_back({{"name", name}});
    if (more.empty()) return;
    const std::string base = "/spec/containers/0/resources";
    if ((!res || !res->is_object()) && !resources_added) patch.push_back({{"op", "add"}, {"path", base}, {"value", {{"claims", more}}}});
    else if (!refs || !refs->is_array()) patch.push_back({{"op", "add"}, {"path", base + "/claims"}, {"value", more}});
    else for (auto& r : more) patch.push_back({{"op", "add"}, {"path", base + "/claims/-"}, {"value", r}});
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

Mutation mutate_pod(const json& pod, const std::string& ns, const NadLookup& nads, const DraClaims* claims, bool dry_run) {
    const json* md = member(pod, "metadata");
    auto annotations = string_map(md ? member(*md, "annotations") : nullptr);
    if (annotations.count(kAdmittedAnnotation)) return {};   // admitted before: as it is
    auto sel = annotations.find(kNetworksAnnotation);
    if (sel == annotations.end() || sel->second.empty()) return {};
    Resources want;
    std::map<std::string, std::string> claim_of;   // claim name -> template
    json reqs = json::array();
    std::string keys;
    Mutation m;
    try {
        for (auto& s : parse_networks(sel->second, ns)) {
            PodNetwork n = nads(s);
            if (!n.error.empty()) return deny(n.error);
            if (!n.parsed) continue;   // not topocni's
            std::optional<std::string> tmpl;
            if (claims && claims->template_for) {
                dra::ClaimPlan plan = dra::claim_plan(n, claims->driver);
                if (!plan.empty()) {
                    json object = dra::claim_template(n, plan);
                    object["metadata"]["namespace"] = ns;   // a pod claims from its own namespace
                    tmpl = claims->template_for(n, ns, object, dry_run);
                }
            }
            if (tmpl) {
                // The claim is the network's request: the allocator counts its VF, bandwidth
                // and address, and the extended resources would count them a second time.
                claim_of[dra::claim_name(n.selection.name)] = *tmpl;
            } else {
                Needs needs = needs_of(n, annotations);
                for (auto& [k, v] : needs.resources) want[k] += v;
                for (auto& w : needs.notes) m.warnings.push_back("topocni: " + w);
            }
            if (n.parsed->conf.placement && n.parsed->conf.placement->node_selector)
                for (auto& r : node_selector_requirements(*n.parsed->conf.placement->node_selector)) reqs.push_back(r);
            keys += (keys.empty() ? "" : ",") + n.key();
        }
    } catch (const base::Error& e) {
        return deny(e.what());
    }
    if (keys.empty()) return m;   // no topocni network: not the extender's either
    want[kMarkerResource] = 1;
    const json* spec = member(pod, "spec");
    const json* containers = spec ? member(*spec, "containers") : nullptr;
    if (!containers || !containers->is_array() || containers->empty()) return m;   // the API server refuses it anyway
    if (requests_topocni(*containers)) {
        m.warnings.push_back("topocni: the pod requests topocni resources already; left as it is");
        // But for the marker: without it kube-scheduler never asks the extender about the pod
        // (managedResources), and only ADD would judge its VFs, NUMA node and facts.
        if (!asks_for(*containers, [](const std::string& k) { return k == kMarkerResource; })) try {
                add_resources(m.patch, (*containers)[0], Resources{{kMarkerResource, 1}});
            } catch (const base::Error& e) {
                return deny(e.what());
            }
        return m;
    }
    try {
        if (!want.empty()) add_resources(m.patch, (*containers)[0], want);
    } catch (const base::Error& e) {
        return deny(e.what());
    }
    if (!claim_of.empty()) {
        bool resources_added = std::any_of(m.patch.begin(), m.patch.end(),
                                           [](const json& op) { return op["path"] == "/spec/containers/0/resources"; });
        add_claims(m.patch, *spec, (*containers)[0], resources_added, claim_of);
    }
    if (!reqs.empty()) add_affinity(m.patch, *spec, reqs);
    if (md && member(*md, "annotations") && member(*md, "annotations")->is_object())
        m.patch.push_back({{"op", "add"}, {"path", "/metadata/annotations/" + pointer_token(kAdmittedAnnotation)}, {"value", keys}});
    else
        m.patch.push_back({{"op", "add"}, {"path", "/metadata/annotations"}, {"value", {{kAdmittedAnnotation, keys}}}});
    return m;
}

namespace {

using base::json_text::Reader;

/// The annotations mutate_pod reads; the pod's others are not kept.
bool read_annotation(const std::string& key) {
    return key == kAdmittedAnnotation || key == kNetworksAnnotation || key == "kubernetes.io/egress-bandwidth" ||
           key == "kubernetes.io/ingress-bandwidth";
}

/// What review() reads of an AdmissionReview, members by their exact names, a later one
/// winning (as nlohmann and the API server's decoder read them), and `null` as absent.
struct ReviewRequest {
    std::optional<std::string> uid;
    bool uid_bad = false, pod_kind = false, create = false, dry_run = false;
    std::string ns;
    std::string_view object;   ///< request.object when it is an object
};

std::optional<std::string> string_or_null(Reader& r, bool& bad) {
    if (r.null()) return std::nullopt;
    if (r.peek() == Reader::Kind::String) return r.string();
    r.skip();
    bad = true;
    return std::nullopt;
}

ReviewRequest read_request(Reader& r) {
    ReviewRequest q;
    std::string key, kkey;
    r.begin_object();
    while (r.next_member(key)) {
        if (key == "uid") {
            q.uid_bad = false;
            q.uid = string_or_null(r, q.uid_bad);
        } else if (key == "kind") {
            q.pod_kind = false;
            if (r.peek() != Reader::Kind::Object) {
                r.skip();
                continue;
            }
            std::optional<std::string> kind, group = std::string();
            bool bad = false;
            r.begin_object();
            while (r.next_member(kkey)) {
                if (kkey == "kind") kind = string_or_null(r, bad);
                else if (kkey == "group" && r.peek() == Reader::Kind::String) group = r.string();
                else if (kkey == "group") r.skip(), group.reset();
                else r.skip();
            }
            q.pod_kind = kind == "Pod" && group == "";
        } else if (key == "operation") {
            bool bad = false;
            q.create = string_or_null(r, bad) == "CREATE";
        } else if (key == "namespace") {
            bool bad = false;
            q.ns = string_or_null(r, bad).value_or("");
        } else if (key == "dryRun") {
            q.dry_run = r.peek() == Reader::Kind::True ? (r.skip(), true) : (r.skip(), false);
        } else if (key == "object") {
            q.object = r.peek() == Reader::Kind::Object ? r.skip() : (r.skip(), std::string_view());
        } else {
            r.skip();
        }
    }
    return q;
}

/// What pod_parts may keep: refused at once past it, before any copy of the part.
struct Budget {
    size_t left = kMaxPodPartsBytes;
    void take(size_t n) {
        if (n > left)
            throw cni::Error(cni::kInvalidConfig, "the pod's container resources, affinity and topocni annotations take more than " +
                                            std::to_string(kMaxPodPartsBytes) +
                                            " bytes (the API server allows 256 KiB of annotations)");
        left -= n;
    }
};

/// Of a Pod, the parts mutate_pod reads, as JSON text: metadata.annotations (the ones it
/// reads), metadata.namespace, each container's resources, spec.affinity. The tree is
/// built of these alone, so that what a request costs does not grow with the rest of it.
std::string pod_parts(std::string_view object, std::string& ns) {
    Budget budget;
    Reader r(object);
    std::string key, mkey, akey, ckey;
    std::string annotations, containers, affinity, claims;   // JSON text of each; "": absent
    r.begin_object();
    while (r.next_member(key)) {
        if (key == "metadata") {
            annotations.clear();
            ns.clear();
            if (r.peek() != Reader::Kind::Object) {
                r.skip();
                continue;
            }
            r.begin_object();
            while (r.next_member(mkey)) {
                if (mkey == "namespace" && r.peek() == Reader::Kind::String) {
                    ns = r.string();
                } else if (mkey == "annotations" && r.peek() == Reader::Kind::Object) {
                    std::map<std::string, std::string> kept;
                    r.begin_object();
                    while (r.next_member(akey)) {
                        if (read_annotation(akey) && r.peek() == Reader::Kind::String) {
                            std::string_view v = r.skip();
                            budget.take(akey.size() + v.size());   // text, no less than what it decodes to
                            kept[akey] = Reader(v).string();
                        } else {
                            r.skip();
                        }
                    }
                    annotations = "{";
                    for (auto& [k, v] : kept) {
                        if (annotations.size() > 1) annotations += ',';
                        base::json_text::append_string(annotations, k);
                        annotations += ':';
                        base::json_text::append_string(annotations, v);
                    }
                    annotations += '}';
                } else {
                    if (mkey == "annotations") annotations = r.null() ? "" : (r.skip(), "0");
                    else r.skip();
                }
            }
        } else if (key == "spec") {
            containers.clear();
            affinity.clear();
            claims.clear();
            if (r.peek() != Reader::Kind::Object) {
                r.skip();
                continue;
            }
            r.begin_object();
            while (r.next_member(mkey)) {
                if (mkey == "containers" && r.peek() == Reader::Kind::Array) {
                    containers = "[";
                    r.begin_array();
                    while (r.next_element()) {
                        if (containers.size() > 1) containers += ',';
                        if (r.peek() != Reader::Kind::Object) {
                            r.skip();
                            containers += "null";
                            continue;
                        }
                        std::string_view resources;
                        r.begin_object();
                        while (r.next_member(ckey)) {
                            std::string_view v = r.skip();
                            if (ckey == "resources") resources = v;
                        }
                        budget.take(resources.size() + 16);
                        containers += resources.empty() ? "{}" : "{\"resources\":" + std::string(resources) + "}";
                    }
                    containers += ']';
                } else if (mkey == "containers") {
                    containers = r.null() ? "" : (r.skip(), "0");
                } else if (mkey == "resourceClaims") {
                    claims.clear();
                    if (r.null()) continue;
                    std::string_view v = r.skip();
                    budget.take(v.size());
                    claims = v;
                } else if (mkey == "affinity") {
                    affinity.clear();
                    if (r.null()) continue;
                    std::string_view v = r.skip();
                    budget.take(v.size());
                    affinity = v;
                } else {
                    r.skip();
                }
            }
        } else {
            r.skip();
        }
    }
    std::string out = "{\"metadata\":{";
    if (!annotations.empty()) out += "\"annotations\":" + annotations;
    out += "},\"spec\":{";
    if (!containers.empty()) out += "\"containers\":" + containers;
    if (!affinity.empty()) out += std::string(containers.empty() ? "" : ",") + "\"affinity\":" + affinity;
    if (!claims.empty()) out += std::string(containers.empty() && affinity.empty() ? "" : ",") + "\"resourceClaims\":" + claims;
    out += "}}";
    return out;
}

}  // namespace

std::string review(const std::string& body, const NadLookup& nads, const DraClaims* claims) {
    ReviewRequest req;
    std::string pod_text, object_ns;
    try {
        Reader r(body);
        if (r.peek() != Reader::Kind::Object) throw cni::Error(cni::kInvalidConfig, "not a JSON object");
        std::string key;
        bool have_request = false;
        r.begin_object();
        while (r.next_member(key)) {
            if (key != "request") {
                r.skip();
                continue;
            }
            have_request = r.peek() == Reader::Kind::Object;
            if (have_request) req = read_request(r);
            else r.skip();
        }
        r.end();
        if (!have_request) throw cni::Error(cni::kInvalidConfig, "no request: not an AdmissionReview");
        if (!req.uid || req.uid_bad) throw cni::Error(cni::kInvalidConfig, "request.uid: expected a string");
        if (req.pod_kind && req.create && !req.object.empty()) pod_text = pod_parts(req.object, object_ns);
    } catch (const base::json_text::SyntaxError& e) {
        throw cni::Error(cni::kInvalidConfig, std::string("not a JSON object: ") + e.what());
    }
    json response = {{"uid", *req.uid}, {"allowed", true}};
    if (!pod_text.empty()) {
        std::string ns = !req.ns.empty() ? req.ns : !object_ns.empty() ? object_ns : "default";
        Mutation m = mutate_pod(json::parse(pod_text), ns, nads, claims, req.dry_run);
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

}  // namespace cluster
