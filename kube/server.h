// A small HTTP(S) server for the endpoints Kubernetes calls (kube-scheduler's extender
// verbs, admission webhooks), bounded in every way a caller could make it spend: request
// size, time per request and per idle connection, connections served at once, connections
// waiting for one of those (oldest first, each at most a request time-out: a burst of
// callers is answered, not dropped), and one more answered 503 with its request read, so
// that the answer arrives. Boost.Beast over OpenSSL, as the client.
#pragma once
#include <atomic>
#include <chrono>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace kube::server {

struct Request {
    std::string method, target, body;
};

struct Response {
    int status = 200;
    std::string body;
    std::string content_type = "application/json";
    /// Sent instead of `body` when not empty: the pieces one after another, written as
    /// they are (a scheduler extender answers with most of its 15 MB request, which it
    /// need not copy). `keep` holds what they point into until they are written.
    std::vector<std::string_view> pieces;
    std::shared_ptr<const void> keep;
};

struct Options {
    std::string listen = "127.0.0.1:8443";   ///< host:port, [v6]:port
    std::string tls_cert, tls_key;             ///< PEM files; both empty: plain HTTP
    size_t max_body = 64u << 20;               ///< a bigger request is answered 413 unread
    std::chrono::milliseconds request_timeout{10000};   ///< reading one request, and writing its answer
    int max_connections = 8;                   ///< served at once; more wait (max_queue)
    /// Accepted connections waiting for one of max_connections to end, oldest first. One
    /// that finds the queue full, or has waited max_wait, is answered 503. While any
    /// wait, answers say `Connection: close` and a kept-alive connection left idle is closed
    /// after a second, so that the places go round.
    int max_queue = 1024;
    /// How long a connection may wait for a place: keep it below the callers' own time-out
    /// (kube-scheduler's httpTimeout, a webhook's timeoutSeconds), or a caller that has given
    /// up is served, and the 503 reaches no one.
    std::chrono::milliseconds max_wait{10000};
    /// Threads serving the connections; 0: one per CPU this process may run on, at most
    /// max_connections; set: at most max_connections + 1. A handler that may wait (on the API) needs one per connection,
    /// and one more to accept, queue and refuse while every handler waits; one that only
    /// computes runs best with one per core: 8 threads on 2 cores made ~1,000 context
    /// switches per 11 MB request, and took 40% longer.
    int threads = 0;
};

using Handler = std::function<Response(Request)>;   ///< the request is the handler's to keep

/// Serves until `stop` is set (a signal handler may set it), then stops accepting, lets
/// the requests in flight finish (each bounded by request_timeout) and returns. Throws
/// kube::Error (Invalid) when it cannot listen or read the certificate. The certificate and
/// key are read again when they change (kube::tls::ServerCertificate). `on_listening` gets
/// the port bound (for ":0").
void serve(const Options& o, const Handler& handler, const std::atomic<bool>& stop,
           const std::function<void(int port)>& on_listening = {});

}  // namespace kube::server
