// Owning file descriptor: move-only, closes in its destructor. Functions that only
// use an fd take a plain int, so ownership is visible in every signature.
#pragma once
#include <unistd.h>
#include <utility>

namespace base {

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
    bool valid() const noexcept { return fd_ >= 0; }
    explicit operator bool() const noexcept { return valid(); }
    /// Hands the fd over; this object becomes empty.
    int release() noexcept { return std::exchange(fd_, -1); }
    void reset() noexcept { if (fd_ >= 0) ::close(fd_); fd_ = -1; }

private:
    int fd_ = -1;
};

}  // namespace base
