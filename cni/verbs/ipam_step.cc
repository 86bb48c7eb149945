#include "cni/verbs/ipam_step.h"

#include "cni/delegate.h"
#include "cni/error.h"
#include "cni/records.h"
#include "cni/result.h"
#include "ipam/allocator.h"

#include <memory>

namespace cni {

namespace {

bool builtin(const conf::NetConf& c) { return c.ipam_type == "host-local"; }

ipam::HostLocal store(const conf::NetConf& c) { return ipam::HostLocal(*c.host_local, c.name); }

std::string run(const Env& env, const conf::NetConf& c, const char* command) {
    return delegate(env.path, c.ipam_type, command, c.raw.dump());
}

}  // namespace

void ipam_preflight(const Env& env, const conf::NetConf& c) {
    if (c.ipam_type.empty()) return;
    if (builtin(c)) store(c).check_requested(c.requested_ips);
    else find_plugin(env.path, c.ipam_type, "ipam.type");
}

Result ipam_add(const Env& env, const conf::NetConf& c, base::Rollback& undo) {
    if (c.ipam_type.empty()) return {};
    Result r;
    if (builtin(c)) {
        auto ticket = std::make_shared<ipam::AllocationUndo>();
        r = store(c).allocate({env.container_id, env.ifname}, c.requested_ips, ticket.get());
        undo.add("ipam", [&c, ticket] { store(c).undo(*ticket); });
    } else {
        auto out = run(env, c, "ADD");
        undo.add("ipam", [&env, &c] { run(env, c, "DEL"); });
        auto j = nlohmann::json::parse(out, nullptr, false);
        if (j.is_discarded()) throw Error(kDecodingFailure, "ipam plugin '" + c.ipam_type + "' printed invalid JSON", out);
        try {
            r = result_from_json(j, "ipam result");
        } catch (const base::Error& e) {
            throw Error(kDecodingFailure, "ipam plugin '" + c.ipam_type + "' result: " + e.what(), out);
        }
    }
    if (r.ips.empty()) throw Error(kInvalidConfig, "ipam plugin '" + c.ipam_type + "' returned no IP addresses");
    return r;
}

void ipam_del(const Env& env, const conf::NetConf& c) {
    if (c.ipam_type.empty()) return;
    if (builtin(c)) {
        store(c).release({env.container_id, env.ifname});
        return;
    }
    // ADD checks the plugin first, so without a record it allocated nothing here.
    if (absent_plugin(env.path, c.ipam_type, "ipam.type",
                      [&] { return read_record(c.state_dir, c.name, env.container_id, env.ifname).has_value(); }))
        return;
    run(env, c, "DEL");
}

void ipam_check(const Env& env, const conf::NetConf& c, const Result& prev) {
    if (c.ipam_type.empty()) return;
    if (!builtin(c)) { run(env, c, "CHECK"); return; }
    auto held = store(c).find({env.container_id, env.ifname});
    for (auto& ip : prev.ips) {
        bool found = false;
        for (auto& r : held) found = found || r.ip == ip.address.addr;
        if (!found)
            throw Error(kCheckFailed, "ipam: address " + ip.address.addr.str() + " of prevResult is not reserved for " +
                                          env.container_id + "/" + env.ifname + " in network '" + c.name + "'");
    }
}

void ipam_gc(const Env& env, const conf::NetConf& c) {
    if (c.ipam_type.empty()) return;
    if (builtin(c)) store(c).gc(c.valid_attachments.value_or(std::vector<ipam::Owner>{}));
    else run(env, c, "GC");
}

void ipam_status(const Env& env, const conf::NetConf& c) {
    if (c.ipam_type.empty()) return;
    if (builtin(c)) store(c).status();
    else run(env, c, "STATUS");
}

// The verb's part of the result: IPAM's addresses (on the pod interface the kind
// created, when there is one), routes and dns, with the config's dns over IPAM's.
void take_ipam_result(Result& result, const Result& ipam, std::optional<int> pod_interface, const Dns& dns) {
    result.ips = ipam.ips;
    for (auto& ip : result.ips) ip.interface = pod_interface;
    result.routes = ipam.routes;
    result.dns = dns.empty() ? ipam.dns : dns;
}

}  // namespace cni
