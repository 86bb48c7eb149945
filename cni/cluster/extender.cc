#include "cni/cluster/extender.h"

#include <algorithm>
#include <cctype>

#include "base/log.h"
#include "cni/error.h"

namespace cni::cluster {

namespace {

using json = nlohmann::json;

[[noreturn]] void bad(const std::string& why) { throw Error(kDecodingFailure, "ExtenderArgs: " + why); }

bool same_ci(const std::string& a, const std::string& b) {
    return a.size() == b.size() && std::equal(a.begin(), a.end(), b.begin(), [](char x, char y) {
               return std::tolower(static_cast<unsigned char>(x)) == std::tolower(static_cast<unsigned char>(y));
           });
}

/// The member `key` of `j` as Go's encoding/json finds it: the exact name, else any that
/// matches it ignoring case.
const json* member_ci(const json& j, const std::string& key) {
    if (!j.is_object()) return nullptr;
    if (auto it = j.find(key); it != j.end()) return &*it;
    for (auto it = j.begin(); it != j.end(); ++it)
        if (same_ci(it.key(), key)) return &*it;
    return nullptr;
}

std::string meta(const json& o, const char* key) {
    const json* md = member_ci(o, "metadata");
    const json* v = md ? member_ci(*md, key) : nullptr;
    return v && v->is_string() ? v->get<std::string>() : "";
}

std::string annotation(const json& o, const char* key) {
    const json* md = member_ci(o, "metadata");
    const json* an = md ? member_ci(*md, "annotations") : nullptr;
    if (!an || !an->is_object()) return "";
    auto it = an->find(key);
    return it != an->end() && it->is_string() ? it->get<std::string>() : "";
}

std::string node_name_of_pod(const json& pod) {
    const json* spec = member_ci(pod, "spec");
    const json* n = spec ? member_ci(*spec, "nodeName") : nullptr;
    return n && n->is_string() ? n->get<std::string>() : "";
}

std::vector<const PendingPod*> pointers(const std::vector<PendingPod>& pods) {
    std::vector<const PendingPod*> out;
    for (auto& p : pods) out.push_back(&p);
    return out;
}

/// At most `max` bytes of a log line.
std::string capped(std::string s, size_t max = 4096) {
    if (s.size() > max) s = s.substr(0, max) + " ...";
    return s;
}

}  // namespace

ExtenderArgs parse_extender_args(const std::string& body) {
    json j = json::parse(body, nullptr, false);
    if (!j.is_object()) bad("not a JSON object");
    ExtenderArgs a;
    const json* pod = member_ci(j, "Pod");
    if (!pod || !pod->is_object()) bad("Pod: missing or not an object");
    a.pod = *pod;
    if (const json* nodes = member_ci(j, "Nodes"); nodes && !nodes->is_null()) {
        const json* items = member_ci(*nodes, "items");
        if (!nodes->is_object() || !items || !(items->is_array() || items->is_null())) bad("Nodes: not a NodeList");
        a.nodes.emplace();
        if (items->is_array())
            for (auto& n : *items) {
                if (!n.is_object()) bad("Nodes.items: a node that is not an object");
                a.nodes->push_back(n);
            }
    }
    if (const json* names = member_ci(j, "NodeNames"); names && !names->is_null()) {
        if (!names->is_array()) bad("NodeNames: not a list");
        a.node_names.emplace();
        for (auto& n : *names) {
            if (!n.is_string()) bad("NodeNames: a name that is not a string");
            a.node_names->push_back(n.get<std::string>());
        }
    }
    if (!a.nodes && !a.node_names) bad("neither Nodes nor NodeNames");
    return a;
}

// ---- caches ----

void Extender::replace_nads(const std::vector<json>& items) {
    std::map<std::string, json> fresh;
    for (auto& n : items) fresh[object_key(n)] = n;
    std::unique_lock lock(mu_);
    nads_ = std::move(fresh);
}

void Extender::nad_event(const kube::Event& e) {
    std::string key = object_key(e.object);
    std::unique_lock lock(mu_);
    if (e.type == "DELETED") nads_.erase(key);
    else nads_[key] = e.object;
}

void Extender::replace_nodes(const std::vector<json>& items) {
    std::map<std::string, std::shared_ptr<const NodeView>> fresh;
    for (auto& n : items) {
        auto v = std::make_shared<const NodeView>(node_view(n));
        fresh[v->name] = std::move(v);
    }
    std::unique_lock lock(mu_);
    nodes_ = std::move(fresh);
}

void Extender::node_event(const kube::Event& e) {
    auto v = std::make_shared<const NodeView>(node_view(e.object));
    std::unique_lock lock(mu_);
    if (e.type == "DELETED") nodes_.erase(v->name);
    else nodes_[v->name] = std::move(v);
}

void Extender::put_pod(const json& pod) {
    std::string uid = meta(pod, "uid"), node = node_name_of_pod(pod);
    std::string networks = annotation(pod, kNetworksAnnotation);
    const json* status = member_ci(pod, "status");
    const json* phase = status ? member_ci(*status, "phase") : nullptr;
    bool pending = !phase || (phase->is_string() && phase->get<std::string>() == "Pending");
    std::lock_guard lock(pods_mu_);
    if (uid.empty()) return;
    if (node.empty() || networks.empty() || !pending) {
        forget(uid);
        return;
    }
    auto& b = bound_[uid];
    if (b.node != node || b.annotation != networks) {
        if (!b.node.empty()) bound_on_[b.node].erase(uid);
        b = Bound{node, meta(pod, "namespace"), networks, std::time(nullptr), {uid, meta(pod, "name"), {}}, false};
        bound_on_[node].insert(uid);
    }
}

void Extender::forget(const std::string& uid) {
    auto it = bound_.find(uid);
    if (it == bound_.end()) return;
    if (auto on = bound_on_.find(it->second.node); on != bound_on_.end()) {
        on->second.erase(uid);
        if (on->second.empty()) bound_on_.erase(on);
    }
    bound_.erase(it);
}

void Extender::replace_pods(const std::vector<json>& items) {
    {
        std::lock_guard lock(pods_mu_);
        bound_.clear();
        bound_on_.clear();
    }
    for (auto& p : items) put_pod(p);
}

void Extender::pod_event(const kube::Event& e) {
    if (e.type == "DELETED") {
        std::lock_guard lock(pods_mu_);
        forget(meta(e.object, "uid"));
        return;
    }
    put_pod(e.object);
}

// ---- the verbs ----

std::vector<PodNetwork> Extender::resolve(const std::vector<NetworkSelection>& sels) {
    std::vector<PodNetwork> out;
    std::shared_lock lock(mu_);
    for (auto& s : sels) {
        auto it = nads_.find(s.namespace_ + "/" + s.name);
        out.push_back(pod_network(s, it == nads_.end() ? nullptr : &it->second));
    }
    return out;
}

std::vector<PodNetwork> Extender::networks_of(const json& pod, bool& has_topocni) {
    has_topocni = false;
    std::string value = annotation(pod, kNetworksAnnotation);
    if (value.empty()) return {};
    std::vector<PodNetwork> nets;
    try {
        nets = resolve(parse_networks(value, meta(pod, "namespace")));
    } catch (const base::Error& e) {
        PodNetwork bad_one;
        bad_one.selection = {meta(pod, "namespace"), "(annotation)", ""};
        bad_one.error = e.what();
        nets.push_back(bad_one);
    }
    for (auto& n : nets) has_topocni = has_topocni || n.parsed || !n.error.empty();
    return nets;
}

std::shared_ptr<const NodeView> Extender::cached_view(const std::string& name) {
    {
        std::shared_lock lock(mu_);
        if (auto it = nodes_.find(name); it != nodes_.end()) return it->second;
    }
    auto v = std::make_shared<NodeView>();
    v->name = name;
    v->facts_why = "the node is not in the extender's cache (yet)";
    return v;
}

NodeView Extender::view_of(const json& node) {
    std::string name = meta(node, "name"), rv = meta(node, "resourceVersion");
    {
        std::shared_lock lock(mu_);
        if (auto it = seen_.find(name); it != seen_.end() && !rv.empty() && it->second.first == rv) return it->second.second;
    }
    NodeView v = node_view(node);
    std::unique_lock lock(mu_);
    seen_[name] = {rv, v};
    return v;
}

std::vector<PendingPod> Extender::pending_on(const std::string& node, const std::string& except_uid, std::time_t now) {
    std::vector<PendingPod> out;
    std::lock_guard lock(pods_mu_);
    auto on = bound_on_.find(node);
    if (on == bound_on_.end()) return out;
    for (auto& uid : on->second) {
        auto& b = bound_.at(uid);
        if (uid == except_uid || now - b.since > static_cast<std::time_t>(o_.pending_seconds)) continue;
        if (!b.resolved) {
            try {
                b.pod.networks = resolve(parse_networks(b.annotation, b.ns));
            } catch (const base::Error&) {
            }
            b.resolved = true;
        }
        out.push_back(b.pod);   // a copy: the watch may change the cache meanwhile
    }
    return out;
}

namespace {

size_t signature(const std::vector<PodNetwork>& nets) {
    std::string all;
    for (auto& n : nets) all += n.key() + '\n' + n.resource_name + '\n' + n.config + '\n' + n.error + '\n';
    return std::hash<std::string>{}(all);
}

}  // namespace

NodeVerdict Extender::cached_judge(const std::vector<PodNetwork>& nets, size_t nets_sig, const NodeView& v,
                                   const std::string& uid, std::time_t now) {
    auto pending = pending_on(v.name, uid, now);
    bool stale = !v.facts || !v.taken_at || now - *v.taken_at > static_cast<std::time_t>(o_.judge.max_facts_age);
    std::string key = v.name + '\n' + std::to_string(reinterpret_cast<uintptr_t>(v.facts.get())) + '\n' +
                      (stale ? "s" : "f") + std::to_string(nets_sig);
    for (auto& p : pending) key += '\n' + p.uid;
    {
        std::lock_guard lock(verdicts_mu_);
        if (auto it = verdicts_.find(key); it != verdicts_.end()) return it->second;
    }
    NodeVerdict verdict = judge_node(nets, v, pointers(pending), o_.judge, now);
    std::lock_guard lock(verdicts_mu_);
    if (verdicts_.size() > 100000) verdicts_.clear();   // bounded; rebuilt as asked
    verdicts_[key] = verdict;
    return verdict;
}

json Extender::filter(const ExtenderArgs& a, std::time_t now) {
    json result = {{"Nodes", nullptr}, {"NodeNames", nullptr}, {"FailedNodes", json::object()},
                   {"FailedAndUnresolvableNodes", json::object()}, {"Error", ""}};
    bool has_topocni = false;
    auto nets = networks_of(a.pod, has_topocni);
    std::string who = meta(a.pod, "namespace") + "/" + meta(a.pod, "name");
    json passed_nodes = json::array(), passed_names = json::array();
    if (!has_topocni) {   // not ours: every node, at once
        if (a.nodes) result["Nodes"] = {{"metadata", json::object()}, {"items", *a.nodes}};
        if (a.node_names) result["NodeNames"] = *a.node_names;
        return result;
    }
    std::string uid = meta(a.pod, "uid"), log;
    size_t fit = 0, total = 0, sig = signature(nets);
    auto judge = [&](const NodeView& v) -> bool {
        ++total;
        NodeVerdict verdict;
        verdict = cached_judge(nets, sig, v, uid, now);
        if (verdict.fits) {
            ++fit;
            return true;
        }
        (verdict.resolvable ? result["FailedNodes"] : result["FailedAndUnresolvableNodes"])[v.name] = verdict.reason;
        log += "; " + v.name + ": " + verdict.evidence;
        return false;
    };
    if (a.nodes) {
        for (auto& n : *a.nodes)
            if (judge(view_of(n))) passed_nodes.push_back(n);
        result["Nodes"] = {{"metadata", json::object()}, {"items", passed_nodes}};
    }
    if (a.node_names) {
        for (auto& name : *a.node_names) {
            std::shared_ptr<const NodeView> v = cached_view(name);
            if (judge(*v)) passed_names.push_back(name);
        }
        result["NodeNames"] = passed_names;
    }
    base::log::info(capped("filter " + who + ": " + std::to_string(fit) + " of " + std::to_string(total) + " nodes fit" + log));
    return result;
}

json Extender::prioritize(const ExtenderArgs& a, std::time_t now) {
    json out = json::array();
    bool has_topocni = false;
    auto nets = networks_of(a.pod, has_topocni);
    std::string uid = meta(a.pod, "uid");
    size_t sig = signature(nets);
    auto score = [&](const NodeView& v) {
        if (!has_topocni) return 0;
        NodeVerdict verdict = cached_judge(nets, sig, v, uid, now);
        return verdict.fits ? verdict.score : 0;
    };
    if (a.nodes)
        for (auto& n : *a.nodes) {
            NodeView v = view_of(n);
            out.push_back({{"Host", v.name}, {"Score", score(v)}});
        }
    if (a.node_names)
        for (auto& name : *a.node_names) out.push_back({{"Host", name}, {"Score", score(*cached_view(name))}});
    return out;
}

Extender::Reply Extender::handle(const std::string& method, const std::string& target, const std::string& body) {
    std::string path = target.substr(0, target.find('?'));
    if (method == "GET" && path == "/healthz") return {200, R"({"status":"ok"})"};
    bool filter_verb = path == o_.url_prefix + "/filter", prioritize_verb = path == o_.url_prefix + "/prioritize";
    if (!filter_verb && !prioritize_verb) return {404, R"({"Error":"no such verb"})"};
    if (method != "POST") return {405, R"({"Error":"POST only"})"};
    std::time_t now = std::time(nullptr);
    try {
        ExtenderArgs a = parse_extender_args(body);
        return {200, (filter_verb ? filter(a, now) : prioritize(a, now)).dump()};
    } catch (const base::Error& e) {
        base::log::warn(std::string("bad request: ") + e.what());
        // The scheduler reads Error from a 200 answer; for prioritize a list is expected,
        // so any other answer is an error it logs.
        if (filter_verb)
            return {200, json({{"Nodes", nullptr}, {"NodeNames", nullptr}, {"FailedNodes", json::object()},
                               {"FailedAndUnresolvableNodes", json::object()}, {"Error", e.what()}})
                             .dump()};
        return {400, json({{"Error", e.what()}}).dump()};
    }
}

}  // namespace cni::cluster
