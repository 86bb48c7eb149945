#include "base/stop_signal.h"

#include <csignal>

namespace base {

namespace {

std::atomic<bool> g_stop{false};   // lock-free: the one thing a handler may touch

void on_signal(int) { g_stop = true; }

}  // namespace

std::atomic<bool>& stop_on_signal() {
    struct sigaction sa {};
    sa.sa_handler = on_signal;
    ::sigaction(SIGTERM, &sa, nullptr);
    ::sigaction(SIGINT, &sa, nullptr);
    return g_stop;
}

}  // namespace base
