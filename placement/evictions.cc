#include "placement/evictions.h"

#include <chrono>

#include <nlohmann/json.hpp>

#include "base/files.h"
#include "base/flock.h"
#include "base/log.h"

namespace placement::evictions {

namespace {

std::string dir(const std::string& state_dir) { return state_dir + "/metrics"; }

bool known(const std::string& outcome) {
    for (auto* o : kOutcomes)
        if (outcome == o) return true;
    return false;
}

}  // namespace

std::string path(const std::string& state_dir) { return dir(state_dir) + "/evictions.json"; }

Counts read(const std::string& state_dir) {
    Counts out;
    try {
        auto text = base::fs::read_file(path(state_dir));
        if (!text) return out;
        auto j = nlohmann::json::parse(*text, nullptr, false);
        if (!j.is_object()) return out;
        for (auto& [net, per] : j.items()) {
            if (!per.is_object()) continue;
            for (auto& [outcome, n] : per.items())
                if (known(outcome) && n.is_number_unsigned()) out[net][outcome] = n.get<uint64_t>();
        }
    } catch (const std::exception& e) {
        base::log::warn(e.what());
    }
    return out;
}

void count(const std::string& state_dir, const std::string& network, const std::string& outcome) {
    try {
        base::fs::mkdir_p(dir(state_dir), 0700);
        // Same directory lock as the refusal counter: one writer at a time in metrics/.
        base::DirLock lock(dir(state_dir), "the eviction counter", std::chrono::seconds(2));
        Counts c = read(state_dir);
        ++c[network][outcome];
        nlohmann::json j = nlohmann::json::object();
        for (auto& [net, per] : c)
            for (auto& [name, n] : per) j[net][name] = n;
        base::fs::write_file(path(state_dir), j.dump() + "\n");
    } catch (const std::exception& e) {
        base::log::warn(std::string("eviction not counted: ") + e.what());
    }
}

}  // namespace placement::evictions
