#include "base/backoff.h"

#include <algorithm>
#include <random>

namespace base {

double uniform01() {
    thread_local std::mt19937_64 gen{std::random_device{}()};
    return std::uniform_real_distribution<double>(0.0, 1.0)(gen);
}

double jittered(double seconds, double factor, const std::function<double()>& random) {
    if (factor <= 0) factor = 1;
    return seconds + random() * factor * seconds;
}

Backoff::Backoff(BackoffPolicy p, std::function<double()> random, std::function<Clock::time_point()> now)
    : p_(p), random_(std::move(random)), now_(std::move(now)), delay_(p.initial) {}

double Backoff::next() {
    const auto now = now_();
    // "If we don't backoff for 2min, assume API server is healthy and we reset the backoff"
    // (reflector.go, defaultBackoffReset).
    if (last_failure_ && now - *last_failure_ > std::chrono::duration<double>(p_.reset_after)) reset();
    last_failure_ = now;
    ++failures_;
    const double d = delay_;
    delay_ = std::min(p_.cap, delay_ * p_.factor);   // the cap bounds the delay; the jitter comes on top
    return p_.jitter > 0 ? jittered(d, p_.jitter, random_) : d;
}

void Backoff::reset() {
    delay_ = p_.initial;
    failures_ = 0;
    last_failure_.reset();
}

}  // namespace base
