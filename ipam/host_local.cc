// HostLocal: each verb opens the store (taking its lock) for exactly its own duration.
// Only ADD creates the store; every other verb opens it when it exists and otherwise has
// nothing to do, so a DEL or GC of a network never used here leaves no directory behind.
#include "ipam/host_local.h"

#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>

#include "ipam/error.h"
#include "ipam/allocator.h"
#include "ipam/disk_store.h"
#include "ipam/gc.h"
#include "ipam/resolv.h"
#include "ipam/status.h"

namespace ipam {

namespace {

// The network name becomes a directory under dataDir; it must stay one level down.
void check_network_name(const std::string& n) {
    if (n.empty()) fail_invalid("name: must not be empty (it names the IPAM store directory)");
    if (n == "." || n == "..") fail_invalid("name: '" + n + "' cannot name the IPAM store directory");
    if (n.find('/') != std::string::npos) fail_invalid("name: '" + n + "' must not contain '/'");
    if (n.find('\0') != std::string::npos) fail_invalid("name: must not contain a NUL byte");
    if (n.size() > 255) fail_invalid("name: longer than 255 bytes");
}

// The reference trims the container id before writing and matching; so do we.
Owner normalized(Owner o) {
    constexpr const char* ws = " \t\n\v\f\r";
    auto b = o.container_id.find_first_not_of(ws);
    o.container_id = b == std::string::npos ? "" : o.container_id.substr(b, o.container_id.find_last_not_of(ws) - b + 1);
    return o;
}

bool is_dir(const std::string& path) {
    struct stat st;
    return ::stat(path.c_str(), &st) == 0 && S_ISDIR(st.st_mode);
}

}  // namespace

HostLocal::HostLocal(Config cfg, std::string network) : cfg_(std::move(cfg)), network_(std::move(network)) {
    check_network_name(network_);
}

std::string HostLocal::dir() const {
    bool slash = !cfg_.data_dir.empty() && cfg_.data_dir.back() == '/';
    return cfg_.data_dir + (slash ? "" : "/") + network_;
}

std::string HostLocal::own_dir() const {
    bool slash = !cfg_.data_dir.empty() && cfg_.data_dir.back() == '/';
    return cfg_.data_dir + (slash ? "" : "/") + ".topocni/" + network_;
}

/// The store when it exists, for every verb but ADD; a store removed while we waited
/// for its lock (a first ADD rolled back) counts as missing.
template <class F>
void with_existing(const HostLocal& h, const Config& cfg, bool durable, F&& f) {
    if (!is_dir(h.dir())) return;
    std::optional<DiskStore> store;
    try {
        store.emplace(h.dir(), h.own_dir(), cfg.lock_timeout, durable, DiskStore::Mode::Existing);
    } catch (const base::Error& e) {
        if (e.sys_errno == ENOENT) return;
        throw;
    }
    f(*store);
}

// What an undo may take away: dataDir itself and below, never its parents (/var/lib/cni
// is shared with libcni and every other plugin, which create in it concurrently).
std::vector<std::string> HostLocal::within_data_dir(const std::vector<std::string>& created) const {
    std::string base = cfg_.data_dir;
    while (base.size() > 1 && base.back() == '/') base.pop_back();
    std::vector<std::string> out;
    for (auto& d : created)
        if (d == base || d.rfind(base + "/", 0) == 0) out.push_back(d);
    return out;
}

base::Result HostLocal::allocate(const Owner& owner, const std::vector<base::IpAddr>& requested, AllocationUndo* undo) {
    base::Result res;
    res.routes = cfg_.routes;
    // Read before reserving anything: a bad resolvConf then leaves nothing to undo.
    if (cfg_.resolv_conf) res.dns = parse_resolv_conf(*cfg_.resolv_conf);
    check_requested(requested);
    DiskStore store(dir(), own_dir(), cfg_.lock_timeout, cfg_.fsync, DiskStore::Mode::Create);
    Owner o = normalized(owner);
    Allocator alloc(cfg_.ranges, store);
    try {
        res.ips = alloc.allocate(o, requested);
    } catch (...) {
        store.remove_created(within_data_dir(store.created()));   // the allocator released what it took
        throw;
    }
    if (undo) *undo = {o, alloc.cursor_moves(), within_data_dir(store.created())};
    return res;
}

void HostLocal::undo(const AllocationUndo& u) {
    with_existing(*this, cfg_, cfg_.fsync, [&](DiskStore& store) {
        store.release(u.owner);
        for (auto& m : u.moves) restore_cursor(store, m);
        store.remove_created(u.created);
    });
}

void HostLocal::check_requested(const std::vector<base::IpAddr>& requested) const {
    (void)Allocator::assign_requested(cfg_.ranges, requested);
}

void HostLocal::release(const Owner& owner) {
    with_existing(*this, cfg_, cfg_.fsync, [&](DiskStore& store) { store.release(normalized(owner)); });
}

std::vector<Reservation> HostLocal::find(const Owner& owner) {
    std::vector<Reservation> held;
    with_existing(*this, cfg_, false, [&](DiskStore& store) { held = store.find(normalized(owner)); });
    if (held.empty())
        throw Error(Error::Kind::NotReserved, "no address is reserved for container '" + owner.container_id +
                                                "' interface '" + owner.ifname + "' in '" + dir() + "'");
    return held;
}

std::vector<Reservation> HostLocal::gc(const std::vector<Owner>& valid) {
    std::vector<Owner> owners;
    for (auto& o : valid) owners.push_back(normalized(o));
    std::vector<Reservation> released;
    with_existing(*this, cfg_, cfg_.fsync, [&](DiskStore& store) { released = collect_garbage(store, owners); });
    return released;
}

// A store that cannot even be opened is "not available" too; a lock timeout keeps
// its own code (11), since trying again later is the right advice for it. A store that
// does not exist yet is fine when ADD could create it: the nearest existing directory
// on its path must be writable.
void HostLocal::status() {
    if (!is_dir(dir())) {
        // The nearest existing directory on the way down to the store must be writable.
        std::string p = dir();
        struct stat st;
        while (::stat(p.c_str(), &st) != 0 && errno == ENOENT && p.size() > 1)
            p = p.substr(0, std::max<size_t>(p.find_last_of('/'), 1));
        if (!S_ISDIR(st.st_mode))
            throw Error(Error::Kind::Unavailable, "store directory '" + dir() + "' cannot be created: '" + p +
                                                     "' is not a directory", {}, ENOTDIR);
        if (::access(p.c_str(), W_OK) != 0)
            throw Error(Error::Kind::Unavailable, "store directory '" + dir() + "' cannot be created: '" + p +
                                                     "' is not writable", {}, errno);
        return;
    }
    try {
        with_existing(*this, cfg_, false, [&](DiskStore& store) { check_status(store, cfg_.ranges, dir()); });
    } catch (const base::LockTimeout&) {
        throw;
    } catch (const Error& e) {
        if (e.kind == Error::Kind::Unavailable) throw;
        throw Error(Error::Kind::Unavailable, "store directory '" + dir() + "' is not usable: " + e.what(), {}, e.sys_errno);
    } catch (const base::Error& e) {
        throw Error(Error::Kind::Unavailable, "store directory '" + dir() + "' is not usable: " + e.what(), {}, e.sys_errno);
    }
}

std::vector<Reservation> HostLocal::list() {
    std::vector<Reservation> out;
    with_existing(*this, cfg_, false, [&](DiskStore& store) { out = store.all(); });
    return out;
}

}  // namespace ipam
