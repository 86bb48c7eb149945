// The clocks attachment records and GC compare: CLOCK_BOOTTIME, which keeps counting
// through suspend, as the kernel's process start times do.
#pragma once
#include <cstdint>

namespace base {

/// CLOCK_BOOTTIME now, in ns (the clock process start times are kept in).
int64_t boottime_ns();
/// When this process was started, on the same clock: static initialisation, or the fork
/// (to the 10 ms tick below it) when start-up took more than 20 ms.
int64_t process_start_ns();

}  // namespace base
