#include "base/log.h"

#include <fcntl.h>
#include <sys/time.h>
#include <unistd.h>

#include <cstdio>
#include <ctime>

#include "base/text.h"
#include "base/fd.h"

namespace base::log {

namespace {

struct State {
    Level level = Level::Error;
    base::UniqueFd file;     ///< empty: stderr
    std::string verb = "-", container_id = "-", ifname = "-";
};

State& state() {
    static State s;
    return s;
}

const char* name(Level l) {
    switch (l) {
        case Level::Error: return "error";
        case Level::Warning: return "warning";
        case Level::Info: return "info";
        case Level::Debug: return "debug";
    }
    return "?";
}

}  // namespace

void configure(const std::string& level, const std::string& file) {
    auto& s = state();
    if (level == "warning") s.level = Level::Warning;
    else if (level == "info") s.level = Level::Info;
    else if (level == "debug") s.level = Level::Debug;
    else s.level = Level::Error;
    s.file.reset();
    if (!file.empty()) {
        int fd = ::open(file.c_str(), O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC | O_NOCTTY, 0640);
        if (fd >= 0) s.file = base::UniqueFd(fd);
        else std::fprintf(stderr, "topocni: cannot open logFile '%s'; logging to stderr\n", file.c_str());
    }
}

void set_context(const std::string& verb, const std::string& container_id, const std::string& ifname) {
    auto& s = state();
    s.verb = verb.empty() ? "-" : verb;
    s.container_id = container_id.empty() ? "-" : container_id;
    s.ifname = ifname.empty() ? "-" : ifname;
}

void write(Level level, const std::string& message) {
    auto& s = state();
    if (level > s.level) return;
    timeval tv;
    gettimeofday(&tv, nullptr);
    tm t;
    gmtime_r(&tv.tv_sec, &t);
    char ts[64];   // room for any int the compiler cannot rule out
    std::snprintf(ts, sizeof ts, "%04d-%02d-%02dT%02d:%02d:%02d.%03ldZ", t.tm_year + 1900, t.tm_mon + 1, t.tm_mday,
                  t.tm_hour, t.tm_min, t.tm_sec, static_cast<long>(tv.tv_usec / 1000));
    std::string line = std::string(ts) + " " + name(level) + " " + s.verb + " " + s.container_id + " " + s.ifname +
                       ": " + utf8_escaped(message);
    for (auto& ch : line)
        if (ch == '\n') ch = ' ';   // one event, one line
    line += '\n';
    // One write(2) per line, so concurrent plugin processes never interleave inside a line.
    ssize_t r = ::write(s.file ? s.file.get() : 2, line.data(), line.size());
    (void)r;
}

}  // namespace base::log
