// The result model, always the newest (1.1.0) shape internally. cni/result.cc reads
// results of every version into it and prints it in whichever version the config asks.
#pragma once
#include <optional>
#include <string>
#include <vector>

#include "base/ip.h"

namespace base {

struct Route {
    base::IpNet dst;
    std::optional<base::IpAddr> gw;
    std::optional<int> mtu, advmss, priority, table, scope;   // 1.1.0 fields
    bool operator==(const Route&) const = default;
};

struct Dns {
    std::vector<std::string> nameservers;
    std::string domain;
    std::vector<std::string> search;
    std::vector<std::string> options;
    bool empty() const { return nameservers.empty() && domain.empty() && search.empty() && options.empty(); }
};

struct Interface {
    std::string name;
    std::string mac;
    std::optional<int> mtu;
    std::string sandbox;      ///< CNI_NETNS for pod interfaces; empty on the host side
    std::string socket_path;
    std::string pci_id;
};

struct IpConfig {
    base::IpNet address;                  ///< address with the subnet's prefix
    std::optional<base::IpAddr> gateway;
    std::optional<int> interface;         ///< index into Result::interfaces
};

struct Result {
    std::vector<Interface> interfaces;
    std::vector<IpConfig> ips;
    std::vector<Route> routes;
    Dns dns;
};

}  // namespace base
