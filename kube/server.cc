#include "kube/server.h"

#include <boost/asio/read.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/strand.hpp>

#include <sched.h>

#include <algorithm>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <thread>
#include <vector>

#include "base/log.h"
#include "kube/beast.h"
#include "kube/error.h"
#include "kube/tls.h"

namespace kube::server {

namespace {

constexpr size_t kReadChunk = 256 * 1024;

/// A Beast body of pieces of memory held elsewhere, written with one gather.
struct PiecesBody {
    struct value_type {
        std::vector<std::string_view> pieces;
        std::shared_ptr<const void> keep;
    };
    static std::uint64_t size(const value_type& v) {
        std::uint64_t n = 0;
        for (auto p : v.pieces) n += p.size();
        return n;
    }
    class writer {
    public:
        using const_buffers_type = std::vector<net::const_buffer>;
        template <bool isRequest, class Fields>
        writer(const http::header<isRequest, Fields>&, const value_type& v) : v_(v) {}
        void init(beast::error_code& ec) { ec = {}; }
        boost::optional<std::pair<const_buffers_type, bool>> get(beast::error_code& ec) {
            ec = {};
            if (done_) return boost::none;
            done_ = true;
            const_buffers_type b;
            b.reserve(v_.pieces.size());
            for (auto p : v_.pieces)
                if (!p.empty()) b.emplace_back(p.data(), p.size());
            return std::make_pair(std::move(b), false);
        }

    private:
        const value_type& v_;
        bool done_ = false;
    };
};

struct Shared {
    const Options& o;
    const Handler& handler;
    std::atomic<int> live{0};
    std::atomic<bool> stopping{false};
    /// Each live session's way to close itself if it is waiting for a request: at SIGTERM a
    /// kept-alive connection would otherwise hold the stop until its time-out.
    std::mutex mu;
    std::map<std::uint64_t, std::function<void()>> closers;
    std::uint64_t next_id = 0;
};

template <class Stream>
class Session : public std::enable_shared_from_this<Session<Stream>> {
public:
    Session(Stream stream, Shared& s) : stream_(std::move(stream)), s_(s) {
        ++s_.live;
        // Beast reads as much as the buffer has room for, and an empty buffer grows to
        // 512 bytes only: a 15 MB request would then take 30,000 reads.
        buf_.reserve(kReadChunk);
    }
    ~Session() {
        {
            std::lock_guard<std::mutex> l(s_.mu);
            s_.closers.erase(id_);
        }
        --s_.live;
    }

    /// Registered once owned by a shared_ptr; the closer runs on the session's strand.
    void enrol() {
        std::lock_guard<std::mutex> l(s_.mu);
        id_ = s_.next_id++;
        s_.closers[id_] = [weak = this->weak_from_this()] {
            if (auto self = weak.lock())
                net::post(self->stream_.get_executor(), [self] {
                    if (self->idle()) self->lowest().close();
                });
        };
    }

    void start_tls() {
        lowest().expires_after(s_.o.request_timeout);
        if constexpr (!std::is_same_v<Stream, beast::tcp_stream>)
            stream_.async_handshake(ssl::stream_base::server, [self = this->shared_from_this()](beast::error_code ec) {
                if (!ec) self->read();
            });
    }

    void read() {
        if (s_.stopping) return;   // the stop closes this connection: it ends here
        parser_.emplace();
        parser_->body_limit(s_.o.max_body);
        lowest().expires_after(s_.o.request_timeout);
        http::async_read_header(stream_, buf_, *parser_, [self = this->shared_from_this()](beast::error_code ec, size_t) {
            self->on_header(ec);
        });
    }

private:
    beast::tcp_stream& lowest() { return beast::get_lowest_layer(stream_); }

    /// Waiting for a request that has not begun (not in the TLS handshake, not answering).
    bool idle() const { return parser_ && !parser_->got_some() && buf_.size() == 0 && !answering_; }

    // A Content-Length over the limit fails the header (Beast checks it against body_limit);
    // a chunked body fails when its chunks add up to more.
    void too_large() { reply({413, R"({"error":"request too large"})"}, false); }

