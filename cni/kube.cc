#include "cni/kube.h"

#include <curl/curl.h>
#include <fcntl.h>
#include <gnu/libc-version.h>
#include <sys/auxv.h>
#include <unistd.h>
#include <dlfcn.h>
#include <sys/time.h>

#include <cctype>
#include <cmath>
#include <memory>
#include <mutex>
#include <type_traits>

#include <nlohmann/json.hpp>

#include "cni/error.h"
#include "cni/log.h"
#include "cni/state.h"
#include "ipam/fs.h"
#include "cni/yaml.h"

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
        text = state::read_file(file);
    } catch (const Error& e) {
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

double now_seconds() {
    timeval tv;
    gettimeofday(&tv, nullptr);
    return tv.tv_sec + tv.tv_usec / 1e6;
}

// libcurl is loaded on first use: linked in, it and the ~30 libraries it pulls (TLS,
// Kerberos, LDAP, IDN...) were loaded and relocated by every plugin run, which took
// longer than the whole ADD and doubled the RSS, while only nodeSelector with an API
// server ever calls it.
struct Curl {
    decltype(&::curl_global_init) global_init;
    decltype(&::curl_easy_init) easy_init;
    decltype(&::curl_easy_cleanup) easy_cleanup;
    decltype(&::curl_easy_setopt) easy_setopt;
    decltype(&::curl_easy_perform) easy_perform;
    decltype(&::curl_easy_getinfo) easy_getinfo;
    decltype(&::curl_easy_strerror) easy_strerror;
    decltype(&::curl_slist_append) slist_append;
    decltype(&::curl_slist_free_all) slist_free_all;
};

}  // namespace

std::optional<std::string> glibc_release(const std::string& path) {
    // Not state::read_file: libc.so.6 is often a symlink (libc-2.28.so) and is ~2 MiB.
    int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) return std::nullopt;
    std::string text;
    char buf[65536];
    ssize_t n;
    while (text.size() < (64u << 20) && (n = ::read(fd, buf, sizeof buf)) > 0) text.append(buf, size_t(n));
    ::close(fd);
    size_t at = text.find("release version ");
    if (at == std::string::npos) return std::nullopt;
    size_t begin = at + 16, end = begin;
    while (end < text.size() && (std::isdigit(static_cast<unsigned char>(text[end])) || text[end] == '.')) ++end;
    std::string release = text.substr(begin, end - begin);
    while (!release.empty() && release.back() == '.') release.pop_back();
    if (release.empty()) return std::nullopt;
    return release;
}

// The release build of topocni is static. It can still dlopen libcurl, but only when the
// node's glibc is the one it was linked with: libcurl brings the node's libc.so.6 and
// dynamic loader, which share private interfaces with the copy linked into us, and
// another release fails anywhere from a dlopen error to a crash. So that case is refused
// up front, with a message that says what to do instead.
std::string libcurl_blocker(const std::string& ours, const std::vector<std::string>& libcs) {
    for (auto& path : libcs) {
        auto theirs = glibc_release(path);
        if (!theirs) continue;
        if (*theirs == ours) return "";
        return "this topocni is statically linked with glibc " + ours + " and can load libcurl only on a node " +
               "with that glibc, but " + path + " is glibc " + *theirs;
    }
    return "this topocni is statically linked and found no glibc to load libcurl with";
}

