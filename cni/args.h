// CNI_ARGS: "K=V;K=V". Unlike the reference plugins we never fail on an unknown key:
// chained plugins all see the same CNI_ARGS (cni#560), and Multus and kubelet add keys
// freely. Key order never matters, a repeated key takes its last value, and a value
// may contain '=' (split on the first one, as Multus does).
#pragma once
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "base/ip.h"

namespace cni {

struct Args {
    std::map<std::string, std::string> all;   ///< every pair, verbatim
    bool ignore_unknown = false;
    std::vector<base::IpAddr> ips;            ///< IP=<ip>[/<prefix>][,<ip>...] (Multus joins with ',')
    std::optional<std::string> mac;           ///< MAC=
    std::string pod_namespace, pod_name, pod_infra_container_id, pod_uid;

    /// Throws code 4 naming CNI_ARGS and the bad pair.
    static Args parse(const std::string& s);
};

}  // namespace cni
