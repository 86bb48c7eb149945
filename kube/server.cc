#include "kube/server.h"

#include <boost/asio/read.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/strand.hpp>

#include <sched.h>
#include <sys/socket.h>
#include <sys/resource.h>

#include <algorithm>
#include <deque>
#include <limits>
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

using Clock = std::chrono::steady_clock;

constexpr size_t kReadChunk = 256 * 1024;
constexpr size_t kDrainChunk = 16 * 1024;
/// A caller answered 503: its TLS handshake, its request's header and the answer, all
/// within this; then kLinger for it to take the answer and close.
constexpr std::chrono::seconds kRefusalTime{2};
constexpr std::chrono::seconds kLinger{1};
/// A kept-alive connection idle while others wait for a place is closed after this.
constexpr std::chrono::seconds kIdleWhileQueued{1};
/// 503s being delivered at once; past this a caller is closed unanswered (a flood, not a burst).
constexpr int kMaxRefusals = 64;

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

/// Served connections, the queue of those waiting for one, and the 503s being delivered:
/// every count under one lock, since sessions end on any worker thread and the acceptor
/// runs on its own strand.
class Server {
public:
    Server(const Options& o, const Handler& handler, tls::ServerCertificate* cert)
        : o(o), handler(handler), cert_(cert) {}

    const Options& o;
    const Handler& handler;

    /// An accepted connection: served, queued, or refused (on the acceptor's strand).
    void take(tcp::socket sock);
    /// A served connection ended: the oldest waiting one that has not waited too long takes its place.
    void release();
    void refusal_done() {
        std::lock_guard<std::mutex> l(mu_);
        --refusing_;
    }
    /// Those that waited request_timeout are answered 503; how many were refused or dropped
    /// lately is logged here, once a tick, not once per caller.
    void tick();
    /// SIGTERM: nothing more is served; the queue is answered 503, idle connections closed.
    void stop();

    bool stopping() const { return stopping_; }
    bool waiting() const { return queued_.load() > 0; }
    bool done() {
        std::lock_guard<std::mutex> l(mu_);
        return live_ == 0 && refusing_ == 0;
    }

    /// Each live session's way to close itself if it is waiting for a request (`kept_only`:
    /// only one that has answered before, and only after kIdleWhileQueued).
    using Closer = std::function<void(bool kept_only)>;
    std::uint64_t enrol(Closer c) {
        std::lock_guard<std::mutex> l(mu_);
        closers_[next_id_] = std::move(c);
        return next_id_++;
    }
    void leave(std::uint64_t id) {
        std::lock_guard<std::mutex> l(mu_);
        closers_.erase(id);
    }

private:
    struct Waiting {
        tcp::socket sock;
        Clock::time_point since;
    };
    void serve(tcp::socket sock);
    void refuse(tcp::socket sock, const char* why);
    void close_idle(bool kept_only);
    /// The caller closed its side and sent nothing we have not read.
    static bool gone(tcp::socket& sock);
    /// Under mu_: the waiting ones past max_wait, taken off the queue.
    std::vector<tcp::socket> expired_locked(Clock::time_point now);

    tls::ServerCertificate* cert_;
    std::mutex mu_;
    int live_ = 0, refusing_ = 0;
    std::deque<Waiting> queue_;
    std::atomic<size_t> queued_{0};
    std::atomic<bool> stopping_{false};
    std::map<std::uint64_t, Closer> closers_;
    std::uint64_t next_id_ = 1;   // 0: a session never enrolled
    std::atomic<int> refused_{0}, dropped_{0};
    bool said_queueing_ = false;
};

/// After an answer that leaves part of the request unread (a 413, a 503): our side closed
/// (plain: a FIN after the answer), then whatever the caller still sends read and dropped
/// until it closes or kLinger passes. Closing with unread bytes would send a reset, and a
/// reset can destroy the answer before the caller reads it.
template <class Stream, class Owner>
void drain(Stream& stream, beast::flat_buffer& buf, std::shared_ptr<Owner> owner) {
    buf.consume(buf.size());
    stream.async_read_some(buf.prepare(kDrainChunk), [&stream, &buf, owner](beast::error_code ec, size_t n) {
        buf.commit(n);
        if (!ec) drain(stream, buf, owner);
    });
}

template <class Stream, class Owner>
void linger(Stream& stream, beast::flat_buffer& buf, std::shared_ptr<Owner> owner) {
    auto& lowest = beast::get_lowest_layer(stream);
    if constexpr (std::is_same_v<Stream, beast::tcp_stream>) {
        boost::system::error_code ignored;
        lowest.socket().shutdown(tcp::socket::shutdown_send, ignored);
    }
    lowest.expires_after(kLinger);
    drain(stream, buf, std::move(owner));
}

