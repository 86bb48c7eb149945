#include "cni/placement/kube.h"

#include <sys/time.h>

#include <cctype>
#include <cmath>
#include <memory>
#include <mutex>
#include <type_traits>

#include <nlohmann/json.hpp>

#include "cni/error.h"
#include "cni/placement/https.h"
#include "base/log.h"
#include "base/files.h"
#include "base/flock.h"
#include "cni/placement/yaml.h"

namespace cni::kube {

namespace {

using json = nlohmann::json;

constexpr size_t kMaxResponse = 16u << 20;           // a Node with a long image list is ~1 MiB
constexpr double kRememberFailureSeconds = 3;        // a storm of ADDs fails fast meanwhile

[[noreturn]] void bad(const std::string& what, const std::string& why) {
    throw Error(kInvalidConfig, what + ": " + why);
}

std::string dir_of(const std::string& path) {
    auto slash = path.rfind('/');
    if (slash == std::string::npos) return ".";
    return slash == 0 ? "/" : path.substr(0, slash);
}

std::string read_whole(const std::string& what, const std::string& file) {
    std::optional<std::string> text;
    try {
        text = base::fs::read_file(file);
    } catch (const base::Error& e) {
        bad(what, e.what());
    }
    if (!text) bad(what, "'" + file + "' does not exist");
    return *text;
}

/// The object `list[name == want][inner]`, e.g. clusters[name=local].cluster.
const json& named(const json& root, const char* list, const char* inner, const std::string& want,
                  const std::string& what) {
    auto it = root.find(list);
    if (it != root.end() && it->is_array())
        for (auto& e : *it)
            if (e.is_object() && e.value("name", json()).is_string() && e["name"].get<std::string>() == want) {
                auto in = e.find(inner);
                if (in == e.end() || !in->is_object())
                    bad(what, std::string(list) + "[\"" + want + "\"]." + inner + ": missing");
                return *in;
            }
    bad(what, std::string(list) + ": no entry named '" + want + "'");
}

std::optional<std::string> str(const json& obj, const char* key, const std::string& what, const std::string& path) {
    auto it = obj.find(key);
    if (it == obj.end() || it->is_null()) return std::nullopt;
    if (!it->is_string()) bad(what, path + "." + key + ": expected a string");
    return it->get<std::string>();
}

/// PEM (or a token) from "<key>-data" (base64) or "<key>" (a file, relative to the
/// kubeconfig's directory).
std::string data_or_file(const json& obj, const std::string& key, const std::string& dir, const std::string& what,
                         const std::string& path) {
    if (auto d = str(obj, (key + "-data").c_str(), what, path)) {
        auto bytes = base64_decode(*d);
        if (!bytes) bad(what, path + "." + key + "-data: not valid base64");
        return *bytes;
    }
    if (auto f = str(obj, key.c_str(), what, path)) {
        std::string file = !f->empty() && (*f)[0] == '/' ? *f : dir + "/" + *f;
        return read_whole(what + ": " + path + "." + key, file);
    }
    return "";
}

/// Multus writes "https://[10.96.0.1]:443" for IPv4 too (Go accepts it, curl does not).
std::string normalise_server(std::string s) {
    auto open = s.find("://[");
    if (open == std::string::npos) return s;
    auto close = s.find(']', open);
    if (close == std::string::npos) return s;
    std::string host = s.substr(open + 4, close - open - 4);
    if (host.find(':') == std::string::npos) s = s.substr(0, open + 3) + host + s.substr(close + 1);
    return s;
}

std::string trimmed(std::string t) {
    while (!t.empty() && (t.back() == '\n' || t.back() == '\r' || t.back() == ' ')) t.pop_back();
    return t;
}

double now_seconds() {
    timeval tv;
    gettimeofday(&tv, nullptr);
    return tv.tv_sec + tv.tv_usec / 1e6;
}

}  // namespace

namespace {

std::string url_escape(const std::string& s) {
    static const char* hex = "0123456789ABCDEF";
    std::string out;
    for (unsigned char ch : s) {
        if (std::isalnum(ch) || ch == '-' || ch == '.' || ch == '_' || ch == '~') out += static_cast<char>(ch);
        else { out += '%'; out += hex[ch >> 4]; out += hex[ch & 15]; }
    }
    return out;
}

/// The message of a Kubernetes Status object, or the first bytes of the body.
std::string status_message(const std::string& body) {
    auto j = json::parse(body, nullptr, false);
    if (j.is_object() && j.contains("message") && j["message"].is_string()) return j["message"].get<std::string>();
    return body.substr(0, 200);
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
        base::log::warn(std::string("cannot write node label cache: ") + e.what());   // only a cache
    }
}

}  // namespace

