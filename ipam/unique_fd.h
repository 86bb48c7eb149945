// Owning file descriptor for the IPAM store: move-only, closed in its destructor.
// (ipam does not depend on netns, so it keeps its own copy of this tiny type.)
#pragma once
#include <unistd.h>
#include <utility>

namespace ipam {

class UniqueFd {
public:
    UniqueFd() = default;
    explicit UniqueFd(int fd) noexcept : fd_(fd) {}
    UniqueFd(const UniqueFd&) = delete;
    UniqueFd& operator=(const UniqueFd&) = delete;
    UniqueFd(UniqueFd&& o) noexcept : fd_(o.release()) {}
    UniqueFd& operator=(UniqueFd&& o) noexcept {
        if (this != &o) { reset(); fd_ = o.release(); }
        return *this;
    }
    ~UniqueFd() { reset(); }

    int get() const noexcept { return fd_; }
    explicit operator bool() const noexcept { return fd_ >= 0; }
    /// Hands the fd over; this object becomes empty.
    int release() noexcept { return std::exchange(fd_, -1); }
    void reset() noexcept { if (fd_ >= 0) ::close(fd_); fd_ = -1; }

private:
    int fd_ = -1;
};

}  // namespace ipam
