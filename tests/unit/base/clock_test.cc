// base/clock.h: the process start GC compares attachment records against.
#include <doctest/doctest.h>

#include "base/clock.h"

namespace {
const int64_t g_test_static_init_ns = base::boottime_ns();
}

TEST_CASE("clock: the process start GC compares against is this process's start-up, never later") {
    // GC keeps attachments completed after this moment. Later than the start-up would
    // release attachments whose ADD began after the runtime took its valid list; much
    // earlier would keep ones that completed just before GC.
    const int64_t start = base::process_start_ns();
    CHECK(start <= base::boottime_ns());
    // Static initialisation of this binary and of clock.cc are moments apart (or, after
    // a slow start-up, the fork tick comes before both).
    CHECK(start <= g_test_static_init_ns + 20'000'000LL);
    CHECK(start > g_test_static_init_ns - 1'000'000'000LL);
    CHECK(base::process_start_ns() == start);   // computed once
}
