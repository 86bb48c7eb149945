#include "kube/node_cache.h"

#include <sys/time.h>

#include "base/files.h"
#include "base/flock.h"
#include "base/log.h"
#include "kube/client.h"
#include "kube/error.h"

namespace kube {

namespace {

using json = nlohmann::json;

constexpr double kRememberFailureSeconds = 3;        // a storm of ADDs fails fast meanwhile

double now_seconds() {
    timeval tv;
    gettimeofday(&tv, nullptr);
    return tv.tv_sec + tv.tv_usec / 1e6;
}

std::string cache_path(const std::string& state_dir, const std::string& node) {
    return state_dir + "/node-labels/" + node + ".json";
}

std::optional<json> read_cache(const std::string& path) {
    try {
        auto text = base::fs::read_file(path);
        if (!text) return std::nullopt;
        auto j = json::parse(*text, nullptr, false);
        if (j.is_object()) return j;
        base::log::warn("ignoring unreadable node label cache '" + path + "'");
    } catch (const base::Error& e) {
        base::log::warn(std::string("ignoring node label cache: ") + e.what());
    }
    return std::nullopt;
}

/// A string member, or "" when absent or of another type (the cache may be corrupt).
std::string str_member(const json& j, const char* key) {
    auto it = j.find(key);
    return it != j.end() && it->is_string() ? it->get<std::string>() : std::string();
}

/// Labels of a cache entry that belongs to `server` and is younger than `ttl`.
std::optional<Labels> fresh(const std::optional<json>& c, const std::string& server, double ttl, double now) {
    if (!c || str_member(*c, "server") != server) return std::nullopt;
    auto at = c->find("fetchedAt");
    auto labels = c->find("labels");
    if (at == c->end() || !at->is_number() || labels == c->end() || !labels->is_object()) return std::nullopt;
    double age = now - at->get<double>();
    if (age < 0 || age >= ttl) return std::nullopt;   // a clock that went back invalidates it
    Labels out;
    for (auto it = labels->begin(); it != labels->end(); ++it)
        if (it->is_string()) out[it.key()] = it->get<std::string>();
    return out;
}

void write_cache(const std::string& path, const json& j) {
    try {
        base::fs::write_file(path, j.dump() + "\n", 0600);
    } catch (const base::Error& e) {
        base::log::warn(std::string("failed to write the node label cache: ") + e.what());   // only a cache
    }
}

/// The error for an answer that is not 200 to a GET made for ADD; `what` names the object.
[[noreturn]] void refuse(const Kubeconfig& kc, const https::Response& r, const std::string& path, const std::string& what,
                         const std::string& resource) {
    std::string code = "HTTP " + std::to_string(r.status);
    std::string where = "GET " + kc.server + path;
    std::string who = "kubeconfig '" + kc.path + "'" + (kc.user.empty() ? "" : " (user '" + kc.user + "')");
    if (r.status == 401)
        throw Error(Error::Kind::Invalid, who + ": the API server refused the credentials (" + code + "): " +
                                              status_message(r.body), r.status);
    if (r.status == 403)
        throw Error(Error::Kind::Invalid, who + ": not allowed to get " + what + " (" + code + "): " +
                                              status_message(r.body) + "; topocni needs \"get\" on \"" + resource +
                                              "\" (it uses get on nodes and pods, nothing else): see examples/rbac.yaml",
                    r.status);
    if (r.status == 429 || r.status >= 500)
        throw Error(Error::Kind::Unavailable, "Kubernetes API: " + where + ": " + code + ": " + status_message(r.body), r.status);
    throw Error(Error::Kind::Invalid, "Kubernetes API: " + where + ": " + code + ": " + status_message(r.body), r.status);
}

}  // namespace

Labels fetch_node_labels(const Kubeconfig& kc, const std::string& node, std::chrono::milliseconds timeout) {
    std::string path = "/api/v1/nodes/" + url_escape(node);
    Client client(kc, timeout);
    https::Response r = client.send("GET", path);
    if (r.status == 404)
        throw Error(Error::Kind::Invalid, "nodeName: node '" + node + "' not found by the API server at " + kc.server +
                                        " (HTTP 404); the name is " + kc.node_source +
                                        ": set nodeName to the Node's name if it differs");
    if (r.status != 200) refuse(kc, r, path, "node '" + node + "'", "nodes");
    auto j = json::parse(r.body, nullptr, false);
    if (!j.is_object() || !j.contains("metadata") || !j["metadata"].is_object())
        throw Error(Error::Kind::Unavailable, "Kubernetes API: GET " + kc.server + path + ": the response is not a Node object");
    Labels out;
    const json& md = j["metadata"];
    if (md.contains("labels") && md["labels"].is_object())
        for (auto it = md["labels"].begin(); it != md["labels"].end(); ++it)
            if (it->is_string()) out[it.key()] = it->get<std::string>();
    return out;
}

std::string pod_node_name(const Kubeconfig& kc, const std::string& ns, const std::string& pod, const std::string& uid,
                          const CacheOptions& opt) {
    // Cached without a lock: two ADDs asking at once both ask the API, and write the same.
    std::string file = opt.state_dir + "/node-labels/.pod-node.json";
    auto cached = read_cache(file);
    if (cached && str_member(*cached, "server") == kc.server && cached->contains("fetchedAt") &&
        (*cached)["fetchedAt"].is_number()) {
        double age = now_seconds() - (*cached)["fetchedAt"].get<double>();
        std::string node = str_member(*cached, "node");
        if (age >= 0 && age < opt.ttl_seconds && !node.empty()) return node;
    }
    std::string path = "/api/v1/namespaces/" + url_escape(ns) + "/pods/" + url_escape(pod);
    Client client(kc, opt.timeout);
    https::Response r = client.send("GET", path);
    if (r.status != 200) refuse(kc, r, path, "pod '" + ns + "/" + pod + "'", "pods");
    auto j = json::parse(r.body, nullptr, false);
    std::string node;
    if (j.is_object() && j.contains("spec") && j["spec"].is_object()) node = str_member(j["spec"], "nodeName");
    std::string their_uid = j.is_object() && j.contains("metadata") && j["metadata"].is_object()
                                ? str_member(j["metadata"], "uid") : "";
    if (!uid.empty() && !their_uid.empty() && their_uid != uid)
        throw Error(Error::Kind::Unavailable, "Kubernetes API: pod '" + ns + "/" + pod + "' is now another pod (uid " + their_uid +
                                        ", this one is " + uid + ")");
    if (node.empty())
        throw Error(Error::Kind::Unavailable, "Kubernetes API: pod '" + ns + "/" + pod + "' has no spec.nodeName (not scheduled?)");
    if (opt.write) {
        base::fs::mkdir_p(opt.state_dir + "/node-labels", 0700);
        write_cache(file, {{"server", kc.server}, {"node", node}, {"fetchedAt", now_seconds()}});
    }
    return node;
}

Labels cached_node_labels(const Kubeconfig& kc, const std::string& node, const CacheOptions& opt) {
    const auto kTimeout = opt.timeout;
    std::string path = cache_path(opt.state_dir, node);
    if (auto hit = fresh(read_cache(path), kc.server, opt.ttl_seconds, now_seconds())) {
        base::log::debug("node labels of '" + node + "' from the cache '" + path + "'");
        return *hit;
    }
    if (!opt.write) return fetch_node_labels(kc, node, kTimeout);

    // One fetch at a time; whoever waited finds the fresh entry (or the remembered
    // failure) and does not fetch again. The cache's directory is the lock: no lock file.
    base::fs::mkdir_p(opt.state_dir + "/node-labels", 0700);
    base::DirLock lock(opt.state_dir + "/node-labels", "the node label cache", std::chrono::seconds(10));
    auto cached = read_cache(path);
    double now = now_seconds();
    if (auto hit = fresh(cached, kc.server, opt.ttl_seconds, now)) return *hit;
    if (cached && str_member(*cached, "server") == kc.server && cached->contains("failedAt") &&
        (*cached)["failedAt"].is_number()) {
        double age = now - (*cached)["failedAt"].get<double>();
        if (age >= 0 && age < kRememberFailureSeconds)
        {
            std::string err = str_member(*cached, "error");
            throw Error(str_member(*cached, "kind") == "invalid" ? Error::Kind::Invalid : Error::Kind::Unavailable,
                        (err.empty() ? std::string("Kubernetes API unreachable") : err) + " (" +
                            std::to_string(static_cast<int>(age) + (age > static_cast<int>(age) ? 1 : 0)) + " s ago, not retried yet)");
        }
    }
    json entry = {{"node", node}, {"server", kc.server}};
    try {
        Labels labels = fetch_node_labels(kc, node, kTimeout);
        entry["fetchedAt"] = now_seconds();
        entry["labels"] = labels;
        write_cache(path, entry);
        base::log::info("fetched " + std::to_string(labels.size()) + " labels of node '" + node + "' from " + kc.server);
        return labels;
    } catch (const base::Error& e) {
        entry["failedAt"] = now_seconds();
        auto* k = dynamic_cast<const Error*>(&e);
        entry["kind"] = k && k->kind == Error::Kind::Invalid ? "invalid" : "unavailable";
        entry["error"] = e.what();
        write_cache(path, entry);
        throw;
    }
}

}  // namespace kube
