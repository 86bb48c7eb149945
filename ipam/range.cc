#include "ipam/range.h"

#include <algorithm>

namespace ipam {

bool Range::contains(const base::IpAddr& a) const {
    return a.family == subnet.addr.family && subnet.contains(a) && start <= a && a <= end;
}

const Range* range_for(const RangeSet& set, const base::IpAddr& a) {
    for (auto& r : set)
        if (r.contains(a)) return &r;
    return nullptr;
}

bool overlaps(const Range& a, const Range& b) {
    if (a.start.family != b.start.family) return false;
    return a.contains(b.start) || a.contains(b.end) || b.contains(a.start) || b.contains(a.end);
}

bool overlaps(const RangeSet& a, const RangeSet& b) {
    for (auto& x : a)
        for (auto& y : b)
            if (overlaps(x, y)) return true;
    return false;
}

std::string to_string(const RangeSet& set) {
    std::string out;
    for (auto& r : set) out += (out.empty() ? "" : ",") + r.start.str() + "-" + r.end.str();
    return out;
}

namespace {

using U128 = unsigned __int128;

U128 to_u128(const base::IpAddr& a) {
    U128 v = 0;
    for (int i = 0; i < a.size(); ++i) v = (v << 8) | a.b[static_cast<size_t>(i)];
    return v;
}

// Addresses of `r` a container may get: [start, end] minus the gateway. Saturates
// for a full /0 v6 range, which cannot be filled anyway.
U128 usable(const Range& r) {
    U128 n = to_u128(r.end) - to_u128(r.start);
    if (n != ~U128(0)) ++n;
    return r.contains(r.gateway) ? n - 1 : n;
}

U128 taken_in(const Range& r, const std::vector<base::IpAddr>& taken) {
    auto lo = std::lower_bound(taken.begin(), taken.end(), r.start);
    auto hi = std::upper_bound(taken.begin(), taken.end(), r.end);
    U128 n = 0;
    for (auto it = lo; it != hi; ++it)
        if (r.contains(*it) && *it != r.gateway) ++n;
    return n;
}

}  // namespace

bool has_free(const RangeSet& set, const std::vector<base::IpAddr>& taken) {
    for (auto& r : set)
        if (taken_in(r, taken) < usable(r)) return true;
    return false;
}

RangeIter::RangeIter(const RangeSet& set, const std::optional<base::IpAddr>& last) : set_(set) {
    if (!last) return;
    for (size_t i = 0; i < set.size(); ++i) {
        if (!set[i].contains(*last)) continue;
        // Resume after the cursor: the first step moves past it.
        idx_ = i;
        cur_ = *last;
        return;
    }
}

// Moves one position; nullopt when it comes back to the first position. Unlike the
// reference we remember the range index together with the first position, so a cursor
// sitting on a range's end cannot make a full set loop forever.
std::optional<base::IpAddr> RangeIter::step() {
    if (set_.empty()) return std::nullopt;
    if (!cur_) {
        cur_ = set_[idx_].start;
    } else if (*cur_ == set_[idx_].end) {
        idx_ = (idx_ + 1) % set_.size();
        cur_ = set_[idx_].start;
    } else {
        cur_ = cur_->next();
    }
    if (!first_) {
        first_ = cur_;
        first_idx_ = idx_;
    } else if (idx_ == first_idx_ && *cur_ == *first_) {
        return std::nullopt;
    }
    return cur_;
}

std::optional<base::IpAddr> RangeIter::next() {
    while (!done_) {
        auto c = step();
        if (!c) done_ = true;
        else if (*c != set_[idx_].gateway) return c;
    }
    return std::nullopt;
}

}  // namespace ipam
