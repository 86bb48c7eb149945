// How long a loop that talks to the Kubernetes API waits after a failure: the reflector's
// LIST+WATCH, the facts publisher and the refusal agent all use this one type, with
// client-go's reflector's numbers (tools/cache/reflector.go: defaultBackoffInit 800 ms,
// defaultBackoffMax 30 s, factor 2, jitter 1.0, defaultBackoffReset 2 min; the arithmetic
// is k8s.io/apimachinery/pkg/util/wait/backoff.go's delay() and wait.go's Jitter()).
//
// The jitter matters on a large cluster: after an API server restart, thousands of node
// agents that failed at the same moment would otherwise all come back at the same moment.
// The reset matters after an outage: once the API answers again, a later single failure
// waits the initial delay, not the cap an outage reached.
#pragma once
#include <chrono>
#include <functional>
#include <optional>

namespace base {

struct BackoffPolicy {
    double initial = 0.8;        ///< seconds: the first delay (before jitter)
    double cap = 30;             ///< seconds: the delay (before jitter) grows no further
    double factor = 2;           ///< each failure in a row multiplies the delay by this
    double jitter = 1;           ///< a delay d is waited as d + random[0, 1) * jitter * d
    double reset_after = 120;    ///< seconds without a failure: the next one starts from `initial`
};

/// Uniform in [0, 1): a generator of this thread's own, seeded once from the system.
double uniform01();

/// `seconds` + random * factor * `seconds`, as wait.Jitter (a factor <= 0 counts as 1).
double jittered(double seconds, double factor, const std::function<double()>& random = uniform01);

class Backoff {
public:
    using Clock = std::chrono::steady_clock;
    /// `random` (uniform in [0, 1)) and `now` are there for tests; by default the thread's
    /// generator and the steady clock.
    explicit Backoff(BackoffPolicy p = {}, std::function<double()> random = uniform01,
                     std::function<Clock::time_point()> now = Clock::now);

    /// One more failure: the seconds to wait before the next attempt.
    double next();
    /// A success: the next failure waits the initial delay again.
    void reset();
    /// Failures since the last reset (for logs: "attempt N").
    int failures() const { return failures_; }
    const BackoffPolicy& policy() const { return p_; }

private:
    BackoffPolicy p_;
    std::function<double()> random_;
    std::function<Clock::time_point()> now_;
    double delay_;                                 ///< before jitter, for the next failure
    int failures_ = 0;
    std::optional<Clock::time_point> last_failure_;
};

}  // namespace base
