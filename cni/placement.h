// Placement validation at ADD (and CHECK): every constraint evaluated, all failures
// reported at once as code 100 with the evidence in details.
#pragma once
#include "cni/attachment.h"

namespace cni {

/// Throws Error(kPlacement, ...) when a constraint fails; no-op without constraints.
void check_placement(Context& ctx);

}  // namespace cni
