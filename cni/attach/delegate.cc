#include "cni/attach/delegate.h"

#include "cni/delegate.h"
#include "cni/error.h"
#include "cni/records.h"
#include "cni/result.h"

namespace cni {

namespace {

using json = nlohmann::json;

/// The delegate's stdin: its own object, with the runtime's keys from our config laid
/// over it, as a runtime (or Multus) would have sent them to the plugin directly.
json delegate_input(const Env& env, const conf::NetConf& c) {
    json in = *c.delegate;
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

}  // namespace

Output meta_run(const Env& env, const conf::NetConf& c) {
    std::string type = c.delegate->value("type", "");
    if ((env.verb == Verb::Del || env.verb == Verb::Gc) &&
        absent_plugin(env.path, type, "delegate.type", [&] {
            return env.verb == Verb::Del && read_record(c.state_dir, c.name, env.container_id, env.ifname).has_value();
        }))
        return std::nullopt;
    std::string out = run_plugin(env.path, type, env.command, delegate_input(env, c).dump(), "delegate plugin",
                                 "delegate.type");
    if (env.verb != Verb::Add) return std::nullopt;
    auto j = json::parse(out, nullptr, false);
    if (j.is_discarded() || !j.is_object())
        throw Error(kDecodingFailure, "delegate plugin '" + type + "' printed no JSON result", out.substr(0, 512));
    Result r;
    try {
        r = result_from_json(j, "delegate result");
    } catch (const Error& e) {
        throw Error(kDecodingFailure, "delegate plugin '" + type + "' result: " + e.what(), out.substr(0, 512));
    }
    return result_to_json(r, c.cni_version);
}

}  // namespace cni
