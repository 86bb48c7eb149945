// Attachment delegate (meta-plugin mode): "delegate": {...} wraps any CNI plugin. topocni
// checks placement, then runs the wrapped plugin from CNI_PATH with the spec's delegation
// protocol and converts its result; the plugin does its own IPAM.
#include "base/log.h"
#include "cni/attach/attachment.h"
#include "cni/attach/device.h"
#include "cni/delegate.h"
#include "cni/error.h"
#include "cni/records.h"
#include "conf/fields.h"

namespace cni {

namespace {

using json = nlohmann::json;

/// The "delegate" object: the wrapped plugin's config, which it validates itself.
json read_delegate_keys(const conf::NetConf& c) {
    const json* d = conf::opt_object(c.raw, "delegate", "");
    if (conf::member(c.raw, "ipam")) conf::bad("ipam", "not used with \"delegate\"; put it in delegate.ipam");
    auto type = conf::opt_string(*d, "type", "delegate");
    if (!type || type->empty()) conf::bad("delegate.type", "missing");
    // Delegation execs CNI_PATH/<type>: a type with a path in it would run anything.
    if (type->find('/') != std::string::npos || *type == "." || *type == "..")
        conf::bad("delegate.type", "'" + *type + "' must be a plugin name, not a path");
    // The wrapped plugin gets runtimeConfig as it is; a "bandwidth" key of ours would
    // be a promise we do not keep for a device we did not create.
    if (conf::member(c.raw, "bandwidth"))
        conf::bad("bandwidth", "not used with \"delegate\"; chain the reference bandwidth plugin after it, "
                               "or use attachment veth, macvlan or sriov");
    return *d;
}

/// The delegate's stdin: its own object, with the runtime's keys from our config laid
/// over it, as a runtime (or Multus) would have sent them to the plugin directly.
json delegate_input(const Env& env, const conf::NetConf& c, const json& delegate) {
    json in = delegate;
    in["cniVersion"] = c.cni_version;
    in["name"] = c.name;
    for (const char* key : {"runtimeConfig", "args"}) {
        auto it = c.raw.find(key);
        if (it == c.raw.end()) continue;
        if (in.contains(key) && in[key].is_object() && it->is_object()) in[key].update(*it);
        else in[key] = *it;
    }
    // Multus adds the device of a NAD's resourceName to the config it passes us.
    for (const char* key : {"deviceID", "pciBusID"})
        if (auto it = c.raw.find(key); it != c.raw.end() && !in.contains(key)) in[key] = *it;
    if (env.verb == Verb::Check || env.verb == Verb::Del)
        if (auto it = c.raw.find("prevResult"); it != c.raw.end()) in["prevResult"] = *it;
    if (env.verb == Verb::Gc)
        for (const char* key : {"cni.dev/valid-attachments", "cni.dev/attachments"})
            if (auto it = c.raw.find(key); it != c.raw.end()) in[key] = *it;
    return in;
}

class Delegate : public Attachment {
public:
    explicit Delegate(json keys) : keys_(std::move(keys)) {}

    bool runs_ipam() const override { return false; }
    const json* ipam_config(const conf::NetConf&) const override { return conf::member(keys_, "ipam"); }
    std::string ipam_key() const override { return "delegate.ipam"; }

    void preflight(Context& ctx) override { find_plugin(ctx.env.path, type(), "delegate.type"); }

    // Multus puts the device of a NAD's resourceName into the config it passes us; a
    // macvlan or ipvlan delegate without a master takes the default route's, as it would.
    placement::Device device(const conf::NetConf& c) const override {
        std::string t = type();
        if (auto pci = device_id_in(c.raw)) return pci_device(*pci, c);
        if (auto pci = device_id_in(keys_)) return pci_device(*pci, c);
        bool lower = t == "macvlan" || t == "ipvlan";
        std::optional<std::string> master;
        if (auto* m = conf::member(keys_, "master"); m && m->is_string() && !m->get<std::string>().empty())
            master = m->get<std::string>();
        bool in_pod = keys_.is_object() && keys_.value("linkInContainer", json(false)) == json(true);
        return master_device(master, "delegate '" + t + "'", lower, in_pod, lower ? t : "macvlan");
    }

