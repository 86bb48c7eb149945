#include "base/clock.h"

#include <fcntl.h>
#include <time.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <optional>

namespace base {

int64_t boottime_ns() {
    timespec ts;
    clock_gettime(CLOCK_BOOTTIME, &ts);
    return int64_t(ts.tv_sec) * 1000000000 + ts.tv_nsec;
}

namespace {
// Taken during static initialisation, before main: precise to the nanosecond.
const int64_t g_static_init_ns = boottime_ns();

// When the kernel started this process (fork), from /proc/self/stat: boot-time clock
// ticks (10 ms), rounded down. nullopt if unreadable.
std::optional<int64_t> kernel_start_ns() {
    int fd = ::open("/proc/self/stat", O_RDONLY | O_CLOEXEC);
    if (fd < 0) return std::nullopt;
    char buf[1024];
    ssize_t n = ::read(fd, buf, sizeof buf - 1);
    ::close(fd);
    if (n <= 0) return std::nullopt;
    buf[n] = '\0';
    const char* p = std::strrchr(buf, ')');   // the command name may hold spaces and ')'
    if (!p) return std::nullopt;
    // Fields after the name start at 3 (state); starttime is field 22.
    unsigned long long ticks = 0;
    int field = 2;
    for (const char* q = p + 1; *q; ++q) {
        if (*q != ' ') continue;
        if (++field == 22) {
            ticks = std::strtoull(q + 1, nullptr, 10);
            break;
        }
    }
    long hz = ::sysconf(_SC_CLK_TCK);
    if (field != 22 || hz <= 0) return std::nullopt;
    return static_cast<int64_t>(ticks) * (1000000000 / hz);
}
}  // namespace

// Static initialisation, unless start-up was slow. Normally it comes within a few ms of
// the fork and is the precise moment; the fork time from /proc is rounded down to a 10 ms
// tick, so using it would keep attachments whose ADD completed just before GC started. But
// a slow start-up (a loaded node; ASan's runtime takes ~70 ms here) moves static
// initialisation well past the fork, and GC would then release an attachment whose ADD
// began after the runtime took its valid list: then the (early) fork tick is the safe side.
int64_t process_start_ns() {
    constexpr int64_t kSlowStartNs = 20'000'000;
    static const int64_t start = [] {
        auto k = kernel_start_ns();
        return k && g_static_init_ns - *k > kSlowStartNs ? *k : g_static_init_ns;
    }();
    return start;
}

}  // namespace base
