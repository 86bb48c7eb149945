// One HTTP(S) GET with bounded time, linked into the static binary: Boost.Beast over
// OpenSSL (both from Debian, linked statically), names resolved by cni/resolve. Only
// what the Kubernetes API client needs: a CA bundle or the node's, a client certificate,
// bearer headers, insecure-skip-tls-verify.
#pragma once
#include <chrono>
#include <string>
#include <utility>
#include <vector>

namespace cni::https {

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

/// GET `url` (http:// or https://, host a name, an IPv4 or a [IPv6] literal). `timeout`
/// bounds the whole request: name resolution, the connection, the TLS handshake and the
/// exchange each get what is left of it. Unreachable,
/// timed out, reset or truncated: code 11. A server certificate that does not verify, a
/// bad client certificate or URL: code 7. A body over `max_body` bytes: code 11.
Response get(const std::string& url, const Headers& headers, const Tls& tls, std::chrono::milliseconds timeout,
             size_t max_body);

}  // namespace cni::https
