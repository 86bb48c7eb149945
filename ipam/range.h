// Range set logic shared by config validation, allocation and status: membership,
// overlap, the round-robin iterator and the "is anything left" test.
#pragma once
#include <optional>
#include <string>
#include <vector>

#include "ipam/host_local.h"

namespace ipam {

/// The range of `set` whose [start, end] holds `a`; nullptr when none does.
const Range* range_for(const RangeSet& set, const base::IpAddr& a);
/// Either range holds the other's start or end (the reference's Overlaps); false across families.
bool overlaps(const Range& a, const Range& b);
/// Any range of one set overlaps any range of the other.
bool overlaps(const RangeSet& a, const RangeSet& b);
/// "start-end,start-end", the reference's RangeSet.String().
std::string to_string(const RangeSet& set);
/// Whether some address of `set` other than a gateway is missing from `taken` (sorted).
bool has_free(const RangeSet& set, const std::vector<base::IpAddr>& taken);

/// Candidate addresses in the reference's round-robin order: the address after `last`
/// (when `last` lies in the set), else the first range's start; +1 steps; from a
/// range's end to the next range's start, wrapping; gateways skipped; every address
/// visited once.
class RangeIter {
public:
    RangeIter(const RangeSet& set, const std::optional<base::IpAddr>& last);
    /// The next candidate; nullopt once the walk is back where it started.
    std::optional<base::IpAddr> next();

private:
    std::optional<base::IpAddr> step();

    const RangeSet& set_;
    size_t idx_ = 0;                     // range holding cur_
    std::optional<base::IpAddr> cur_;          // last position visited (returned or skipped)
    std::optional<base::IpAddr> first_;        // first position visited; seeing it again ends the walk
    size_t first_idx_ = 0;
    bool done_ = false;
};

}  // namespace ipam
