#include "conf/fields.h"

#include <cmath>
#include <strings.h>

namespace conf {

const json* member_ci(const json& obj, const std::string& key) {
    if (!obj.is_object()) return nullptr;
    if (auto* exact = member(obj, key)) return exact;
    for (auto it = obj.begin(); it != obj.end(); ++it)
        if (!it->is_null() && strcasecmp(it.key().c_str(), key.c_str()) == 0) return &*it;
    return nullptr;
}

std::optional<std::string> opt_string(const json& obj, const std::string& key, const std::string& path) {
    auto* v = member(obj, key);
    if (!v) return std::nullopt;
    if (!v->is_string()) bad(join(path, key), "expected a string, got " + std::string(v->type_name()));
    return v->get<std::string>();
}

std::optional<bool> opt_bool(const json& obj, const std::string& key, const std::string& path) {
    auto* v = member(obj, key);
    if (!v) return std::nullopt;
    if (!v->is_boolean()) bad(join(path, key), "expected true or false, got " + std::string(v->type_name()));
    return v->get<bool>();
}

std::optional<long long> opt_int(const json& obj, const std::string& key, const std::string& path,
                                 long long lo, long long hi) {
    auto* v = member(obj, key);
    if (!v) return std::nullopt;
    long long n;
    if (v->is_number_integer()) {
        if (v->is_number_unsigned() && v->get<unsigned long long>() > static_cast<unsigned long long>(hi))
            bad(join(path, key), "must be between " + std::to_string(lo) + " and " + std::to_string(hi));
        n = v->get<long long>();
    } else if (v->is_number_float()) {
        double d = v->get<double>();
        if (!std::isfinite(d) || d != std::floor(d) || d < static_cast<double>(lo) || d > static_cast<double>(hi))
            bad(join(path, key), "must be an integer between " + std::to_string(lo) + " and " + std::to_string(hi));
        n = static_cast<long long>(d);
    } else {
        bad(join(path, key), "expected a number, got " + std::string(v->type_name()));
    }
    if (n < lo || n > hi)
        bad(join(path, key), "must be between " + std::to_string(lo) + " and " + std::to_string(hi) +
                                 ", got " + std::to_string(n));
    return n;
}

std::optional<double> opt_number(const json& obj, const std::string& key, const std::string& path,
                                 double lo, double hi) {
    auto* v = member(obj, key);
    if (!v) return std::nullopt;
    if (!v->is_number()) bad(join(path, key), "expected a number, got " + std::string(v->type_name()));
    double d = v->get<double>();
    if (!std::isfinite(d) || d < lo || d > hi)
        bad(join(path, key), "must be between " + std::to_string(lo) + " and " + std::to_string(hi));
    return d;
}

const json* opt_object(const json& obj, const std::string& key, const std::string& path) {
    auto* v = member(obj, key);
    if (v && !v->is_object()) bad(join(path, key), "expected an object, got " + std::string(v->type_name()));
    return v;
}

const json* opt_array(const json& obj, const std::string& key, const std::string& path) {
    auto* v = member(obj, key);
    if (v && !v->is_array()) bad(join(path, key), "expected a list, got " + std::string(v->type_name()));
    return v;
}

std::vector<std::string> opt_strings(const json& obj, const std::string& key, const std::string& path) {
    std::vector<std::string> out;
    auto* arr = opt_array(obj, key, path);
    if (!arr) return out;
    for (size_t i = 0; i < arr->size(); ++i) {
        if (!(*arr)[i].is_string()) bad(index(join(path, key), i), "expected a string");
        out.push_back((*arr)[i].get<std::string>());
    }
    return out;
}

}  // namespace conf
