#include "cni/attachment.h"
#include "cni/error.h"
#include "cni/ipam.h"
#include "cni/meta.h"
#include "cni/records.h"
#include "cni/verbs.h"

namespace cni {

// GC releases everything of this network that belongs to an attachment not in
// cni.dev/valid-attachments. A missing list is an error, not "release all": an empty
// list means that, and only an explicit empty list may say it.
Output cmd_gc(const Env& env, const conf::NetConf& c) {
    if (c.delegate) return meta_run(env, c);
    if (!c.valid_attachments)
        throw Error(kInvalidConfig, "cni.dev/valid-attachments: required for GC");
    // No ADD of this network runs while we decide what is stale (see NetworkLock).
    NetworkLock guard(c.state_dir, c.name, NetworkLock::Exclusive,
                      c.host_local ? static_cast<int>(c.host_local->lock_timeout.count()) : 10000);
    // An attachment that finished ADD after this GC started was in flight when the
    // runtime took its valid list (libcni builds it from finished results): keep it.
    // In-flight ADDs held the lock we just waited for, so they are all finished now.
    int64_t started = process_start_ns();
    conf::NetConf effective = c;
    auto& valid = *effective.valid_attachments;
    std::vector<Record> stale;
    for (auto& r : list_records(c.state_dir, c.name)) {
        bool listed = false;
        for (auto& v : valid) listed = listed || (v.container_id == r.container_id && v.ifname == r.ifname);
        if (listed) continue;
        if (r.completed_ns >= started) {
            valid.push_back({r.container_id, r.ifname});
            effective.raw["cni.dev/valid-attachments"].push_back({{"containerID", r.container_id}, {"ifname", r.ifname}});
            continue;
        }
        stale.push_back(r);
    }
    std::string errors;
    try { ipam_gc(env, effective); } catch (const Error& e) { errors += e.what(); }
    auto host = netns::Handle::current();
    Context ctx{env, effective, host, nullptr};
    ctx.stale = &stale;
    try {
        make_attachment(c)->gc(ctx);
        for (auto& r : stale) remove_record(c.state_dir, c.name, r.container_id, r.ifname);
    } catch (const Error& e) {
        errors += (errors.empty() ? "" : "; ") + std::string(e.what());
    }
    if (!errors.empty()) throw Error(kInternal, "GC incomplete: " + errors);
    return std::nullopt;
}

}  // namespace cni
