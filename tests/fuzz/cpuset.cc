// cpuset / cpulist strings ("0-3,8-11"), and cpu_manager_state files.
#include "placement/topology.h"
#include "fuzz.h"

TOPOCNI_FUZZ_TARGET({
    if (auto s = placement::topo::parse_cpuset(input)) {
        auto back = placement::topo::parse_cpuset(placement::topo::format_cpuset(*s));
        if (!back || *back != *s) __builtin_trap();   // printing and parsing must round-trip
    }
})
