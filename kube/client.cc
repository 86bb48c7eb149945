#include "kube/client.h"

#include <cctype>

#include "base/log.h"
#include "kube/error.h"
#include "kube/watch_decoder.h"

namespace kube {

namespace {

using json = nlohmann::json;

constexpr size_t kMaxResponse = 64u << 20;        // a page of 500 Nodes with long image lists
constexpr size_t kMaxErrorBody = 64u << 10;       // a Status object
constexpr size_t kMaxWatchLine = 16u << 20;       // one object of a WATCH stream

std::string join_query(const std::string& path, const std::string& query) {
    if (query.empty()) return path;
    return path + (path.find('?') == std::string::npos ? "?" : "&") + query;
}

}  // namespace

std::string url_escape(const std::string& s) {
    static const char* hex = "0123456789ABCDEF";
    std::string out;
    for (unsigned char ch : s) {
        if (std::isalnum(ch) || ch == '-' || ch == '.' || ch == '_' || ch == '~') out += static_cast<char>(ch);
        else { out += '%'; out += hex[ch >> 4]; out += hex[ch & 15]; }
    }
    return out;
}

std::string status_message(const std::string& body) {
    auto j = json::parse(body, nullptr, false);
    if (j.is_object() && j.contains("message") && j["message"].is_string()) return j["message"].get<std::string>();
    return body.substr(0, 200);
}

bool resource_version_too_large(int status, const json& body) {
    // As client-go's isTooLargeResourceVersionError: the ResourceVersionTooLarge cause, or
    // (API servers before 1.18.6) a Timeout whose cause or message says so.
    if (!body.is_object()) return false;
    static const json kNone = json::array();
    const json* causes = &kNone;
    if (auto d = body.find("details"); d != body.end() && d->is_object())
        if (auto c = d->find("causes"); c != d->end() && c->is_array()) causes = &*c;
    for (auto& c : *causes)
        if (c.is_object() && c.value("reason", json()) == "ResourceVersionTooLarge") return true;
    auto reason = body.value("reason", json());
    bool timeout = reason == "Timeout" || (status == 504 && !(reason.is_string() && !reason.get<std::string>().empty()));
    if (!timeout) return false;
    for (auto& c : *causes)
        if (c.is_object() && c.value("message", json()) == "Too large resource version") return true;
    auto m = body.value("message", json());
    return m.is_string() && m.get<std::string>().find("Too large resource version") != std::string::npos;
}

Client::Client(Kubeconfig kc, std::chrono::milliseconds timeout)
    : kc_(std::move(kc)), timeout_(timeout), conn_(std::make_unique<https::Connection>(kc_.server, tls_of(kc_))) {}

Client::~Client() = default;

int Client::connections_opened() const { return conn_->connections_opened(); }

https::Response Client::send(const std::string& method, const std::string& path, const std::string& body,
                             const std::string& content_type) {
    https::Request req{method, path, {{"Accept", "application/json"}}, body};
    std::string token = current_token(kc_);
    if (!token.empty()) req.headers.emplace_back("Authorization", "Bearer " + token);
    if (!content_type.empty()) req.headers.emplace_back("Content-Type", content_type);
    if (kc_.insecure)
        base::log::warn("kubeconfig '" + kc_.path + "' sets insecure-skip-tls-verify: the API server at " + kc_.server +
                        " is not verified");
    try {
        return conn_->request(req, timeout_, kMaxResponse);
    } catch (const Error& e) {
        if (e.kind == Error::Kind::Unavailable)
            throw Error(Error::Kind::Unavailable, std::string("Kubernetes API unreachable: ") + e.what());
        throw Error(e.kind, "kubeconfig '" + kc_.path + "': " + e.what());
    }
}

void Client::refuse(const https::Response& r, const std::string& method, const std::string& path,
                    const std::string& what, const std::string& verb, const std::string& resource) const {
    std::string code = "HTTP " + std::to_string(r.status);
    std::string where = method + " " + kc_.server + path;
    std::string who = "kubeconfig '" + kc_.path + "'" + (kc_.user.empty() ? "" : " (user '" + kc_.user + "')");
    if (r.status == 401)
        throw Error(Error::Kind::Invalid,
                    who + ": the API server refused the credentials (" + code + "): " + status_message(r.body), r.status);
    if (r.status == 403)
        throw Error(Error::Kind::Invalid,
                    who + ": not allowed to " + verb + " " + what + " (" + code + "): " + status_message(r.body) +
                        "; topocni needs \"" + verb + "\" on \"" + resource + "\": see examples/rbac.yaml",
                    r.status);
    if (r.status == 410 || resource_version_too_large(r.status, json::parse(r.body, nullptr, false)))
        throw ResourceVersionUnavailable(Error::Kind::Unavailable,
                                         "Kubernetes API: " + where + ": " + code + ": " + status_message(r.body), r.status);
    if (r.status == 429 || r.status >= 500 || r.status == 409)
        throw Error(Error::Kind::Unavailable, "Kubernetes API: " + where + ": " + code + ": " + status_message(r.body),
                    r.status);
    throw Error(Error::Kind::Invalid, "Kubernetes API: " + where + ": " + code + ": " + status_message(r.body), r.status);
}

json Client::get(const std::string& path, const std::string& what, const std::string& resource) {
    auto r = send("GET", path);
    if (r.status != 200) refuse(r, "GET", path, what, "get", resource);
    auto j = json::parse(r.body, nullptr, false);
    if (!j.is_object())
        throw Error(Error::Kind::Unavailable, "Kubernetes API: GET " + kc_.server + path + ": the answer is not a JSON object");
    return j;
}

json Client::patch(const std::string& path, const json& body, const std::string& content_type, const std::string& what,
                   const std::string& resource) {
    auto r = send("PATCH", path, body.dump(), content_type);
    if (r.status != 200) refuse(r, "PATCH", path, what, "patch", resource);
    auto j = json::parse(r.body, nullptr, false);
    return j.is_discarded() ? json() : j;
}

json Client::create(const std::string& path, const json& body, const std::string& what, const std::string& resource) {
    auto r = send("POST", path, body.dump(), "application/json");
    if (r.status != 200 && r.status != 201 && r.status != 202) refuse(r, "POST", path, what, "create", resource);
    auto j = json::parse(r.body, nullptr, false);
    return j.is_discarded() ? json() : j;
}

json Client::update(const std::string& path, const json& body, const std::string& what, const std::string& resource) {
    auto r = send("PUT", path, body.dump(), "application/json");
    if (r.status != 200 && r.status != 201) refuse(r, "PUT", path, what, "update", resource);
    auto j = json::parse(r.body, nullptr, false);
    return j.is_discarded() ? json() : j;
}

bool Client::remove(const std::string& path, const std::string& what, const std::string& resource) {
    auto r = send("DELETE", path);
    if (r.status == 404) return false;
    if (r.status != 200 && r.status != 202) refuse(r, "DELETE", path, what, "delete", resource);
    return true;
}

Page Client::list(const std::string& path, const std::string& resource, size_t page_size,
                  const std::string& resource_version) {
    for (int attempt = 0;; ++attempt) {
        Page out;
        std::string cont;
        bool expired = false;
        do {
            std::string q = page_size ? "limit=" + std::to_string(page_size) : "";
            auto add = [&q](const std::string& kv) { q += (q.empty() ? "" : "&") + kv; };
            if (!cont.empty()) add("continue=" + url_escape(cont));
            else if (!resource_version.empty()) add("resourceVersion=" + url_escape(resource_version));
            std::string target = join_query(path, q);
            auto r = send("GET", target);
            if (r.status == 410 && !cont.empty() && attempt == 0) {   // the continue token expired: from the start
                expired = true;
                break;
            }
            if (r.status != 200) refuse(r, "GET", target, resource, "list", resource);
            auto j = json::parse(r.body, nullptr, false);
            if (!j.is_object() || !j.contains("items") || !(j["items"].is_array() || j["items"].is_null()))
                throw Error(Error::Kind::Unavailable, "Kubernetes API: GET " + kc_.server + target + ": the answer is not a list");
            if (j["items"].is_array())
                for (auto& item : j["items"]) out.items.push_back(std::move(item));
            cont.clear();
            if (auto md = j.find("metadata"); md != j.end() && md->is_object()) {
                if (auto c = md->find("continue"); c != md->end() && c->is_string()) cont = c->get<std::string>();
                if (auto rv = md->find("resourceVersion"); rv != md->end() && rv->is_string())
                    out.resource_version = rv->get<std::string>();
            }
        } while (!cont.empty());
        if (!expired) return out;
        base::log::info("LIST " + path + ": continue token expired; listing again");
    }
}

std::string Client::watch(const std::string& path, const std::string& resource_version, const std::string& resource,
                          const std::function<bool(const Event&)>& on_event, const std::function<bool()>& stop,
                          int timeout_seconds, const std::function<void()>& on_open) {
    std::string target = join_query(path, "watch=1&allowWatchBookmarks=true&timeoutSeconds=" +
                                              std::to_string(timeout_seconds) +
                                              (resource_version.empty() ? "" : "&resourceVersion=" + url_escape(resource_version)));
    https::Request req{"GET", target, {{"Accept", "application/json"}}, ""};
    std::string token = current_token(kc_);
    if (!token.empty()) req.headers.emplace_back("Authorization", "Bearer " + token);
    std::string error_body;
    WatchDecoder decoder("Kubernetes API: WATCH " + kc_.server + path + ": ", resource_version, kMaxWatchLine);
    auto on_data = [&](std::string_view piece) {
        if (piece.empty()) {   // the 200's header: the stream is open
            if (on_open) on_open();
            return true;
        }
        return decoder.feed(piece, on_event);
    };
    // The server ends the stream after timeoutSeconds; a little more before calling it dead.
    auto idle = std::chrono::seconds(timeout_seconds + 30);
    int status;
    try {
        status = conn_->stream(req, timeout_, idle, on_data, stop, error_body, kMaxErrorBody);
    } catch (const Error& e) {
        if (e.http_status) throw;
        throw Error(e.kind == Error::Kind::Unavailable ? e.kind : e.kind,
                    (e.kind == Error::Kind::Unavailable ? "Kubernetes API unreachable: " : "kubeconfig '" + kc_.path + "': ") +
                        std::string(e.what()));
    }
    if (status != 200) refuse({status, error_body}, "WATCH", target, resource, "watch", resource);
    decoder.finish(on_event);   // a last event without its newline
    return decoder.resource_version();
}

}  // namespace kube
