#include "ipam/status.h"

#include "ipam/error.h"
#include "ipam/range.h"

namespace ipam {

void check_status(Store& store, const std::vector<RangeSet>& sets, const std::string& dir) {
    try {
        store.check_writable();
    } catch (const base::Error& e) {
        throw Error(Error::Kind::Unavailable, "store directory '" + dir + "' is not writable: " + e.what(), {}, e.sys_errno);
    }
    auto taken = store.addresses();
    for (size_t i = 0; i < sets.size(); ++i)
        if (!has_free(sets[i], taken))
            throw Error(Error::Kind::Unavailable, "range set " + std::to_string(i) + " (" + to_string(sets[i]) +
                                                     ") has no free address");
}

}  // namespace ipam
