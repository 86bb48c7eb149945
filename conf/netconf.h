// The network configuration topocni reads from stdin: plain structs, std::optional for
// everything the user may leave out, so only what was set reaches the kernel.
#pragma once
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "base/types.h"
#include "conf/bandwidth.h"
#include "conf/placement.h"
#include "cni/attach/sriov_conf.h"
#include "ipam/host_local.h"

namespace conf {

enum class Attachment { Veth, Macvlan, Sriov };

struct NetConf {
    std::string cni_version;             ///< "" is read as "0.1.0" (spec)
    std::string name;
    std::string type;
    Attachment attachment = Attachment::Veth;

    // link settings
    std::optional<int> mtu;
    std::optional<std::string> mac;       ///< final MAC after precedence (runtimeConfig > CNI_ARGS > config)

    // veth
    std::optional<std::string> bridge;    ///< enslave the host end to this bridge
    bool is_gateway = false;              ///< bridge: gateway addresses on the bridge

    // macvlan
    std::optional<std::string> master;    ///< default: the interface of the node's default route
    std::string macvlan_mode = "bridge";  ///< bridge, private, vepa, passthru
    bool link_in_container = false;       ///< look the master up inside the pod netns

    // IPAM
    std::string ipam_type;                ///< "" = L2 only
    std::optional<ipam::Config> host_local;   ///< parsed when ipam_type == "host-local"
    std::vector<base::IpAddr> requested_ips;  ///< CNI_ARGS IP=, args.cni.ips, runtimeConfig.ips

    // SR-IOV (conf/sriov.cc) and placement (conf/placement.cc) parse their own keys.
    std::optional<SriovConf> sriov;       ///< set when attachment == sriov
    std::optional<Placement> placement;   ///< set when nodeSelector or topology is given
    std::optional<nlohmann::json> delegate;   ///< meta-plugin mode: the wrapped plugin's config
    std::optional<Bandwidth> bandwidth;   ///< runtimeConfig.bandwidth, else "bandwidth" (conf/bandwidth.cc)

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
};

/// What of CNI_ARGS the config parser needs (kept separate so conf/ does not depend on cni/env).
struct ArgsView {
    std::optional<std::string> mac;
    std::vector<base::IpAddr> ips;
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
NetConf parse(const std::string& text, const ArgsView& args, Purpose purpose = Purpose::Setup);

/// The cniVersion field only, for error objects printed before full parsing succeeds.
std::string peek_version(const std::string& text);

}  // namespace conf
