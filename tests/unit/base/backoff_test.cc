// base/backoff.h: the one back-off of every loop that talks to the API, with client-go's
// reflector's numbers (tools/cache/reflector.go; the arithmetic of apimachinery's
// pkg/util/wait/backoff.go delay() and wait.go Jitter()).
#include <doctest/doctest.h>

#include <algorithm>
#include <chrono>
#include <vector>

#include "base/backoff.h"

namespace {

using Clock = std::chrono::steady_clock;

struct FakeTime {
    Clock::time_point t{};
    void pass(double s) { t += std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(s)); }
};

}  // namespace

TEST_CASE("backoff: without jitter the delay starts at 0.8 s, doubles and stops at 30 s") {
    FakeTime now;
    base::BackoffPolicy p;
    p.jitter = 0;
    base::Backoff b(p, [] { return 0.5; }, [&] { return now.t; });
    std::vector<double> got;
    for (int i = 0; i < 8; ++i) got.push_back(b.next());
    CHECK(got == std::vector<double>{0.8, 1.6, 3.2, 6.4, 12.8, 25.6, 30, 30});
    CHECK(b.failures() == 8);
}

TEST_CASE("backoff: the jitter adds random times the delay on top, so the cap is waited as 30 to 60 s") {
    FakeTime now;
    double r = 0;
    base::Backoff b({}, [&] { return r; }, [&] { return now.t; });
    r = 0;
    CHECK(b.next() == doctest::Approx(0.8));
    r = 0.5;
    CHECK(b.next() == doctest::Approx(1.6 * 1.5));
    r = 0.999;
    CHECK(b.next() == doctest::Approx(3.2 * 1.999));
    for (int i = 0; i < 5; ++i) b.next();
    r = 0.25;
    CHECK(b.next() == doctest::Approx(30 * 1.25));   // at the cap: still jittered, as wait.delay does
}

TEST_CASE("backoff: a success starts it over, so a failure after an outage waits about a second, not the cap") {
    FakeTime now;
    base::Backoff b({}, [] { return 0.0; }, [&] { return now.t; });
    for (int i = 0; i < 10; ++i) {
        b.next();
        now.pass(1);
    }
    CHECK(b.next() == doctest::Approx(30));
    b.reset();
    CHECK(b.failures() == 0);
    CHECK(b.next() == doctest::Approx(0.8));
    CHECK(b.failures() == 1);
}

TEST_CASE("backoff: two minutes without a failure start it over by themselves") {
    FakeTime now;
    base::Backoff b({}, [] { return 0.0; }, [&] { return now.t; });
    for (int i = 0; i < 10; ++i) b.next();
    now.pass(119);
    CHECK(b.next() == doctest::Approx(30));   // not quiet long enough
    now.pass(121);
    CHECK(b.next() == doctest::Approx(0.8));
    CHECK(b.failures() == 1);
}

TEST_CASE("backoff: the thread's random source is uniform in [0, 1) and jittered() spreads a timeout over [t, 2t)") {
    double lo = 1, hi = 0;
    for (int i = 0; i < 2000; ++i) {
        double u = base::uniform01();
        REQUIRE(u >= 0);
        REQUIRE(u < 1);
        lo = std::min(lo, u);
        hi = std::max(hi, u);
    }
    CHECK(lo < 0.05);
    CHECK(hi > 0.95);
    CHECK(base::jittered(300, 1.0, [] { return 0.0; }) == doctest::Approx(300));
    CHECK(base::jittered(300, 1.0, [] { return 0.5; }) == doctest::Approx(450));
    CHECK(base::jittered(300, 0.0, [] { return 0.5; }) == doctest::Approx(450));   // factor <= 0 counts as 1
}
