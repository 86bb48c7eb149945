#include "conf/error.h"

#include "ipam/error.h"
#include "netns/error.h"

namespace conf {

bool is_invalid_config(const base::Error& e) {
    if (auto* c = dynamic_cast<const Error*>(&e)) return c->kind == Error::Kind::Invalid;
    if (auto* i = dynamic_cast<const ipam::Error*>(&e)) return i->kind == ipam::Error::Kind::Invalid;
    if (auto* n = dynamic_cast<const netns::Error*>(&e)) return n->kind == netns::Error::Kind::Invalid;
    return false;
}

}  // namespace conf
