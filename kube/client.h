// The Kubernetes API as topocni uses it: GET, PATCH and POST of single objects, LIST in
// pages, and WATCH streams with bookmarks, over one kept-open connection per Client.
// Failures are kube::Error: Unavailable (unreachable, 429, 5xx, 410 Gone, an answer that
// is not what was asked) or Invalid (401, 403, 404 and other 4xx, naming the verb and
// resource examples/rbac.yaml must grant). ADD builds a Client for its one request; the
// node publisher and other long-running consumers keep theirs.
#pragma once
#include <chrono>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "kube/error.h"
#include "kube/kubeconfig.h"

namespace kube {

/// RFC 3986 percent-encoding of one path segment or query value.
std::string url_escape(const std::string& s);

/// The `message` of a Kubernetes Status object, or the first bytes of the body.
std::string status_message(const std::string& body);

/// The resource version a LIST or WATCH asked for is one the server cannot serve: compacted
/// away (HTTP 410 Gone or Expired, as a status or an ERROR event) or newer than it has (a
/// 504 "Too large resource version", as client-go's isTooLargeResourceVersionError in
/// tools/cache/reflector.go tells it). Only a list from scratch brings the view back.
struct ResourceVersionUnavailable : Error {
    using Error::Error;
};

/// Whether an answer (its status and Status body) says the resource version is too large.
bool resource_version_too_large(int status, const nlohmann::json& status_body);

struct Page {
    std::vector<nlohmann::json> items;
    std::string resource_version;   ///< the list's metadata.resourceVersion: where a WATCH starts
};

/// One event of a WATCH stream.
struct Event {
    std::string type;               ///< ADDED, MODIFIED, DELETED, BOOKMARK
    nlohmann::json object;
};

class Client {
public:
    explicit Client(Kubeconfig kc, std::chrono::milliseconds timeout = std::chrono::seconds(10));
    ~Client();

    const Kubeconfig& config() const { return kc_; }

    /// Sends one request; the status as the server gave it, the body as is. Errors on the
    /// way (no connection, TLS, time-out) throw.
    https::Response send(const std::string& method, const std::string& path, const std::string& body = {},
                         const std::string& content_type = {});

    /// GET an object: its JSON on 200; otherwise a kube::Error that names `what` ("node
    /// 'w1'") and, for 403, the permission (`verb` on `resource`) that is missing.
    nlohmann::json get(const std::string& path, const std::string& what, const std::string& resource);

    /// PATCH with `content_type` ("application/merge-patch+json",
    /// "application/json-patch+json", "application/strategic-merge-patch+json"); the object
    /// after the patch.
    nlohmann::json patch(const std::string& path, const nlohmann::json& body, const std::string& content_type,
                         const std::string& what, const std::string& resource);

    /// POST a new object; its JSON as created.
    nlohmann::json create(const std::string& path, const nlohmann::json& body, const std::string& what,
                          const std::string& resource);

    /// PUT an object (its metadata.resourceVersion, when set, makes it conditional: 409 if
    /// it changed since); its JSON as stored.
    nlohmann::json update(const std::string& path, const nlohmann::json& body, const std::string& what,
                          const std::string& resource);

    /// DELETE an object; false when it was not there (404), which is no failure.
    bool remove(const std::string& path, const std::string& what, const std::string& resource);

    /// LIST `path` (a collection, optional query after '?') in pages of `page_size` (0: one
    /// page, no limit), following metadata.continue. `resource_version` (empty: none, the
    /// latest from etcd; "0": any, from the API server's watch cache) goes with the first
    /// page only: the API server refuses it together with a continue token, as client-go's
    /// pager knows. A continue token that expired (410) starts the list again, once. A
    /// version the server cannot serve throws ResourceVersionUnavailable.
    Page list(const std::string& path, const std::string& resource, size_t page_size = 500,
              const std::string& resource_version = "");

    /// WATCH `path` from `resource_version` with bookmarks: `on_event` gets every event but
    /// bookmarks, which only move the resource version on. Returns the last resource version
    /// seen, when the server ends the stream (after about `timeout_seconds`), `stop()` is
    /// true or `on_event` returns false. A resource version the server no longer has (HTTP
    /// 410, or an ERROR event with a 410 Status) throws ResourceVersionUnavailable with
    /// http_status 410: list again. Lines over 16 MiB throw. `on_open` is called once the
    /// server has answered 200 (the stream is open; a failure before it never ran).
    std::string watch(const std::string& path, const std::string& resource_version, const std::string& resource,
                      const std::function<bool(const Event&)>& on_event, const std::function<bool()>& stop,
                      int timeout_seconds = 300, const std::function<void()>& on_open = {});

    /// TCP connections opened so far (connection reuse, for tests and logs).
    int connections_opened() const;

private:
    /// Throws the kube::Error for a status that is not 2xx.
    [[noreturn]] void refuse(const https::Response& r, const std::string& method, const std::string& path,
                             const std::string& what, const std::string& verb, const std::string& resource) const;
    Kubeconfig kc_;
    std::chrono::milliseconds timeout_;
    std::unique_ptr<https::Connection> conn_;
};

}  // namespace kube
