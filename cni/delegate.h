// The spec's delegation protocol: run another plugin from CNI_PATH with our own
// environment (CNI_COMMAND overridden) and the whole config on stdin.
#pragma once
#include <functional>
#include <string>
#include <vector>

namespace cni {

/// Finds `type` in `path`, runs it with `command` and `stdin_text`, returns its stdout.
/// A type that is not a plain name or is not found is code 7, and nothing is run. A
/// plugin that fails raises its own error code and message, prefixed with its name.
/// The executable for plugin `type` in CNI_PATH; code 7 naming `key` when it is not there.
std::string find_plugin(const std::vector<std::string>& path, const std::string& type, const std::string& key);

/// For DEL and GC: true when plugin `type` is not in CNI_PATH and so holds nothing to
/// release (logged). That is so only without a record of an ADD it got (`recorded`,
/// asked only then); with one, find_plugin's error is thrown, for a retry.
bool absent_plugin(const std::vector<std::string>& path, const std::string& type, const std::string& key,
                   const std::function<bool()>& recorded);

std::string delegate(const std::vector<std::string>& path, const std::string& type, const std::string& command,
                     const std::string& stdin_text);

/// The same for any role: `what` names the plugin in messages ("delegate plugin") and
/// `key` is the config key of its type ("delegate.type") for code-7 errors.
std::string run_plugin(const std::vector<std::string>& path, const std::string& type, const std::string& command,
                       const std::string& stdin_text, const std::string& what, const std::string& key);

}  // namespace cni
