#include "placement/labels.h"

#include <cerrno>
#include <cstdlib>
#include <optional>

#include <nlohmann/json.hpp>

#include "placement/error.h"

namespace placement {

namespace {

using Op = conf::LabelRequirement::Op;

std::optional<long long> to_int64(const std::string& s) {
    if (s.empty() || s.find_first_of(" \t\n+") != std::string::npos) return std::nullopt;
    errno = 0;
    char* end = nullptr;
    long long v = std::strtoll(s.c_str(), &end, 10);
    if (errno != 0 || *end != '\0') return std::nullopt;
    return v;
}

std::string trim(const std::string& s) {
    size_t b = s.find_first_not_of(" \t\r");
    if (b == std::string::npos) return "";
    size_t e = s.find_last_not_of(" \t\r");
    return s.substr(b, e - b + 1);
}

}  // namespace

bool matches(const conf::LabelRequirement& r, const Labels& labels) {
    auto it = labels.find(r.key);
    bool has = it != labels.end();
    switch (r.op) {
        case Op::In:
            if (!has) return false;
            for (auto& v : r.values)
                if (v == it->second) return true;
            return false;
        case Op::NotIn:
            if (!has) return true;   // apimachinery: NotIn matches an absent key
            for (auto& v : r.values)
                if (v == it->second) return false;
            return true;
        case Op::Exists: return has;
        case Op::DoesNotExist: return !has;
        case Op::Gt:
        case Op::Lt: {
            // Both sides must parse as base-10 int64; otherwise no match.
            if (!has || r.values.size() != 1) return false;
            auto have = to_int64(it->second), want = to_int64(r.values[0]);
            if (!have || !want) return false;
            return r.op == Op::Gt ? *have > *want : *have < *want;
        }
    }
    return false;
}

bool matches(const conf::LabelSelector& s, const Labels& labels) {
    for (auto& r : s.requirements)
        if (!matches(r, labels)) return false;
    return true;
}

std::string to_string(const conf::LabelRequirement& r) {
    auto list = [&] {
        std::string s;
        for (auto& v : r.values) s += (s.empty() ? "" : ",") + v;
        return "(" + s + ")";
    };
    switch (r.op) {
        case Op::In: return r.values.size() == 1 ? r.key + "=" + r.values[0] : r.key + " in " + list();
        case Op::NotIn: return r.key + " notin " + list();
        case Op::Exists: return r.key;
        case Op::DoesNotExist: return "!" + r.key;
        case Op::Gt: return r.key + ">" + (r.values.empty() ? "" : r.values[0]);
        case Op::Lt: return r.key + "<" + (r.values.empty() ? "" : r.values[0]);
    }
    return r.key;
}

std::string evidence(const conf::LabelRequirement& r, const Labels& labels) {
    auto it = labels.find(r.key);
    if (it == labels.end()) return r.key + " absent";
    return r.key + "=" + it->second;
}

Labels parse_labels(const std::string& text, const std::string& path) {
    Labels out;
    size_t first = text.find_first_not_of(" \t\r\n");
    if (first != std::string::npos && text[first] == '{') {
        auto j = nlohmann::json::parse(text, nullptr, false);
        if (j.is_discarded() || !j.is_object())
            throw Error(Error::Kind::Invalid, "nodeLabelsFile: '" + path + "' is not a valid JSON object of labels");
        for (auto it = j.begin(); it != j.end(); ++it) {
            if (it->is_string()) out[it.key()] = it->get<std::string>();
            else if (it->is_boolean() || it->is_number()) out[it.key()] = it->dump();
            else
                throw Error(Error::Kind::Invalid, "nodeLabelsFile: '" + path + "': label '" + it.key() +
                                                "' must be a string, got " + it->type_name());
        }
        return out;
    }
    size_t pos = 0;
    for (int line_no = 1; pos < text.size(); ++line_no) {
        size_t nl = text.find('\n', pos);
        std::string line = trim(text.substr(pos, nl == std::string::npos ? std::string::npos : nl - pos));
        pos = nl == std::string::npos ? text.size() : nl + 1;
        if (line.empty() || line[0] == '#') continue;   // comments and NFD "# +directives"
        bool remove = line[0] == '-';
        if (remove) line.erase(0, 1);
        auto eq = line.find('=');
        std::string key = trim(line.substr(0, eq));
        std::string value = eq == std::string::npos ? "true" : trim(line.substr(eq + 1));
        if (key.empty() || key.find_first_of(" \t") != std::string::npos)
            throw Error(Error::Kind::Invalid, "nodeLabelsFile: '" + path + "' line " + std::to_string(line_no) +
                                            ": expected <name>[=<value>], got '" + line + "'");
        if (key.find('/') == std::string::npos) key = "feature.node.kubernetes.io/" + key;   // NFD's default namespace
        if (remove) out.erase(key);
        else out[key] = value;
    }
    return out;
}

}  // namespace placement
