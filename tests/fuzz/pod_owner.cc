// The Pod object the refusal agent GETs before an eviction (its uid, deletionTimestamp and
// controller ownerReference), and the Status body of the eviction's answer.
#include "fuzz.h"
#include "kube/eviction.h"

TOPOCNI_FUZZ_TARGET({
    auto j = nlohmann::json::parse(input, nullptr, false);
    (void)kube::eviction_answer({429, input});
    if (!j.is_discarded()) (void)kube::pod_view(j);
})
