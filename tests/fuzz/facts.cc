// The node facts document a consumer reads from a Node's topocni.io/facts annotation:
// strict parse, and a document that parses must print back to one that parses to the
// same content. (The WATCH lines around it are fuzzed by watch_line.cc.)
#include "cni/placement/node_facts.h"
#include "fuzz.h"

TOPOCNI_FUZZ_TARGET({
    auto j = nlohmann::json::parse(input, nullptr, false);
    if (!j.is_discarded()) {
        cni::NodeFacts f = cni::facts_from_json(j);
        cni::NodeFacts again = cni::facts_from_json(cni::to_json(f));
        if (cni::facts_content(again) != cni::facts_content(f)) __builtin_trap();
    }
})
