#include "ipam/gc.h"

#include <algorithm>

namespace ipam {

namespace {

bool still_valid(const Reservation& r, const std::vector<Owner>& valid) {
    return std::any_of(valid.begin(), valid.end(),
                       [&](const Owner& o) { return held_by(r, o) || legacy_of(r, o); });
}

}  // namespace

std::vector<Reservation> collect_garbage(Store& store, const std::vector<Owner>& valid) {
    std::vector<Reservation> released;
    for (auto& r : store.all()) {
        if (still_valid(r, valid)) continue;
        store.remove(r);
        released.push_back(r);
    }
    store.tidy_index();
    return released;
}

}  // namespace ipam
