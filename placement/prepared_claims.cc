#include "placement/prepared_claims.h"

#include <fcntl.h>
#include <unistd.h>
#include <sys/stat.h>

#include <algorithm>
#include <cctype>

#include "base/error.h"
#include "base/files.h"

namespace placement::prepared_claims {

using nlohmann::json;

namespace {

std::string claims_dir(const std::string& sd) { return root(sd) + "/claims"; }
std::string devices_dir(const std::string& sd) { return root(sd) + "/devices"; }
std::string pods_dir(const std::string& sd) { return root(sd) + "/pods"; }

/// A PCI address as a file name: what sysfs names it, nothing that walks a path.
bool valid_pci(const std::string& pci) {
    if (pci.empty() || pci.size() > 32) return false;
    for (unsigned char c : pci)
        if (!std::isxdigit(c) && c != ':' && c != '.') return false;
    return true;
}

std::string need_pci(const std::string& pci) {
    if (!valid_pci(pci)) throw base::Error("'" + pci + "' is not a PCI address");
    return pci;
}

const json& member(const json& j, const char* key, json::value_t type, const std::string& at) {
    auto it = j.find(key);
    if (it == j.end() || it->type() != type)
        throw base::Error("prepared claim record: " + at + key + ": missing or of the wrong type");
    return *it;
}

std::string text(const json& j, const char* key, const std::string& at) {
    return member(j, key, json::value_t::string, at).get<std::string>();
}

uint64_t number(const json& j, const char* key, const std::string& at) {
    auto it = j.find(key);
    if (it == j.end()) return 0;
    if (!it->is_number_unsigned()) throw base::Error("prepared claim record: " + at + key + ": expected an unsigned integer");
    return it->get<uint64_t>();
}

}  // namespace

bool Record::holds_pod(const std::string& pod_uid) const {
    if (pod_uid.empty()) return false;
    for (const auto& p : pods)
        if (p.uid == pod_uid) return true;
    return false;
}

bool Record::books_bandwidth() const {
    return std::any_of(devices.begin(), devices.end(), [](const Device& d) { return d.books_bandwidth(); });
}

std::string root(const std::string& state_dir) { return state_dir + "/dra"; }

bool valid_uid(const std::string& uid) {
    if (uid.empty() || uid.size() > 64) return false;
    for (unsigned char c : uid)
        if (!std::isalnum(c) && c != '-') return false;
    return true;
}

json to_json(const Record& r) {
    json pods = json::array(), devices = json::array();
    for (const auto& p : r.pods) pods.push_back({{"uid", p.uid}, {"name", p.name}});
    for (const auto& d : r.devices) {
        json j = {{"request", d.request}, {"pool", d.pool}, {"device", d.device}, {"kind", d.kind}};
        if (d.share_id) j["shareID"] = *d.share_id;
        if (!d.pci.empty()) j["pci"] = d.pci;
        if (!d.link.empty()) j["link"] = d.link;
        if (d.egress_bps) j["egressBps"] = d.egress_bps;
        if (d.ingress_bps) j["ingressBps"] = d.ingress_bps;
        devices.push_back(std::move(j));
    }
    json j = {{"version", r.version}, {"state", r.state}, {"uid", r.uid}, {"namespace", r.ns}, {"name", r.name},
              {"pods", pods}, {"devices", devices}};
    if (!r.network.empty()) j["network"] = r.network;
    return j;
}

Record record_from_json(const json& j) {
    if (!j.is_object()) throw base::Error("prepared claim record: not a JSON object");
    Record r;
    if (member(j, "version", json::value_t::number_unsigned, "").get<int>() != 1)
        throw base::Error("prepared claim record: version: only 1 is known");
    r.state = text(j, "state", "");
    if (r.state != "preparing" && r.state != "prepared" && r.state != "unpreparing")
        throw base::Error("prepared claim record: state: '" + r.state + "' is none of preparing, prepared, unpreparing");
    r.uid = text(j, "uid", "");
    if (!valid_uid(r.uid)) throw base::Error("prepared claim record: uid: '" + r.uid + "' is not a claim UID");
    r.ns = text(j, "namespace", "");
    r.name = text(j, "name", "");
    if (j.contains("network")) r.network = text(j, "network", "");
    for (const auto& p : member(j, "pods", json::value_t::array, "")) {
        if (!p.is_object()) throw base::Error("prepared claim record: pods[]: not an object");
        r.pods.push_back({text(p, "uid", "pods[]."), text(p, "name", "pods[].")});
    }
    for (const auto& d : member(j, "devices", json::value_t::array, "")) {
        if (!d.is_object()) throw base::Error("prepared claim record: devices[]: not an object");
        Device x;
        const std::string at = "devices[].";
        x.request = text(d, "request", at);
        x.pool = text(d, "pool", at);
        x.device = text(d, "device", at);
        x.kind = text(d, "kind", at);
        if (d.contains("shareID")) x.share_id = text(d, "shareID", at);
        if (d.contains("pci")) x.pci = need_pci(text(d, "pci", at));
        if (d.contains("link")) x.link = text(d, "link", at);
        x.egress_bps = number(d, "egressBps", at);
        x.ingress_bps = number(d, "ingressBps", at);
        r.devices.push_back(std::move(x));
    }
    return r;
}

std::optional<Record> read(const std::string& state_dir, const std::string& uid) {
    if (!valid_uid(uid)) return std::nullopt;
    auto text = base::fs::read_file(claims_dir(state_dir) + "/" + uid + ".json");
    if (!text) return std::nullopt;
    auto j = json::parse(*text, nullptr, false);
    return record_from_json(j);
}

void write(const std::string& state_dir, const Record& r) {
    if (!valid_uid(r.uid)) throw base::Error("'" + r.uid + "' is not a claim UID");
    base::fs::write_file(claims_dir(state_dir) + "/" + r.uid + ".json", to_json(r).dump() + "\n");
}

void create(const std::string& state_dir, const Record& r) {
    if (!valid_uid(r.uid)) throw base::Error("'" + r.uid + "' is not a claim UID");
    const std::string dir = claims_dir(state_dir), name = r.uid + ".json", path = dir + "/" + name;
    base::UniqueFd at = base::fs::make_dir(AT_FDCWD, dir, dir, 0700);   // dra/ is there: its lock made it
    // Under a page: one write, which a kill -9 lands before or after, never inside.
    base::fs::create_file(at.get(), name, to_json(r).dump() + "\n", path, true);
    try {
        base::fs::sync(at.get(), dir);
    } catch (...) {
        ::unlinkat(at.get(), name.c_str(), 0);
        throw;
    }
}

void remove(const std::string& state_dir, const std::string& uid) {
    if (!valid_uid(uid)) return;
    base::fs::remove_file(claims_dir(state_dir) + "/" + uid + ".json");
}

std::vector<std::string> uids(const std::string& state_dir) {
    std::vector<std::string> out;
    for (auto& name : base::fs::list_dir(claims_dir(state_dir))) {
        if (name.size() <= 5 || name.compare(name.size() - 5, 5, ".json") != 0) continue;   // temp files
        out.push_back(name.substr(0, name.size() - 5));
    }
    return out;
}

std::optional<std::string> hold_vf(const std::string& state_dir, const std::string& pci, const std::string& uid) {
    std::string path = devices_dir(state_dir) + "/" + need_pci(pci);
    // A symlink whose target is the claim's UID: created whole, with its content, in one
    // step that fails when the name exists (symlink(2) never replaces), so two claims can
    // never hold one VF and a reader never sees half a hold. One metadata operation where a
    // temp file, its link and its unlink were three: a prepare's holds are most of its
    // time on a busy disk. Not synced: holds are rebuilt from the records at start
    // (Preparer::recover).
    for (int attempt = 0; attempt < 3; ++attempt) {
        if (::symlink(uid.c_str(), path.c_str()) == 0) return std::nullopt;
        if (errno == ENOENT) {
            base::fs::mkdir_p(devices_dir(state_dir), 0700);
            continue;
        }
        if (errno != EEXIST) base::fs::fail_io("hold VF", path, errno);
        auto holder = vf_holder(state_dir, pci);
        if (holder) return *holder == uid ? std::nullopt : holder;
        // Released between the two calls: try again (a holder only ever releases, never hands over).
    }
    throw base::Error("VF " + pci + " is taken and released again and again: try again");
}

std::optional<std::string> vf_holder(const std::string& state_dir, const std::string& pci) {
    if (!valid_pci(pci)) return std::nullopt;
    std::string path = devices_dir(state_dir) + "/" + pci;
    char buf[128];
    ssize_t n = ::readlink(path.c_str(), buf, sizeof buf);
    if (n >= 0 && size_t(n) < sizeof buf) return std::string(buf, size_t(n));
    if (n < 0 && errno == ENOENT) return std::nullopt;
    if (n < 0 && errno == EINVAL) return base::fs::read_file(path);   // a regular file: an earlier version's hold
    if (n >= 0) throw base::Error("'" + path + "' names no claim UID");
    base::fs::fail_io("read", path, errno);
}

void release_vf(const std::string& state_dir, const std::string& pci, const std::string& uid) {
    // Not durable either: a hold that comes back after a power loss names no prepared
    // record, and recover() takes it away.
    if (vf_holder(state_dir, pci) == uid && ::unlink((devices_dir(state_dir) + "/" + pci).c_str()) != 0 && errno != ENOENT)
        base::fs::fail_io("remove", devices_dir(state_dir) + "/" + pci, errno);
}

std::vector<std::pair<std::string, std::string>> held_vfs(const std::string& state_dir) {
    std::vector<std::pair<std::string, std::string>> out;
    for (auto& name : base::fs::list_dir(devices_dir(state_dir)))
        if (valid_pci(name))
            if (auto h = vf_holder(state_dir, name)) out.emplace_back(name, *h);
    return out;
}

namespace {

/// pods/<pod>.<claim>: '.' is in no UID (valid_uid), so the name splits one way only.
std::string index_name(const std::string& pod_uid, const std::string& claim_uid) { return pod_uid + "." + claim_uid; }

}  // namespace

void index_pods(const std::string& state_dir, const Record& r) {
    if (!r.books_bandwidth()) return;
    const std::string dir = pods_dir(state_dir);
    base::UniqueFd at = base::fs::make_dir(AT_FDCWD, dir, dir, 0700);   // dra/ is there: its lock made it
    for (const auto& pod : r.pods) {
        if (!valid_uid(pod.uid) || !valid_uid(r.uid)) throw base::Error("'" + pod.uid + "' or '" + r.uid + "' is not a UID");
        // An empty file, flat in pods/: one create, no directory per pod (a mkdir costs more
        // than the file). Not synced: rebuilt from the records at start.
        const std::string name = index_name(pod.uid, r.uid);
        try {
            base::fs::create_file(at.get(), name, "", dir + "/" + name, false);
        } catch (const base::Error& e) {
            if (e.sys_errno != EEXIST) throw;
        }
    }
}

void unindex_pod(const std::string& state_dir, const std::string& pod_uid, const std::string& claim_uid) {
    if (!valid_uid(pod_uid) || !valid_uid(claim_uid)) return;
    std::string path = pods_dir(state_dir) + "/" + index_name(pod_uid, claim_uid);
    if (::unlink(path.c_str()) != 0 && errno != ENOENT) base::fs::fail_io("remove", path, errno);
}

std::vector<std::string> pod_claims(const std::string& state_dir, const std::string& pod_uid) {
    if (!valid_uid(pod_uid)) return {};
    std::vector<std::string> out;
    for (auto& [pod, claim] : indexed_pods(state_dir))
        if (pod == pod_uid) out.push_back(claim);
    return out;
}

std::vector<std::pair<std::string, std::string>> indexed_pods(const std::string& state_dir) {
    std::vector<std::pair<std::string, std::string>> out;
    for (auto& name : base::fs::list_dir(pods_dir(state_dir))) {
        auto dot = name.find('.');
        if (dot == std::string::npos) continue;   // an earlier version's pods/<pod>/ (drop_nested_index)
        std::string pod = name.substr(0, dot), claim = name.substr(dot + 1);
        if (valid_uid(pod) && valid_uid(claim)) out.emplace_back(pod, claim);
    }
    return out;
}

std::vector<std::string> drop_nested_index(const std::string& state_dir) {
    std::vector<std::string> out;
    for (auto& name : base::fs::list_dir(pods_dir(state_dir))) {
        if (!valid_uid(name)) continue;
        std::string dir = pods_dir(state_dir) + "/" + name;
        struct stat st {};
        if (::lstat(dir.c_str(), &st) != 0 || !S_ISDIR(st.st_mode)) continue;
        for (auto& f : base::fs::list_dir(dir)) ::unlink((dir + "/" + f).c_str());
        (void)remove_stale_temps(dir);   // a killed writer's temp file: rmdir needs the directory empty
        ::rmdir(dir.c_str());
        out.push_back(dir);
    }
    return out;
}

std::vector<std::string> remove_stale_temps(const std::string& dir) {
    std::vector<std::string> out;
    base::UniqueFd at(::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
    if (!at) return out;
    for (const auto& name : base::fs::list_names(at.get(), dir)) {
        auto dot = name.rfind(".tmp.");
        if (name.empty() || name[0] != '.' || dot == std::string::npos) continue;
        std::string pid = name.substr(dot + 5);
        if (pid.empty() || pid.find_first_not_of("0123456789") != std::string::npos) continue;
        struct stat st {};
        if (::stat(("/proc/" + pid).c_str(), &st) == 0) continue;   // its writer is still at it
        base::fs::remove_at(at.get(), name, dir + "/" + name);
        out.push_back(dir + "/" + name);
    }
    return out;
}

}  // namespace placement::prepared_claims
