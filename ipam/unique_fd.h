// The IPAM store uses the project's owning fd type (netns/fd.h is header-only, so ipam
// still needs no netns library).
#pragma once
#include "netns/fd.h"

namespace ipam {
using netns::UniqueFd;
}  // namespace ipam
