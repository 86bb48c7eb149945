// One address per range set for an owner, on top of a Store whose lock is held for
// the whole call (the reference locks each set separately).
#pragma once
#include <optional>
#include <vector>

#include "base/rollback.h"
#include "base/result_model.h"
#include "ipam/host_local.h"
#include "ipam/store.h"

namespace ipam {

/// A round-robin cursor this allocation moved: from `before` (nullopt: no cursor file)
/// to `after`. An undo puts it back when nobody moved it since.
struct CursorMove {
    size_t set = 0;
    std::optional<base::IpAddr> before;
    base::IpAddr after;
};

class Store;
/// Puts a moved cursor back to `before` (removing the file when there was none) unless
/// another allocation moved it since.
void restore_cursor(Store& store, const CursorMove& m);

class Allocator {
public:
    Allocator(const std::vector<RangeSet>& sets, Store& store) : sets_(sets), store_(store) {}

    /// Maps requested addresses to their sets (at most one per set), without a store:
    /// code 7 naming the address when one is outside every set or is a gateway. ADD
    /// runs this before it changes anything.
    static std::vector<std::optional<base::IpAddr>> assign_requested(const std::vector<RangeSet>& sets,
                                                               const std::vector<base::IpAddr>& requested);

    /// One IpConfig per set, in set order. A requested address is used for its set;
    /// otherwise an address the owner already holds there (retried ADD); otherwise the
    /// next free one in round-robin order. On failure only what this call reserved is
    /// released.
    std::vector<base::IpConfig> allocate(const Owner& owner, const std::vector<base::IpAddr>& requested);
    /// The cursors the last successful allocate() moved.
    const std::vector<CursorMove>& cursor_moves() const { return moves_; }

private:
    base::IpAddr claim_requested(size_t set, const base::IpAddr& ip, const Owner& owner, base::Rollback& undo);
    base::IpAddr claim_next(size_t set, const Owner& owner, base::Rollback& undo);
    void claimed(size_t set, const base::IpAddr& ip, const Owner& owner, base::Rollback& undo);

    const std::vector<RangeSet>& sets_;
    Store& store_;
    std::vector<CursorMove> moves_;
};

}  // namespace ipam
