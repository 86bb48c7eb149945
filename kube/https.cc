#include "kube/https.h"

#include <openssl/err.h>
#include <openssl/ssl.h>
#include <openssl/x509_vfy.h>

#include <boost/asio/connect.hpp>

#include <algorithm>
#include <cstdint>
#include <limits>
#include <optional>

#include "kube/beast.h"
#include "kube/error.h"
#include "kube/resolve.h"
#include "kube/tls.h"

namespace kube::https {

namespace {

struct Url {
    bool tls = true;
    std::string host, port, target;
};

Url parse_url(const std::string& url) {
    Url u;
    std::string rest;
    if (url.rfind("https://", 0) == 0) rest = url.substr(8);
    else if (url.rfind("http://", 0) == 0) u.tls = false, rest = url.substr(7);
    else throw Error(Error::Kind::Invalid, "'" + url + "' is not an http(s) URL");
    auto slash = rest.find('/');
    std::string authority = rest.substr(0, slash);
    u.target = slash == std::string::npos ? "/" : rest.substr(slash);
    if (!authority.empty() && authority[0] == '[') {
        auto close = authority.find(']');
        if (close == std::string::npos) throw Error(Error::Kind::Invalid, "'" + url + "': unclosed '['");
        u.host = authority.substr(1, close - 1);
        if (close + 1 < authority.size() && authority[close + 1] == ':') u.port = authority.substr(close + 2);
    } else {
        auto colon = authority.rfind(':');
        u.host = authority.substr(0, colon);
        if (colon != std::string::npos) u.port = authority.substr(colon + 1);
    }
    if (u.host.empty()) throw Error(Error::Kind::Invalid, "'" + url + "' names no host");
    if (u.port.empty()) u.port = u.tls ? "443" : "80";
    if (u.port.size() > 5 || u.port.find_first_not_of("0123456789") != std::string::npos || std::stoi(u.port) < 1 ||
        std::stoi(u.port) > 65535)
        throw Error(Error::Kind::Invalid, "'" + url + "': port '" + u.port + "' is not a port number (1-65535)");
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

void configure(ssl::context& ctx, const Tls& tls, std::string& ca_source) {
    kube::tls::modern_only(ctx);
    boost::system::error_code ec;
    if (tls.insecure) {
        ctx.set_verify_mode(ssl::verify_none);
    } else {
        ctx.set_verify_mode(ssl::verify_peer);
        if (!tls.ca_pem.empty()) {
            ctx.add_certificate_authority(net::buffer(tls.ca_pem), ec);
            if (ec) throw Error(Error::Kind::Invalid, "the CA from " + tls.ca_source + " is not a PEM certificate: " + ec.message());
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
                throw Error(Error::Kind::Invalid, "no CA to verify the API server with: " + tls.ca_source +
                                                " has none and the node has no CA bundle");
        }
    }
    if (!tls.client_cert_pem.empty()) {
        ctx.use_certificate_chain(net::buffer(tls.client_cert_pem), ec);
        if (ec) throw Error(Error::Kind::Invalid, "the client certificate is not usable: " + ec.message());
        ctx.use_private_key(net::buffer(tls.client_key_pem), ssl::context::pem, ec);
        if (ec) throw Error(Error::Kind::Invalid, "the client key is not usable: " + ec.message());
    }
}

/// One asynchronous operation's outcome, shared with its handler so that a handler run
/// after its caller gave up writes into memory that still exists.
struct Op {
    bool done = false;
    boost::system::error_code ec;
};

std::string host_header(const Url& u) {
    std::string host = u.host.find(':') != std::string::npos ? "[" + u.host + "]" : u.host;   // an IPv6 literal
    return u.port == (u.tls ? "443" : "80") ? host : host + ":" + u.port;
}

}  // namespace

struct Connection::Impl {
    Url u;
    Tls tls;
    std::string base;
    net::io_context ioc;
    std::unique_ptr<ssl::context> ctx;
    std::string ca_source;
    std::unique_ptr<beast::tcp_stream> plain;
    std::unique_ptr<beast::ssl_stream<beast::tcp_stream>> secure;
    beast::flat_buffer buf;
    int opened = 0;

    bool is_open() const { return plain || secure; }

