// Reading and printing results in every spec version (reference §1.7).
#pragma once
#include <string>

#include <nlohmann/json.hpp>

#include "base/result_model.h"

namespace conf {
struct Protocol;
}

namespace cni {

// The result model lives below every layer (IPAM fills it, netlink applies it); the
// protocol reads and prints it, and cni code names it unqualified.
using base::Dns;
using base::Interface;
using base::IpConfig;
using base::Result;
using base::Route;

/// Prints a result in `version`'s shape. 0.1.0/0.2.0 need at least one IP (an L2-only
/// result cannot be expressed there): code 1 otherwise.
nlohmann::json result_to_json(const Result& r, const std::string& version);
/// Reads a result of any version (0.1.0 ip4/ip6 form, 0.3.x-0.4.0 with ips[].version,
/// 1.x). `path` names it in errors ("prevResult"). Bad content is code 7.
Result result_from_json(const nlohmann::json& j, const std::string& path);
/// Prints an error object in the spec's shape.
nlohmann::json error_to_json(int code, const std::string& msg, const std::string& details, const std::string& version);

/// What conf::parse asks the protocol: the cniVersions spoken (cni/version.h) and how a
/// prevResult is read (result_from_json).
extern const conf::Protocol kProtocol;

/// CHECK: the prevResult interface named `ifname` in sandbox `netns` (kCheckFailed if none).
const Interface& expected_pod_interface(const Result& prev, const std::string& ifname, const std::string& netns);

}  // namespace cni
