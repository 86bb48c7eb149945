// Placement constraints: nodeSelector and topology.
#pragma once
#include <optional>
#include <string>

namespace conf {

struct NetConf;

struct Placement {
};

/// Fills c.placement (nodeSelector, topology, ...) and c.delegate; code 7 naming the key.
void parse_placement(NetConf& c);

}  // namespace conf