    beast::tcp_stream& lowest() { return secure ? beast::get_lowest_layer(*secure) : *plain; }

    /// Runs the loop until `op` is done or `left` has passed; false on time-out.
    bool wait(const std::shared_ptr<Op>& op, std::chrono::milliseconds left) {
        const auto until = std::chrono::steady_clock::now() + left;
        while (!op->done) {
            auto now = std::chrono::steady_clock::now();
            if (now >= until) return false;
            ioc.restart();
            ioc.run_one_for(until - now);
        }
        return true;
    }

    /// Closes the connection. Pending operations end with operation_aborted; they are run
    /// to completion here, while whatever they refer to (parser, buffers) still exists.
    void close(const std::shared_ptr<Op>& pending = nullptr) {
        if (is_open()) {
            boost::system::error_code ignored;
            lowest().socket().close(ignored);
            if (pending) {
                const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(2);
                while (!pending->done && std::chrono::steady_clock::now() < until) {
                    ioc.restart();
                    ioc.run_one_for(std::chrono::milliseconds(100));
                }
            }
        }
        ioc.restart();
        ioc.poll();
        secure.reset();
        plain.reset();
        buf.consume(buf.size());
    }

    void connect(std::chrono::steady_clock::time_point deadline, std::chrono::milliseconds timeout,
                 const std::string& where) {
        auto left = [&] {
            return std::max(std::chrono::milliseconds(1), std::chrono::duration_cast<std::chrono::milliseconds>(
                                                              deadline - std::chrono::steady_clock::now()));
        };
        auto addrs = resolve::addresses(u.host, left());
        std::vector<tcp::endpoint> endpoints;
        for (auto& a : addrs)
            endpoints.emplace_back(net::ip::make_address(a), static_cast<unsigned short>(std::stoi(u.port)));
        std::string addr_list;
        for (auto& a : addrs) addr_list += (addr_list.empty() ? "" : ", ") + a;

        plain = std::make_unique<beast::tcp_stream>(ioc);
        ++opened;
        auto op = std::make_shared<Op>();
        plain->async_connect(endpoints, [op](boost::system::error_code ec, const tcp::endpoint&) {
            op->ec = ec;
            op->done = true;
        });
        if (!wait(op, left())) {
            close(op);
            throw Error(Error::Kind::Unavailable, where + ": no connection to " + u.host + " (" + addr_list +
                                                      ") within " + std::to_string(timeout.count()) + " ms");
        }
        if (op->ec) {
            close();
            throw Error(Error::Kind::Unavailable,
                        where + ": cannot connect to " + u.host + " (" + addr_list + "): " + op->ec.message());
        }
        if (!u.tls) return;

        if (!ctx) {
            kube::tls::init();
            auto c = std::make_unique<ssl::context>(ssl::context::tls_client);
            configure(*c, tls, ca_source);
            ctx = std::move(c);
        }
        secure = std::make_unique<beast::ssl_stream<beast::tcp_stream>>(std::move(*plain), *ctx);
        plain.reset();
        SSL* s = secure->native_handle();
        if (!tls.insecure) {
            // The name (or address) in the URL must be in the certificate, as Go checks it.
            X509_VERIFY_PARAM* param = SSL_get0_param(s);
            int ok = is_ip(u.host) ? X509_VERIFY_PARAM_set1_ip_asc(param, u.host.c_str())
                                   : X509_VERIFY_PARAM_set1_host(param, u.host.c_str(), 0);
            if (ok != 1) throw Error(Error::Kind::Internal, "failed to set the name to verify: " + kube::tls::last_error());
        }
        if (!is_ip(u.host)) SSL_set_tlsext_host_name(s, u.host.c_str());
        auto hs = std::make_shared<Op>();
        secure->async_handshake(ssl::stream_base::client, [hs](boost::system::error_code ec) {
            hs->ec = ec;
            hs->done = true;
        });
        if (!wait(hs, left())) {
            close(hs);
            throw Error(Error::Kind::Unavailable, where + ": no TLS handshake within " + std::to_string(timeout.count()) + " ms");
        }
        if (hs->ec) {
            long v = tls.insecure ? X509_V_OK : SSL_get_verify_result(s);
            boost::system::error_code herr = hs->ec;
            close();
            if (v != X509_V_OK)
                throw Error(Error::Kind::Invalid, where + ": the server's certificate does not verify against the CA from " +
                                                      ca_source + ": " + X509_verify_cert_error_string(v));
            throw Error(Error::Kind::Unavailable, where + ": TLS handshake failed: " + herr.message());
        }
    }

