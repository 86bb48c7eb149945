#include "ipam/disk_store.h"

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <fcntl.h>
#include <unistd.h>

#include "ipam/fs.h"

namespace ipam {

namespace {

constexpr const char* kCursorPrefix = "last_reserved_ip.";
constexpr const char* kProbe = ".topocni-probe";
constexpr const char* kSparePrefix = "spare-";

// Creates the store directory before the lock inside it can be opened.
const std::string& prepared(const std::string& dir) {
    fs::mkdir_p(dir, 0755);
    return dir;
}

// The address a directory entry reserves: only names that are exactly an address as
// the reference prints it. This skips "lock", "last_reserved_ip.*", dot-files and
// directories (which list_files already leaves out).
std::optional<IpAddr> reserved_ip(const std::string& name) {
    auto ip = IpAddr::parse(name);
    if (!ip || ip->str() != name) return std::nullopt;
    return ip;
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
DiskStore::DiskStore(std::string dir, std::chrono::milliseconds lock_timeout, bool durable)
    : dir_(std::move(dir)), lock_(prepared(dir_) + "/lock", lock_timeout), durable_(durable) {
    dir_fd_ = fs::open_dir(AT_FDCWD, dir_, dir_);
    UniqueFd own = fs::make_dir(dir_fd_.get(), ".topocni", path(".topocni"), 0755);
    owners_fd_ = fs::make_dir(own.get(), "owners", owners_path(""), 0755);
    tmp_fd_ = fs::make_dir(own.get(), "tmp", tmp_path(""), 0755);
    clear_temps();
}

// Spare files. Allocating an inode is the dearest thing an ADD does to the store: on
// ext4 without a journal (common on VM images) the allocator skips inodes freed in the
// last seconds, which pod churn makes a long scan, ~0.5 ms per file here, three files per
// ADD. So files leaving the store (a released reservation, a dropped index) are renamed
// into tmp/ as spares instead of unlinked, and the next file written reuses one: rename
// and rewrite, no allocation and no free. At most kMaxSpares are kept per store; their
// content means nothing (it is rewritten before a spare is linked anywhere).
//
// Temp files are created and consumed while the lock is held, so a ".tmp-" file here
// now was left by a process that died mid-write and is removed. A spare can be left
// still linked to a reservation by a process that died between link() and unlink();
// reuse checks that a spare has no other name (see take_spare()).
void DiskStore::clear_temps() {
    for (auto& name : fs::list_files(tmp_fd_.get(), tmp_path(""))) {
        if (name.rfind(kSparePrefix, 0) == 0 && spares_.size() < kMaxSpares) spares_.push_back(name);
        else fs::remove_at(tmp_fd_.get(), name, tmp_path(name));
    }
}

std::string DiskStore::spare_name() {
    return kSparePrefix + std::to_string(::getpid()) + "-" + std::to_string(seq_++);
}

std::optional<std::string> DiskStore::take_spare(std::string_view content, bool sync) {
    while (!spares_.empty()) {
        std::string name = std::move(spares_.back());
        spares_.pop_back();
        if (fs::rewrite_lone_file(tmp_fd_.get(), name, content, tmp_path(name), sync)) return name;
        fs::remove_at(tmp_fd_.get(), name, tmp_path(name));   // another name still has it: drop ours
    }
    return std::nullopt;
}

std::string DiskStore::write_temp(std::string_view content, bool sync) {
    if (auto spare = take_spare(content, sync)) return *spare;
    std::string name = spare_name();
    fs::create_file(tmp_fd_.get(), name, content, tmp_path(name), sync);
    return name;
}

// A temp file that was not linked anywhere goes back to the pool.
void DiskStore::keep_spare(const std::string& tmp) {
    if (spares_.size() < kMaxSpares) spares_.push_back(tmp);
    else fs::remove_at(tmp_fd_.get(), tmp, tmp_path(tmp));
}

// Takes `name` under `at` out of the store at once, as unlink() would, keeping its inode
// as a spare while the pool has room. A missing file is not an error.
void DiskStore::retire(int at, const std::string& name, const std::string& shown) {
    if (spares_.size() < kMaxSpares) {
        std::string spare = spare_name();
        if (::renameat(at, name.c_str(), tmp_fd_.get(), spare.c_str()) == 0) {
            spares_.push_back(spare);
            return;
        }
        if (errno == ENOENT) return;
    }
    fs::remove_at(at, name, shown);
}

// Puts temp file `tmp` in place of `name` under `to_fd` atomically. An existing file is
// swapped out with RENAME_EXCHANGE and then removed (it sits in tmp/ meanwhile, where a
// crash leaves it to clear_temps()); only a new name, or a file system without
// RENAME_EXCHANGE, gets a plain rename.
void DiskStore::replace(const std::string& tmp, int to_fd, const std::string& name, const std::string& shown) {
    if (::renameat2(tmp_fd_.get(), tmp.c_str(), to_fd, name.c_str(), RENAME_EXCHANGE) == 0) {
        fs::remove_at(tmp_fd_.get(), tmp, tmp_path(tmp));
        return;
    }
    if (::renameat(tmp_fd_.get(), tmp.c_str(), to_fd, name.c_str()) != 0) {
        int err = errno;
        fs::remove_at(tmp_fd_.get(), tmp, tmp_path(tmp));
        fs::fail_io("replace", shown, err);
    }
}

bool DiskStore::taken(const IpAddr& ip) { return fs::exists_at(dir_fd_.get(), ip.str(), path(ip.str())); }

std::optional<Reservation> DiskStore::holder(const IpAddr& ip) {
    auto content = fs::read_at(dir_fd_.get(), ip.str(), path(ip.str()));
    if (!content) return std::nullopt;
    return parse_reservation(ip, *content);
}

// The reference writes in place (O_EXCL create, then write), so a crash can leave an
// empty file that blocks the address for good. We write a temp file first and link() it
// to the address's name: the name appears with its full content or not at all, and
// link() fails with EEXIST exactly when the address is taken. The owner index is
// updated before, so it always lists at least what the owner holds.
bool DiskStore::reserve(const IpAddr& ip, const Owner& owner) {
    index_add(owner, ip);
    std::string tmp = write_temp(reservation_content(owner), durable_);
    const std::string name = ip.str();
    bool linked = ::linkat(tmp_fd_.get(), tmp.c_str(), dir_fd_.get(), name.c_str(), 0) == 0;
    int err = errno;
    if (linked) fs::remove_at(tmp_fd_.get(), tmp, tmp_path(tmp));   // the inode lives on as the reservation
    else keep_spare(tmp);
    if (!linked && err != EEXIST) fs::fail_io("create reservation", path(name), err);
    if (linked && durable_) fs::sync(dir_fd_.get(), dir_);
    return linked;
}

void DiskStore::remove(const Reservation& r) {
    auto now = holder(r.ip);
    if (!now || now->container_id != r.container_id || now->ifname != r.ifname) return;
    retire(dir_fd_.get(), r.ip.str(), path(r.ip.str()));
    if (durable_) fs::sync(dir_fd_.get(), dir_);
    if (!r.ifname.empty()) index_drop({r.container_id, r.ifname}, r.ip);
}

std::vector<IpAddr> DiskStore::indexed(const Owner& owner) {
    std::vector<IpAddr> out;
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
    for (auto& r : held) retire(dir_fd_.get(), r.ip.str(), path(r.ip.str()));
    if (!held.empty() && durable_) fs::sync(dir_fd_.get(), dir_);
    const std::string name = index_file_name(owner);
    retire(owners_fd_.get(), name, owners_path(name));
    return held;
}

std::vector<Reservation> DiskStore::all() {
    std::vector<Reservation> out;
    for (auto& name : fs::list_files(dir_fd_.get(), dir_)) {
        auto ip = reserved_ip(name);
        if (!ip) continue;
        if (auto content = fs::read_at(dir_fd_.get(), name, path(name))) out.push_back(parse_reservation(*ip, *content));
    }
    std::sort(out.begin(), out.end(), [](auto& a, auto& b) { return a.ip < b.ip; });
    return out;
}

std::vector<IpAddr> DiskStore::addresses() {
    std::vector<IpAddr> out;
    for (auto& name : fs::list_files(dir_fd_.get(), dir_))
        if (auto ip = reserved_ip(name)) out.push_back(*ip);
    std::sort(out.begin(), out.end());
    return out;
}

// A missing or unreadable cursor only costs round-robin order once, as in the reference.
std::optional<IpAddr> DiskStore::cursor(size_t set) {
    const std::string name = kCursorPrefix + std::to_string(set);
    auto content = fs::read_at(dir_fd_.get(), name, path(name), 64);
    if (!content) return std::nullopt;
    auto end = content->find_last_not_of(" \t\r\n");
    return IpAddr::parse(std::string_view(*content).substr(0, end == std::string::npos ? 0 : end + 1));
}

// Rewritten in place, as the reference does, but without truncating first (on ext4 a
// truncate to zero also starts writeback): the address, then the length. A crash in
// between can leave a longer address's tail behind ("10.0.0.90" for "10.0.0.9"); like a
// missing or unreadable cursor that only changes which address comes next, since the
// cursor is just where the search for a free address starts. Readers hold the lock.
void DiskStore::set_cursor(size_t set, const IpAddr& ip) {
    const std::string name = kCursorPrefix + std::to_string(set);
    fs::write_in_place(dir_fd_.get(), name, ip.str(), path(name));
}

void DiskStore::tidy_index() {
    for (auto& name : fs::list_files(owners_fd_.get(), owners_path(""))) {
        auto content = fs::read_at(owners_fd_.get(), name, owners_path(name));
        auto idx = content ? parse_index(*content) : std::nullopt;
        if (!idx || index_file_name(idx->owner) != name) {
            fs::remove_at(owners_fd_.get(), name, owners_path(name));
            continue;
        }
        auto held = verified(*idx);
        if (held.size() == idx->ips.size()) continue;
        idx->ips.clear();
        for (auto& r : held) idx->ips.push_back(r.ip);
        save_index(*idx);
    }
}

// Writes a reservation-sized file into the store directory and removes it again.
void DiskStore::check_writable() {
    std::string tmp = write_temp("probe", false);
    fs::remove_at(dir_fd_.get(), kProbe, path(kProbe));
    bool linked = ::linkat(tmp_fd_.get(), tmp.c_str(), dir_fd_.get(), kProbe, 0) == 0;
    int err = errno;
    fs::remove_at(tmp_fd_.get(), tmp, tmp_path(tmp));
    if (!linked) fs::fail_io("create", path(kProbe), err);
    fs::remove_at(dir_fd_.get(), kProbe, path(kProbe));
}

std::optional<OwnerIndex> DiskStore::load_index(const Owner& owner) {
    const std::string name = index_file_name(owner);
    auto content = fs::read_at(owners_fd_.get(), name, owners_path(name));
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
        retire(owners_fd_.get(), name, owners_path(name));
        return;
    }
    const std::string text = format_index(idx);
    if (text.size() > 4096) {
        replace(write_temp(text, false), owners_fd_.get(), name, owners_path(name));
        return;
    }
    // A new index: a spare with the text already in it takes the name (never over an
    // existing file, which is rewritten in place instead).
    if (auto spare = take_spare(text, false)) {
        if (::renameat2(tmp_fd_.get(), spare->c_str(), owners_fd_.get(), name.c_str(), RENAME_NOREPLACE) == 0) return;
        keep_spare(*spare);
    }
    fs::write_in_place(owners_fd_.get(), name, text, owners_path(name));
}

void DiskStore::index_add(const Owner& owner, const IpAddr& ip) {
    OwnerIndex idx = load_index(owner).value_or(OwnerIndex{owner, {}});
    if (std::find(idx.ips.begin(), idx.ips.end(), ip) != idx.ips.end()) return;
    idx.ips.push_back(ip);
    save_index(idx);
}

void DiskStore::index_drop(const Owner& owner, const IpAddr& ip) {
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
