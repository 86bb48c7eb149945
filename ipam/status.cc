#include "ipam/status.h"

#include "cni/error.h"
#include "ipam/range.h"

namespace ipam {

void check_status(Store& store, const std::vector<RangeSet>& sets, const std::string& dir) {
    try {
        store.check_writable();
    } catch (const cni::Error& e) {
        throw cni::Error(cni::kNotAvailable, "store directory '" + dir + "' is not writable: " + e.what(), {}, e.sys_errno);
    }
    auto taken = store.addresses();
    for (size_t i = 0; i < sets.size(); ++i)
        if (!has_free(sets[i], taken))
            throw cni::Error(cni::kNotAvailable, "range set " + std::to_string(i) + " (" + to_string(sets[i]) +
                                                     ") has no free address");
}

}  // namespace ipam