    http::request<http::string_body> make(const Request& r) const {
        http::request<http::string_body> req{http::string_to_verb(r.method), r.target, 11};
        req.set(http::field::host, host_header(u));
        req.set(http::field::user_agent, "topocni/" TOPOCNI_VERSION);
        for (auto& [k, v] : r.headers) req.set(k, v);
        if (!r.body.empty()) req.body() = r.body;
        req.prepare_payload();
        return req;
    }

    /// Writes the request; then reads into `parser` with `read` (header, or all). Returns
    /// the error (or none) and whether anything of the answer arrived.
    template <class Parser, class Read>
    boost::system::error_code exchange(http::request<http::string_body>& req, Parser& parser, Read read,
                                       std::chrono::steady_clock::time_point deadline, std::chrono::milliseconds timeout,
                                       const std::string& where) {
        auto op = std::make_shared<Op>();
        auto write_and_read = [&](auto& stream) {
            http::async_write(stream, req, [this, op, &stream, &parser, read](boost::system::error_code ec, size_t) {
                if (ec) {
                    op->ec = ec;
                    op->done = true;
                    return;
                }
                read(stream, buf, parser, [op](boost::system::error_code ec2, size_t) {
                    op->ec = ec2;
                    op->done = true;
                });
            });
        };
        if (secure) write_and_read(*secure);
        else write_and_read(*plain);
        auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
        if (!wait(op, std::max(left, std::chrono::milliseconds(1)))) {
            close(op);
            throw Error(Error::Kind::Unavailable, where + ": no complete answer within " + std::to_string(timeout.count()) + " ms");
        }
        return op->ec;
    }

    static bool closed_while_idle(const boost::system::error_code& ec) {
        return ec == net::error::eof || ec == ssl::error::stream_truncated || ec == net::error::connection_reset ||
               ec == net::error::broken_pipe || ec == http::error::end_of_stream;
    }

