#include "placement/ledger.h"

#include <dirent.h>
#include <unistd.h>

#include <algorithm>

#include <nlohmann/json.hpp>

#include "base/files.h"
#include "base/log.h"

namespace placement::ledger {

namespace {

// ':' is in neither a network name, a container ID nor an interface name: no two
// attachments share a file name.
std::string file_name(const std::string& network, const std::string& cid, const std::string& ifname) {
    return network + ":" + cid + ":" + ifname + ".json";
}

constexpr const char* kCapacity = "capacity";

}  // namespace

std::string root(const std::string& state_dir) { return state_dir + "/bandwidth"; }
std::string dir(const std::string& state_dir, const std::string& link) { return root(state_dir) + "/" + link; }
std::vector<std::string> links(const std::string& state_dir) { return base::fs::list_dir(root(state_dir)); }

std::vector<Entry> entries(const std::string& state_dir, const std::string& link) {
    std::vector<Entry> out;
    for (auto& name : base::fs::list_dir(dir(state_dir, link))) {
        if (name.size() < 6 || name.compare(name.size() - 5, 5, ".json") != 0) continue;   // temp files
        std::string path = dir(state_dir, link) + "/" + name;
        std::optional<std::string> text;
        try { text = base::fs::read_file(path); } catch (const std::exception& e) { base::log::warn(e.what()); }
        if (!text) continue;
        auto j = nlohmann::json::parse(*text, nullptr, false);
        if (!j.is_object()) {
            base::log::warn("bandwidth ledger: '" + path + "' is no JSON object; not counted");
            continue;
        }
        Entry e;
        e.network = j.value("network", "");
        e.container_id = j.value("containerID", "");
        e.ifname = j.value("ifname", "");
        e.egress_bps = j.value("egressBps", uint64_t{0});
        e.ingress_bps = j.value("ingressBps", uint64_t{0});
        e.capacity_bps = j.value("capacityBps", uint64_t{0});
        e.overcommit = j.value("overcommit", 1.0);
        e.capacity_source = j.value("capacitySource", "");
        e.pod = j.value("pod", "");
        out.push_back(std::move(e));
    }
    return out;
}

void commit(const std::string& state_dir, const std::string& link, const Entry& e, bool durable) {
    nlohmann::json j = {{"network", e.network},       {"containerID", e.container_id}, {"ifname", e.ifname},
                        {"egressBps", e.egress_bps},  {"ingressBps", e.ingress_bps},   {"capacityBps", e.capacity_bps},
                        {"overcommit", e.overcommit}, {"capacitySource", e.capacity_source}};
    if (!e.pod.empty()) j["pod"] = e.pod;
    base::fs::write_file(dir(state_dir, link) + "/" + file_name(e.network, e.container_id, e.ifname), j.dump() + "\n", 0600,
                         durable);
}

void record_capacity(const std::string& state_dir, const std::string& link, const Entry& e) {
    nlohmann::json j = {{"capacityBps", e.capacity_bps}, {"overcommit", e.overcommit}, {"capacitySource", e.capacity_source},
                        {"network", e.network}};
    base::fs::write_file(dir(state_dir, link) + "/" + kCapacity, j.dump() + "\n");
}

std::optional<Entry> capacity(const std::string& state_dir, const std::string& link) {
    std::optional<std::string> text;
    try { text = base::fs::read_file(dir(state_dir, link) + "/" + kCapacity); } catch (const std::exception& e) { base::log::warn(e.what()); }
    if (!text) return std::nullopt;
    auto j = nlohmann::json::parse(*text, nullptr, false);
    if (!j.is_object()) return std::nullopt;
    Entry e;
    e.network = j.value("network", "");
    e.capacity_bps = j.value("capacityBps", uint64_t{0});
    e.overcommit = j.value("overcommit", 1.0);
    e.capacity_source = j.value("capacitySource", "");
    return e;
}

bool remove(const std::string& state_dir, const std::string& link, const std::string& network,
            const std::string& container_id, const std::string& ifname, bool durable) {
    std::string path = dir(state_dir, link) + "/" + file_name(network, container_id, ifname);
    if (::access(path.c_str(), F_OK) != 0) return false;
    base::fs::remove_file(path, durable);
    return true;
}

int remove_everywhere(const std::string& state_dir, const std::string& network, const std::string& container_id,
                      const std::string& ifname) {
    int n = 0;
    for (auto& link : links(state_dir)) n += remove(state_dir, link, network, container_id, ifname);
    return n;
}

}  // namespace placement::ledger
