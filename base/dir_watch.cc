#include "base/dir_watch.h"

#include <poll.h>
#include <sys/inotify.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "base/log.h"

namespace base {

DirWatch::DirWatch(const std::string& fallback) : fd_(::inotify_init1(IN_NONBLOCK | IN_CLOEXEC)) {
    if (!fd_) log::warn(std::string("inotify: ") + std::strerror(errno) + "; " + fallback);
}

bool DirWatch::add(const std::string& dir) {
    if (!fd_) return false;
    const uint32_t mask = IN_CREATE | IN_DELETE | IN_MOVED_TO | IN_MOVED_FROM | IN_CLOSE_WRITE | IN_ONLYDIR;
    return ::inotify_add_watch(fd_.get(), dir.c_str(), mask) >= 0;
}

bool DirWatch::wait(int ms) {
    if (!fd_) {
        ::poll(nullptr, 0, ms);
        return false;
    }
    pollfd p{fd_.get(), POLLIN, 0};
    if (::poll(&p, 1, ms) <= 0) return false;
    char buf[16384];
    while (::read(fd_.get(), buf, sizeof buf) > 0) {
    }
    return true;
}

}  // namespace base