template <class Stream>
constexpr bool kTls = !std::is_same_v<Stream, beast::tcp_stream>;

template <class Stream>
class Session : public std::enable_shared_from_this<Session<Stream>> {
public:
    /// `tls` keeps the TLS context the stream was made with (a reload makes a new one).
    Session(std::shared_ptr<const void> tls, Stream stream, Server& s)
        : tls_(std::move(tls)), stream_(std::move(stream)), s_(s), hurry_(stream_.get_executor()) {
        // Beast reads as much as the buffer has room for, and an empty buffer grows to
        // 512 bytes only: a 15 MB request would then take 30,000 reads.
        buf_.reserve(kReadChunk);
    }
    ~Session() {
        s_.leave(id_);
        s_.release();
    }

    /// Registered once owned by a shared_ptr; the closer runs on the session's strand.
    void enrol() {
        id_ = s_.enrol([weak = this->weak_from_this()](bool kept_only) {
            if (auto self = weak.lock())
                net::post(self->stream_.get_executor(), [self, kept_only] {
                    if (kept_only) self->hurry();
                    else if (self->idle()) self->lowest().close();
                });
        });
    }

    void start() {
        if constexpr (kTls<Stream>) {
            lowest().expires_after(s_.o.request_timeout);
            stream_.async_handshake(ssl::stream_base::server, [self = this->shared_from_this()](beast::error_code ec) {
                if (!ec) self->read();
            });
        } else {
            read();
        }
    }

private:
    beast::tcp_stream& lowest() { return beast::get_lowest_layer(stream_); }

    void read() {
        if (s_.stopping()) return;   // the stop closes this connection: it ends here
        parser_.emplace();
        parser_->body_limit(s_.o.max_body);
        lowest().expires_after(s_.o.request_timeout);
        if (served_ && s_.waiting()) hurry();
        http::async_read_header(stream_, buf_, *parser_, [self = this->shared_from_this()](beast::error_code ec, size_t) {
            self->on_header(ec);
        });
    }

    /// Waiting for a request that has not begun (not in the TLS handshake, not answering).
    bool idle() const { return parser_ && !parser_->got_some() && buf_.size() == 0 && !answering_; }

    /// Others wait for this connection's place: kept alive and idle, it is closed in
    /// kIdleWhileQueued rather than request_timeout (a caller that keeps a connection
    /// unused that long is not about to send on it). A pending read's time-out cannot be
    /// shortened, hence a timer of its own.
    void hurry() {
        if (!served_ || !idle() || hurrying_) return;
        hurrying_ = true;
        hurry_.expires_after(kIdleWhileQueued);
        hurry_.async_wait([weak = this->weak_from_this()](beast::error_code ec) {
            auto self = weak.lock();
            if (!self || ec) return;
            self->hurrying_ = false;
            if (self->s_.waiting() && self->idle()) self->lowest().close();
        });
    }

    // A Content-Length over the limit fails the header (Beast checks it against body_limit);
    // a chunked body fails when its chunks add up to more.
    void too_large() {
        unread_ = true;
        reply({413, R"({"error":"request too large"})"}, false);
    }

    void on_header(beast::error_code ec) {
        answering_ = true;
        if (hurrying_) {   // a request came: the idle connection's timer no longer applies
            hurry_.cancel();
            hurrying_ = false;
        }
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
        // While others wait, this connection's place goes to the next after this answer.
        keep_alive = keep_alive && !s_.stopping() && !s_.waiting();
        res_ = {};
        res_.version(11);
        res_.result(static_cast<unsigned>(r.status));
        res_.set(http::field::content_type, r.content_type);
        res_.set(http::field::server, "topocni");
        res_.keep_alive(keep_alive);
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
            ++self->served_;
            if (ec) return;
            if (keep_alive) self->read();
            else if (self->unread_) linger(self->stream_, self->buf_, self);
        });
    }

    std::shared_ptr<const void> tls_;   // outlives stream_ (declared before it)
    Stream stream_;
    Server& s_;
    net::steady_timer hurry_;
    beast::flat_buffer buf_;
    std::optional<http::request_parser<http::string_body>> parser_;
    std::string body_;
    bool answering_ = false;   // from a request's header to its answer written
    bool unread_ = false;      // answered before the request was read whole
    bool hurrying_ = false;
    std::uint64_t served_ = 0;
    std::uint64_t id_ = 0;
    http::response<PiecesBody> res_;
};

/// A caller there is no place for: its request's header read (after the TLS handshake),
/// a well-formed 503 written, the rest drained, closed; all within kRefusalTime + kLinger.
template <class Stream>
class Refusal : public std::enable_shared_from_this<Refusal<Stream>> {
public:
    Refusal(std::shared_ptr<const void> tls, Stream stream, Server& s, const char* why)
        : tls_(std::move(tls)), stream_(std::move(stream)), s_(s), why_(why), buf_(kDrainChunk) {}
    ~Refusal() { s_.refusal_done(); }

