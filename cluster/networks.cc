#include "cluster/networks.h"

#include <cctype>

#include <nlohmann/json.hpp>

#include "cni/error.h"

namespace cluster {

namespace {

using json = nlohmann::json;

[[noreturn]] void bad(const std::string& why) { throw cni::Error(cni::kInvalidConfig, "networks annotation: " + why); }

std::string trim(const std::string& s) {
    size_t a = 0, b = s.size();
    while (a < b && std::isspace(static_cast<unsigned char>(s[a]))) ++a;
    while (b > a && std::isspace(static_cast<unsigned char>(s[b - 1]))) --b;
    return s.substr(a, b - a);
}

/// A DNS-1123 subdomain (NAD and namespace names), at most 253 bytes.
bool valid_name(const std::string& n) {
    if (n.empty() || n.size() > 253) return false;
    for (char ch : n)
        if (!(std::islower(static_cast<unsigned char>(ch)) || std::isdigit(static_cast<unsigned char>(ch)) || ch == '-' ||
              ch == '.'))
            return false;
    return std::isalnum(static_cast<unsigned char>(n.front())) && std::isalnum(static_cast<unsigned char>(n.back()));
}

NetworkSelection checked(NetworkSelection s, const std::string& what) {
    if (!valid_name(s.namespace_)) bad(what + ": namespace '" + s.namespace_ + "' is not a valid name");
    if (!valid_name(s.name)) bad(what + ": network name '" + s.name + "' is not a valid name");
    if (s.interface.size() > 15) bad(what + ": interface '" + s.interface + "' is longer than 15 bytes");
    return s;
}

}  // namespace

std::vector<NetworkSelection> parse_networks(const std::string& value, const std::string& pod_namespace) {
    std::vector<NetworkSelection> out;
    std::string v = trim(value);
    if (v.empty()) return out;
    if (v.front() == '[') {
        json j = json::parse(v, nullptr, false);
        if (!j.is_array()) bad("not a JSON list");
        for (size_t i = 0; i < j.size(); ++i) {
            std::string what = "[" + std::to_string(i) + "]";
            const json& e = j[i];
            if (!e.is_object()) bad(what + ": expected an object");
            auto str = [&](const char* key) -> std::string {
                auto it = e.find(key);
                if (it == e.end() || it->is_null()) return "";
                if (!it->is_string()) bad(what + "." + key + ": expected a string");
                return it->get<std::string>();
            };
            NetworkSelection s{str("namespace"), str("name"), str("interface")};
            if (s.namespace_.empty()) s.namespace_ = pod_namespace;
            out.push_back(checked(s, what));
        }
        return out;
    }
    size_t start = 0;
    while (start <= v.size()) {
        size_t comma = v.find(',', start);
        std::string item = trim(v.substr(start, comma == std::string::npos ? std::string::npos : comma - start));
        start = comma == std::string::npos ? v.size() + 1 : comma + 1;
        if (item.empty()) bad("an empty entry in '" + value.substr(0, 200) + "'");
        NetworkSelection s{pod_namespace, item, ""};
        if (auto at = s.name.find('@'); at != std::string::npos) {
            s.interface = s.name.substr(at + 1);
            s.name = s.name.substr(0, at);
            if (s.interface.empty()) bad("'" + item + "': an empty interface after '@'");
        }
        if (auto slash = s.name.find('/'); slash != std::string::npos) {
            s.namespace_ = s.name.substr(0, slash);
            s.name = s.name.substr(slash + 1);
        }
        out.push_back(checked(s, "'" + item + "'"));
    }
    return out;
}

}  // namespace cluster