    void on_header(beast::error_code ec) {
        answering_ = true;
        if (ec == http::error::body_limit) return too_large();
        if (ec) return;   // closed, timed out, garbage: nothing to answer
        auto length = parser_->content_length();
        if (!length || parser_->chunked()) {   // chunked: Beast reads it, 64 KiB at a time
            http::async_read(stream_, buf_, *parser_, [self = this->shared_from_this()](beast::error_code ec, size_t) {
                self->on_read(ec);
            });
            return;
        }
        // A known length is read straight into the body, each read taking all the socket
        // holds. Beast would read 64 KiB at a time, each read a completion handed to a
        // worker thread: 175 of them for the 11 MB of 5,000 Nodes.
        body_.resize(*length);
        size_t have = std::min<size_t>(buf_.size(), *length);
        net::buffer_copy(net::buffer(body_.data(), have), buf_.data());
        buf_.consume(have);
        net::async_read(stream_, net::buffer(body_.data() + have, *length - have),
                        [self = this->shared_from_this()](beast::error_code ec, size_t) {
                            if (ec) return;
                            auto& req = self->parser_->get();
                            self->handle(std::string(req.method_string()), std::string(req.target()),
                                         std::move(self->body_), req.keep_alive());
                        });
    }

    void on_read(beast::error_code ec) {
        if (ec == http::error::body_limit) return too_large();
        if (ec) return;   // closed, timed out, garbage: nothing to answer
        auto& req = parser_->get();
        handle(std::string(req.method_string()), std::string(req.target()), std::move(req.body()), req.keep_alive());
    }

    void handle(std::string method, std::string target, std::string body, bool keep_alive) {
        Response r;
        try {
            r = s_.handler({std::move(method), std::move(target), std::move(body)});
        } catch (const std::exception& e) {
            base::log::error(std::string("handler failed: ") + e.what());
            r = {500, R"({"error":"internal error"})"};
        }
        reply(std::move(r), keep_alive);
    }

    void reply(Response r, bool keep_alive) {
        res_ = {};
        res_.version(11);
        res_.result(static_cast<unsigned>(r.status));
        res_.set(http::field::content_type, r.content_type);
        res_.set(http::field::server, "topocni");
        res_.keep_alive(keep_alive && !s_.stopping);
        if (r.pieces.empty()) {
            auto body = std::make_shared<const std::string>(std::move(r.body));
            res_.body() = {{*body}, body};
        } else {
            res_.body() = {std::move(r.pieces), std::move(r.keep)};
        }
        res_.prepare_payload();
        lowest().expires_after(s_.o.request_timeout);
        http::async_write(stream_, res_, [self = this->shared_from_this(), keep_alive](beast::error_code ec, size_t) {
            self->answering_ = false;
            if (!ec && keep_alive) self->read();
        });
    }