    // The scheduler side: a VF when the NAD names a device-plugin resource (Multus passes its
    // device); otherwise the wrapped plugin chooses at ADD.
    placement::ScheduledDevice scheduled_device(const conf::NetConf&, const std::string& resource_name) const override {
        placement::ScheduledDevice d;
        if (!resource_name.empty()) {
            d.kind = placement::ScheduledDevice::Kind::Vf;
        } else {
            d.chosen_at_add = true;
            d.none_why = "delegate: the device is chosen at ADD";
        }
        return d;
    }

    // host-local in delegate.ipam, read as the wrapped plugin's host-local would read it.
    std::optional<ipam::Config> pool(const conf::NetConf& c) const override {
        auto* ipam = conf::member(keys_, "ipam");
        if (!ipam || ipam->value("type", json("")) != json("host-local")) return std::nullopt;
        json whole = keys_;
        whole["name"] = c.name;
        if (auto rc = c.raw.find("runtimeConfig"); rc != c.raw.end()) whole["runtimeConfig"] = *rc;
        try {
            return ipam::parse_config(whole, c.cni_version);
        } catch (const base::Error& e) {
            throw Error(code_of(e), std::string("delegate.") + e.what(), e.details);
        }
    }

    // The record (written by the verb before this) says the delegate got this ADD: a DEL
    // the delegate fails for an attachment it never saw (one we refused) is then not the
    // runtime's problem. It stays when the delegate fails too: that ADD may have changed
    // things, and its DEL must be able to fail (see del). So nothing is rolled back.
    std::optional<int> add(Context& ctx, const Result&, Result& result, base::Rollback& undo) override {
        try {
            result = *forward(ctx);
        } catch (...) {
            undo.dismiss();
            throw;
        }
        return std::nullopt;
    }

    // DEL is forwarded even when ADD was refused. A delegate that fails the DEL of an
    // attachment it never saw (no record of ours says it got the ADD: we refused it, or the
    // config could not even be read) must not keep the pod from going away; its failure is
    // logged. With a record, its failure is the runtime's to see.
    void del(Context& ctx) override {
        const auto& c = ctx.conf;
        bool delegated = read_record(c.state_dir, c.name, ctx.env.container_id, ctx.env.ifname).has_value();
        try {
            forward(ctx);
        } catch (const base::Error& e) {
            if (delegated) throw;
            base::log::warn(std::string(e.what()) + " (ignored: the delegate never got an ADD for this attachment)");
        }
    }

    void check(Context& ctx, const Result&) override { forward(ctx); }
    void collect(Context& ctx) override { forward(ctx); }
    void status(Context& ctx) override { forward(ctx); }

private:
    std::string type() const { return keys_.is_object() ? keys_.value("type", "") : ""; }

    /// Runs the wrapped plugin for this verb; for ADD, its result in the model.
    std::optional<Result> forward(const Context& ctx) {
        const Env& env = ctx.env;
        const auto& c = ctx.conf;
        // A delegate object DEL or GC could not read: ADD refused the config, so nothing
        // was delegated under it.
        if (!keys_.is_object()) return std::nullopt;
        if ((env.verb == Verb::Del || env.verb == Verb::Gc) &&
            absent_plugin(env.path, type(), "delegate.type", [&] {
                return env.verb == Verb::Del && read_record(c.state_dir, c.name, env.container_id, env.ifname).has_value();
            }))
            return std::nullopt;
        std::string out = run_plugin(env.path, type(), env.command, delegate_input(env, c, keys_).dump(), "delegate plugin",
                                     "delegate.type");
        if (env.verb != Verb::Add) return std::nullopt;
        auto j = json::parse(out, nullptr, false);
        if (j.is_discarded() || !j.is_object())
            throw Error(kDecodingFailure, "delegate plugin '" + type() + "' printed no JSON result", out.substr(0, 512));
        try {
            return result_from_json(j, "delegate result");
        } catch (const base::Error& e) {
            throw Error(kDecodingFailure, "delegate plugin '" + type() + "' result: " + e.what(), out.substr(0, 512));
        }
    }

    json keys_;
};

}  // namespace

std::unique_ptr<Attachment> make_delegate(conf::NetConf& c, conf::Purpose purpose) {
    auto keys = read_keys<json>(c, purpose, [&] { return read_delegate_keys(c); });
    // runtimeConfig goes to the wrapped plugin as it is: its bandwidth is that plugin's to
    // shape, not a rate topocni admits.
    c.bandwidth.reset();
    return std::make_unique<Delegate>(std::move(keys));
}

}  // namespace cni
