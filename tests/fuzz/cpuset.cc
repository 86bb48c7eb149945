// cpuset / cpulist strings ("0-3,8-11"), and cpu_manager_state files.
#include "cni/placement/topology.h"
#include "fuzz.h"

TOPOCNI_FUZZ_TARGET({
    if (auto s = cni::topo::parse_cpuset(input)) {
        auto back = cni::topo::parse_cpuset(cni::topo::format_cpuset(*s));
        if (!back || *back != *s) __builtin_trap();   // printing and parsing must round-trip
    }
})
