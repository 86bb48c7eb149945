#include "cluster/extender.h"

#include <algorithm>
#include <cctype>

#include "base/json_text.h"
#include "base/log.h"
#include "cni/error.h"

namespace cluster {

namespace {

using json = nlohmann::json;

[[noreturn]] void bad_args(const std::string& why) { throw cni::Error(cni::kDecodingFailure, "ExtenderArgs: " + why); }

/// The member `key` of `j` as Go's encoding/json finds it: the exact name, else any that
/// matches it ignoring case.
const json* member_ci(const json& j, const std::string& key) {
    if (!j.is_object()) return nullptr;
    if (auto it = j.find(key); it != j.end()) return &*it;
    for (auto it = j.begin(); it != j.end(); ++it)
        if (base::json_text::same_key(it.key(), key)) return &*it;
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

namespace {

using Reader = base::json_text::Reader;
using base::json_text::same_key;

/// One Node of Nodes.items: its name, resourceVersion, labels and facts annotation, and
/// its bytes. Members are taken in order, a later one overriding an earlier (Go's way).
NodeItem read_node(Reader& r) {
    if (r.peek() != Reader::Kind::Object) bad_args("Nodes.items: a node that is not an object");
    NodeItem n;
    size_t start = r.offset();
    std::string key, mkey, akey;
    r.begin_object();
    while (r.next_member(key)) {
        if (!same_key(key, "metadata") || r.peek() != Reader::Kind::Object) {
            if (same_key(key, "metadata")) n = NodeItem{};   // null or another kind: no metadata
            r.skip();
            continue;
        }
        r.begin_object();
        while (r.next_member(mkey)) {
            bool is_string = r.peek() == Reader::Kind::String;
            if (same_key(mkey, "name")) {
                n.name = is_string ? r.string() : (r.skip(), std::string());
            } else if (same_key(mkey, "resourceVersion")) {
                n.resource_version = is_string ? r.string() : (r.skip(), std::string());
            } else if (same_key(mkey, "labels")) {
                std::string_view v = r.skip();
                n.labels = v.front() == '{' ? v : std::string_view();
            } else if (same_key(mkey, "annotations") && r.peek() == Reader::Kind::Object) {
                n.facts = {};
                r.begin_object();
                while (r.next_member(akey)) {   // a map: keys exact
                    std::string_view v = r.skip();
                    if (akey == placement::kFactsAnnotation) n.facts = v.front() == '"' ? v : std::string_view();
                }
            } else {
                if (same_key(mkey, "annotations")) n.facts = {};
                r.skip();
            }
        }
    }
    size_t end = r.offset();
    n.raw = std::string_view(r.text()).substr(start, end - start);
    return n;
}

/// Fills `p` from a v1.Pod as Go's encoding/json decodes into one: struct fields ignoring
/// case, a later member overriding an earlier, `null` leaving a struct or string as it is
/// and emptying a map, a second annotations object merged into the first; the annotations'
/// keys exact. Values of another kind than the field's are passed over (Go would fail the
/// whole request; kube-scheduler never sends them).
void read_pod(Reader& r, PodRef& p) {
    std::string key, mkey, akey;
    r.begin_object();
    while (r.next_member(key)) {
        if (!same_key(key, "metadata") || r.peek() != Reader::Kind::Object) {
            r.skip();
            continue;
        }
        r.begin_object();
        while (r.next_member(mkey)) {
            std::string* field = same_key(mkey, "name")        ? &p.name
                                 : same_key(mkey, "namespace") ? &p.namespace_
                                 : same_key(mkey, "uid")       ? &p.uid
                                                               : nullptr;
            if (field && r.peek() == Reader::Kind::String) {
                *field = r.string();
            } else if (same_key(mkey, "annotations") && r.peek() == Reader::Kind::Object) {
                r.begin_object();
                while (r.next_member(akey)) {
                    if (akey == kNetworksAnnotation && r.peek() == Reader::Kind::String) p.networks = r.string();
                    else r.skip();
                }
            } else {
                if (same_key(mkey, "annotations") && r.null()) p.networks.clear();
                else r.skip();
            }
        }
    }
}

}  // namespace

namespace {

[[noreturn]] void too_many() { bad_args("more than " + std::to_string(kMaxNodesPerRequest) + " nodes in one request"); }

}  // namespace

ExtenderArgs parse_extender_args(std::string body) {
    ExtenderArgs a;
    a.body = std::make_shared<const std::string>(std::move(body));
    Reader r(*a.body);
    bool have_pod = false;
    try {
        if (r.peek() != Reader::Kind::Object) bad_args("not a JSON object");
        r.begin_object();
        std::string key, nkey;
        while (r.next_member(key)) {
            if (same_key(key, "Pod")) {
                // *v1.Pod: null makes it nil, an object fills it (into the one before, as Go does).
                if (r.peek() == Reader::Kind::Object) {
                    read_pod(r, a.pod);
                    have_pod = true;
                } else {
                    r.skip();
                    a.pod = PodRef{};
                    have_pod = false;
                }
            } else if (same_key(key, "Nodes")) {
                a.nodes.reset();
                if (r.null()) continue;
                if (r.peek() != Reader::Kind::Object) bad_args("Nodes: not a NodeList");
                a.nodes.emplace();
                bool have_items = false;
                r.begin_object();
                while (r.next_member(nkey)) {
                    if (!same_key(nkey, "items")) {
                        r.skip();
                        continue;
                    }
                    have_items = true;
                    a.nodes->clear();
                    if (r.null()) continue;
                    if (r.peek() != Reader::Kind::Array) bad_args("Nodes: not a NodeList");
                    r.begin_array();
                    while (r.next_element()) {
                        if (a.nodes->size() >= kMaxNodesPerRequest) too_many();
                        a.nodes->push_back(read_node(r));
                    }
                }
                if (!have_items) bad_args("Nodes: not a NodeList");
            } else if (same_key(key, "NodeNames")) {
                a.node_names.reset();
                if (r.null()) continue;
                if (r.peek() != Reader::Kind::Array) bad_args("NodeNames: not a list");
                a.node_names.emplace();
                r.begin_array();
                while (r.next_element()) {
                    if (a.node_names->size() >= kMaxNodesPerRequest) too_many();
                    if (r.peek() != Reader::Kind::String) bad_args("NodeNames: a name that is not a string");
                    a.node_names->push_back(r.string());
                }
            } else {
                r.skip();
            }
        }
        r.end();
    } catch (const base::json_text::SyntaxError& e) {
        bad_args(std::string("not a JSON object: ") + e.what());
    }
    if (!have_pod) bad_args("Pod: missing or not an object");
    if (!a.nodes && !a.node_names) bad_args("neither Nodes nor NodeNames");
    return a;
}

// ---- caches ----

void Extender::replace_nads(const std::vector<json>& items) { nads_.store().replace(items); }

void Extender::nad_event(const kube::Event& e) { nads_.store().event(e); }

Extender::View Extender::make_view(NodeView v) {
    auto n = std::make_shared<Node>();
    n->view = std::move(v);
    return n;
}

void Extender::replace_nodes(const std::vector<json>& items) {
    decltype(nodes_) old;
    {
        std::shared_lock lock(mu_);
        old = nodes_;
    }
    decltype(nodes_) fresh;
    for (auto& n : items) {
        // A relist hands back the nodes that did not change: keep them, and their verdicts.
        std::string rv = meta(n, "resourceVersion"), name = meta(n, "name");
        if (auto it = old.find(name); it != old.end() && !rv.empty() && it->second->view.resource_version == rv) {
            fresh[name] = it->second;
            continue;
        }
        View v = make_view(node_view(n));
        fresh[v->view.name] = std::move(v);
    }
    std::unique_lock lock(mu_);
    nodes_ = std::move(fresh);
    seen_.clear();
}

void Extender::node_event(const kube::Event& e) {
    View v = make_view(node_view(e.object));
    std::unique_lock lock(mu_);
    seen_.erase(v->view.name);
    if (e.type == "DELETED") nodes_.erase(v->view.name);
    else nodes_[v->view.name] = std::move(v);
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
    for (auto& s : sels) {
        auto n = nads_.find(s);
        out.push_back(n ? std::move(*n) : pod_network(s, nullptr));
    }
    return out;
}

std::vector<PodNetwork> Extender::networks_of(const PodRef& pod, bool& has_topocni) {
    has_topocni = false;
    if (pod.networks.empty()) return {};
    std::vector<PodNetwork> nets;
    try {
        nets = resolve(parse_networks(pod.networks, pod.namespace_));
    } catch (const base::Error& e) {
        PodNetwork bad_one;
        bad_one.selection = {pod.namespace_, "(annotation)", ""};
        bad_one.error = e.what();
        nets.push_back(bad_one);
    }
    for (auto& n : nets) has_topocni = has_topocni || n.parsed || !n.error.empty();
    return nets;
}

std::vector<Extender::View> Extender::views_of(const ExtenderArgs& a) {
    std::vector<View> out;
    auto unknown = [](const std::string& name) {
        NodeView v;
        v.name = name;
        v.facts_why = "the node is not in the extender's cache (yet)";
        return make_view(std::move(v));
    };
    if (a.node_names) {
        out.reserve(a.node_names->size());
        std::shared_lock lock(mu_);
        for (auto& name : *a.node_names) {
            auto it = nodes_.find(name);
            out.push_back(it != nodes_.end() ? it->second : unknown(name));
        }
        return out;
    }
    if (!a.nodes) return out;
    out.resize(a.nodes->size());
    std::vector<size_t> missing;
    {
        std::shared_lock lock(mu_);
        for (size_t i = 0; i < a.nodes->size(); ++i) {
            const NodeItem& n = (*a.nodes)[i];
            // The same resourceVersion is the same object: the scheduler's informer and
            // the extender's watch read one API.
            for (auto* cache : {&nodes_, &seen_}) {
                auto it = cache->find(n.name);
                if (!out[i] && it != cache->end() && !n.resource_version.empty() &&
                    it->second->view.resource_version == n.resource_version)
                    out[i] = it->second;
            }
            if (!out[i]) missing.push_back(i);
        }
    }
    for (size_t i : missing) {
        const NodeItem& n = (*a.nodes)[i];
        std::map<std::string, std::string> labels;
        std::optional<std::string> facts;
        try {
            std::string key;
            if (!n.labels.empty()) {
                Reader r(n.labels);
                r.begin_object();
                while (r.next_member(key)) {
                    if (r.peek() == Reader::Kind::String) labels[key] = r.string();
                    else r.skip();
                }
            }
            if (!n.facts.empty()) facts = Reader(n.facts).string();
        } catch (const base::json_text::SyntaxError&) {   // validated when parsed: cannot happen
        }
        out[i] = make_view(node_view(n.name, n.resource_version, std::move(labels), facts ? &*facts : nullptr));
        if (n.resource_version.empty()) continue;
        std::unique_lock lock(mu_);
        if (seen_.size() >= 2 * nodes_.size() + 1000) seen_.clear();   // bounded: the watch's nodes differ rarely
        seen_[n.name] = out[i];
    }
    return out;
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
        out.push_back(b.pod);
    }
    return out;
}

namespace {

size_t signature(const std::vector<PodNetwork>& nets) {
    std::string all;
    for (auto& n : nets) all += n.key() + '\n' + n.resource_name + '\n' + n.config + '\n' + n.error + '\n';
    return std::hash<std::string>{}(all);
}

constexpr size_t kVerdictsPerNode = 8;

void append_members(std::string& out, const std::vector<std::pair<std::string_view, std::string_view>>& members) {
    out += '{';
    for (size_t i = 0; i < members.size(); ++i) {
        if (i) out += ',';
        base::json_text::append_string(out, members[i].first);
        out += ':';
        base::json_text::append_string(out, members[i].second);
    }
    out += '}';
}

}  // namespace

NodeVerdict Extender::cached_judge(const std::vector<PodNetwork>& nets, size_t nets_sig, const View& node,
                                   const std::string& uid, std::time_t now) {
    const NodeView& v = node->view;
    auto pending = pending_on(v.name, uid, now);
    bool stale = !v.facts || !v.taken_at || now - *v.taken_at > static_cast<std::time_t>(o_.judge.max_facts_age);
    VerdictKey key{nets_sig, stale, {}};
    for (auto& p : pending) key.pending += p.uid + '\n';
    {
        std::lock_guard lock(node->mu);
        for (auto& [k, verdict] : node->verdicts)
            if (k == key) return verdict;
    }
    NodeVerdict verdict = judge_node(nets, v, pointers(pending), o_.judge, now);
    std::lock_guard lock(node->mu);
    if (node->verdicts.size() >= kVerdictsPerNode) node->verdicts.erase(node->verdicts.begin());
    node->verdicts.emplace_back(std::move(key), verdict);
    return verdict;
}

Extender::Reply Extender::filter(const ExtenderArgs& a, std::time_t now) {
    bool has_topocni = false;
    auto nets = networks_of(a.pod, has_topocni);
    std::string who = a.pod.namespace_ + "/" + a.pod.name;
    std::string uid = a.pod.uid, log;
    size_t fit = 0, sig = signature(nets);
    // Not ours: every node passes, at once.
    std::vector<View> views = has_topocni ? views_of(a) : std::vector<View>{};
    std::vector<NodeVerdict> verdicts(views.size());   // the failed maps below point into their reasons
    std::vector<std::pair<std::string_view, std::string_view>> failed, unresolvable;
    for (size_t i = 0; i < views.size(); ++i) {
        verdicts[i] = cached_judge(nets, sig, views[i], uid, now);
        if (verdicts[i].fits) {
            ++fit;
            continue;
        }
        const std::string& name = views[i]->view.name;
        (verdicts[i].resolvable ? failed : unresolvable).emplace_back(name, verdicts[i].reason);
        if (log.size() < 4096) log += "; " + name + ": " + verdicts[i].evidence;
    }
    auto pass = [&](size_t i) { return !has_topocni || verdicts[i].fits; };
    // The answer: a head, the fitting Nodes as the request has them (a run of fitting
    // neighbours is one piece, separators included), and a tail.
    struct Owned {
        std::shared_ptr<const std::string> body;
        std::string head, tail;
    };
    auto own = std::make_shared<Owned>();
    if (a.nodes) own->body = a.body;   // the pieces point into it; names are copied
    Reply reply{200, "", {}, own};
    std::string& out = own->head;
    out += R"({"Nodes":)";
    if (a.nodes) {
        out += R"({"metadata":{},"items":[)";
        reply.pieces.push_back(out);
        const auto& items = *a.nodes;
        for (size_t i = 0; i < items.size();) {
            if (!pass(i)) {
                ++i;
                continue;
            }
            size_t last = i;
            while (last + 1 < items.size() && pass(last + 1)) ++last;
            if (reply.pieces.size() > 1) reply.pieces.emplace_back(",");
            const char* from = items[i].raw.data();
            const char* to = items[last].raw.data() + items[last].raw.size();
            reply.pieces.emplace_back(from, static_cast<size_t>(to - from));
            i = last + 1;
        }
        own->tail += "]}";
    } else {
        out += "null";
    }
    std::string& tail = a.nodes ? own->tail : own->head;
    tail += R"(,"NodeNames":)";
    if (a.node_names) {
        tail += '[';
        bool first = true;
        for (size_t i = 0; i < a.node_names->size(); ++i) {
            if (!pass(i)) continue;
            if (!first) tail += ',';
            first = false;
            base::json_text::append_string(tail, (*a.node_names)[i]);
        }
        tail += ']';
    } else {
        tail += "null";
    }
    tail += R"(,"FailedNodes":)";
    append_members(tail, failed);
    tail += R"(,"FailedAndUnresolvableNodes":)";
    append_members(tail, unresolvable);
    tail += R"(,"Error":""})";
    if (a.nodes) reply.pieces.push_back(own->tail);
    else reply.pieces.push_back(own->head);
    if (has_topocni)
        base::log::info(capped("filter " + who + ": " + std::to_string(fit) + " of " + std::to_string(views.size()) +
                               " nodes fit" + log));
    return reply;
}

std::string Extender::Reply::text() const {
    if (pieces.empty()) return body;
    std::string out;
    for (auto p : pieces) out += p;
    return out;
}

std::string Extender::prioritize(const ExtenderArgs& a, std::time_t now) {
    bool has_topocni = false;
    auto nets = networks_of(a.pod, has_topocni);
    std::string uid = a.pod.uid;
    size_t sig = signature(nets);
    // Not ours: every node alike, named as the request names it, without looking it up.
    std::vector<View> views = has_topocni ? views_of(a) : std::vector<View>{};
    size_t count = a.node_names ? a.node_names->size() : a.nodes ? a.nodes->size() : 0;
    std::string out = "[", log;
    for (size_t i = 0; i < count; ++i) {
        int score = 0;
        const std::string& host = a.node_names ? (*a.node_names)[i] : (*a.nodes)[i].name;
        if (has_topocni) {
            NodeVerdict verdict = cached_judge(nets, sig, views[i], uid, now);
            score = verdict.fits ? verdict.score : 0;
            log += (i ? ", " : ": ") + host + "=" + std::to_string(score);
        }
        if (i) out += ',';
        out += R"({"Host":)";
        base::json_text::append_string(out, host);
        out += R"(,"Score":)" + std::to_string(score) + '}';
    }
    out += ']';
    // As filter says why a node was left out, prioritize says how each one scored: the
    // operator's view of the choice kube-scheduler weighed.
    if (has_topocni) base::log::info(capped("prioritize " + a.pod.namespace_ + "/" + a.pod.name + log));
    return out;
}

Extender::Reply Extender::handle(const std::string& method, const std::string& target, std::string body) {
    std::string path = target.substr(0, target.find('?'));
    bool filter_verb = path == o_.url_prefix + "/filter", prioritize_verb = path == o_.url_prefix + "/prioritize";
    if (!filter_verb && !prioritize_verb) return {404, R"({"Error":"no such verb"})"};
    if (method != "POST") return {405, R"({"Error":"POST only"})"};
    std::time_t now = std::time(nullptr);
    try {
        ExtenderArgs a = parse_extender_args(std::move(body));
        if (filter_verb) return filter(a, now);
        return {200, prioritize(a, now), {}, {}};
    } catch (const base::Error& e) {
        base::log::warn(std::string("bad request: ") + e.what());
        // The scheduler reads Error from a 200 answer; for prioritize a list is expected,
        // so any other answer is an error it logs.
        if (filter_verb)
            return {200,
                    json({{"Nodes", nullptr}, {"NodeNames", nullptr}, {"FailedNodes", json::object()},
                          {"FailedAndUnresolvableNodes", json::object()}, {"Error", e.what()}})
                        .dump(-1, ' ', false, json::error_handler_t::replace),
                    {}, {}};
        return {400, json({{"Error", e.what()}}).dump(-1, ' ', false, json::error_handler_t::replace), {}, {}};
    }
}

}  // namespace cluster
