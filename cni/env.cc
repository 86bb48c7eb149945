#include "cni/env.h"

#include <cctype>
#include <cstdlib>

#include "cni/error.h"
#include "base/text.h"

namespace cni {

namespace {

[[noreturn]] void bad_env(const std::string& msg) { throw Error(kInvalidEnv, msg); }

}  // namespace

const char* verb_name(Verb v) {
    switch (v) {
        case Verb::Add: return "ADD";
        case Verb::Del: return "DEL";
        case Verb::Check: return "CHECK";
        case Verb::Gc: return "GC";
        case Verb::Status: return "STATUS";
        case Verb::Version: return "VERSION";
    }
    return "?";
}

Env Env::from_environment() { return from([](const char* name) -> const char* { return std::getenv(name); }); }

Env Env::from(const std::function<const char*(const char*)>& get) {
    auto getenv_str = [&](const char* name) -> std::string {
        const char* v = get(name);
        return v ? v : "";
    };
    Env e;
    e.command = getenv_str("CNI_COMMAND");
    static const struct { const char* name; Verb verb; } verbs[] = {
        {"ADD", Verb::Add}, {"DEL", Verb::Del}, {"CHECK", Verb::Check},
        {"GC", Verb::Gc}, {"STATUS", Verb::Status}, {"VERSION", Verb::Version},
    };
    bool known = false;
    for (auto& v : verbs)
        if (e.command == v.name) { e.verb = v.verb; known = true; }
    if (e.command.empty()) bad_env("required env variables [CNI_COMMAND] missing");
    if (!known) bad_env("unknown CNI_COMMAND: '" + e.command + "'");
    if (e.verb == Verb::Version) return e;

    e.container_id = getenv_str("CNI_CONTAINERID");
    e.netns = getenv_str("CNI_NETNS");
    e.ifname = getenv_str("CNI_IFNAME");
    bool attach = e.verb == Verb::Add || e.verb == Verb::Del || e.verb == Verb::Check;

    std::string missing;
    auto need = [&](bool cond, const char* name) { if (cond) missing += (missing.empty() ? "" : ",") + std::string(name); };
    need(attach && e.container_id.empty(), "CNI_CONTAINERID");
    need((e.verb == Verb::Add || e.verb == Verb::Check) && e.netns.empty(), "CNI_NETNS");
    need(attach && e.ifname.empty(), "CNI_IFNAME");
    need(e.verb == Verb::Gc && getenv_str("CNI_PATH").empty(), "CNI_PATH");
    if (!missing.empty()) bad_env("required env variables [" + missing + "] missing");

    if (attach && !base::valid_container_id(e.container_id))
        bad_env("CNI_CONTAINERID '" + e.container_id + "' has invalid characters (allowed: [a-zA-Z0-9][a-zA-Z0-9_.-]*)");
    if (attach) {
        if (auto why = base::ifname_problem(e.ifname); !why.empty()) bad_env("CNI_IFNAME '" + e.ifname + "' " + why);
    }
    if (!e.netns.empty() && e.netns[0] != '/') bad_env("CNI_NETNS '" + e.netns + "' is not an absolute path");
    // It is echoed in the result ("sandbox") and in records, which are JSON.
    if (!base::valid_utf8(e.netns)) bad_env("CNI_NETNS '" + e.netns + "' is not valid UTF-8");

    std::string path = getenv_str("CNI_PATH");
    size_t pos = 0;
    while (pos <= path.size() && !path.empty()) {
        size_t end = path.find(':', pos);
        if (end == std::string::npos) end = path.size();
        std::string dir = path.substr(pos, end - pos);
        pos = end + 1;
        if (dir.empty()) continue;
        // A relative entry would make the plugin run whatever sits in the runtime's cwd.
        if (dir[0] != '/') bad_env("CNI_PATH entry '" + dir + "' is not an absolute path");
        e.path.push_back(dir);
    }
    e.args = Args::parse(getenv_str("CNI_ARGS"));
    return e;
}

}  // namespace cni
