#include "conf/placement.h"

#include "conf/netconf.h"

namespace conf {

void parse_placement(NetConf& c) { (void)c; }

}  // namespace conf
