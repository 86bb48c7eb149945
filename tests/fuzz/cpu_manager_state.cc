// kubelet's cpu_manager_state checkpoint (v2, v3, v4 layouts).
#include "placement/topology.h"
#include "fuzz.h"

TOPOCNI_FUZZ_TARGET((void)placement::topo::parse_cpu_manager_state(input, "pod-uid-1"))