    [[noreturn]] void fail(const boost::system::error_code& ec, const std::string& where, size_t max_body) {
        close();
        if (ec == http::error::body_limit)
            throw Error(Error::Kind::Unavailable, where + ": the answer is larger than " + std::to_string(max_body) + " bytes");
        // Without TLS's close_notify (a server or proxy dying mid-answer) Asio says stream_truncated.
        if (ec == http::error::partial_message || ec == net::error::eof || ec == ssl::error::stream_truncated ||
            ec == http::error::end_of_stream)
            throw Error(Error::Kind::Unavailable, where + ": the server closed the connection before the answer was complete");
        throw Error(Error::Kind::Unavailable, where + ": " + ec.message());
    }
};

Connection::Connection(const std::string& base, Tls tls) : impl_(std::make_unique<Impl>()) {
    impl_->u = parse_url(base);
    impl_->tls = std::move(tls);
    impl_->base = base;
}

Connection::~Connection() { impl_->close(); }

int Connection::connections_opened() const { return impl_->opened; }
const std::string& Connection::base() const { return impl_->base; }

Response Connection::request(const Request& r, std::chrono::milliseconds timeout, size_t max_body) {
    Impl& m = *impl_;
    std::string where = r.method + " " + m.base + r.target;
    const auto deadline = std::chrono::steady_clock::now() + timeout;
    auto req = m.make(r);
    for (int attempt = 0;; ++attempt) {
        bool reused = m.is_open();
        if (!reused) m.connect(deadline, timeout, where);
        http::response_parser<http::string_body> parser;
        parser.body_limit(max_body);
        auto read_all = [](auto& stream, auto& buf, auto& p, auto handler) { http::async_read(stream, buf, p, std::move(handler)); };
        auto ec = m.exchange(req, parser, read_all, deadline, timeout, where);
        // A kept connection the server closed while it was idle: the request never reached
        // it; once more on a new connection. Not a POST: had it reached the server after all,
        // a second one would create a second object.
        if (ec && reused && attempt == 0 && !parser.got_some() && Impl::closed_while_idle(ec) && r.method != "POST") {
            m.close();
            continue;
        }
        if (ec) m.fail(ec, where, max_body);
        if (!parser.get().keep_alive()) m.close();
        return {static_cast<int>(parser.get().result_int()), std::move(parser.get().body())};
    }
}

int Connection::stream(const Request& r, std::chrono::milliseconds timeout, std::chrono::milliseconds idle,
                       const std::function<bool(std::string_view)>& on_data, const std::function<bool()>& stop,
                       std::string& error_body, size_t max_error_body) {
    Impl& m = *impl_;
    std::string where = r.method + " " + m.base + r.target;
    const auto deadline = std::chrono::steady_clock::now() + timeout;
    auto req = m.make(r);
    std::optional<http::response_parser<http::string_body>> p;
    for (int attempt = 0;; ++attempt) {
        p.emplace();
        // Bounded below, piece by piece. (Boost 1.74's parser reads an empty optional as a
        // limit of 0 for a body with a Content-Length.)
        p->body_limit(std::numeric_limits<std::uint64_t>::max());
        bool reused = m.is_open();
        if (!reused) m.connect(deadline, timeout, where);
        auto read_header = [](auto& stream, auto& buf, auto& parser, auto handler) {
            http::async_read_header(stream, buf, parser, std::move(handler));
        };
        auto ec = m.exchange(req, *p, read_header, deadline, timeout, where);
        if (ec && reused && attempt == 0 && !p->got_some() && Impl::closed_while_idle(ec)) {
            m.close();
            continue;
        }
        if (ec) m.fail(ec, where, 0);
        break;
    }
    auto& parser = *p;
    int status = static_cast<int>(parser.get().result_int());
    std::string& body = parser.get().body();
    const bool ok = status == 200;
    // The stream is open: an empty piece says so once (a watcher counts from here how long
    // its WATCH ran; a failure before this point never "ran a while").
    if (ok && !on_data(std::string_view{})) {
        m.close();
        return status;
    }
    auto last_data = std::chrono::steady_clock::now();
    while (!parser.is_done()) {
        if (stop && stop()) {
            m.close();
            return status;
        }
        auto op = std::make_shared<Op>();
        auto read_some = [&](auto& stream) {
            http::async_read_some(stream, m.buf, parser, [op](boost::system::error_code ec, size_t) {
                op->ec = ec;
                op->done = true;
            });
        };
        if (m.secure) read_some(*m.secure);
        else read_some(*m.plain);
        bool done = false;
        while (!done) {
            done = m.wait(op, std::chrono::milliseconds(200));
            if (done) break;
            bool idle_out = std::chrono::steady_clock::now() - last_data > idle;
            if ((stop && stop()) || idle_out) {
                m.close(op);
                if (idle_out && !(stop && stop()))
                    throw Error(Error::Kind::Unavailable,
                                where + ": nothing arrived for " + std::to_string(idle.count()) + " ms");
                return status;
            }
        }
        if (op->ec == http::error::need_buffer) op->ec = {};
        if (op->ec) m.fail(op->ec, where, max_error_body);
        if (!body.empty()) {
            last_data = std::chrono::steady_clock::now();
            if (!ok) {
                if (error_body.size() < max_error_body) error_body += body.substr(0, max_error_body - error_body.size());
                body.clear();
                continue;
            }
            std::string piece;
            piece.swap(body);   // the body string only ever grows at its end: emptied, it starts again
            bool more;
            try {
                more = on_data(piece);
            } catch (...) {
                m.close();   // the rest of the stream is unread: the connection cannot carry another request
                throw;
            }
            if (!more) {
                m.close();
                return status;
            }
        }
    }
    if (!parser.get().keep_alive()) m.close();
    return status;
}

Response get(const std::string& url, const Headers& headers, const Tls& tls, std::chrono::milliseconds timeout,
             size_t max_body) {
    Url u = parse_url(url);
    Connection c((u.tls ? "https://" : "http://") + host_header(u), tls);
    return c.request({"GET", u.target, headers, ""}, timeout, max_body);
}

}  // namespace kube::https
