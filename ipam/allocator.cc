#include "ipam/allocator.h"

#include <algorithm>

#include "ipam/error.h"
#include "ipam/range.h"

namespace ipam {

namespace {

base::IpConfig ip_config(const RangeSet& set, const base::IpAddr& ip) {
    const Range* r = range_for(set, ip);
    return {base::IpNet{ip, r->subnet.prefix}, r->gateway, std::nullopt};
}

std::optional<base::IpAddr> held_in(const RangeSet& set, const std::vector<base::IpAddr>& held) {
    for (auto& ip : held)
        if (range_for(set, ip)) return ip;
    return std::nullopt;
}

std::optional<size_t> set_of(const std::vector<RangeSet>& sets, const base::IpAddr& ip) {
    for (size_t i = 0; i < sets.size(); ++i)
        if (range_for(sets[i], ip)) return i;
    return std::nullopt;
}

std::string all_sets(const std::vector<RangeSet>& sets) {
    std::string out;
    for (auto& s : sets) out += (out.empty() ? "" : "; ") + to_string(s);
    return out;
}

std::string join(const std::vector<base::IpAddr>& ips) {
    std::string out;
    for (auto& ip : ips) out += (out.empty() ? "" : ", ") + ip.str();
    return out;
}

}  // namespace

std::vector<base::IpConfig> Allocator::allocate(const Owner& owner, const std::vector<base::IpAddr>& requested) {
    auto wanted = assign_requested(sets_, requested);
    moves_.clear();
    auto held = store_.indexed(owner);
    base::Rollback undo;   // releases the addresses this call reserved, unless dismissed
    std::vector<base::IpConfig> out;
    for (size_t i = 0; i < sets_.size(); ++i) {
        base::IpAddr ip;
        if (wanted[i]) ip = claim_requested(i, *wanted[i], owner, undo);
        else if (auto h = held_in(sets_[i], held)) ip = *h;
        else ip = claim_next(i, owner, undo);
        out.push_back(ip_config(sets_[i], ip));
    }
    undo.dismiss();
    return out;
}

// Maps requested addresses to their sets before anything is reserved, so a bad
// request fails without touching the store. At most one address per set.
std::vector<std::optional<base::IpAddr>> Allocator::assign_requested(const std::vector<RangeSet>& sets,
                                                                const std::vector<base::IpAddr>& requested) {
    std::vector<std::optional<base::IpAddr>> per_set(sets.size());
    std::vector<base::IpAddr> extra;
    for (auto& ip : requested) {
        auto s = set_of(sets, ip);
        if (!s) fail_invalid("requested IP " + ip.str() + " is not in any range set (" + all_sets(sets) + ")");
        if (ip == range_for(sets[*s], ip)->gateway)
            fail_invalid("requested IP " + ip.str() + " is the gateway of range set " + std::to_string(*s));
        if (!per_set[*s]) per_set[*s] = ip;
        else if (*per_set[*s] != ip && std::find(extra.begin(), extra.end(), ip) == extra.end()) extra.push_back(ip);
    }
    if (!extra.empty())
        fail_invalid("failed to allocate all requested IPs: " + join(extra) + " (at most one address per range set)");
    return per_set;
}

// Already ours is fine: a retried ADD with the same request must succeed.
base::IpAddr Allocator::claim_requested(size_t set, const base::IpAddr& ip, const Owner& owner, base::Rollback& undo) {
    auto h = store_.holder(ip);
    if (h && held_by(*h, owner)) return ip;
    auto taken = [&](const std::string& by) {
        return Error(Error::Kind::Taken, "requested IP address " + ip.str() + " is not available in range set " +
                                                  to_string(sets_[set]) + ": reserved by " + by);
    };
    if (h) throw taken(h->container_id.empty() ? "an empty reservation file (a crash leftover; GC releases it)"
                                               : "container '" + h->container_id + "' interface '" + h->ifname + "'");
    if (!store_.reserve(ip, owner)) throw taken("another process");
    claimed(set, ip, owner, undo);
    return ip;
}

base::IpAddr Allocator::claim_next(size_t set, const Owner& owner, base::Rollback& undo) {
    RangeIter it(sets_[set], store_.cursor(set));
    while (auto ip = it.next()) {
        if (store_.taken(*ip) || !store_.reserve(*ip, owner)) continue;
        claimed(set, *ip, owner, undo);
        return *ip;
    }
    throw Error(Error::Kind::Exhausted, "no IP addresses available in range set: " + to_string(sets_[set]));
}

// The cursor's old value is kept so that an undo (here, or HostLocal::undo after a later
// step of ADD failed) can put it back: a refused ADD changes nothing.
void Allocator::claimed(size_t set, const base::IpAddr& ip, const Owner& owner, base::Rollback& undo) {
    undo.add("release " + ip.str(), [this, ip, owner] { store_.remove({ip, owner.container_id, owner.ifname}); });
    CursorMove move{set, store_.cursor(set), ip};
    store_.set_cursor(set, ip);
    undo.add("cursor " + std::to_string(set), [this, move] { restore_cursor(store_, move); });
    moves_.push_back(move);
}

void restore_cursor(Store& store, const CursorMove& m) {
    if (store.cursor(m.set) != m.after) return;   // another ADD moved it since: theirs stands
    if (m.before) store.set_cursor(m.set, *m.before);
    else store.remove_cursor(m.set);
}

}  // namespace ipam
