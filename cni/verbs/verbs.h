// One function per CNI verb, for a network's config and its attachment kind (cni/attach/).
// Each returns what goes to stdout (nothing for DEL, CHECK,
// GC, STATUS) and throws cni::Error on failure; dispatch.cc prints either.
#pragma once
#include <functional>
#include <optional>
#include <span>
#include <string>

#include <nlohmann/json.hpp>

#include "cni/env.h"
#include "conf/netconf.h"

namespace cni {

class Attachment;

using Output = std::optional<nlohmann::json>;

Output cmd_add(const Env& env, const conf::NetConf& c, Attachment& kind);
Output cmd_del(const Env& env, const conf::NetConf& c, Attachment& kind);
Output cmd_check(const Env& env, const conf::NetConf& c, Attachment& kind);
Output cmd_gc(const Env& env, const conf::NetConf& c, Attachment& kind);
Output cmd_status(const Env& env, const conf::NetConf& c, Attachment& kind);
/// VERSION reads only {"cniVersion"} from stdin (which may be empty).
nlohmann::json cmd_version(const std::string& stdin_text);

/// One verb of the table dispatch() chooses from.
struct VerbEntry {
    Verb verb;
    Output (*run)(const Env&, const conf::NetConf&, Attachment&);
    const char* min_version;   ///< oldest cniVersion that has this verb
};

/// Where the protocol reads and writes: the process's own environment, stdin and stdout
/// in plugin_main(); anything else in tests and fuzz targets.
struct PluginIo {
    std::function<const char*(const char*)> getenv;
    std::function<std::string()> read_stdin;
    bool stdin_is_tty = false;
    std::function<void(const std::string&)> write;
    bool configure_logging = true;   ///< logFile/logLevel from the config take effect
};

/// The plugin protocol: environment, stdin, the verb from `verbs`, the result or the
/// error JSON written out, and the exit status. Never throws.
int dispatch(const PluginIo& io, std::span<const VerbEntry> verbs);

/// dispatch() on this process's environment, stdin and stdout, with the real verbs.
int plugin_main();

}  // namespace cni
