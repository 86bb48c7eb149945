// CNI STATUS for the store: can an ADD succeed right now?
#pragma once
#include <vector>

#include "ipam/host_local.h"
#include "ipam/store.h"

namespace ipam {

/// Throws ipam::Error Unavailable when the store cannot be written or a range set has no
/// free address left (any address without a reservation, gateways excluded).
void check_status(Store& store, const std::vector<RangeSet>& sets, const std::string& dir);

}  // namespace ipam
