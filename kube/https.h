// HTTP(S) with bounded time, linked into the static binary: Boost.Beast over OpenSSL (both
// from Debian, linked statically), names resolved by kube/resolve. Only what the
// Kubernetes API client needs: a CA bundle or the node's, a client certificate, bearer
// headers, insecure-skip-tls-verify; one connection kept open across requests (a
// long-running consumer would otherwise pay a TLS handshake per call), and bodies read as
// they arrive (watch streams).
#pragma once
#include <chrono>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace kube::https {

struct Tls {
    std::string ca_pem;             ///< trusted CAs; empty: the node's system bundle
    std::string ca_source;          ///< where ca_pem came from, for messages
    std::string client_cert_pem, client_key_pem;
    bool insecure = false;          ///< no verification of the server at all
};

struct Response {
    int status = 0;
    std::string body;
};

using Headers = std::vector<std::pair<std::string, std::string>>;

struct Request {
    std::string method = "GET";
    std::string target;             ///< path and query: "/api/v1/nodes?limit=500"
    Headers headers;
    std::string body;               ///< sent with Content-Length when not empty
};

/// One connection to `base` ("https://host:port", host a name, an IPv4 or a [IPv6]
/// literal), opened at the first request and kept open (HTTP/1.1 keep-alive) until the
/// server closes it, an exchange fails or the Connection goes. A request that finds the
/// kept connection closed by the server while idle is sent once more on a new one.
/// Errors: kube::Error, Unavailable (unreachable, timed out, reset, truncated, a body over
/// the limit) or Invalid (a server certificate that does not verify, a bad client
/// certificate or URL). Not thread-safe: one user at a time.
class Connection {
public:
    Connection(const std::string& base, Tls tls);
    ~Connection();
    Connection(const Connection&) = delete;
    Connection& operator=(const Connection&) = delete;

    /// Sends `r` and reads the whole answer. `timeout` bounds it all: name resolution,
    /// connection, TLS handshake and exchange each get what is left of it.
    Response request(const Request& r, std::chrono::milliseconds timeout, size_t max_body);

    /// Sends `r` and, once a 200's header has arrived, hands `on_data` an empty piece (the
    /// stream is open), then the body piece by piece as it arrives, until the
    /// body ends, `on_data` returns false, `stop()` returns true (asked every 200 ms) or
    /// nothing arrives for `idle` (Unavailable). `timeout` bounds the request up to the
    /// answer's header. A status other than 200 returns at once with the body (at most
    /// `max_error_body` bytes) in `error_body`. The connection is closed afterwards unless
    /// the body ended.
    int stream(const Request& r, std::chrono::milliseconds timeout, std::chrono::milliseconds idle,
               const std::function<bool(std::string_view)>& on_data, const std::function<bool()>& stop,
               std::string& error_body, size_t max_error_body);

    /// How many TCP connections this Connection has opened (for tests and logs).
    int connections_opened() const;
    const std::string& base() const;

private:
    struct Impl;
    std::unique_ptr<Impl> impl_;
};

/// GET `url` over a connection of its own: the one-shot form ADD uses.
Response get(const std::string& url, const Headers& headers, const Tls& tls, std::chrono::milliseconds timeout,
             size_t max_body);

}  // namespace kube::https
