// One address per range set for an owner, on top of a Store whose lock is held for
// the whole call (the reference locks each set separately).
#pragma once
#include <optional>
#include <vector>

#include "cni/cleanup.h"
#include "cni/types.h"
#include "ipam/host_local.h"
#include "ipam/store.h"

namespace ipam {

class Allocator {
public:
    Allocator(const std::vector<RangeSet>& sets, Store& store) : sets_(sets), store_(store) {}

    /// One IpConfig per set, in set order. A requested address is used for its set;
    /// otherwise an address the owner already holds there (retried ADD); otherwise the
    /// next free one in round-robin order. On failure only what this call reserved is
    /// released.
    std::vector<cni::IpConfig> allocate(const Owner& owner, const std::vector<IpAddr>& requested);

private:
    std::vector<std::optional<IpAddr>> assign_requested(const std::vector<IpAddr>& requested) const;
    std::optional<size_t> set_of(const IpAddr& ip) const;
    IpAddr claim_requested(size_t set, const IpAddr& ip, const Owner& owner, cni::Rollback& undo);
    IpAddr claim_next(size_t set, const Owner& owner, cni::Rollback& undo);
    void claimed(size_t set, const IpAddr& ip, const Owner& owner, cni::Rollback& undo);
    std::string all_sets() const;

    const std::vector<RangeSet>& sets_;
    Store& store_;
};

}  // namespace ipam
