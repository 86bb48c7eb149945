#include "kube/eviction.h"

#include <algorithm>

#include "kube/client.h"
#include "kube/error.h"

namespace kube {

using json = nlohmann::json;

namespace {

[[noreturn]] void bad_pod(const std::string& where, const std::string& why) {
    throw Error(Error::Kind::Invalid, "Pod object: " + where + ": " + why);
}

std::string need_string(const json& j, const char* key, const std::string& where) {
    auto it = j.find(key);
    if (it == j.end() || !it->is_string() || it->get<std::string>().empty())
        bad_pod(where + "." + key, "missing, or not a non-empty string");
    return it->get<std::string>();
}

}  // namespace

PodView pod_view(const json& pod) {
    if (!pod.is_object()) bad_pod("(top)", "not an object");
    if (auto k = pod.find("kind"); k != pod.end() && (!k->is_string() || *k != "Pod")) bad_pod("kind", "not Pod");
    auto md = pod.find("metadata");
    if (md == pod.end() || !md->is_object()) bad_pod("metadata", "missing, or not an object");
    PodView v;
    v.name = need_string(*md, "name", "metadata");
    v.uid = need_string(*md, "uid", "metadata");
    if (auto ns = md->find("namespace"); ns != md->end() && ns->is_string()) v.pod_namespace = *ns;
    if (auto dt = md->find("deletionTimestamp"); dt != md->end() && !dt->is_null()) v.terminating = true;
    auto owners = md->find("ownerReferences");
    if (owners == md->end() || owners->is_null()) return v;
    if (!owners->is_array()) bad_pod("metadata.ownerReferences", "not an array");
    for (size_t i = 0; i < owners->size(); ++i) {
        const json& o = (*owners)[i];
        std::string where = "metadata.ownerReferences[" + std::to_string(i) + "]";
        if (!o.is_object()) bad_pod(where, "not an object");
        auto c = o.find("controller");
        if (c != o.end() && !c->is_null() && !c->is_boolean()) bad_pod(where + ".controller", "not a boolean");
        if (c == o.end() || !c->is_boolean() || !c->get<bool>()) continue;
        // apimachinery allows one controller reference; the first one found counts.
        if (v.controller) continue;
        OwnerRef r;
        r.kind = need_string(o, "kind", where);
        r.name = need_string(o, "name", where);
        r.uid = need_string(o, "uid", where);
        if (auto a = o.find("apiVersion"); a != o.end() && a->is_string()) r.api_version = *a;
        v.controller = r;
    }
    return v;
}

std::string eviction_path(const std::string& ns, const std::string& name) {
    return "/api/v1/namespaces/" + url_escape(ns) + "/pods/" + url_escape(name) + "/eviction";
}

json eviction_body(const std::string& ns, const std::string& name) {
    return {{"apiVersion", "policy/v1"}, {"kind", "Eviction"}, {"metadata", {{"name", name}, {"namespace", ns}}}};
}

EvictionAnswer eviction_answer(const https::Response& r) {
    EvictionAnswer a{EvictionAnswer::Outcome::Failed, r.status, status_message(r.body), 0};
    if (r.status >= 200 && r.status < 300) a.outcome = EvictionAnswer::Outcome::Evicted;
    else if (r.status == 429) a.outcome = EvictionAnswer::Outcome::Blocked;
    else if (r.status == 404) a.outcome = EvictionAnswer::Outcome::Gone;
    auto j = json::parse(r.body, nullptr, false);
    if (j.is_object())
        if (auto d = j.find("details"); d != j.end() && d->is_object()) {
            if (auto ra = d->find("retryAfterSeconds"); ra != d->end() && ra->is_number_integer())
                a.retry_after_seconds = static_cast<int>(std::clamp<int64_t>(ra->get<int64_t>(), 0, 3600));
            if (auto cs = d->find("causes"); cs != d->end() && cs->is_array())
                for (auto& c : *cs)
                    if (c.is_object() && c.contains("message") && c["message"].is_string())
                        a.message += "; " + c["message"].get<std::string>();
        }
    return a;
}

}  // namespace kube
