#include <sys/stat.h>

#include "cni/attach/attachment.h"
#include "cni/error.h"
#include "cni/verbs/ipam_step.h"
#include "base/log.h"
#include "ipam/host_local.h"
#include "placement/ledger.h"
#include "base/clock.h"
#include "cni/records.h"
#include "cni/verbs/verbs.h"

namespace cni {

namespace {

bool dir_exists(const std::string& p) {
    struct stat st;
    return ::stat(p.c_str(), &st) == 0 && S_ISDIR(st.st_mode);
}

bool listed(const std::vector<ipam::Owner>& valid, const Record& r) {
    for (auto& v : valid)
        if (v.container_id == r.container_id && v.ifname == r.ifname) return true;
    return false;
}

bool in_ledger(const conf::NetConf& c) {
    for (auto& link : placement::ledger::links(c.state_dir))
        for (auto& e : placement::ledger::entries(c.state_dir, link))
            if (e.network == c.name) return true;
    return false;
}

/// Ledger entries of this network whose attachment is not valid: its record may be lost,
/// and the link must not keep counting the bandwidth of a pod that is gone.
void sweep_ledger(const conf::NetConf& c, const std::vector<ipam::Owner>& valid) {
    for (auto& link : placement::ledger::links(c.state_dir))
        for (auto& e : placement::ledger::entries(c.state_dir, link))
            if (e.network == c.name && !listed(valid, Record{e.network, e.container_id, e.ifname}))
                placement::ledger::remove(c.state_dir, link, e.network, e.container_id, e.ifname);
}

}  // namespace

// GC releases everything of this network that belongs to an attachment not in
// cni.dev/valid-attachments. A missing list is an error, not "release all": an empty
// list means that, and only an explicit empty list may say it.
Output cmd_gc(const Env& env, const conf::NetConf& c, Attachment& kind) {
    if (c.name.empty()) {
        base::log::warn("the config has no valid name; nothing can have been added under it, nothing to collect");
        return std::nullopt;
    }
    auto host = netns::Handle::current();
    Context ctx{env, c, host, nullptr};
    kind.collect(ctx);
    if (!c.valid_attachments) {
        // topocni's IPAM cannot tell what to release without the list; a delegate's plugin
        // got the request as the runtime sent it, and decides for itself.
        if (!kind.runs_ipam()) return std::nullopt;
        throw Error(kInvalidConfig, "cni.dev/valid-attachments: required for GC");
    }
    // ADD writes the network's records directory before anything else, and the IPAM store
    // may be shared with the reference plugin: with neither, nothing here is ours to collect,
    // and GC creates nothing.
    // (A ledger entry of this network without either is collected below, under the lock.)
    if (!dir_exists(records_dir(c.state_dir, c.name)) && !(c.host_local && dir_exists(ipam::HostLocal(*c.host_local, c.name).dir())) &&
        !in_ledger(c))
        return std::nullopt;
    // No ADD of this network runs while we decide what is stale (see lock_network()).
    auto guard = lock_network(c.state_dir, c.name, base::DirLock::Exclusive,
                              c.host_local ? static_cast<int>(c.host_local->lock_timeout.count()) : 10000);
    // An attachment that finished ADD after this GC started was in flight when the
    // runtime took its valid list (libcni builds it from finished results): keep it.
    // In-flight ADDs held the lock we just waited for, so they are all finished now.
    int64_t started = base::process_start_ns();
    conf::NetConf effective = c;
    auto& valid = *effective.valid_attachments;
    std::vector<Record> stale;
    for (auto& r : list_records(c.state_dir, c.name)) {
        if (listed(valid, r)) continue;
        if (r.completed_ns >= started) {
            valid.push_back({r.container_id, r.ifname});
            effective.raw["cni.dev/valid-attachments"].push_back({{"containerID", r.container_id}, {"ifname", r.ifname}});
            continue;
        }
        stale.push_back(r);
    }
    std::string errors;
    if (kind.runs_ipam())
        try { ipam_gc(env, effective); } catch (const base::Error& e) { errors += e.what(); }
    Context stale_ctx{env, effective, host, nullptr, &stale};
    try {
        kind.gc(stale_ctx);
        for (auto& r : stale) {
            placement::ledger::remove_everywhere(c.state_dir, c.name, r.container_id, r.ifname);
            remove_record(c.state_dir, c.name, r.container_id, r.ifname);
        }
    } catch (const base::Error& e) {
        errors += (errors.empty() ? "" : "; ") + std::string(e.what());
    }
    try { sweep_ledger(c, valid); } catch (const base::Error& e) { errors += (errors.empty() ? "" : "; ") + std::string(e.what()); }
    guard.release_created();   // a records directory GC had to create for the lock, when still empty
    if (!errors.empty()) throw Error(kInternal, "GC incomplete: " + errors);
    return std::nullopt;
}

}  // namespace cni
