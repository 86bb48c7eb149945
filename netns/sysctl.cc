// sysctl access through /proc/sys. /proc/sys/net resolves against the netns of the
// calling thread at open time, so these follow netns::Guard.
#include "netns/sysctl.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <system_error>

#include "netns/error.h"
#include "base/fd.h"

namespace netns::sysctl {
namespace {

std::string path_of(const std::string& name) {
    // Names may come from user config; never let "../" walk out of /proc/sys.
    if (name.empty() || name.front() == '/' || ("/" + name + "/").find("/../") != std::string::npos)
        netns::fail_invalid("invalid sysctl name '" + name + "'");
    return "/proc/sys/" + name;
}

[[noreturn]] void fail(const std::string& what, int err) {
    throw netns::Error(netns::Error::Kind::Failed, "failed to " + what + ": " + std::generic_category().message(err), {}, err);
}

}  // namespace

std::optional<std::string> get(const std::string& name) {
    base::UniqueFd fd(::open(path_of(name).c_str(), O_RDONLY | O_CLOEXEC));
    if (!fd) {
        if (errno == ENOENT) return std::nullopt;
        fail("read sysctl '" + name + "'", errno);
    }
    std::string out;
    char buf[512];
    for (;;) {
        ssize_t n = ::read(fd.get(), buf, sizeof(buf));
        if (n < 0 && errno == EINTR) continue;
        if (n < 0) fail("read sysctl '" + name + "'", errno);
        if (n == 0) break;
        out.append(buf, size_t(n));
    }
    while (!out.empty() && out.back() == '\n') out.pop_back();
    return out;
}

void set(const std::string& name, const std::string& value) {
    std::string what = "set sysctl '" + name + "' to '" + value + "'";
    base::UniqueFd fd(::open(path_of(name).c_str(), O_WRONLY | O_CLOEXEC));
    if (!fd) fail(what, errno);
    // proc sysctl handlers take the whole value in one write; a short write is an error.
    ssize_t n;
    do n = ::write(fd.get(), value.data(), value.size());
    while (n < 0 && errno == EINTR);
    if (n < 0) fail(what, errno);
    if (size_t(n) != value.size()) fail(what, EIO);
}

void ensure(const std::string& name, const std::string& value) {
    if (get(name) == value) return;
    set(name, value);
}

}  // namespace netns::sysctl