namespace {

const Curl& curl() {
    static std::once_flag once;
    static Curl api;
    static std::string error;
    std::call_once(once, [] {
        // A dynamic build (the test and sanitizer builds) has only one libc.
        if (::getauxval(AT_BASE) == 0)
            error = libcurl_blocker(::gnu_get_libc_version(),
                                    {"/lib/x86_64-linux-gnu/libc.so.6", "/usr/lib/x86_64-linux-gnu/libc.so.6",
                                     "/lib/aarch64-linux-gnu/libc.so.6", "/usr/lib/aarch64-linux-gnu/libc.so.6",
                                     "/lib64/libc.so.6", "/usr/lib64/libc.so.6", "/lib/libc.so.6", "/usr/lib/libc.so.6"});
        if (!error.empty()) {
            error += "; use nodeLabelsFile (Node Feature Discovery writes one) or a topocni built on this OS";
            return;
        }
        void* lib = ::dlopen("libcurl.so.4", RTLD_NOW | RTLD_LOCAL);
        if (!lib) {
            const char* e = ::dlerror();
            error = e ? e : "dlopen failed";
            return;
        }
        auto sym = [&](auto& fn, const char* name) {
            fn = reinterpret_cast<std::remove_reference_t<decltype(fn)>>(::dlsym(lib, name));
            if (!fn && error.empty()) error = std::string("libcurl.so.4 has no ") + name;
        };
        sym(api.global_init, "curl_global_init");
        sym(api.easy_init, "curl_easy_init");
        sym(api.easy_cleanup, "curl_easy_cleanup");
        sym(api.easy_setopt, "curl_easy_setopt");
        sym(api.easy_perform, "curl_easy_perform");
        sym(api.easy_getinfo, "curl_easy_getinfo");
        sym(api.easy_strerror, "curl_easy_strerror");
        sym(api.slist_append, "curl_slist_append");
        sym(api.slist_free_all, "curl_slist_free_all");
        if (error.empty()) api.global_init(CURL_GLOBAL_DEFAULT);
    });
    if (!error.empty())
        fail_internal("cannot load libcurl (needed to read node labels from the Kubernetes API): " + error);
    return api;
}

size_t collect(char* data, size_t size, size_t n, void* user) {
    auto* out = static_cast<std::string*>(user);
    if (out->size() + size * n > kMaxResponse) return 0;   // aborts the transfer
    out->append(data, size * n);
    return size * n;
}

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
        auto text = state::read_file(path);
        if (!text) return std::nullopt;
        auto j = json::parse(*text, nullptr, false);
        if (j.is_object()) return j;
        log::warn("ignoring unreadable node label cache '" + path + "'");
    } catch (const Error& e) {
        log::warn(std::string("ignoring node label cache: ") + e.what());
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
        state::write_file(path, j.dump() + "\n", 0600);
    } catch (const Error& e) {
        log::warn(std::string("cannot write node label cache: ") + e.what());   // only a cache
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
    if (auto it = cluster.find("insecure-skip-tls-verify"); it != cluster.end() && !it->is_null()) {
        if (it->is_boolean()) kc.insecure = it->get<bool>();
        else if (it->is_string() && (*it == "true" || *it == "false")) kc.insecure = *it == "true";
        else bad(what, cpath + ".insecure-skip-tls-verify: expected true or false");
    }

    auto user_name = str(ctx, "user", what, "contexts[\"" + ctx_name + "\"].context");
    if (user_name && !user_name->empty()) {
        std::string upath = "users[\"" + *user_name + "\"].user";
        const json& user = named(root, "users", "user", *user_name, what);
        kc.client_cert_pem = data_or_file(user, "client-certificate", dir, what, upath);
        kc.client_key_pem = data_or_file(user, "client-key", dir, what, upath);
        if (kc.client_cert_pem.empty() != kc.client_key_pem.empty())
            bad(what, upath + ": client-certificate and client-key go together");
        if (auto t = str(user, "token", what, upath)) kc.token = *t;
        else if (auto f = str(user, "tokenFile", what, upath)) {
            std::string file = !f->empty() && (*f)[0] == '/' ? *f : dir + "/" + *f;
            kc.token = read_whole(what + ": " + upath + ".tokenFile", file);
        }
        while (!kc.token.empty() && (kc.token.back() == '\n' || kc.token.back() == '\r' || kc.token.back() == ' '))
            kc.token.pop_back();
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

Labels fetch_node_labels(const Kubeconfig& kc, const std::string& node, std::chrono::milliseconds timeout) {
    const Curl& api = curl();
    std::unique_ptr<CURL, void (*)(CURL*)> h(api.easy_init(), api.easy_cleanup);
    if (!h) fail_internal("failed to initialise libcurl");
    std::unique_ptr<curl_slist, void (*)(curl_slist*)> headers(nullptr, api.slist_free_all);
    auto add_header = [&](const std::string& s) { headers.reset(api.slist_append(headers.release(), s.c_str())); };
    add_header("Accept: application/json");
    if (!kc.token.empty()) add_header("Authorization: Bearer " + kc.token);

    std::string url = kc.server + "/api/v1/nodes/" + url_escape(node);
    std::string body;
    char err[CURL_ERROR_SIZE] = {};
    CURL* c = h.get();
    api.easy_setopt(c, CURLOPT_URL, url.c_str());
    api.easy_setopt(c, CURLOPT_PROTOCOLS_STR, "https,http");
    api.easy_setopt(c, CURLOPT_NOSIGNAL, 1L);
    api.easy_setopt(c, CURLOPT_TIMEOUT_MS, static_cast<long>(timeout.count()));
    api.easy_setopt(c, CURLOPT_CONNECTTIMEOUT_MS, static_cast<long>(timeout.count()));
    api.easy_setopt(c, CURLOPT_HTTPHEADER, headers.get());
    api.easy_setopt(c, CURLOPT_USERAGENT, "topocni/" TOPOCNI_VERSION);
    api.easy_setopt(c, CURLOPT_WRITEFUNCTION, collect);
    api.easy_setopt(c, CURLOPT_WRITEDATA, &body);
    api.easy_setopt(c, CURLOPT_ERRORBUFFER, err);
    // The PEM blobs are copied by libcurl, so nothing has to outlive this call.
    if (!kc.ca_pem.empty()) {
        curl_blob ca{const_cast<char*>(kc.ca_pem.data()), kc.ca_pem.size(), CURL_BLOB_COPY};
        api.easy_setopt(c, CURLOPT_CAINFO_BLOB, &ca);
    }
    if (!kc.client_cert_pem.empty()) {
        curl_blob cert{const_cast<char*>(kc.client_cert_pem.data()), kc.client_cert_pem.size(), CURL_BLOB_COPY};
        curl_blob key{const_cast<char*>(kc.client_key_pem.data()), kc.client_key_pem.size(), CURL_BLOB_COPY};
        api.easy_setopt(c, CURLOPT_SSLCERT_BLOB, &cert);
        api.easy_setopt(c, CURLOPT_SSLCERTTYPE, "PEM");
        api.easy_setopt(c, CURLOPT_SSLKEY_BLOB, &key);
        api.easy_setopt(c, CURLOPT_SSLKEYTYPE, "PEM");
    }
    if (kc.insecure) {
        api.easy_setopt(c, CURLOPT_SSL_VERIFYPEER, 0L);
        api.easy_setopt(c, CURLOPT_SSL_VERIFYHOST, 0L);
    }

    CURLcode rc = api.easy_perform(c);
    std::string where = "GET " + url;
    if (rc != CURLE_OK) {
        std::string why = err[0] ? err : api.easy_strerror(rc);
        switch (rc) {
            case CURLE_PEER_FAILED_VERIFICATION:
            case CURLE_SSL_CACERT_BADFILE:
            case CURLE_SSL_CERTPROBLEM:
            case CURLE_UNSUPPORTED_PROTOCOL:
            case CURLE_URL_MALFORMAT:
                throw Error(kInvalidConfig, "kubeconfig '" + kc.path + "': " + where + " failed: " + why);
            default:
                throw Error(kTryAgainLater, "Kubernetes API unreachable: " + where + " failed: " + why);
        }
    }
    long status = 0;
    api.easy_getinfo(c, CURLINFO_RESPONSE_CODE, &status);
    std::string code = "HTTP " + std::to_string(status);
    if (status == 401 || status == 403)
        throw Error(kInvalidConfig, "kubeconfig '" + kc.path + "': the API server refused the credentials (" + code +
                                        "): " + status_message(body));
    if (status == 404)
        throw Error(kInvalidConfig, "nodeName: node '" + node + "' not found by the API server (" + code + ")");
    if (status == 429 || status >= 500)
        throw Error(kTryAgainLater, "Kubernetes API: " + where + ": " + code + ": " + status_message(body));
    if (status != 200)
        throw Error(kInvalidConfig, "Kubernetes API: " + where + ": " + code + ": " + status_message(body));

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

Labels cached_node_labels(const Kubeconfig& kc, const std::string& node, const CacheOptions& opt) {
    constexpr auto kTimeout = std::chrono::milliseconds(3000);
    std::string path = cache_path(opt.state_dir, node);
    if (auto hit = fresh(read_cache(path), kc.server, opt.ttl_seconds, now_seconds())) {
        log::debug("node labels of '" + node + "' from the cache '" + path + "'");
        return *hit;
    }
    if (!opt.write) return fetch_node_labels(kc, node, kTimeout);

    // One fetch at a time; whoever waited finds the fresh entry (or the remembered
    // failure) and does not fetch again. The cache's directory is the lock: no lock file.
    ipam::fs::mkdir_p(opt.state_dir + "/node-labels", 0700);
    state::Lock lock(opt.state_dir + "/node-labels", "the node label cache", std::chrono::seconds(10));
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
        log::info("fetched " + std::to_string(labels.size()) + " labels of node '" + node + "' from " + kc.server);
        return labels;
    } catch (const Error& e) {
        entry["failedAt"] = now_seconds();
        entry["code"] = e.code;
        entry["error"] = e.what();
        write_cache(path, entry);
        throw;
    }
}

}  // namespace cni::kube
