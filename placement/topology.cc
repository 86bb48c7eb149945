#include "placement/topology.h"

#include <dirent.h>

#include <cerrno>
#include <charconv>
#include <fstream>
#include <sstream>

#include <nlohmann/json.hpp>

#include "placement/error.h"

namespace placement::topo {

namespace {

using json = nlohmann::json;

constexpr int kMaxCpu = 1 << 16;   // bounds a hostile "0-4000000000"

std::optional<std::string> slurp(const std::string& path) {
    std::ifstream f(path);
    if (!f) return std::nullopt;
    std::stringstream ss;
    ss << f.rdbuf();
    if (f.bad()) return std::nullopt;
    return ss.str();
}

std::optional<int> to_int(std::string_view s) {
    int v = 0;
    auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
    if (ec != std::errc() || p != s.data() + s.size()) return std::nullopt;
    return v;
}

[[noreturn]] void malformed(const std::string& why) {
    throw Error(Error::Kind::Decoding, "cpu_manager_state: " + why);
}

void add_cpuset(const json& v, const std::string& where, CpuSet& out) {
    if (!v.is_string()) malformed(where + ": expected a cpuset string");
    auto set = parse_cpuset(v.get<std::string>());
    if (!set) malformed(where + ": '" + v.get<std::string>() + "' is not a cpuset");
    out.insert(set->begin(), set->end());
}

/// Reads the fields shared by v2, v3 and v4's data into `out`.
void read_fields(const json& j, const std::string& uid, PodCpus& out) {
    if (j.contains("policyName") && j["policyName"].is_string()) out.policy = j["policyName"];
    if (auto e = j.find("entries"); e != j.end() && e->is_object()) {
        if (auto pod = e->find(uid); pod != e->end()) {
            // v1 keyed entries by container ID with a plain string; that says nothing about the pod.
            if (pod->is_object())
                for (auto c = pod->begin(); c != pod->end(); ++c)
                    add_cpuset(*c, "entries." + uid + "." + c.key(), out.cpus);
        }
    }
    if (auto p = j.find("podEntries"); p != j.end() && p->is_object()) {
        if (auto pod = p->find(uid); pod != p->end()) {
            if (pod->is_string()) add_cpuset(*pod, "podEntries." + uid, out.cpus);
            else if (pod->is_object() && pod->contains("cpuSet"))
                add_cpuset((*pod)["cpuSet"], "podEntries." + uid + ".cpuSet", out.cpus);
        }
    }
}

}  // namespace

std::optional<CpuSet> parse_cpuset(std::string_view s) {
    if (!s.empty() && s.back() == '\n') s.remove_suffix(1);
    CpuSet out;
    if (s.empty()) return out;
    size_t pos = 0;
    while (pos <= s.size()) {
        size_t comma = s.find(',', pos);
        std::string_view part = s.substr(pos, comma == std::string_view::npos ? std::string_view::npos : comma - pos);
        auto dash = part.find('-');
        auto a = to_int(part.substr(0, dash));
        auto b = dash == std::string_view::npos ? a : to_int(part.substr(dash + 1));
        if (!a || !b || *a < 0 || *a > *b || *b >= kMaxCpu) return std::nullopt;
        for (int c = *a; c <= *b; ++c) out.insert(c);
        if (comma == std::string_view::npos) break;
        pos = comma + 1;
    }
    return out;
}

std::string format_cpuset(const CpuSet& s) {
    std::string out;
    for (auto it = s.begin(); it != s.end();) {
        int start = *it, end = *it;
        for (++it; it != s.end() && *it == end + 1; ++it) end = *it;
        if (!out.empty()) out += ",";
        out += std::to_string(start);
        if (end != start) out += "-" + std::to_string(end);
    }
    return out;
}

PodCpus parse_cpu_manager_state(const std::string& text, const std::string& pod_uid) {
    auto j = json::parse(text, nullptr, false);
    if (j.is_discarded() || !j.is_object()) malformed("not a JSON object");
    PodCpus out;
    // v4: "data" is the authoritative payload; the top-level copy is for older kubelets.
    if (auto d = j.find("data"); d != j.end() && d->is_string() && !d->get<std::string>().empty()) {
        auto data = json::parse(d->get<std::string>(), nullptr, false);
        if (data.is_discarded() || !data.is_object()) malformed("'data' is not a JSON object");
        read_fields(data, pod_uid, out);
        return out;
    }
    read_fields(j, pod_uid, out);
    return out;
}

std::map<int, CpuSet> numa_cpus(const std::string& sysfs_root) {
    std::map<int, CpuSet> out;
    std::string dir = sysfs_root + "/devices/system/node";
    DIR* d = ::opendir(dir.c_str());
    if (!d) return out;
    while (dirent* e = ::readdir(d)) {
        std::string name = e->d_name;
        if (name.rfind("node", 0) != 0) continue;
        auto n = to_int(std::string_view(name).substr(4));
        if (!n) continue;
        auto text = slurp(dir + "/" + name + "/cpulist");
        if (!text) continue;
        if (auto set = parse_cpuset(*text)) out[*n] = *set;
    }
    ::closedir(d);
    return out;
}

std::set<int> nodes_of(const CpuSet& cpus, const std::map<int, CpuSet>& numa, CpuSet* unplaced) {
    std::set<int> out;
    for (int cpu : cpus) {
        bool found = false;
        for (auto& [node, set] : numa)
            if (set.count(cpu)) { out.insert(node); found = true; }
        if (!found && unplaced) unplaced->insert(cpu);
    }
    return out;
}

std::string format_nodes(const std::set<int>& nodes) {
    std::string out;
    for (int n : nodes) out += (out.empty() ? "" : ",") + std::to_string(n);
    return out;
}

std::optional<int> read_numa_node(const std::string& path) {
    auto text = slurp(path);
    if (!text) return std::nullopt;
    while (!text->empty() && (text->back() == '\n' || text->back() == ' ')) text->pop_back();
    auto n = to_int(*text);
    if (!n || *n < -1) return std::nullopt;
    return n;
}

std::optional<long long> read_speed(const std::string& sysfs_root, const std::string& ifname) {
    auto text = slurp(sysfs_root + "/class/net/" + ifname + "/speed");
    if (!text) return std::nullopt;
    while (!text->empty() && (text->back() == '\n' || text->back() == ' ')) text->pop_back();
    long long v = 0;
    auto [p, ec] = std::from_chars(text->data(), text->data() + text->size(), v);
    if (ec != std::errc() || p != text->data() + text->size() || v <= 0) return std::nullopt;
    return v;
}

}  // namespace placement::topo
