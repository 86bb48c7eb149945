// The network config from stdin, with ipam, nodeSelector, topology, sriov and delegate keys.
#include "conf/netconf.h"
#include "cni/attach/attachment.h"
#include "fuzz.h"

TOPOCNI_FUZZ_TARGET(cni::parse_config(input, {}))
