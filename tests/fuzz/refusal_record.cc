// The pod's refusal record the refusal agent and explain --pod read from the state
// directory (<stateDir>/refused/*.json): strict parse, and a record that parses must print
// back to one that parses to the same record.
#include "cni/placement/refusal_record.h"
#include "fuzz.h"

TOPOCNI_FUZZ_TARGET({
    auto r = cni::refusal_record::parse(input);
    auto again = cni::refusal_record::parse(cni::refusal_record::to_json(r).dump());
    if (cni::refusal_record::to_json(again) != cni::refusal_record::to_json(r)) __builtin_trap();
    (void)cni::refusal_record::eviction_due(r, 1700000000);
})
