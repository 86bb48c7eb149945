// An in-memory Store for allocator tests: records state, so tests check what the
// store holds rather than which calls were made.
#pragma once
#include <map>

#include "ipam/store.h"

namespace ipam_test {

class MemStore final : public ipam::Store {
public:
    std::map<base::IpAddr, ipam::Reservation> files;
    std::map<size_t, base::IpAddr> cursors;

    bool taken(const base::IpAddr& ip) override { return files.count(ip) != 0; }
    std::optional<ipam::Reservation> holder(const base::IpAddr& ip) override {
        auto it = files.find(ip);
        if (it == files.end()) return std::nullopt;
        return it->second;
    }
    bool reserve(const base::IpAddr& ip, const ipam::Owner& o) override {
        return files.emplace(ip, ipam::Reservation{ip, o.container_id, o.ifname}).second;
    }
    void remove(const ipam::Reservation& r) override {
        auto it = files.find(r.ip);
        if (it != files.end() && it->second.container_id == r.container_id && it->second.ifname == r.ifname) files.erase(it);
    }
    std::vector<base::IpAddr> indexed(const ipam::Owner& o) override {
        std::vector<base::IpAddr> out;
        for (auto& r : find(o))
            if (ipam::held_by(r, o)) out.push_back(r.ip);
        return out;
    }
    std::vector<ipam::Reservation> find(const ipam::Owner& o) override {
        std::vector<ipam::Reservation> out;
        for (auto& [ip, r] : files)
            if (ipam::held_by(r, o) || ipam::legacy_of(r, o)) out.push_back(r);
        return out;
    }
    std::vector<ipam::Reservation> release(const ipam::Owner& o) override {
        auto out = find(o);
        for (auto& r : out) files.erase(r.ip);
        return out;
    }
    std::vector<ipam::Reservation> all() override {
        std::vector<ipam::Reservation> out;
        for (auto& [ip, r] : files) out.push_back(r);
        return out;
    }
    std::vector<base::IpAddr> addresses() override {
        std::vector<base::IpAddr> out;
        for (auto& [ip, r] : files) out.push_back(ip);
        return out;
    }
    std::optional<base::IpAddr> cursor(size_t set) override {
        auto it = cursors.find(set);
        if (it == cursors.end()) return std::nullopt;
        return it->second;
    }
    void set_cursor(size_t set, const base::IpAddr& ip) override { cursors[set] = ip; }
    void remove_cursor(size_t set) override { cursors.erase(set); }
};

}  // namespace ipam_test
