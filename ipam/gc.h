// CNI GC for the store: release every reservation no valid attachment owns.
#pragma once
#include <vector>

#include "ipam/host_local.h"
#include "ipam/store.h"

namespace ipam {

/// Releases reservations whose (container id, ifname) is not in `valid`; a legacy
/// id-only file stays when any valid attachment has its container id; an empty file
/// (the reference plugin crashed mid-write) always goes. An empty `valid` releases
/// everything. Stale owner-index entries are dropped too. Returns what was released.
std::vector<Reservation> collect_garbage(Store& store, const std::vector<Owner>& valid);

}  // namespace ipam
