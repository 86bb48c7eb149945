#include "cni/placement/https.h"

#include <openssl/err.h>
#include <openssl/ssl.h>
#include <openssl/x509_vfy.h>

#include <boost/asio/connect.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/ssl.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <boost/beast/ssl.hpp>

#include <algorithm>
#include <optional>

#include "cni/error.h"
#include "cni/placement/resolve.h"

// Set before OpenSSL is initialised: the static binary's OPENSSL_cpuid_setup waits for it
// (cni/static_guards.cc). Weak: dynamic builds run OpenSSL's own at start-up instead.
extern "C" __attribute__((weak)) int topocni_tls_wanted;

namespace cni::https {

namespace {

namespace beast = boost::beast;
namespace http = beast::http;
namespace net = boost::asio;
namespace ssl = net::ssl;
using tcp = net::ip::tcp;

struct Url {
    bool tls = true;
    std::string host, port, target;
};

Url parse_url(const std::string& url) {
    Url u;
    std::string rest;
    if (url.rfind("https://", 0) == 0) rest = url.substr(8);
    else if (url.rfind("http://", 0) == 0) u.tls = false, rest = url.substr(7);
    else throw Error(kInvalidConfig, "'" + url + "' is not an http(s) URL");
    auto slash = rest.find('/');
    std::string authority = rest.substr(0, slash);
    u.target = slash == std::string::npos ? "/" : rest.substr(slash);
    if (!authority.empty() && authority[0] == '[') {
        auto close = authority.find(']');
        if (close == std::string::npos) throw Error(kInvalidConfig, "'" + url + "': unclosed '['");
        u.host = authority.substr(1, close - 1);
        if (close + 1 < authority.size() && authority[close + 1] == ':') u.port = authority.substr(close + 2);
    } else {
        auto colon = authority.rfind(':');
        u.host = authority.substr(0, colon);
        if (colon != std::string::npos) u.port = authority.substr(colon + 1);
    }
    if (u.host.empty()) throw Error(kInvalidConfig, "'" + url + "' names no host");
    if (u.port.empty()) u.port = u.tls ? "443" : "80";
    if (u.port.size() > 5 || u.port.find_first_not_of("0123456789") != std::string::npos || std::stoi(u.port) < 1 ||
        std::stoi(u.port) > 65535)
        throw Error(kInvalidConfig, "'" + url + "': port '" + u.port + "' is not a port number (1-65535)");
    return u;
}

bool is_ip(const std::string& host) {
    boost::system::error_code ec;
    net::ip::make_address(host, ec);
    return !ec;
}

/// Every file a distribution keeps its CA bundle in; the first that exists is used.
const char* const kSystemBundles[] = {"/etc/ssl/certs/ca-certificates.crt", "/etc/pki/tls/certs/ca-bundle.crt",
                                      "/etc/ssl/ca-bundle.pem", "/etc/pki/tls/cacert.pem", "/etc/ssl/cert.pem"};

std::string openssl_error() {
    unsigned long e = ERR_get_error();
    if (!e) return "unknown TLS error";
    char buf[256];
    ERR_error_string_n(e, buf, sizeof buf);
    return buf;
}

void configure(ssl::context& ctx, const Tls& tls, std::string& ca_source) {
    ctx.set_options(ssl::context::default_workarounds | ssl::context::no_sslv2 | ssl::context::no_sslv3 |
                    ssl::context::no_tlsv1 | ssl::context::no_tlsv1_1);
    boost::system::error_code ec;
    if (tls.insecure) {
        ctx.set_verify_mode(ssl::verify_none);
    } else {
        ctx.set_verify_mode(ssl::verify_peer);
        if (!tls.ca_pem.empty()) {
            ctx.add_certificate_authority(net::buffer(tls.ca_pem), ec);
            if (ec) throw Error(kInvalidConfig, "the CA from " + tls.ca_source + " is not a PEM certificate: " + ec.message());
            ca_source = tls.ca_source;
        } else {
            for (auto* f : kSystemBundles) {
                if (::access(f, R_OK) != 0) continue;
                ctx.load_verify_file(f, ec);
                if (!ec) {
                    ca_source = std::string("the node's bundle '") + f + "'";
                    break;
                }
            }
            if (ca_source.empty())
                throw Error(kInvalidConfig, "no CA to verify the API server with: " + tls.ca_source +
                                                " has none and the node has no CA bundle");
        }
    }
    if (!tls.client_cert_pem.empty()) {
        ctx.use_certificate_chain(net::buffer(tls.client_cert_pem), ec);
        if (ec) throw Error(kInvalidConfig, "the client certificate is not usable: " + ec.message());
        ctx.use_private_key(net::buffer(tls.client_key_pem), ssl::context::pem, ec);
        if (ec) throw Error(kInvalidConfig, "the client key is not usable: " + ec.message());
    }
}

template <class Stream>
Response exchange(net::io_context& ioc, Stream& stream, const Url& u, const Headers& headers,
                  std::chrono::milliseconds left, std::chrono::milliseconds timeout, size_t max_body,
                  const std::string& where) {
    http::request<http::empty_body> req{http::verb::get, u.target, 11};
    std::string host = u.host.find(':') != std::string::npos ? "[" + u.host + "]" : u.host;   // an IPv6 literal
    req.set(http::field::host, u.port == (u.tls ? "443" : "80") ? host : host + ":" + u.port);
    req.set(http::field::user_agent, "topocni/" TOPOCNI_VERSION);
    for (auto& [k, v] : headers) req.set(k, v);
    beast::flat_buffer buf;
    http::response_parser<http::string_body> parser;
    parser.body_limit(max_body);
    boost::system::error_code result;
    bool done = false;
    http::async_write(stream, req, [&](boost::system::error_code ec, size_t) {
        if (ec) {
            result = ec;
            done = true;
            return;
        }
        http::async_read(stream, buf, parser, [&](boost::system::error_code ec2, size_t) {
            result = ec2;
            done = true;
        });
    });
    ioc.restart();
    ioc.run_for(left);
    if (!done)
        throw Error(kTryAgainLater, where + ": no complete answer within " + std::to_string(timeout.count()) + " ms");
    if (result == http::error::body_limit)
        throw Error(kTryAgainLater, where + ": the answer is larger than " + std::to_string(max_body) + " bytes");
    // Without TLS's close_notify (a server or proxy dying mid-answer) Asio says stream_truncated.
    if (result == http::error::partial_message || result == net::error::eof || result == ssl::error::stream_truncated)
        throw Error(kTryAgainLater, where + ": the server closed the connection before the answer was complete");
    if (result) throw Error(kTryAgainLater, where + ": " + result.message());
    return {static_cast<int>(parser.get().result_int()), parser.get().body()};
}

}  // namespace

Response get(const std::string& url, const Headers& headers, const Tls& tls, std::chrono::milliseconds timeout,
             size_t max_body) {
    Url u = parse_url(url);
    std::string where = "GET " + url;
    // One deadline for the whole request; each step gets what is left of it.
    const auto deadline = std::chrono::steady_clock::now() + timeout;
    auto left = [&] {
        return std::max(std::chrono::milliseconds(1), std::chrono::duration_cast<std::chrono::milliseconds>(
                                                          deadline - std::chrono::steady_clock::now()));
    };
    auto addrs = resolve::addresses(u.host, left());
    std::vector<tcp::endpoint> endpoints;
    for (auto& a : addrs) endpoints.emplace_back(net::ip::make_address(a), static_cast<unsigned short>(std::stoi(u.port)));

    net::io_context ioc;
    beast::tcp_stream tcp_stream(ioc);
    boost::system::error_code cerr = net::error::timed_out;
    bool connected = false;
    tcp_stream.async_connect(endpoints, [&](boost::system::error_code ec, const tcp::endpoint&) {
        cerr = ec;
        connected = true;
    });
    ioc.run_for(left());
    std::string addr_list;
    for (auto& a : addrs) addr_list += (addr_list.empty() ? "" : ", ") + a;
    if (!connected)
        throw Error(kTryAgainLater, where + ": no connection to " + u.host + " (" + addr_list + ") within " +
                                        std::to_string(timeout.count()) + " ms");
    if (cerr) throw Error(kTryAgainLater, where + ": cannot connect to " + u.host + " (" + addr_list + "): " + cerr.message());
    if (!u.tls) return exchange(ioc, tcp_stream, u, headers, left(), timeout, max_body, where);

    if (&topocni_tls_wanted) topocni_tls_wanted = 1;
    static const bool init = OPENSSL_init_ssl(OPENSSL_INIT_NO_LOAD_CONFIG, nullptr) == 1;   // no openssl.cnf
    if (!init) fail_internal("cannot initialise OpenSSL: " + openssl_error());
    ssl::context ctx(ssl::context::tls_client);
    std::string ca_source;
    configure(ctx, tls, ca_source);
    beast::ssl_stream<beast::tcp_stream> stream(std::move(tcp_stream), ctx);
    SSL* s = stream.native_handle();
    if (!tls.insecure) {
        // The name (or address) in the URL must be in the certificate, as Go checks it.
        X509_VERIFY_PARAM* param = SSL_get0_param(s);
        int ok = is_ip(u.host) ? X509_VERIFY_PARAM_set1_ip_asc(param, u.host.c_str())
                               : X509_VERIFY_PARAM_set1_host(param, u.host.c_str(), 0);
        if (ok != 1) fail_internal("cannot set the name to verify: " + openssl_error());
    }
    if (!is_ip(u.host)) SSL_set_tlsext_host_name(s, u.host.c_str());

    boost::system::error_code herr = net::error::timed_out;
    bool shaken = false;
    stream.async_handshake(ssl::stream_base::client, [&](boost::system::error_code ec) {
        herr = ec;
        shaken = true;
    });
    ioc.restart();
    ioc.run_for(left());
    if (!shaken) throw Error(kTryAgainLater, where + ": no TLS handshake within " + std::to_string(timeout.count()) + " ms");
    if (herr) {
        long v = tls.insecure ? X509_V_OK : SSL_get_verify_result(s);
        if (v != X509_V_OK)
            throw Error(kInvalidConfig, where + ": the server's certificate does not verify against the CA from " +
                                            ca_source + ": " + X509_verify_cert_error_string(v));
        throw Error(kTryAgainLater, where + ": TLS handshake failed: " + herr.message());
    }
    return exchange(ioc, stream, u, headers, left(), timeout, max_body, where);
}

}  // namespace cni::https
