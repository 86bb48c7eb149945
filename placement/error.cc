#include "placement/error.h"

#include "kube/error.h"

namespace placement {

bool is_unavailable(const base::Error& e) {
    if (auto* p = dynamic_cast<const Error*>(&e)) return p->kind == Error::Kind::NotYet;
    if (auto* k = dynamic_cast<const kube::Error*>(&e)) return k->kind == kube::Error::Kind::Unavailable;
    return dynamic_cast<const base::LockTimeout*>(&e) != nullptr;
}

}  // namespace placement
