// The network configuration topocni reads from stdin: plain structs, std::optional for
// everything the user may leave out, so only what was set reaches the kernel.
#pragma once
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "base/result_model.h"
#include "conf/bandwidth.h"
#include "conf/on_refusal.h"
#include "conf/placement.h"
#include "ipam/host_local.h"

namespace conf {

struct NetConf {
    std::string cni_version;             ///< "" is read as "0.1.0" (spec)
    std::string name;
    std::string type;
    /// The attachment kind: the "attachment" key (default veth), or "delegate" when the
    /// config wraps another plugin. Each kind reads its own keys (cni/attach/).
    std::string kind = "veth";

    // link settings
    std::optional<int> mtu;
    std::optional<std::string> mac;       ///< final MAC after precedence (runtimeConfig > CNI_ARGS > config)

    // IPAM
    std::string ipam_type;                ///< "" = L2 only
    std::optional<ipam::Config> host_local;   ///< parsed when ipam_type == "host-local"
    std::vector<base::IpAddr> requested_ips;  ///< CNI_ARGS IP=, args.cni.ips, runtimeConfig.ips

    std::optional<Placement> placement;   ///< set when nodeSelector or topology is given (conf/placement.cc)
    std::optional<Bandwidth> bandwidth;   ///< runtimeConfig.bandwidth, else "bandwidth" (conf/bandwidth.cc)
    OnRefusal on_refusal;                 ///< onRefusal, evictAfterRefusals, evictWindowSeconds (conf/on_refusal.cc)

    std::string state_dir = "/var/lib/cni/topocni";   ///< stateDir: state records, caches
    std::string sysfs_root = "/sys";      ///< sysfsRoot: every sysfs read goes through it

    // logging
    std::optional<std::string> log_file;  ///< logFile
    std::string log_level = "error";      ///< logLevel: error, warning, info, debug

    base::Dns dns;                         ///< top-level "dns"
    std::optional<base::Result> prev_result;
    std::optional<std::vector<ipam::Owner>> valid_attachments;   ///< GC input

    nlohmann::json raw;                   ///< the whole config, as given (for delegation)
    std::vector<std::string> ignored;     ///< Teardown: the errors of keys treated as absent
    std::vector<std::string> unknown_keys;   ///< Setup: keys topocni does not read, near misses first (conf/known_keys.h)
};

/// What of CNI_ARGS the config parser needs (kept separate so conf/ does not depend on cni/env).
struct ArgsView {
    std::optional<std::string> mac;
    std::vector<base::IpAddr> ips;
};

/// What the CNI protocol layer decides while a config is read (cni/ passes cni::kProtocol):
/// which cniVersions it speaks (code 1 otherwise, before any other key is looked at), and
/// how a prevResult of that version is read into the result model.
struct Protocol {
    void (*check_version)(const std::string& version);
    base::Result (*read_result)(const nlohmann::json& j, const std::string& what);
};

/// What the config is parsed for.
enum class Purpose {
    Setup,      ///< ADD, CHECK, STATUS, explain: every key must be valid
    Teardown,   ///< DEL, GC: a key that cannot be read is treated as absent (see parse)
};

/// Parses stdin. Bad JSON is code 6; an invalid config is code 7 naming the key by its
/// path. `cni_args` contributes MAC= and IP=.
///
/// For Teardown, only what locates the attachment's leftovers must be readable: the
/// JSON itself (6), cniVersion (1) and, for GC, cni.dev/valid-attachments (7). Any other
/// key that is invalid is treated as absent and named in `ignored`; an invalid `name`
/// leaves it empty, and the verb then has nothing to look for (nothing can have been
/// added under a name ADD refuses). So a pod whose ADD was refused for, say, a bad
/// nodeSelector can always be torn down.
NetConf parse(const std::string& text, const ArgsView& args, const Protocol& protocol, Purpose purpose = Purpose::Setup);

/// The attachment kind a config names, as parse reads it (NetConf::kind), without checking
/// anything else: for configs kept in records, which only need to be counted by kind.
std::string kind_of(const nlohmann::json& raw);

/// The cniVersion field only, for error objects printed before full parsing succeeds.
std::string peek_version(const std::string& text);

}  // namespace conf
