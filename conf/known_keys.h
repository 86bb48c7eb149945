// Keys topocni does not read. A typo ("attachement", "ipam.rangeStrat") otherwise gives a
// config that works with a default in the typo's place, and nothing says so. The spec
// wants unknown top-level keys allowed (runtimes and other tools add their own), so only
// a near miss of a key topocni reads is reported there; inside topocni's own objects
// (host-local ipam, its ranges and routes, dns) every unknown key is. The plugin logs
// them at warning level; `topocni validate` and `topocni exec --strict` refuse them.
// (topology, bandwidth and label selectors refuse unknown keys while parsing.)
#pragma once
#include <initializer_list>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace conf {

/// The key of `known` that `key` is a near miss of: the same but for case, or one edit
/// away (two for keys longer than 4), a swap of neighbours counting as one; "" if none.
std::string near_miss(const std::string& key, std::initializer_list<const char*> known);

/// " (did you mean \"x\"?)" for a near miss, else "".
std::string did_you_mean(const std::string& key, std::initializer_list<const char*> known);

/// Every key of `raw` (a config as the plugin reads it) that topocni does not read, as
/// "<key path>: unknown key, ignored (did you mean ...?)". Never throws: values of the
/// wrong type are left to the parser.
std::vector<std::string> unknown_keys(const nlohmann::json& raw);

}  // namespace conf
