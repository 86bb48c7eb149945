// HostLocal: each verb opens the store (taking its lock) for exactly its own duration.
#include "ipam/host_local.h"

#include "cni/error.h"
#include "ipam/allocator.h"
#include "ipam/disk_store.h"
#include "ipam/gc.h"
#include "ipam/resolv.h"
#include "ipam/status.h"

namespace ipam {

namespace {

// The network name becomes a directory under dataDir; it must stay one level down.
void check_network_name(const std::string& n) {
    if (n.empty()) cni::fail_config("name: must not be empty (it names the IPAM store directory)");
    if (n == "." || n == "..") cni::fail_config("name: '" + n + "' cannot name the IPAM store directory");
    if (n.find('/') != std::string::npos) cni::fail_config("name: '" + n + "' must not contain '/'");
    if (n.find('\0') != std::string::npos) cni::fail_config("name: must not contain a NUL byte");
    if (n.size() > 255) cni::fail_config("name: longer than 255 bytes");
}

// The reference trims the container id before writing and matching; so do we.
Owner normalized(Owner o) {
    constexpr const char* ws = " \t\n\v\f\r";
    auto b = o.container_id.find_first_not_of(ws);
    o.container_id = b == std::string::npos ? "" : o.container_id.substr(b, o.container_id.find_last_not_of(ws) - b + 1);
    return o;
}

}  // namespace

HostLocal::HostLocal(Config cfg, std::string network) : cfg_(std::move(cfg)), network_(std::move(network)) {
    check_network_name(network_);
}

std::string HostLocal::dir() const {
    bool slash = !cfg_.data_dir.empty() && cfg_.data_dir.back() == '/';
    return cfg_.data_dir + (slash ? "" : "/") + network_;
}

cni::Result HostLocal::allocate(const Owner& owner, const std::vector<IpAddr>& requested) {
    cni::Result res;
    res.routes = cfg_.routes;
    // Read before reserving anything: a bad resolvConf then leaves nothing to undo.
    if (cfg_.resolv_conf) res.dns = parse_resolv_conf(*cfg_.resolv_conf);
    DiskStore store(dir(), cfg_.lock_timeout, cfg_.fsync);
    res.ips = Allocator(cfg_.ranges, store).allocate(normalized(owner), requested);
    return res;
}

void HostLocal::release(const Owner& owner) {
    DiskStore store(dir(), cfg_.lock_timeout, cfg_.fsync);
    store.release(normalized(owner));
}

std::vector<Reservation> HostLocal::find(const Owner& owner) {
    DiskStore store(dir(), cfg_.lock_timeout);
    auto held = store.find(normalized(owner));
    if (held.empty())
        throw cni::Error(cni::kCheckFailed, "no address is reserved for container '" + owner.container_id +
                                                "' interface '" + owner.ifname + "' in '" + dir() + "'");
    return held;
}

std::vector<Reservation> HostLocal::gc(const std::vector<Owner>& valid) {
    std::vector<Owner> owners;
    for (auto& o : valid) owners.push_back(normalized(o));
    DiskStore store(dir(), cfg_.lock_timeout, cfg_.fsync);
    return collect_garbage(store, owners);
}

// A store that cannot even be opened is "not available" too; a lock timeout keeps
// its own code (11), since trying again later is the right advice for it.
void HostLocal::status() {
    std::optional<DiskStore> store;
    try {
        store.emplace(dir(), cfg_.lock_timeout);
    } catch (const cni::Error& e) {
        if (e.code == cni::kTryAgainLater) throw;
        throw cni::Error(cni::kNotAvailable, "store directory '" + dir() + "' is not usable: " + e.what(), {}, e.sys_errno);
    }
    check_status(*store, cfg_.ranges, dir());
}

std::vector<Reservation> HostLocal::list() {
    DiskStore store(dir(), cfg_.lock_timeout);
    return store.all();
}

}  // namespace ipam
