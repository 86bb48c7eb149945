#include "cni/args.h"

#include <strings.h>

#include "cni/error.h"
#include "netns/netlink.h"

namespace cni {

namespace {
[[noreturn]] void bad(const std::string& why) { throw Error(kInvalidEnv, "CNI_ARGS: " + why); }
}

Args Args::parse(const std::string& s) {
    Args a;
    size_t pos = 0;
    while (pos <= s.size()) {
        size_t end = s.find(';', pos);
        if (end == std::string::npos) end = s.size();
        std::string pair = s.substr(pos, end - pos);
        pos = end + 1;
        if (pair.empty()) continue;   // tolerate "A=1;;B=2" and a trailing ';'
        auto eq = pair.find('=');
        if (eq == std::string::npos || eq == 0) bad("invalid pair '" + pair + "', expected KEY=VALUE");
        a.all[pair.substr(0, eq)] = pair.substr(eq + 1);
    }
    for (auto& [k, v] : a.all) {
        if (k == "IgnoreUnknown") {
            if (strcasecmp(v.c_str(), "1") && strcasecmp(v.c_str(), "true") && strcasecmp(v.c_str(), "0") &&
                strcasecmp(v.c_str(), "false"))
                bad("IgnoreUnknown='" + v + "' must be 1, true, 0 or false");
            a.ignore_unknown = !strcasecmp(v.c_str(), "1") || !strcasecmp(v.c_str(), "true");
        } else if (k == "IP") {
            size_t p = 0;
            while (p <= v.size()) {
                size_t comma = v.find(',', p);
                if (comma == std::string::npos) comma = v.size();
                std::string one = v.substr(p, comma - p);
                p = comma + 1;
                auto slash = one.find('/');
                auto ip = base::IpAddr::parse(one.substr(0, slash));
                if (!ip || (slash != std::string::npos && !base::IpNet::parse(one)))
                    bad("IP='" + v + "' is not an IP address (or a comma-separated list of them)");
                a.ips.push_back(*ip);
            }
        } else if (k == "MAC") {
            if (!netns::nl::parse_mac(v)) bad("MAC='" + v + "' is not a MAC address");
            a.mac = v;
        } else if (k == "K8S_POD_NAMESPACE") a.pod_namespace = v;
        else if (k == "K8S_POD_NAME") a.pod_name = v;
        else if (k == "K8S_POD_INFRA_CONTAINER_ID") a.pod_infra_container_id = v;
        else if (k == "K8S_POD_UID") a.pod_uid = v;
    }
    return a;
}

}  // namespace cni