    void start() {
        beast::get_lowest_layer(stream_).expires_after(kRefusalTime);
        if constexpr (kTls<Stream>) {
            stream_.async_handshake(ssl::stream_base::server, [self = this->shared_from_this()](beast::error_code ec) {
                if (!ec) self->read_header();
            });
        } else {
            read_header();
        }
    }

private:
    void read_header() {
        // The body is drained, never kept: any length is answered. (Not boost::none: Beast
        // 1.74 compares a length with the optional limit, and every length exceeds none.)
        parser_.body_limit(std::numeric_limits<std::uint64_t>::max());
        http::async_read_header(stream_, buf_, parser_, [self = this->shared_from_this()](beast::error_code ec, size_t) {
            if (!ec) self->answer();
        });
    }

    void answer() {
        res_.version(11);
        res_.result(http::status::service_unavailable);
        res_.set(http::field::content_type, "application/json");
        res_.set(http::field::server, "topocni");
        res_.set(http::field::retry_after, "1");
        res_.keep_alive(false);
        res_.body() = std::string(R"({"error":")") + why_ + "\"}";
        res_.prepare_payload();   // Content-Length from the body
        http::async_write(stream_, res_, [self = this->shared_from_this()](beast::error_code ec, size_t) {
            if (!ec) linger(self->stream_, self->buf_, self);
        });
    }

    std::shared_ptr<const void> tls_;
    Stream stream_;
    Server& s_;
    const char* why_;
    beast::flat_buffer buf_;
    http::request_parser<http::empty_body> parser_;
    http::response<http::string_body> res_;
};

void Server::take(tcp::socket sock) {
    std::vector<std::function<void()>> hurry;
    {
        std::unique_lock<std::mutex> l(mu_);
        if (live_ < o.max_connections && queue_.empty()) {
            ++live_;
            l.unlock();
            return serve(std::move(sock));
        }
        if (queue_.size() >= static_cast<size_t>(o.max_queue)) {
            l.unlock();
            return refuse(std::move(sock), "busy");
        }
        queue_.push_back({std::move(sock), Clock::now()});
        queued_ = queue_.size();
        if (!said_queueing_) {
            said_queueing_ = true;
            base::log::info("busy: " + std::to_string(o.max_connections) + " connections served; callers wait (at most " +
                            std::to_string(o.max_queue) + ")");
        }
    }
    close_idle(true);
}

void Server::release() {
    std::optional<tcp::socket> next;
    std::vector<tcp::socket> late;
    {
        std::lock_guard<std::mutex> l(mu_);
        --live_;
        late = expired_locked(Clock::now());
        // A caller that gave up while it waited (its FIN is all there is to read) is not
        // served: the work would be done for no one while the live callers wait longer.
        while (!queue_.empty() && !stopping_ && !next) {
            tcp::socket sock = std::move(queue_.front().sock);
            queue_.pop_front();
            if (gone(sock)) continue;   // closed here
            next.emplace(std::move(sock));
            ++live_;
        }
        queued_ = queue_.size();
    }
    // Started on the connection's own strand, not inside the session ending here.
    if (next) {
        auto ex = next->get_executor();
        net::post(ex, [this, sock = std::move(*next)]() mutable { serve(std::move(sock)); });
    }
    for (auto& sock : late) {
        auto ex = sock.get_executor();
        net::post(ex, [this, sock = std::move(sock)]() mutable { refuse(std::move(sock), "busy"); });
    }
}

bool Server::gone(tcp::socket& sock) {
    char c;
    return ::recv(sock.native_handle(), &c, 1, MSG_PEEK | MSG_DONTWAIT) == 0;
}

std::vector<tcp::socket> Server::expired_locked(Clock::time_point now) {
    std::vector<tcp::socket> late;
    while (!queue_.empty() && now - queue_.front().since >= o.max_wait) {
        late.push_back(std::move(queue_.front().sock));
        queue_.pop_front();
    }
    queued_ = queue_.size();
    return late;
}

void Server::tick() {
    std::vector<tcp::socket> late;
    {
        std::lock_guard<std::mutex> l(mu_);
        late = expired_locked(Clock::now());
        if (queue_.empty() && said_queueing_ && live_ < o.max_connections) {
            said_queueing_ = false;
            base::log::info("no caller waits any more");
        }
    }
    for (auto& sock : late) refuse(std::move(sock), "busy");
    if (int n = refused_.exchange(0))
        base::log::warn("busy: " + std::to_string(n) + " caller(s) answered 503 (" + std::to_string(o.max_connections) +
                        " served, " + std::to_string(o.max_queue) + " may wait, each at most " +
                        std::to_string(o.max_wait.count()) + " ms)");
    if (int n = dropped_.exchange(0))
        base::log::warn("busy: " + std::to_string(n) + " caller(s) closed unanswered (" + std::to_string(kMaxRefusals) +
                        " 503s already being delivered)");
}

