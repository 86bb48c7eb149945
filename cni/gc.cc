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
    std::string errors;
    try { ipam_gc(env, c); } catch (const Error& e) { errors += e.what(); }
    std::vector<Record> stale;
    for (auto& r : list_records(c.state_dir, c.name)) {
        bool valid = false;
        for (auto& v : *c.valid_attachments) valid = valid || (v.container_id == r.container_id && v.ifname == r.ifname);
        if (!valid) stale.push_back(r);
    }
    auto host = netns::Handle::current();
    Context ctx{env, c, host, nullptr};
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
