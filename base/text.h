// Text that quotes outside input. Error JSON and log lines must be valid UTF-8 (nlohmann
// refuses to print anything else, and a runtime could not parse it), but a config, an
// environment variable or a file can hold any byte: those are shown escaped, never dropped.
#pragma once
#include <string>
#include <string_view>

namespace base {

/// `s` with every byte that is not part of a valid UTF-8 sequence written as "\xHH".
/// Valid UTF-8 comes back unchanged.
std::string utf8_escaped(std::string_view s);

/// `s` with every byte that is not part of a valid UTF-8 sequence replaced by U+FFFD,
/// as Go's encoding/json reads it (and so every Go runtime passes it on).
std::string utf8_replaced(std::string_view s);

/// Whether `s` is valid UTF-8 (no overlong forms, no surrogates, at most U+10FFFF).
bool valid_utf8(std::string_view s);

/// Interface name rules of the kernel: 1..15 bytes, not "." or "..", no '/', ':' or
/// whitespace. Returns the reason when invalid, empty when fine.
std::string ifname_problem(const std::string& name);
/// Container IDs and network names: ^[a-zA-Z0-9][a-zA-Z0-9_.\-]*$ (the reference skel's rule).
bool valid_container_id(const std::string& id);

}  // namespace base
