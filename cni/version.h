// The CNI spec versions topocni speaks, and comparisons between them.
#pragma once
#include <string>
#include <vector>

namespace cni {

/// Exactly the versions of the spec: VERSION prints this list.
const std::vector<std::string>& supported_versions();
/// Throws code 1 with the supported list in details unless `v` is one of them.
void require_supported(const std::string& v);
/// Semantic comparison of "a.b.c" strings; "" counts as "0.1.0" (spec).
int compare_versions(const std::string& a, const std::string& b);
inline bool at_least(const std::string& v, const std::string& min) { return compare_versions(v, min) >= 0; }

}  // namespace cni
