#include "kube/resolve.h"

#include <arpa/inet.h>
#include <ares.h>
#include <netdb.h>
#include <poll.h>

#include <algorithm>
#include <memory>

#include "kube/error.h"

namespace kube::resolve {

namespace {

struct Answer {
    bool done = false;
    int status = ARES_SUCCESS;
    std::vector<std::string> v4, v6;
};

void on_answer(void* arg, int status, int, ares_addrinfo* res) {
    auto* a = static_cast<Answer*>(arg);
    a->done = true;
    a->status = status;
    if (!res) return;
    for (auto* n = res->nodes; n; n = n->ai_next) {
        char buf[INET6_ADDRSTRLEN] = {};
        if (n->ai_family == AF_INET)
            inet_ntop(AF_INET, &reinterpret_cast<sockaddr_in*>(n->ai_addr)->sin_addr, buf, sizeof buf), a->v4.push_back(buf);
        else if (n->ai_family == AF_INET6)
            inet_ntop(AF_INET6, &reinterpret_cast<sockaddr_in6*>(n->ai_addr)->sin6_addr, buf, sizeof buf),
                a->v6.push_back(buf);
    }
    ares_freeaddrinfo(res);
}

bool literal(const std::string& host) {
    unsigned char buf[16];
    return inet_pton(AF_INET, host.c_str(), buf) == 1 || inet_pton(AF_INET6, host.c_str(), buf) == 1;
}

}  // namespace

std::vector<std::string> addresses(const std::string& name, std::chrono::milliseconds timeout) {
    std::string host = name.size() > 1 && name.front() == '[' && name.back() == ']' ? name.substr(1, name.size() - 2)
                                                                                     : name;
    if (literal(host)) return {host};

    static const int init = ares_library_init(ARES_LIB_INIT_ALL);
    if (init != ARES_SUCCESS) throw Error(Error::Kind::Internal, std::string("failed to start the resolver: ") + ares_strerror(init));
    ares_options opt{};
    opt.lookups = const_cast<char*>("fb");   // /etc/hosts, then DNS
    opt.timeout = static_cast<int>(std::max<long long>(100, timeout.count() / 2));
    opt.tries = 2;
    ares_channel ch = nullptr;
    int rc = ares_init_options(&ch, &opt, ARES_OPT_LOOKUPS | ARES_OPT_TIMEOUTMS | ARES_OPT_TRIES);
    if (rc != ARES_SUCCESS) throw Error(Error::Kind::Internal, std::string("failed to start the resolver: ") + ares_strerror(rc));
    std::unique_ptr<std::remove_pointer_t<ares_channel>, void (*)(ares_channel)> guard(ch, ares_destroy);

    Answer a;
    ares_addrinfo_hints hints{};
    hints.ai_family = AF_UNSPEC;
    ares_getaddrinfo(ch, host.c_str(), nullptr, &hints, on_answer, &a);
    const auto deadline = std::chrono::steady_clock::now() + timeout;
    while (!a.done) {
        auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
        if (left.count() <= 0) {
            ares_cancel(ch);
            throw Error(Error::Kind::Unavailable, "no DNS answer for '" + host + "' within " + std::to_string(timeout.count()) +
                                            " ms (servers from /etc/resolv.conf)");
        }
        ares_socket_t socks[ARES_GETSOCK_MAXNUM];
        int bits = ares_getsock(ch, socks, ARES_GETSOCK_MAXNUM);
        pollfd fds[ARES_GETSOCK_MAXNUM];
        int n = 0;
        for (int i = 0; i < ARES_GETSOCK_MAXNUM; ++i) {
            short ev = (ARES_GETSOCK_READABLE(bits, i) ? POLLIN : 0) | (ARES_GETSOCK_WRITABLE(bits, i) ? POLLOUT : 0);
            if (ev) fds[n++] = {socks[i], ev, 0};
        }
        timeval tv_max{left.count() / 1000, (left.count() % 1000) * 1000}, tv{};
        timeval* t = ares_timeout(ch, &tv_max, &tv);
        int wait = static_cast<int>(t->tv_sec * 1000 + t->tv_usec / 1000);
        ::poll(fds, n, std::max(wait, 1));
        for (int i = 0; i < n; ++i)
            ares_process_fd(ch, fds[i].revents & (POLLIN | POLLERR | POLLHUP) ? fds[i].fd : ARES_SOCKET_BAD,
                            fds[i].revents & POLLOUT ? fds[i].fd : ARES_SOCKET_BAD);
        if (n == 0) ares_process_fd(ch, ARES_SOCKET_BAD, ARES_SOCKET_BAD);   // time-outs
    }
    if (a.status == ARES_ENOTFOUND || a.status == ARES_ENODATA || a.status == ARES_EBADNAME)
        throw Error(Error::Kind::Invalid, "host name '" + host + "' is neither in /etc/hosts nor in DNS");
    if (a.status != ARES_SUCCESS)
        throw Error(Error::Kind::Unavailable, "failed to resolve '" + host + "': " + ares_strerror(a.status));
    std::vector<std::string> out = a.v4;
    out.insert(out.end(), a.v6.begin(), a.v6.end());
    if (out.empty()) throw Error(Error::Kind::Invalid, "host name '" + host + "' has no address");
    return out;
}

}  // namespace kube::resolve
