#include "ipam/usage.h"

#include <sys/stat.h>

#include "ipam/range.h"

namespace ipam {

namespace {

unsigned __int128 as_number(const base::IpAddr& a) {
    unsigned __int128 v = 0;
    for (int i = 0; i < a.size(); ++i) v = (v << 8) | a.b[static_cast<size_t>(i)];
    return v;
}

}  // namespace

std::vector<SetUsage> pool_sizes(const Config& cfg) {
    std::vector<SetUsage> out;
    for (auto& set : cfg.ranges) {
        SetUsage u;
        u.range_set = to_string(set);
        for (auto& r : set) {
            u.size += as_number(r.end) - as_number(r.start) + 1;
            if (r.contains(r.gateway)) u.size -= 1;   // the allocator never hands out a gateway
        }
        out.push_back(std::move(u));
    }
    return out;
}

std::vector<SetUsage> pool_usage(const Config& cfg, const std::string& network) {
    HostLocal store(cfg, network);
    struct stat st;
    // Listing opens (and so creates) the store; a pool nobody used yet has no reservations.
    std::vector<Reservation> held = ::stat(store.dir().c_str(), &st) == 0 ? store.list() : std::vector<Reservation>{};
    std::vector<SetUsage> out = pool_sizes(cfg);
    for (size_t i = 0; i < out.size(); ++i)
        for (auto& r : held)
            if (range_for(cfg.ranges[i], r.ip)) out[i].held.push_back(r);
    return out;
}

std::string count_text(unsigned __int128 v) {
    if (v > static_cast<unsigned __int128>(1) << 62) return "more than 2^62";
    return std::to_string(static_cast<unsigned long long>(v));
}

unsigned __int128 free_addresses(unsigned __int128 size, unsigned __int128 held) { return size > held ? size - held : 0; }

unsigned __int128 free_after_allocation(const SetUsage& u, const std::string& container_id, const std::string& ifname) {
    bool mine = false;
    for (auto& r : u.held) mine = mine || (!container_id.empty() && r.container_id == container_id && r.ifname == ifname);
    return free_addresses(u.size, static_cast<unsigned __int128>(u.held.size()) + (mine ? 0 : 1));
}

}  // namespace ipam
