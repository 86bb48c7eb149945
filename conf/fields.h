// Typed access to JSON config fields. Every failure is a conf::Error Invalid whose
// message starts with the key's full path ("ipam.ranges[0][0].subnet: ..."), so the
// operator can find the bad key without guessing.
#pragma once
#include <optional>
#include <string>

#include <nlohmann/json.hpp>

#include "conf/error.h"

namespace conf {

using json = nlohmann::json;

/// "a" + "b" -> "a.b"; "" + "b" -> "b".
inline std::string join(const std::string& path, const std::string& key) {
    return path.empty() ? key : path + "." + key;
}
inline std::string index(const std::string& path, size_t i) { return path + "[" + std::to_string(i) + "]"; }
/// "a" + "k" -> a["k"], for map keys that are data, not names.
inline std::string label(const std::string& path, const std::string& key) { return path + "[\"" + key + "\"]"; }

[[noreturn]] inline void bad(const std::string& path, const std::string& why) {
    throw Error(Error::Kind::Invalid, path + ": " + why);
}

/// The member `key` of object `obj` or nullptr when absent or null.
inline const json* member(const json& obj, const std::string& key) {
    if (!obj.is_object()) return nullptr;
    auto it = obj.find(key);
    if (it == obj.end() || it->is_null()) return nullptr;
    return &*it;
}

/// Case-insensitive member lookup: runtimes disagree on capitalisation
/// (containerd sends "HostPort", podman and cnitool "hostPort").
const json* member_ci(const json& obj, const std::string& key);

std::optional<std::string> opt_string(const json& obj, const std::string& key, const std::string& path);
std::optional<bool> opt_bool(const json& obj, const std::string& key, const std::string& path);
/// Integer within [lo, hi]; JSON floats with a fraction are rejected.
std::optional<long long> opt_int(const json& obj, const std::string& key, const std::string& path,
                                 long long lo, long long hi);
/// Non-negative number (seconds etc.), fractions allowed.
std::optional<double> opt_number(const json& obj, const std::string& key, const std::string& path,
                                 double lo, double hi);
/// Object member, type-checked.
const json* opt_object(const json& obj, const std::string& key, const std::string& path);
const json* opt_array(const json& obj, const std::string& key, const std::string& path);
/// Array of strings.
std::vector<std::string> opt_strings(const json& obj, const std::string& key, const std::string& path);

}  // namespace conf
