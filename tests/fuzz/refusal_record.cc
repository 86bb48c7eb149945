// The pod's refusal record the refusal agent and explain --pod read from the state
// directory (<stateDir>/refused/*.json): strict parse, and a record that parses must print
// back to one that parses to the same record.
#include "placement/refusal_record.h"
#include "fuzz.h"

TOPOCNI_FUZZ_TARGET({
    auto r = placement::refusal_record::parse(input);
    auto again = placement::refusal_record::parse(placement::refusal_record::to_json(r).dump());
    if (placement::refusal_record::to_json(again) != placement::refusal_record::to_json(r)) __builtin_trap();
    (void)placement::refusal_record::eviction_due(r, 1700000000);
})
