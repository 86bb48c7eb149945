#include "cni/version.h"

#include <cstdio>

#include "cni/error.h"

namespace cni {

const std::vector<std::string>& supported_versions() {
    static const std::vector<std::string> all = {"0.1.0", "0.2.0", "0.3.0", "0.3.1", "0.4.0", "1.0.0", "1.1.0"};
    return all;
}

void require_supported(const std::string& v) {
    for (auto& s : supported_versions())
        if (s == v) return;
    std::string list;
    for (auto& s : supported_versions()) list += (list.empty() ? "" : ", ") + s;
    throw Error(kIncompatibleVersion, "incompatible CNI versions: config is \"" + v + "\"",
                "config is \"" + v + "\", plugin supports [" + list + "]");
}

int compare_versions(const std::string& a, const std::string& b) {
    auto parse = [](const std::string& s) {
        int x = 0, y = 1, z = 0;   // "" means 0.1.0
        if (!s.empty()) { x = y = z = 0; std::sscanf(s.c_str(), "%d.%d.%d", &x, &y, &z); }
        return (x * 1000 + y) * 1000 + z;
    };
    int pa = parse(a), pb = parse(b);
    return pa < pb ? -1 : pa > pb ? 1 : 0;
}

}  // namespace cni
