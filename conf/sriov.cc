#include "conf/sriov.h"

#include "conf/netconf.h"

namespace conf {

void parse_sriov(NetConf& c) { (void)c; }

}  // namespace conf