std::optional<std::string> base64_decode(const std::string& in) {
    auto val = [](char c) -> int {
        if (c >= 'A' && c <= 'Z') return c - 'A';
        if (c >= 'a' && c <= 'z') return c - 'a' + 26;
        if (c >= '0' && c <= '9') return c - '0' + 52;
        if (c == '+' || c == '-') return 62;
        if (c == '/' || c == '_') return 63;
        return -1;
    };
    std::string out;
    unsigned buf = 0;
    int bits = 0;
    bool padding = false;
    for (char c : in) {
        if (c == ' ' || c == '\n' || c == '\r' || c == '\t') continue;
        if (c == '=') { padding = true; continue; }
        if (padding) return std::nullopt;   // data after padding
        int v = val(c);
        if (v < 0) return std::nullopt;
        buf = (buf << 6) | static_cast<unsigned>(v);
        bits += 6;
        if (bits >= 8) {
            bits -= 8;
            out += static_cast<char>((buf >> bits) & 0xFF);
        }
    }
    if (bits >= 6) return std::nullopt;   // a single dangling character
    return out;
}

Kubeconfig parse_kubeconfig(const std::string& text, const std::string& path) {
    std::string what = "kubeconfig '" + path + "'";
    json root = parse_yaml(text, what);
    if (!root.is_object()) bad(what, "not a kubeconfig (expected a mapping)");
    std::string dir = dir_of(path);

    std::string ctx_name;
    if (auto cur = str(root, "current-context", what, "")) ctx_name = *cur;
    if (ctx_name.empty()) {
        // kubectl needs a current context; one lone context is unambiguous.
        auto it = root.find("contexts");
        // (Found by fuzzing: the lone entry may be null or a scalar, where value() throws.)
        if (it != root.end() && it->is_array() && it->size() == 1 && (*it)[0].is_object() &&
            (*it)[0].value("name", json()).is_string())
            ctx_name = (*it)[0]["name"].get<std::string>();
        else bad(what, "current-context: missing");
    }
    const json& ctx = named(root, "contexts", "context", ctx_name, what);
    auto cluster_name = str(ctx, "cluster", what, "contexts[\"" + ctx_name + "\"].context");
    if (!cluster_name) bad(what, "contexts[\"" + ctx_name + "\"].context.cluster: missing");

    Kubeconfig kc;
    kc.path = path;
    std::string cpath = "clusters[\"" + *cluster_name + "\"].cluster";
    const json& cluster = named(root, "clusters", "cluster", *cluster_name, what);
    auto server = str(cluster, "server", what, cpath);
    if (!server || server->empty()) bad(what, cpath + ".server: missing");
    if (server->rfind("https://", 0) != 0 && server->rfind("http://", 0) != 0)
        bad(what, cpath + ".server: '" + *server + "' is not an http(s) URL");
    kc.server = normalise_server(*server);
    while (!kc.server.empty() && kc.server.back() == '/') kc.server.pop_back();
    kc.ca_pem = data_or_file(cluster, "certificate-authority", dir, what, cpath);
    if (cluster.contains("certificate-authority-data"))
        kc.ca_source = what + " " + cpath + ".certificate-authority-data";
    else if (auto f = str(cluster, "certificate-authority", what, cpath))
        kc.ca_source = "'" + (!f->empty() && (*f)[0] == '/' ? *f : dir + "/" + *f) + "' (" + what + ")";
    else
        kc.ca_source = what + " (no certificate-authority)";
    if (auto it = cluster.find("insecure-skip-tls-verify"); it != cluster.end() && !it->is_null()) {
        if (it->is_boolean()) kc.insecure = it->get<bool>();
        else if (it->is_string() && (*it == "true" || *it == "false")) kc.insecure = *it == "true";
        else bad(what, cpath + ".insecure-skip-tls-verify: expected true or false");
    }

    auto user_name = str(ctx, "user", what, "contexts[\"" + ctx_name + "\"].context");
    if (user_name && !user_name->empty()) {
        std::string upath = "users[\"" + *user_name + "\"].user";
        kc.user = *user_name;
        const json& user = named(root, "users", "user", *user_name, what);
        kc.client_cert_pem = data_or_file(user, "client-certificate", dir, what, upath);
        kc.client_key_pem = data_or_file(user, "client-key", dir, what, upath);
        if (kc.client_cert_pem.empty() != kc.client_key_pem.empty())
            bad(what, upath + ": client-certificate and client-key go together");
        if (auto t = str(user, "token", what, upath)) kc.token = *t;
        else if (auto f = str(user, "tokenFile", what, upath)) {
            kc.token_file = !f->empty() && (*f)[0] == '/' ? *f : dir + "/" + *f;
            kc.token = trimmed(read_whole(what + ": " + upath + ".tokenFile", kc.token_file));   // it must exist now
        }
        kc.token = trimmed(kc.token);
        bool has_creds = !kc.token.empty() || !kc.client_cert_pem.empty();
        if (!has_creds && (user.contains("exec") || user.contains("auth-provider")))
            bad(what, upath + ": exec and auth-provider credentials are not supported; "
                              "use a token or a client certificate");
    }
    return kc;
}

