#include "conf/on_refusal.h"

#include "conf/fields.h"
#include "conf/netconf.h"

namespace conf {

void parse_on_refusal(NetConf& c) {
    const json& j = c.raw;
    OnRefusal o;
    if (auto p = opt_string(j, "onRefusal", "")) {
        if (*p != "wait" && *p != "evict") bad("onRefusal", "'" + *p + "' is not one of wait, evict");
        o.evict = *p == "evict";
    }
    // Bounds: a record keeps the times of the last `after` refusals, so `after` bounds its
    // size; a window under 10 s is shorter than kubelet's first sandbox retries.
    if (auto n = opt_int(j, "evictAfterRefusals", "", 1, 100)) o.after = static_cast<int>(*n);
    if (auto t = opt_int(j, "evictWindowSeconds", "", 10, 86400)) o.window_seconds = static_cast<int>(*t);
    c.on_refusal = o;
}

}  // namespace conf
