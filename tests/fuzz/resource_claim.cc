// A ResourceClaim as the DRA plugin reads it from the API (any JSON), the capacity
// quantities in it, and the prepared-claim record it keeps on the node: the reader either
// takes it or throws base::Error; a record that parses prints back to the same record.
#include "cluster/claim_prepare.h"
#include "fuzz.h"
#include "placement/prepared_claims.h"

TOPOCNI_FUZZ_TARGET({
    auto j = nlohmann::json::parse(input, nullptr, false);
    if (!j.is_discarded()) {
        try {
            auto c = cluster::claims::read_claim(j);
            for (const auto& r : c.results)
                for (const auto& [name, q] : r.consumed_capacity) (void)cluster::claims::quantity_value(q);
        } catch (const base::Error&) {
        }
        auto r = placement::prepared_claims::record_from_json(j);
        auto again = placement::prepared_claims::record_from_json(placement::prepared_claims::to_json(r));
        if (placement::prepared_claims::to_json(again) != placement::prepared_claims::to_json(r)) __builtin_trap();
        (void)cluster::claims::answer_of(r);
    }
    (void)cluster::claims::quantity_value(input);
})