Kubeconfig load_kubeconfig(const std::string& path) {
    return parse_kubeconfig(read_whole("kubeconfig", path), path);
}

namespace {

/// GET `path` from the API server; the status as is, or code 7/11 for what failed on the way.
https::Response api_get(const Kubeconfig& kc, const std::string& path, std::chrono::milliseconds timeout) {
    https::Headers headers = {{"Accept", "application/json"}};
    // A projected service-account token rotates: read it for every request.
    std::string token = kc.token;
    if (!kc.token_file.empty()) token = trimmed(read_whole("kubeconfig '" + kc.path + "': tokenFile", kc.token_file));
    if (!token.empty()) headers.emplace_back("Authorization", "Bearer " + token);
    https::Tls tls{kc.ca_pem, kc.ca_source, kc.client_cert_pem, kc.client_key_pem, kc.insecure};
    if (kc.insecure)
        base::log::warn("kubeconfig '" + kc.path + "' sets insecure-skip-tls-verify: the API server at " + kc.server +
                  " is not verified");
    try {
        return https::get(kc.server + path, headers, tls, timeout, kMaxResponse);
    } catch (const base::Error& e) {
        if (code_of(e) == kTryAgainLater) throw Error(kTryAgainLater, std::string("Kubernetes API unreachable: ") + e.what());
        throw Error(code_of(e), "kubeconfig '" + kc.path + "': " + e.what());
    }
}

/// Code 7 or 11 for an answer that is not 200; `what` names the object ("node 'w1'").
void require_ok(const Kubeconfig& kc, const https::Response& r, const std::string& where, const std::string& what,
                const std::string& resource) {
    if (r.status == 200) return;
    std::string code = "HTTP " + std::to_string(r.status);
    std::string who = "kubeconfig '" + kc.path + "'" + (kc.user.empty() ? "" : " (user '" + kc.user + "')");
    if (r.status == 401)
        throw Error(kInvalidConfig, who + ": the API server refused the credentials (" + code + "): " +
                                        status_message(r.body));
    if (r.status == 403)
        throw Error(kInvalidConfig, who + ": not allowed to get " + what + " (" + code + "): " + status_message(r.body) +
                                        "; topocni needs \"get\" on \"" + resource +
                                        "\" (it uses get on nodes and pods, nothing else): see examples/rbac.yaml");
    if (r.status == 429 || r.status >= 500)
        throw Error(kTryAgainLater, "Kubernetes API: " + where + ": " + code + ": " + status_message(r.body));
    throw Error(kInvalidConfig, "Kubernetes API: " + where + ": " + code + ": " + status_message(r.body));
}

}  // namespace

Labels fetch_node_labels(const Kubeconfig& kc, const std::string& node, std::chrono::milliseconds timeout) {
    std::string path = "/api/v1/nodes/" + url_escape(node);
    std::string where = "GET " + kc.server + path;
    https::Response r = api_get(kc, path, timeout);
    if (r.status == 404)
        throw Error(kInvalidConfig, "nodeName: node '" + node + "' not found by the API server at " + kc.server +
                                        " (HTTP 404); the name is " + kc.node_source +
                                        ": set nodeName to the Node's name if it differs");
    require_ok(kc, r, where, "node '" + node + "'", "nodes");
    const std::string& body = r.body;
    auto j = json::parse(body, nullptr, false);
    if (!j.is_object() || !j.contains("metadata") || !j["metadata"].is_object())
        throw Error(kTryAgainLater, "Kubernetes API: " + where + ": the response is not a Node object");
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
    https::Response r = api_get(kc, path, opt.timeout);
    require_ok(kc, r, "GET " + kc.server + path, "pod '" + ns + "/" + pod + "'", "pods");
    auto j = json::parse(r.body, nullptr, false);
    std::string node;
    if (j.is_object() && j.contains("spec") && j["spec"].is_object()) node = str_member(j["spec"], "nodeName");
    std::string their_uid = j.is_object() && j.contains("metadata") && j["metadata"].is_object()
                                ? str_member(j["metadata"], "uid") : "";
    if (!uid.empty() && !their_uid.empty() && their_uid != uid)
        throw Error(kTryAgainLater, "Kubernetes API: pod '" + ns + "/" + pod + "' is now another pod (uid " + their_uid +
                                        ", this one is " + uid + ")");
    if (node.empty())
        throw Error(kTryAgainLater, "Kubernetes API: pod '" + ns + "/" + pod + "' has no spec.nodeName (not scheduled?)");
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
            auto code = cached->find("code");
            std::string err = str_member(*cached, "error");
            throw Error(code != cached->end() && code->is_number_integer() ? code->get<int>() : int(kTryAgainLater),
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
        entry["code"] = code_of(e);
        entry["error"] = e.what();
        write_cache(path, entry);
        throw;
    }
}

}  // namespace cni::kube
