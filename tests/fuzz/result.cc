// prevResult of every version, and conversion to every version.
#include <nlohmann/json.hpp>

#include "cni/result.h"
#include "cni/version.h"
#include "fuzz.h"

TOPOCNI_FUZZ_TARGET({
    auto j = nlohmann::json::parse(input, nullptr, false);
    if (j.is_discarded()) return 0;
    auto r = cni::result_from_json(j, "prevResult");
    for (auto& v : cni::supported_versions()) {
        try {
            auto out = cni::result_to_json(r, v);
            (void)cni::result_from_json(out, "converted");
        } catch (const base::Error&) {
        }
    }
})