void Server::stop() {
    std::deque<Waiting> queue;
    {
        std::lock_guard<std::mutex> l(mu_);
        stopping_ = true;
        queue.swap(queue_);
        queued_ = 0;
    }
    for (auto& w : queue) refuse(std::move(w.sock), "shutting down");
    close_idle(false);
}

void Server::close_idle(bool kept_only) {
    std::vector<Closer> closers;
    {
        std::lock_guard<std::mutex> l(mu_);
        for (auto& [id, close] : closers_) closers.push_back(close);
    }
    for (auto& close : closers) close(kept_only);
}

void Server::serve(tcp::socket sock) {
    if (cert_) {
        auto ctx = cert_->current();
        auto s = std::make_shared<Session<beast::ssl_stream<beast::tcp_stream>>>(
            ctx, beast::ssl_stream<beast::tcp_stream>(beast::tcp_stream(std::move(sock)), *ctx), *this);
        s->enrol();
        s->start();
    } else {
        auto s = std::make_shared<Session<beast::tcp_stream>>(nullptr, beast::tcp_stream(std::move(sock)), *this);
        s->enrol();
        s->start();
    }
}

void Server::refuse(tcp::socket sock, const char* why) {
    {
        std::lock_guard<std::mutex> l(mu_);
        if (refusing_ >= kMaxRefusals) {
            ++dropped_;
            return;   // the socket closes here
        }
        ++refusing_;
    }
    ++refused_;
    if (cert_) {
        auto ctx = cert_->current();
        std::make_shared<Refusal<beast::ssl_stream<beast::tcp_stream>>>(
            ctx, beast::ssl_stream<beast::tcp_stream>(beast::tcp_stream(std::move(sock)), *ctx), *this, why)
            ->start();
    } else {
        std::make_shared<Refusal<beast::tcp_stream>>(nullptr, beast::tcp_stream(std::move(sock)), *this, why)->start();
    }
}

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
    if (o.threads > 0) return std::clamp(o.threads, 1, std::max(1, o.max_connections + 1));
    cpu_set_t cpus;
    int n = ::sched_getaffinity(0, sizeof cpus, &cpus) == 0 ? CPU_COUNT(&cpus) : 2;
    return std::clamp(n, 1, std::max(1, o.max_connections));
}

/// A burst of waiting callers holds one descriptor each: the soft limit (often 1,024) is
/// raised to the hard one, as Go's runtime does at start.
void raise_file_limit() {
    struct rlimit r {};
    if (::getrlimit(RLIMIT_NOFILE, &r) == 0 && r.rlim_cur < r.rlim_max) {
        r.rlim_cur = r.rlim_max;
        ::setrlimit(RLIMIT_NOFILE, &r);
    }
}

}  // namespace

void serve(const Options& o, const Handler& handler, const std::atomic<bool>& stop,
           const std::function<void(int)>& on_listening) {
    // Destroyed in reverse: the io_context (and the sessions its handlers hold) before the
    // server state they report to and the certificate they were made from.
    std::optional<tls::ServerCertificate> cert;
    if (!o.tls_cert.empty() || !o.tls_key.empty()) {
        kube::tls::init();
        cert.emplace(o.tls_cert, o.tls_key);
    }
    raise_file_limit();
    Server server(o, handler, cert ? &*cert : nullptr);
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
            if (!server.stopping()) server.take(std::move(sock));
            accept();
        });
    };
    accept();
    net::steady_timer watch(control);
    std::chrono::steady_clock::time_point until;
    std::function<void()> drain = [&] {
        // The requests in flight finish, each bounded by request_timeout; the 503s to the
        // queue are delivered, each bounded by kRefusalTime.
        server.tick();
        if (server.done() || std::chrono::steady_clock::now() > until) return ioc.stop();
        watch.expires_after(std::chrono::milliseconds(50));
        watch.async_wait([&](boost::system::error_code) { drain(); });
    };
    std::function<void()> poll_stop = [&] {
        watch.expires_after(std::chrono::milliseconds(100));
        watch.async_wait([&](boost::system::error_code) {
            server.tick();
            if (!stop) return poll_stop();
            acceptor.close();
            retry.cancel();
            server.stop();
            until = std::chrono::steady_clock::now() + std::max<std::chrono::milliseconds>(o.request_timeout, kRefusalTime + kLinger);
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
