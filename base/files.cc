#include "base/files.h"

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <dirent.h>
#include <fcntl.h>
#include <memory>
#include <sys/stat.h>
#include <unistd.h>

#include "base/error.h"

namespace base::fs {

void fail_io(const std::string& what, const std::string& path, int err) {
    throw base::FileError("failed to " + what + " '" + path + "': " + std::strerror(err), {}, err);
}

std::vector<std::string> make_dirs(const std::string& path, mode_t mode) {
    std::vector<std::string> created;
    // Nearly always there already: one syscall instead of one per component.
    if (::mkdir(path.c_str(), mode) == 0) return {path};
    if (errno == EEXIST) return {};
    // A failed ADD elsewhere may remove a directory it created (remove_dirs) just as we
    // create one below it: then start again from the top, a few times.
    for (int attempt = 0;; ++attempt) {
        bool lost = false;
        for (size_t end = 1; end <= path.size() && !lost; ++end) {
            if (end != path.size() && path[end] != '/') continue;
            std::string part = path.substr(0, end);
            if (::mkdir(part.c_str(), mode) == 0) created.push_back(part);
            else if (errno == ENOENT && attempt < 5) lost = true;
            else if (errno != EEXIST) fail_io("create directory", part, errno);
        }
        if (!lost) return created;
    }
}

void mkdir_p(const std::string& path, mode_t mode) { (void)make_dirs(path, mode); }

void remove_dirs(const std::vector<std::string>& created) {
    for (auto it = created.rbegin(); it != created.rend(); ++it) ::rmdir(it->c_str());
}

bool is_empty_dir(const std::string& path) {
    std::unique_ptr<DIR, int (*)(DIR*)> dir(::opendir(path.c_str()), ::closedir);
    if (!dir) return false;
    while (const dirent* e = ::readdir(dir.get()))
        if (std::strcmp(e->d_name, ".") != 0 && std::strcmp(e->d_name, "..") != 0) return false;
    return true;
}

base::UniqueFd open_dir(int at, const std::string& name, const std::string& shown) {
    base::UniqueFd fd(::openat(at, name.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
    if (!fd) fail_io("open directory", shown, errno);
    return fd;
}

base::UniqueFd make_dir(int at, const std::string& name, const std::string& shown, mode_t mode) {
    // Nearly always there: one syscall instead of two.
    base::UniqueFd fd(::openat(at, name.c_str(), O_RDONLY | O_CLOEXEC | O_DIRECTORY));
    if (fd || errno != ENOENT) return fd ? std::move(fd) : open_dir(at, name, shown);   // open_dir reports the error
    if (::mkdirat(at, name.c_str(), mode) != 0 && errno != EEXIST) fail_io("create directory", shown, errno);
    return open_dir(at, name, shown);
}

std::optional<std::string> read_at(int at, const std::string& name, const std::string& shown, size_t max) {
    base::UniqueFd fd(::openat(at, name.c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW));
    if (!fd) {
        if (errno == ENOENT) return std::nullopt;
        fail_io("open", shown, errno);
    }
    std::string out;
    char buf[4096];
    while (out.size() < max) {
        ssize_t n = ::read(fd.get(), buf, std::min(sizeof buf, max - out.size()));
        if (n < 0 && errno == EINTR) continue;
        if (n < 0) fail_io("read", shown, errno);
        if (n == 0) break;
        out.append(buf, static_cast<size_t>(n));
    }
    return out;
}

void create_file(int at, const std::string& name, std::string_view data, const std::string& shown, bool durable) {
    base::UniqueFd fd(::openat(at, name.c_str(), O_RDWR | O_EXCL | O_CREAT | O_CLOEXEC, 0600));
    if (!fd) fail_io("create", shown, errno);
    try {
        while (!data.empty()) {
            ssize_t n = ::write(fd.get(), data.data(), data.size());
            if (n < 0 && errno == EINTR) continue;
            if (n < 0) fail_io("write", shown, errno);
            data.remove_prefix(static_cast<size_t>(n));
        }
        if (durable) sync(fd.get(), shown);
    } catch (...) {
        ::unlinkat(at, name.c_str(), 0);   // ours: created just now; no half-written file stays
        throw;
    }
}

namespace {
// `data` over the start of the open file whose size is `size`, then the tail cut off.
void overwrite(int fd, off_t size, std::string_view data, const std::string& shown) {
    ssize_t n;
    do n = ::pwrite(fd, data.data(), data.size(), 0);
    while (n < 0 && errno == EINTR);
    if (n != static_cast<ssize_t>(data.size())) fail_io("write", shown, n < 0 ? errno : EIO);
    if (size > static_cast<off_t>(data.size()) && ::ftruncate(fd, static_cast<off_t>(data.size())) != 0)
        fail_io("truncate", shown, errno);
}
}  // namespace

void write_in_place(int at, const std::string& name, std::string_view data, const std::string& shown) {
    base::UniqueFd fd(::openat(at, name.c_str(), O_WRONLY | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0600));
    if (!fd) fail_io("open", shown, errno);
    struct stat st;
    if (::fstat(fd.get(), &st) != 0) fail_io("stat", shown, errno);
    overwrite(fd.get(), st.st_size, data, shown);
}

bool exists_at(int at, const std::string& name, const std::string& shown) {
    struct stat st;
    if (::fstatat(at, name.c_str(), &st, AT_SYMLINK_NOFOLLOW) == 0) return true;
    if (errno == ENOENT) return false;
    fail_io("stat", shown, errno);
}

void remove_at(int at, const std::string& name, const std::string& shown) {
    if (::unlinkat(at, name.c_str(), 0) != 0 && errno != ENOENT) fail_io("remove", shown, errno);
}

void sync(int fd, const std::string& shown) {
    if (::fsync(fd) != 0) fail_io("sync", shown, errno);
}

namespace {

bool is_regular(int at, const dirent& e) {
    if (e.d_type != DT_UNKNOWN) return e.d_type == DT_REG;
    struct stat st;
    return ::fstatat(at, e.d_name, &st, AT_SYMLINK_NOFOLLOW) == 0 && S_ISREG(st.st_mode);
}

}  // namespace

namespace {

/// The names of the entries under `at` that `keep` accepts.
template <class F>
std::vector<std::string> names_where(int at, const std::string& shown, F&& keep) {
    // A fresh fd for the directory: fdopendir takes it over and reads from offset 0.
    base::UniqueFd fd(::openat(at, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC));
    if (!fd) fail_io("open directory", shown, errno);
    std::unique_ptr<DIR, int (*)(DIR*)> dir(::fdopendir(fd.get()), ::closedir);
    if (!dir) fail_io("list directory", shown, errno);
    fd.release();
    std::vector<std::string> names;
    while (const dirent* e = ::readdir(dir.get()))
        if (keep(*e)) names.emplace_back(e->d_name);
    return names;
}

}  // namespace

std::vector<std::string> list_names(int at, const std::string& shown) {
    return names_where(at, shown, [](const dirent& e) {
        return std::strcmp(e.d_name, ".") != 0 && std::strcmp(e.d_name, "..") != 0;
    });
}

void remove_tree(int at, const std::string& name, const std::string& shown) {
    base::UniqueFd fd(::openat(at, name.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC | O_NOFOLLOW));
    if (!fd) {
        if (errno == ENOTDIR || errno == ELOOP) remove_at(at, name, shown);
        else if (errno != ENOENT) fail_io("open directory", shown, errno);
        return;
    }
    for (auto& n : list_names(fd.get(), shown)) remove_tree(fd.get(), n, shown + "/" + n);
    if (::unlinkat(at, name.c_str(), AT_REMOVEDIR) != 0 && errno != ENOENT) fail_io("remove directory", shown, errno);
}

std::vector<std::string> list_files(int at, const std::string& shown) {
    return names_where(at, shown, [at](const dirent& e) { return is_regular(at, e); });
}

// --- whole files by path, durable ---

namespace {

std::string parent_of(const std::string& path) {
    auto slash = path.rfind('/');
    return slash == 0 ? "/" : path.substr(0, slash);
}

void sync_dir(const std::string& dir) {
    UniqueFd fd(::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
    if (!fd) fail_io("open directory", dir, errno);
    if (::fsync(fd.get()) < 0) fail_io("sync directory", dir, errno);
}

void write_all(int fd, const std::string& data, const std::string& path) {
    size_t done = 0;
    while (done < data.size()) {
        ssize_t n = ::write(fd, data.data() + done, data.size() - done);
        if (n < 0 && errno == EINTR) continue;
        if (n < 0) fail_io("write", path, errno);
        done += size_t(n);
    }
}

/// A complete, synced temp file beside `path`, holding `data` with exactly `mode` (not
/// umask's), in its directory, created (`dir_mode`) when missing; the directories
/// made are added to `created`. Returns its name.
std::string synced_temp_beside(const std::string& path, const std::string& data, unsigned mode, unsigned dir_mode,
                               std::vector<std::string>& created, bool durable = true) {
    std::string dir = parent_of(path);
    for (auto& d : make_dirs(dir, dir_mode)) created.push_back(d);
    std::string tmp = dir + "/." + path.substr(dir.size() + 1) + ".tmp." + std::to_string(::getpid());
    UniqueFd fd(::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, mode));
    if (!fd && errno == ENOENT) {
        // A failed ADD or a DEL elsewhere removed the directory it had created just now: again.
        for (auto& d : make_dirs(dir, dir_mode)) created.push_back(d);
        fd = UniqueFd(::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, mode));
    }
    if (!fd) fail_io("create", tmp, errno);
    try {
        if (::fchmod(fd.get(), mode) < 0) fail_io("set the mode of", tmp, errno);
        write_all(fd.get(), data, tmp);
        if (durable && ::fsync(fd.get()) < 0) fail_io("sync", tmp, errno);
    } catch (...) {
        ::unlink(tmp.c_str());
        throw;
    }
    return tmp;
}

}  // namespace

std::vector<std::string> write_file(const std::string& path, const std::string& data, unsigned mode, bool durable) {
    std::vector<std::string> created;
    std::string tmp = synced_temp_beside(path, data, mode, 0700, created, durable);
    if (::rename(tmp.c_str(), path.c_str()) < 0) {
        int err = errno;
        ::unlink(tmp.c_str());
        fail_io("replace", path, err);
    }
    if (durable) sync_dir(parent_of(path));
    return created;
}

bool create_once(const std::string& path, const std::string& data, unsigned mode, unsigned dir_mode, bool durable) {
    std::vector<std::string> created;   // the caller knows them (missing_dirs) before
    // The mode is part of the contract (the device-info spec says 0444).
    std::string tmp = synced_temp_beside(path, data, mode, dir_mode, created, durable);
    // link() fails with EEXIST instead of replacing, unlike rename(): a file that appeared
    // meanwhile (the runtime's copy of the device plugin's) wins.
    int rc = ::link(tmp.c_str(), path.c_str());
    int err = errno;
    ::unlink(tmp.c_str());
    if (rc < 0 && err == EEXIST) return false;
    if (rc < 0) fail_io("create", path, err);
    if (durable) sync_dir(parent_of(path));
    return true;
}

std::optional<std::string> read_file(const std::string& path) {
    UniqueFd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW));
    if (!fd) {
        if (errno == ENOENT) return std::nullopt;
        fail_io("open", path, errno);
    }
    std::string out;
    char buf[8192];
    for (;;) {
        ssize_t n = ::read(fd.get(), buf, sizeof buf);
        if (n < 0 && errno == EINTR) continue;
        if (n < 0) fail_io("read", path, errno);
        if (n == 0) return out;
        out.append(buf, size_t(n));
        if (out.size() > (1u << 20)) throw FileError("'" + path + "' is larger than 1 MiB");
    }
}

std::vector<std::string> missing_dirs(const std::string& dir) {
    std::vector<std::string> out;
    std::string d = dir;
    struct stat st;
    while (!d.empty() && d != "/" && ::stat(d.c_str(), &st) != 0 && errno == ENOENT) {
        out.insert(out.begin(), d);
        d = parent_of(d);
    }
    return out;
}

void remove_file(const std::string& path, bool durable) {
    if (::unlink(path.c_str()) < 0) {
        if (errno == ENOENT) return;
        fail_io("remove", path, errno);
    }
    if (durable) sync_dir(parent_of(path));
}

std::vector<std::string> list_dir(const std::string& path) {
    std::vector<std::string> out;
    if (DIR* d = ::opendir(path.c_str())) {
        while (auto* e = ::readdir(d))
            if (e->d_name[0] != '.') out.push_back(e->d_name);
        ::closedir(d);
    }
    std::sort(out.begin(), out.end());
    return out;
}

}  // namespace base::fs
