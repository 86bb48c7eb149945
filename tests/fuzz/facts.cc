// The node facts document a consumer reads from a Node's topocni.io/facts annotation:
// strict parse, and a document that parses must print back to one that parses to the
// same content. (The WATCH lines around it are fuzzed by watch_line.cc.)
#include "placement/node_facts.h"
#include "fuzz.h"

TOPOCNI_FUZZ_TARGET({
    auto j = nlohmann::json::parse(input, nullptr, false);
    if (!j.is_discarded()) {
        placement::NodeFacts f = placement::facts_from_json(j);
        placement::NodeFacts again = placement::facts_from_json(placement::to_json(f));
        if (placement::facts_content(again) != placement::facts_content(f)) __builtin_trap();
    }
})