    Stream stream_;
    Shared& s_;
    beast::flat_buffer buf_;
    std::optional<http::request_parser<http::string_body>> parser_;
    std::string body_;
    bool answering_ = false;   // from a request's header to its answer written
    std::uint64_t id_ = 0;
    http::response<PiecesBody> res_;
};

tcp::endpoint endpoint_of(const std::string& listen) {
    std::string host = "0.0.0.0", port = listen;
    if (!listen.empty() && listen[0] == '[') {
        auto close = listen.find("]:");
        if (close == std::string::npos) throw Error(Error::Kind::Invalid, "--listen '" + listen + "': expected [addr]:port");
        host = listen.substr(1, close - 1);
        port = listen.substr(close + 2);
    } else if (auto colon = listen.rfind(':'); colon != std::string::npos) {
        host = listen.substr(0, colon).empty() ? "0.0.0.0" : listen.substr(0, colon);
        port = listen.substr(colon + 1);
    }
    boost::system::error_code ec;
    auto addr = net::ip::make_address(host, ec);
    if (ec) throw Error(Error::Kind::Invalid, "--listen '" + listen + "': '" + host + "' is not an IP address");
    if (port.empty() || port.size() > 5 || port.find_first_not_of("0123456789") != std::string::npos || std::stoi(port) > 65535)
        throw Error(Error::Kind::Invalid, "--listen '" + listen + "': '" + port + "' is not a port");
    return {addr, static_cast<unsigned short>(std::stoi(port))};
}

int thread_count(const Options& o) {
    int n = o.threads;
    if (n <= 0) {
        cpu_set_t cpus;
        n = ::sched_getaffinity(0, sizeof cpus, &cpus) == 0 ? CPU_COUNT(&cpus) : 2;
    }
    return std::clamp(n, 1, std::max(1, o.max_connections));
}

}  // namespace

void serve(const Options& o, const Handler& handler, const std::atomic<bool>& stop,
           const std::function<void(int)>& on_listening) {
    // Destroyed in reverse: the io_context (and the sessions its handlers hold) before the
    // TLS context their streams use and the counter they decrement.
    Shared shared{o, handler};
    std::optional<ssl::context> tls;
    if (!o.tls_cert.empty() || !o.tls_key.empty()) {
        kube::tls::init();
        tls.emplace(ssl::context::tls_server);
        kube::tls::modern_only(*tls);
        boost::system::error_code ec;
        tls->use_certificate_chain_file(o.tls_cert, ec);
        if (ec) throw Error(Error::Kind::Invalid, "--tls-cert '" + o.tls_cert + "': " + ec.message());
        tls->use_private_key_file(o.tls_key, ssl::context::pem, ec);
        if (ec) throw Error(Error::Kind::Invalid, "--tls-key '" + o.tls_key + "': " + ec.message());
    }
    net::io_context ioc;
    // Several threads run `ioc`: the acceptor and the stop timer share one strand, so that
    // closing the acceptor never races an accept completing on another thread; each session
    // gets a strand of its own (its read and its time-out timer must not run at once).
    auto control = net::make_strand(ioc);
    tcp::acceptor acceptor(control);
    auto ep = endpoint_of(o.listen);
    boost::system::error_code ec;
    acceptor.open(ep.protocol(), ec);
    if (!ec) acceptor.set_option(net::socket_base::reuse_address(true), ec);
    if (!ec) acceptor.bind(ep, ec);
    if (!ec) acceptor.listen(net::socket_base::max_listen_connections, ec);
    if (ec) throw Error(Error::Kind::Invalid, "failed to listen on '" + o.listen + "': " + ec.message());
    if (on_listening) on_listening(acceptor.local_endpoint().port());

    net::steady_timer retry(control);
    std::function<void()> accept = [&] {
        acceptor.async_accept(net::make_strand(ioc), [&](boost::system::error_code aec, tcp::socket sock) {
            if (aec) {
                if (!acceptor.is_open()) return;
                // Out of file descriptors and the like: try again a little later, not in a busy loop.
                base::log::warn("accept failed: " + aec.message());
                retry.expires_after(std::chrono::milliseconds(100));
                retry.async_wait([&](boost::system::error_code) {
                    if (acceptor.is_open()) accept();
                });
                return;
            }
            if (shared.live.load() >= o.max_connections) {
                // Busy: say so at once rather than queue the caller (plain HTTP), or close.
                if (!tls) {
                    static const std::string busy =
                        "HTTP/1.1 503 Service Unavailable\r\nContent-Type: application/json\r\nContent-Length: 17\r\n"
                        "Connection: close\r\n\r\n{\"error\":\"busy\"}";
                    boost::system::error_code ignored;
                    sock.non_blocking(true, ignored);
                    sock.write_some(net::buffer(busy), ignored);
                }
                base::log::warn("busy: " + std::to_string(o.max_connections) + " connections served; one refused");
            } else if (tls) {
                auto s = std::make_shared<Session<beast::ssl_stream<beast::tcp_stream>>>(
                    beast::ssl_stream<beast::tcp_stream>(beast::tcp_stream(std::move(sock)), *tls), shared);
                s->enrol();
                s->start_tls();
            } else {
                auto s = std::make_shared<Session<beast::tcp_stream>>(beast::tcp_stream(std::move(sock)), shared);
                s->enrol();
                s->read();
            }
            accept();
        });
    };
    accept();
    net::steady_timer watch(control);
    std::chrono::steady_clock::time_point until;
    std::function<void()> drain = [&] {
        // The requests in flight finish, each bounded by request_timeout.
        if (shared.live.load() == 0 || std::chrono::steady_clock::now() > until) return ioc.stop();
        watch.expires_after(std::chrono::milliseconds(50));
        watch.async_wait([&](boost::system::error_code) { drain(); });
    };
    std::function<void()> poll_stop = [&] {
        watch.expires_after(std::chrono::milliseconds(100));
        watch.async_wait([&](boost::system::error_code) {
            if (!stop) return poll_stop();
            acceptor.close();
            retry.cancel();
            shared.stopping = true;
            std::vector<std::function<void()>> closers;
            {
                std::lock_guard<std::mutex> l(shared.mu);
                for (auto& [id, close] : shared.closers) closers.push_back(close);
            }
            for (auto& close : closers) close();
            until = std::chrono::steady_clock::now() + o.request_timeout;
            drain();
        });
    };
    poll_stop();
    std::vector<std::thread> workers;
    for (int i = 1; i < thread_count(o); ++i) workers.emplace_back([&] { ioc.run(); });
    ioc.run();
    for (auto& t : workers) t.join();
}

}  // namespace kube::server
