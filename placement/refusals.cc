#include "placement/refusals.h"

#include <chrono>

#include <nlohmann/json.hpp>

#include "base/log.h"
#include "base/files.h"
#include "base/flock.h"

namespace placement::refusals {

namespace {

std::string dir(const std::string& state_dir) { return state_dir + "/metrics"; }

Counts parse(const std::string& text) {
    Counts out;
    auto j = nlohmann::json::parse(text, nullptr, false);
    if (!j.is_object()) return out;
    for (auto& [net, per] : j.items()) {
        if (!per.is_object()) continue;
        for (auto& [constraint, n] : per.items())
            if (n.is_number_unsigned()) out[net][constraint] = n.get<uint64_t>();
    }
    return out;
}

}  // namespace

std::string path(const std::string& state_dir) { return dir(state_dir) + "/refusals.json"; }

Counts read(const std::string& state_dir) {
    try {
        if (auto text = base::fs::read_file(path(state_dir))) return parse(*text);
    } catch (const std::exception& e) {
        base::log::warn(e.what());
    }
    return {};
}

void count(const std::string& state_dir, const std::string& network, const std::vector<std::string>& constraints) {
    try {
        base::fs::mkdir_p(dir(state_dir), 0700);
        // Read, add, replace under the directory's lock: concurrent refusals all count.
        base::DirLock lock(dir(state_dir), "the refusal counter", std::chrono::seconds(2));
        Counts c = read(state_dir);
        for (auto& name : constraints) ++c[network][name];
        nlohmann::json j = nlohmann::json::object();
        for (auto& [net, per] : c)
            for (auto& [name, n] : per) j[net][name] = n;
        base::fs::write_file(path(state_dir), j.dump() + "\n");
    } catch (const std::exception& e) {
        base::log::warn(std::string("placement refusal not counted: ") + e.what());
    }
}

}  // namespace placement::refusals
