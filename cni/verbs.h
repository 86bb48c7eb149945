// One function per CNI verb. Each returns what goes to stdout (nothing for DEL, CHECK,
// GC, STATUS) and throws cni::Error on failure; dispatch.cc prints either.
#pragma once
#include <optional>
#include <string>

#include <nlohmann/json.hpp>

#include "cni/env.h"
#include "conf/netconf.h"

namespace cni {

using Output = std::optional<nlohmann::json>;

Output cmd_add(const Env& env, const conf::NetConf& c);
Output cmd_del(const Env& env, const conf::NetConf& c);
Output cmd_check(const Env& env, const conf::NetConf& c);
Output cmd_gc(const Env& env, const conf::NetConf& c);
Output cmd_status(const Env& env, const conf::NetConf& c);
/// VERSION reads only {"cniVersion"} from stdin (which may be empty).
nlohmann::json cmd_version(const std::string& stdin_text);

/// Runs the plugin protocol: environment, stdin, verb, stdout, exit status.
int plugin_main();

}  // namespace cni
