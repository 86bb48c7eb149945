// Network namespace handle and guard. Opening checks the path really is a namespace
// (nsfs or procfs), so a reused or bogus CNI_NETNS never makes us act on the host.
#pragma once
#include <functional>
#include <string>

#include "base/fd.h"

namespace netns {

/// An open network namespace (O_RDONLY|O_CLOEXEC fd on an nsfs/procfs path).
class Handle {
public:
    /// Throws netns::Error NoNamespace when the path is not a namespace, and
    /// sets sys_errno = ENOENT when the path does not exist (DEL treats that as "gone").
    static Handle open(const std::string& path);
    /// The namespace of the calling thread.
    static Handle current();

    int fd() const { return fd_.get(); }
    const std::string& path() const { return path_; }
    /// Same namespace as another handle (compares st_dev/st_ino).
    bool same_as(const Handle& other) const;

private:
    base::UniqueFd fd_;
    std::string path_;
};

/// Enters a namespace for the lifetime of the guard and always switches back; if
/// switching back fails the process aborts, because every later step would act on the
/// wrong namespace.
class Guard {
public:
    explicit Guard(const Handle& target);
    ~Guard();
    Guard(const Guard&) = delete;
    Guard& operator=(const Guard&) = delete;

private:
    base::UniqueFd saved_;
};

/// Runs fn inside the namespace (like Go's ns.Do).
template <class F>
auto with(const Handle& ns, F&& fn) {
    Guard g(ns);
    return fn();
}

}  // namespace netns
