#include "placement/refusal_record.h"

#include <algorithm>
#include <chrono>
#include <cstdio>

#include "base/files.h"
#include "base/flock.h"
#include "base/hash.h"
#include "base/log.h"
#include "placement/error.h"

namespace placement::refusal_record {

namespace {

using json = nlohmann::json;

bool dns_chars(const std::string& s, bool dots) {
    for (char ch : s)
        if (!((ch >= 'a' && ch <= 'z') || (ch >= '0' && ch <= '9') || ch == '-' || (dots && ch == '.'))) return false;
    return true;
}

/// A namespace is a DNS label, a pod name a DNS subdomain: neither holds '/' or '_', so
/// "<namespace>_<name>" names one pod and stays inside dir().
bool valid_names(const std::string& ns, const std::string& name) {
    return !ns.empty() && ns.size() <= 63 && dns_chars(ns, false) && !name.empty() && name.size() <= 253 &&
           dns_chars(name, true) && name[0] != '.';
}

[[noreturn]] void bad_member(const std::string& member, const std::string& why) {
    throw Error(Error::Kind::Invalid, "refusal record: " + member + ": " + why);
}

const json& need(const json& j, const char* key, json::value_t type) {
    auto it = j.find(key);
    if (it == j.end()) bad_member(key, "missing");
    bool ok = it->type() == type ||
              (type == json::value_t::number_integer && it->type() == json::value_t::number_unsigned);
    if (!ok) bad_member(key, std::string("expected ") + (type == json::value_t::string ? "a string" : type == json::value_t::boolean ? "a boolean" : type == json::value_t::array ? "an array" : "an integer") + ", got " + it->type_name());
    return *it;
}

int64_t need_int(const json& j, const char* key, int64_t lo, int64_t hi) {
    const json& v = need(j, key, json::value_t::number_integer);
    if (v.is_number_unsigned() && v.get<uint64_t>() > static_cast<uint64_t>(hi)) bad_member(key, "out of range");
    int64_t n = v.get<int64_t>();
    if (n < lo || n > hi) bad_member(key, std::to_string(n) + " is out of range " + std::to_string(lo) + "-" + std::to_string(hi));
    return n;
}

std::string need_string(const json& j, const char* key, size_t max) {
    std::string s = need(j, key, json::value_t::string).get<std::string>();
    if (s.size() > max) bad_member(key, "longer than " + std::to_string(max) + " bytes");
    return s;
}

/// The first `max` bytes of `s`, not cutting a UTF-8 sequence in two.
std::string cut(const std::string& s, size_t max) {
    if (s.size() <= max) return s;
    size_t n = max;
    while (n > 0 && (static_cast<unsigned char>(s[n]) & 0xC0) == 0x80) --n;
    return s.substr(0, n);
}

constexpr int64_t kMaxTime = 253402300799;   // 9999-12-31T23:59:59Z

}  // namespace

std::string dir(const std::string& state_dir) { return state_dir + "/refused"; }

std::optional<std::string> file_name(const std::string& ns, const std::string& name) {
    if (!valid_names(ns, name)) return std::nullopt;
    std::string f = ns + "_" + name;
    if (f.size() > 200) {   // NAME_MAX is 255
        char hash[17];
        std::snprintf(hash, sizeof hash, "%016llx", static_cast<unsigned long long>(base::fnv1a64(f)));
        f = f.substr(0, 183) + "-" + hash;
    }
    return f + ".json";
}

Record counted(std::optional<Record> had, const Refusal& x, std::time_t now) {
    Record r;
    // The same pod (by uid) counts on; a new pod of the same name starts again.
    if (had && had->pod_uid == x.pod_uid && had->pod_namespace == x.pod_namespace && had->pod_name == x.pod_name) {
        r = *had;
    } else {
        r.first = now;
    }
    r.pod_namespace = x.pod_namespace;
    r.pod_name = x.pod_name;
    r.pod_uid = x.pod_uid;
    r.network = cut(x.network, 253);
    r.node = cut(x.node, 253);
    r.constraints.clear();
    for (auto& c : x.constraints)
        if (r.constraints.size() < 16) r.constraints.push_back(cut(c, 64));
    r.evidence = cut(x.evidence, kMaxEvidence);
    r.last = now;
    ++r.count;
    r.evict = x.evict;
    r.after = std::clamp(x.after, 1, 100);
    r.window_seconds = std::clamp(x.window_seconds, 10, 86400);
    r.recent.push_back(now);
    if (r.recent.size() > static_cast<size_t>(r.after))
        r.recent.erase(r.recent.begin(), r.recent.end() - r.after);
    return r;
}

size_t refusals_within(const Record& r, std::time_t now) {
    return static_cast<size_t>(std::count_if(r.recent.begin(), r.recent.end(),
                                             [&](int64_t t) { return t > now - r.window_seconds && t <= now; }));
}

bool eviction_due(const Record& r, std::time_t now) {
    return r.evict && refusals_within(r, now) >= static_cast<size_t>(r.after);
}

json to_json(const Record& r) {
    return {{"version", r.version},        {"namespace", r.pod_namespace},   {"name", r.pod_name},
            {"uid", r.pod_uid},            {"network", r.network},           {"node", r.node},
            {"constraints", r.constraints}, {"evidence", r.evidence},         {"first", r.first},
            {"last", r.last},              {"count", r.count},               {"onRefusal", r.evict ? "evict" : "wait"},
            {"evictAfterRefusals", r.after}, {"evictWindowSeconds", r.window_seconds}, {"recent", r.recent}};
}

Record parse(const std::string& text) {
    if (text.size() > 16384) bad_member("(top)", "larger than 16 KiB");
    json j = json::parse(text, nullptr, false);
    if (j.is_discarded() || !j.is_object()) bad_member("(top)", "not a JSON object");
    static const char* kKeys[] = {"version", "namespace", "name", "uid", "network", "node", "constraints", "evidence",
                                  "first", "last", "count", "onRefusal", "evictAfterRefusals", "evictWindowSeconds",
                                  "recent"};
    for (auto it = j.begin(); it != j.end(); ++it)
        if (std::none_of(std::begin(kKeys), std::end(kKeys), [&](const char* k) { return it.key() == k; }))
            bad_member(it.key(), "unknown member");
    Record r;
    r.version = static_cast<int>(need_int(j, "version", 1, 1));
    r.pod_namespace = need_string(j, "namespace", 63);
    r.pod_name = need_string(j, "name", 253);
    if (!valid_names(r.pod_namespace, r.pod_name)) bad_member("name", "not a valid pod namespace and name");
    r.pod_uid = need_string(j, "uid", 128);
    r.network = need_string(j, "network", 253);
    r.node = need_string(j, "node", 253);
    const json& cs = need(j, "constraints", json::value_t::array);
    if (cs.size() > 16) bad_member("constraints", "more than 16");
    for (auto& c : cs) {
        if (!c.is_string() || c.get<std::string>().size() > 64) bad_member("constraints", "expected strings of at most 64 bytes");
        r.constraints.push_back(c.get<std::string>());
    }
    r.evidence = need_string(j, "evidence", kMaxEvidence);
    r.first = need_int(j, "first", 0, kMaxTime);
    r.last = need_int(j, "last", r.first, kMaxTime);
    r.count = static_cast<uint64_t>(need_int(j, "count", 1, INT64_MAX));
    std::string policy = need_string(j, "onRefusal", 8);
    if (policy != "wait" && policy != "evict") bad_member("onRefusal", "'" + policy + "' is not one of wait, evict");
    r.evict = policy == "evict";
    r.after = static_cast<int>(need_int(j, "evictAfterRefusals", 1, 100));
    r.window_seconds = static_cast<int>(need_int(j, "evictWindowSeconds", 10, 86400));
    const json& rec = need(j, "recent", json::value_t::array);
    if (rec.empty() || rec.size() > static_cast<size_t>(r.after)) bad_member("recent", "expected 1 to evictAfterRefusals times");
    for (auto& t : rec) {
        if (!t.is_number_integer() || t.get<int64_t>() < r.first || t.get<int64_t>() > r.last)
            bad_member("recent", "expected times between first and last");
        r.recent.push_back(t.get<int64_t>());
    }
    if (!std::is_sorted(r.recent.begin(), r.recent.end())) bad_member("recent", "not oldest first");
    return r;
}

void note(const std::string& state_dir, const Refusal& x, std::time_t now) {
    try {
        auto name = file_name(x.pod_namespace, x.pod_name);
        if (!name) {
            base::log::info("placement refusal not recorded for the pod: no valid K8S_POD_NAMESPACE and K8S_POD_NAME");
            return;
        }
        const std::string d = dir(state_dir);
        base::fs::mkdir_p(d, 0700);
        // Read, count, replace under the directory's lock: concurrent refusals of a pod all count.
        base::DirLock lock(d, "the refusal records", std::chrono::seconds(2));
        std::optional<Record> had;
        if (auto text = base::fs::read_file(d + "/" + *name)) {
            try {
                had = parse(*text);
            } catch (const base::Error& e) {
                base::log::warn(std::string("refusal record replaced: ") + e.what());
            }
        } else if (base::fs::list_dir(d).size() >= kMaxRecords) {
            base::log::warn("placement refusal not recorded: " + std::to_string(kMaxRecords) + " pods have records in '" +
                            d + "' (is the refusal agent running?)");
            return;
        }
        base::fs::write_file(d + "/" + *name, to_json(counted(had, x, now)).dump() + "\n");
    } catch (const std::exception& e) {
        base::log::warn(std::string("placement refusal not recorded: ") + e.what());
    }
}

std::vector<std::string> list(const std::string& state_dir) {
    std::vector<std::string> out;
    for (auto& n : base::fs::list_dir(dir(state_dir)))
        if (n.size() > 5 && n.compare(n.size() - 5, 5, ".json") == 0) out.push_back(n);
    return out;
}

std::optional<std::string> read_text(const std::string& state_dir, const std::string& name) {
    return base::fs::read_file(dir(state_dir) + "/" + name);
}

std::optional<Record> read(const std::string& state_dir, const std::string& name) {
    auto text = read_text(state_dir, name);
    if (!text) return std::nullopt;
    return parse(*text);
}

void remove_if_same(const std::string& state_dir, const std::string& name, const std::string& text) {
    const std::string d = dir(state_dir);
    base::DirLock lock(d, "the refusal records", std::chrono::seconds(2));
    auto now = base::fs::read_file(d + "/" + name);
    if (now && *now == text) base::fs::remove_file(d + "/" + name);
}

}  // namespace placement::refusal_record
