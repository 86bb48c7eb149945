#include "kube/kubeconfig.h"

#include <cctype>
#include <cstdlib>
#include <cmath>
#include <memory>
#include <mutex>
#include <type_traits>

#include <nlohmann/json.hpp>

#include "kube/error.h"
#include "base/log.h"
#include "base/files.h"
#include "kube/yaml.h"

namespace kube {

namespace {

using json = nlohmann::json;

[[noreturn]] void bad(const std::string& what, const std::string& why) {
    throw Error(Error::Kind::Invalid, what + ": " + why);
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


std::optional<Kubeconfig> in_cluster_config(const std::string& sa_dir) {
    const char* host = ::getenv("KUBERNETES_SERVICE_HOST");
    const char* port = ::getenv("KUBERNETES_SERVICE_PORT");
    if (!host || !*host || !port || !*port) return std::nullopt;
    Kubeconfig kc;
    kc.path = "(in-cluster service account " + sa_dir + ")";
    std::string h = host;
    kc.server = "https://" + (h.find(':') != std::string::npos ? "[" + h + "]" : h) + ":" + port;
    kc.token_file = sa_dir + "/token";
    kc.token = trimmed(read_whole(kc.path, kc.token_file));
    kc.ca_pem = read_whole(kc.path, sa_dir + "/ca.crt");
    kc.ca_source = "'" + sa_dir + "/ca.crt'";
    kc.user = "serviceaccount";
    return kc;
}

std::string current_token(const Kubeconfig& kc) {
    // A projected service-account token rotates: read it for every request.
    if (kc.token_file.empty()) return kc.token;
    return trimmed(read_whole("kubeconfig '" + kc.path + "': tokenFile", kc.token_file));
}

https::Tls tls_of(const Kubeconfig& kc) { return {kc.ca_pem, kc.ca_source, kc.client_cert_pem, kc.client_key_pem, kc.insecure}; }

}  // namespace kube
