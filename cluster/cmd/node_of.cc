#include "cluster/cmd/commands.h"

#include <cstdlib>

#include "placement/placement.h"

namespace cluster::cmd {

std::string node_of(const std::string& flag) {
    if (!flag.empty()) return flag;
    if (const char* n = ::getenv("NODE_NAME"); n && *n) return n;
    return placement::node_name(conf::Placement{});
}

}  // namespace cluster::cmd
