#include "ipam/disk_store.h"

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <fcntl.h>
#include <unistd.h>

#include "ipam/error.h"
#include "base/files.h"

namespace ipam {

namespace {

constexpr const char* kCursorPrefix = "last_reserved_ip.";
constexpr const char* kProbe = ".topocni-probe";
constexpr const char* kLegacyOwnDir = ".topocni";   // where earlier releases kept owners/ and tmp/

// The address a directory entry reserves: only names that are exactly an address as
// the reference prints it. This skips "lock", "last_reserved_ip.*", dot-files and
// directories (which list_files already leaves out).
std::optional<base::IpAddr> reserved_ip(const std::string& name) {
    auto ip = base::IpAddr::parse(name);
    if (!ip || ip->str() != name) return std::nullopt;
    return ip;
}

/// The store's lock, with its directory created first in Create mode. A directory
/// removed between the two (a first ADD rolled back) is created again.
FileLock take_lock(const std::string& dir, std::chrono::milliseconds timeout, DiskStore::Mode mode,
                   std::vector<std::string>& created) {
    for (int attempt = 0;; ++attempt) {
        if (mode == DiskStore::Mode::Create)
            for (auto& d : base::fs::make_dirs(dir, 0755)) created.push_back(d);
        try {
            return FileLock(dir + "/lock", timeout);
        } catch (const base::Error& e) {
            if (e.sys_errno != ENOENT || mode != DiskStore::Mode::Create || attempt >= 5) throw;
        }
    }
}

}  // namespace

// Crash safety and durability.
// A process killed at any point (kill -9, OOM, a crashed runtime) leaves every file of
// the store whole or absent, and never leaves the index behind the reservations: a
// reservation appears under its final name in one step (link of a complete temp file),
// the small files that are rewritten (owner index, cursor) are written in one write()
// within a page, which a kill cannot tear (see save_index()), and the owner index is
// written before the reservation it lists. That needs no fsync: the page cache survives
// the process.
// A power loss or kernel crash is different: a name can reach the disk before the data
// of the file it names, so a reservation made in the last seconds may come back empty.
// It still blocks its address (no address is ever handed out twice), topocni reports it
// as a crash leftover and GC releases it; and every pod it could have belonged to died
// with the node. By default nothing is synced: each fsync costs 0.3-1.5 ms on a virtual
// disk (an ADD used to do five) and the reference plugin syncs nothing either. With
// ipam.fsync (`durable_`) a reservation's temp file is synced before it is linked and
// the store directory after every link and unlink, so a reservation survives a power
// loss whole and a release stays released. The owner index and the round-robin cursor
// are never synced: an index that lost its content is unreadable or points at files
// that do not hold its owner, and find() then scans (tidy_index() rewrites it); losing
// the cursor only changes which address comes next.
//
// Files that are rewritten (the index, the cursor) are never renamed over or truncated
// to zero: on ext4 either starts writeback of the new data (auto_da_alloc), which cost
// 0.3 ms and up to several ms per ADD. See save_index() and set_cursor().
//
// Nothing outlives the attachment it was written for: a released reservation and an
// emptied index are unlinked. (Earlier releases kept them as spare inodes for reuse,
// which left files behind after every DEL.)
DiskStore::DiskStore(std::string dir, std::string own_dir, std::chrono::milliseconds lock_timeout, bool durable,
                     Mode mode)
    : dir_(std::move(dir)),
      own_dir_(std::move(own_dir)),
      lock_(take_lock(dir_, lock_timeout, mode, created_)),
      durable_(durable) {
    dir_fd_ = base::fs::open_dir(AT_FDCWD, dir_, dir_);
    // Our files from before they moved out of the reference's directory walk.
    if (base::fs::exists_at(dir_fd_.get(), kLegacyOwnDir, path(kLegacyOwnDir)))
        base::fs::remove_tree(dir_fd_.get(), kLegacyOwnDir, path(kLegacyOwnDir));
    open_own(false);
    clear_temps();
}

// Our directories exist once an ADD reserved something; DEL, GC and CHECK only open
// what is there.
void DiskStore::open_own(bool create) {
    if (owners_fd_ && tmp_fd_) return;
    if (create) {
        for (auto& sub : {"owners", "tmp"})
            for (auto& d : base::fs::make_dirs(own_path(sub), 0755)) created_.push_back(d);
    }
    auto open_if = [&](const char* sub, base::UniqueFd& fd) {
        if (fd) return;
        fd = base::UniqueFd(::open(own_path(sub).c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
        if (!fd && errno != ENOENT) base::fs::fail_io("open directory", own_path(sub), errno);
    };
    open_if("owners", owners_fd_);
    open_if("tmp", tmp_fd_);
}

int DiskStore::owners_fd(bool create) {
    if (!owners_fd_ && create) open_own(true);
    return owners_fd_.get();   // -1 when absent and not created
}

int DiskStore::tmp_fd() {
    if (!tmp_fd_) open_own(true);
    return tmp_fd_.get();
}

// Temp files are created and consumed while the lock is held, so any file here now was
// left by a process that died mid-write.
void DiskStore::clear_temps() {
    if (!tmp_fd_) return;
    for (auto& name : base::fs::list_files(tmp_fd_.get(), own_path("tmp")))
        base::fs::remove_at(tmp_fd_.get(), name, own_path("tmp/" + name));
}

bool DiskStore::taken(const base::IpAddr& ip) { return base::fs::exists_at(dir_fd_.get(), ip.str(), path(ip.str())); }

std::optional<Reservation> DiskStore::holder(const base::IpAddr& ip) {
    auto content = base::fs::read_at(dir_fd_.get(), ip.str(), path(ip.str()));
    if (!content) return std::nullopt;
    return parse_reservation(ip, *content);
}

// The reference writes in place (O_EXCL create, then write), so a crash can leave an
// empty file that blocks the address for good. We write a temp file first and link() it
// to the address's name: the name appears with its full content or not at all, and
// link() fails with EEXIST exactly when the address is taken. The owner index is
// updated before, so it always lists at least what the owner holds.
bool DiskStore::reserve(const base::IpAddr& ip, const Owner& owner) {
    index_add(owner, ip);
    const std::string content = reservation_content(owner);
    const std::string name = ip.str();
    const std::string tmp = "tmp-" + std::to_string(::getpid()) + "-" + std::to_string(seq_++);
    int tfd = tmp_fd();
    base::fs::create_file(tfd, tmp, content, own_path("tmp/" + tmp), durable_);
    bool linked = ::linkat(tfd, tmp.c_str(), dir_fd_.get(), name.c_str(), 0) == 0;
    int err = errno;
    base::fs::remove_at(tfd, tmp, own_path("tmp/" + tmp));
    if (!linked && err == EXDEV) {
        // <dataDir>/<net> is a mount of its own: write in place, as the reference does.
        try {
            base::fs::create_file(dir_fd_.get(), name, content, path(name), durable_);
            linked = true;
        } catch (const base::Error& e) {
            err = e.sys_errno;
        }
    }
    if (!linked && err != EEXIST) base::fs::fail_io("create reservation", path(name), err);
    if (linked && durable_) base::fs::sync(dir_fd_.get(), dir_);
    return linked;
}

void DiskStore::remove(const Reservation& r) {
    auto now = holder(r.ip);
    if (!now || now->container_id != r.container_id || now->ifname != r.ifname) return;
    base::fs::remove_at(dir_fd_.get(), r.ip.str(), path(r.ip.str()));
    if (durable_) base::fs::sync(dir_fd_.get(), dir_);
    if (!r.ifname.empty()) index_drop({r.container_id, r.ifname}, r.ip);
}

std::vector<base::IpAddr> DiskStore::indexed(const Owner& owner) {
    std::vector<base::IpAddr> out;
    if (auto idx = load_index(owner))
        for (auto& r : verified(*idx)) out.push_back(r.ip);
    return out;
}

// The index when it still points at something; otherwise a full scan, which also
// finds what the reference plugin reserved (it writes no index) and legacy files.
std::vector<Reservation> DiskStore::find(const Owner& owner) {
    if (auto idx = load_index(owner)) {
        auto held = verified(*idx);
        if (!held.empty()) return held;
    }
    return scan(owner);
}

std::vector<Reservation> DiskStore::release(const Owner& owner) {
    auto held = find(owner);
    for (auto& r : held) base::fs::remove_at(dir_fd_.get(), r.ip.str(), path(r.ip.str()));
    if (!held.empty() && durable_) base::fs::sync(dir_fd_.get(), dir_);
    if (int fd = owners_fd(false); fd >= 0) {
        const std::string name = index_file_name(owner);
        base::fs::remove_at(fd, name, own_path("owners/" + name));
    }
    return held;
}

std::vector<Reservation> DiskStore::all() {
    std::vector<Reservation> out;
    for (auto& name : base::fs::list_files(dir_fd_.get(), dir_)) {
        auto ip = reserved_ip(name);
        if (!ip) continue;
        if (auto content = base::fs::read_at(dir_fd_.get(), name, path(name))) out.push_back(parse_reservation(*ip, *content));
    }
    std::sort(out.begin(), out.end(), [](auto& a, auto& b) { return a.ip < b.ip; });
    return out;
}

std::vector<base::IpAddr> DiskStore::addresses() {
    std::vector<base::IpAddr> out;
    for (auto& name : base::fs::list_files(dir_fd_.get(), dir_))
        if (auto ip = reserved_ip(name)) out.push_back(*ip);
    std::sort(out.begin(), out.end());
    return out;
}

// A missing or unreadable cursor only costs round-robin order once, as in the reference.
std::optional<base::IpAddr> DiskStore::cursor(size_t set) {
    const std::string name = kCursorPrefix + std::to_string(set);
    auto content = base::fs::read_at(dir_fd_.get(), name, path(name), 64);
    if (!content) return std::nullopt;
    auto end = content->find_last_not_of(" \t\r\n");
    return base::IpAddr::parse(std::string_view(*content).substr(0, end == std::string::npos ? 0 : end + 1));
}

// Rewritten in place, as the reference does, but without truncating first (on ext4 a
// truncate to zero also starts writeback): the address, then the length. A crash in
// between can leave a longer address's tail behind ("10.0.0.90" for "10.0.0.9"); like a
// missing or unreadable cursor that only changes which address comes next, since the
// cursor is just where the search for a free address starts. Readers hold the lock.
void DiskStore::set_cursor(size_t set, const base::IpAddr& ip) {
    const std::string name = kCursorPrefix + std::to_string(set);
    base::fs::write_in_place(dir_fd_.get(), name, ip.str(), path(name));
}

void DiskStore::remove_cursor(size_t set) {
    const std::string name = kCursorPrefix + std::to_string(set);
    base::fs::remove_at(dir_fd_.get(), name, path(name));
}

void DiskStore::tidy_index() {
    int fd = owners_fd(false);
    if (fd < 0) return;
    for (auto& name : base::fs::list_files(fd, own_path("owners"))) {
        auto content = base::fs::read_at(fd, name, own_path("owners/" + name));
        auto idx = content ? parse_index(*content) : std::nullopt;
        if (!idx || index_file_name(idx->owner) != name) {
            base::fs::remove_at(fd, name, own_path("owners/" + name));
            continue;
        }
        auto held = verified(*idx);
        if (held.size() == idx->ips.size()) continue;
        idx->ips.clear();
        for (auto& r : held) idx->ips.push_back(r.ip);
        save_index(*idx);
    }
}

// Creates a reservation-sized file in the store directory and removes it again.
void DiskStore::check_writable() {
    base::fs::remove_at(dir_fd_.get(), kProbe, path(kProbe));
    base::fs::create_file(dir_fd_.get(), kProbe, "probe", path(kProbe), false);
    base::fs::remove_at(dir_fd_.get(), kProbe, path(kProbe));
}

void DiskStore::remove_created(const std::vector<std::string>& created) {
    // Our own directories first, while the lock still has its name: an ADD that arrives
    // after the lock is unlinked creates them anew instead of finding them gone.
    std::vector<std::string> own, rest;
    for (auto& d : created) (d.rfind(own_dir_, 0) == 0 ? own : rest).push_back(d);
    base::fs::remove_dirs(own);
    bool made_store = std::find(rest.begin(), rest.end(), dir_) != rest.end();
    // Unlinked while we hold it: a waiter notices the name is gone and starts over.
    if (made_store && base::fs::list_names(dir_fd_.get(), dir_) == std::vector<std::string>{"lock"})
        base::fs::remove_at(dir_fd_.get(), "lock", path("lock"));
    base::fs::remove_dirs(rest);   // each only when empty: used by someone else meanwhile, it stays
}

std::optional<OwnerIndex> DiskStore::load_index(const Owner& owner) {
    int fd = owners_fd(false);
    if (fd < 0) return std::nullopt;
    const std::string name = index_file_name(owner);
    auto content = base::fs::read_at(fd, name, own_path("owners/" + name));
    auto idx = content ? parse_index(*content) : std::nullopt;
    if (!idx || idx->owner != owner) return std::nullopt;
    return idx;
}

// Written in place with one write() at offset 0 (not synced: see the top). An index is
// far smaller than a page, and a kill cannot tear a write() within one page (the kernel
// checks for fatal signals between pages), so a grown index (index_add: the old text
// plus a line) is the old one or the new one. A shrunk one is truncated after the
// write; a kill in between leaves a tail that makes it unreadable or lists an address
// the owner no longer holds, which verified() drops. A temp file and a rename would
// cost an inode allocation per ADD, ~0.1 ms on ext4 under pod churn.
void DiskStore::save_index(const OwnerIndex& idx) {
    const std::string name = index_file_name(idx.owner);
    if (idx.ips.empty()) {
        if (int fd = owners_fd(false); fd >= 0) base::fs::remove_at(fd, name, own_path("owners/" + name));
        return;
    }
    int fd = owners_fd(true);
    const std::string text = format_index(idx);
    if (text.size() <= 4096) {
        base::fs::write_in_place(fd, name, text, own_path("owners/" + name));
        return;
    }
    // Bigger than a page (thousands of addresses): a temp file renamed over it.
    const std::string tmp = "tmp-" + std::to_string(::getpid()) + "-" + std::to_string(seq_++);
    base::fs::create_file(tmp_fd(), tmp, text, own_path("tmp/" + tmp), false);
    if (::renameat(tmp_fd(), tmp.c_str(), fd, name.c_str()) != 0) {
        int err = errno;
        base::fs::remove_at(tmp_fd(), tmp, own_path("tmp/" + tmp));
        base::fs::fail_io("replace", own_path("owners/" + name), err);
    }
}

void DiskStore::index_add(const Owner& owner, const base::IpAddr& ip) {
    OwnerIndex idx = load_index(owner).value_or(OwnerIndex{owner, {}});
    if (std::find(idx.ips.begin(), idx.ips.end(), ip) != idx.ips.end()) return;
    idx.ips.push_back(ip);
    save_index(idx);
}

void DiskStore::index_drop(const Owner& owner, const base::IpAddr& ip) {
    auto idx = load_index(owner);
    if (!idx) return;
    auto it = std::find(idx->ips.begin(), idx->ips.end(), ip);
    if (it == idx->ips.end()) return;
    idx->ips.erase(it);
    save_index(*idx);
}

// The index entries whose reservation file still holds exactly this owner.
std::vector<Reservation> DiskStore::verified(const OwnerIndex& idx) {
    std::vector<Reservation> out;
    for (auto& ip : idx.ips)
        if (auto r = holder(ip); r && held_by(*r, idx.owner)) out.push_back(*r);
    return out;
}

std::vector<Reservation> DiskStore::scan(const Owner& owner) {
    std::vector<Reservation> out;
    for (auto& r : all())
        if (held_by(r, owner) || legacy_of(r, owner)) out.push_back(r);
    return out;
}

}  // namespace ipam
