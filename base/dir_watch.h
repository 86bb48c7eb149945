// Waking up when files change in a few directories (inotify), for the long-running commands
// that re-read the state directory: the publisher, the refusal agent. Without inotify (no
// instances left), a wait is a sleep and the caller's interval does the work.
#pragma once
#include <string>

#include "base/fd.h"

namespace base {

class DirWatch {
public:
    /// `fallback` says what the caller does without inotify ("reading every interval only").
    explicit DirWatch(const std::string& fallback);
    /// Watches `dir` for files created, removed, renamed or written (a directory watched
    /// already costs nothing). False when it cannot be watched (missing: try again later).
    bool add(const std::string& dir);
    /// Waits up to `ms` for a change; true when one came. Drains what arrived.
    bool wait(int ms);

private:
    UniqueFd fd_;
};

}  // namespace base
