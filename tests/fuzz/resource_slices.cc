// The ResourceSlices a LIST returns, as `topocni dra-driver` reads them back (any JSON: our
// slices, strays, other drivers', broken ones), and the devices it offers from a facts
// document, each checked against the API's rules.
#include "cluster/dra_slices.h"
#include "cluster/dra_sync.h"
#include "fuzz.h"
#include "placement/node_facts.h"

TOPOCNI_FUZZ_TARGET({
    auto j = nlohmann::json::parse(input, nullptr, false);
    if (!j.is_discarded()) {
        std::vector<nlohmann::json> items;
        if (j.is_array()) items.assign(j.begin(), j.end());
        else items.push_back(j);
        cluster::dra::SliceSync sync("w1", "topocni.io");
        (void)sync.read_held(items);
        try {
            auto facts = placement::facts_from_json(j);
            (void)cluster::dra::devices(facts, {});   // validate_device throws base::Error for a bad one
        } catch (const base::Error&) {
        }
    }
})
