#include "conf/known_keys.h"

#include <algorithm>
#include <cctype>

#include "conf/fields.h"

namespace conf {

namespace {

using json = nlohmann::json;

// Every top-level key some part of topocni reads: the common keys, each kind's
// (cni/attach/), placement's, and what runtimes and Multus send.
const std::initializer_list<const char*> kTopLevel = {
    "cniVersion", "name", "type", "attachment", "mtu", "mac", "dns", "ipam", "stateDir", "sysfsRoot", "logFile",
    "logLevel", "runtimeConfig", "bandwidth", "args", "capabilities", "prevResult", "cni.dev/valid-attachments",
    "cni.dev/attachments", "deviceID", "pciBusID", "delegate", "nodeSelector", "nodeName", "nodeLabelsFile",
    "kubeconfig", "nodeLabelsTTL", "apiTimeout", "kubeletRootDir", "topology",
    // veth, macvlan, sriov
    "bridge", "isGateway", "master", "mode", "linkInContainer", "vlan", "vlanQoS", "vlanProto", "spoofchk", "trust",
    "link_state", "min_tx_rate", "max_tx_rate"};
const std::initializer_list<const char*> kHostLocal = {"type",    "ranges",  "subnet",     "rangeStart",
                                                       "rangeEnd", "gateway", "routes",     "dataDir",
                                                       "resolvConf", "lockTimeout", "fsync"};
const std::initializer_list<const char*> kRange = {"subnet", "rangeStart", "rangeEnd", "gateway"};
const std::initializer_list<const char*> kRoute = {"dst", "gw", "mtu", "advmss", "priority", "table", "scope"};
const std::initializer_list<const char*> kDns = {"nameservers", "domain", "search", "options"};

std::string lower(const std::string& s) {
    std::string out = s;
    for (auto& ch : out) ch = static_cast<char>(std::tolower(static_cast<unsigned char>(ch)));
    return out;
}

/// Edits between a and b (insert, delete, replace, swap of neighbours).
size_t distance(const std::string& a, const std::string& b) {
    std::vector<std::vector<size_t>> d(a.size() + 1, std::vector<size_t>(b.size() + 1));
    for (size_t i = 0; i <= a.size(); ++i) d[i][0] = i;
    for (size_t j = 0; j <= b.size(); ++j) d[0][j] = j;
    for (size_t i = 1; i <= a.size(); ++i)
        for (size_t j = 1; j <= b.size(); ++j) {
            size_t cost = a[i - 1] == b[j - 1] ? 0 : 1;
            d[i][j] = std::min({d[i - 1][j] + 1, d[i][j - 1] + 1, d[i - 1][j - 1] + cost});
            if (i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1])
                d[i][j] = std::min(d[i][j], d[i - 2][j - 2] + 1);
        }
    return d[a.size()][b.size()];
}

bool known(const std::string& key, std::initializer_list<const char*> keys) {
    return std::any_of(keys.begin(), keys.end(), [&](const char* k) { return key == k; });
}

std::string listing(std::initializer_list<const char*> keys) {
    std::string out;
    for (auto* k : keys) out += (out.empty() ? "" : ", ") + std::string(k);
    return out;
}

/// Every key of `obj` not in `keys`, each with a did-you-mean or the list of keys.
void check_object(const json& obj, const std::string& path, std::initializer_list<const char*> keys,
                  std::vector<std::string>& out) {
    if (!obj.is_object()) return;
    for (auto it = obj.begin(); it != obj.end(); ++it) {
        if (known(it.key(), keys)) continue;
        auto hint = did_you_mean(it.key(), keys);
        out.push_back(join(path, it.key()) + ": unknown key, ignored" +
                      (hint.empty() ? " (known: " + listing(keys) + ")" : hint));
    }
}

void check_list(const json* list, const std::string& path, std::initializer_list<const char*> keys,
                std::vector<std::string>& out) {
    if (!list || !list->is_array()) return;
    for (size_t i = 0; i < list->size(); ++i) check_object((*list)[i], index(path, i), keys, out);
}

}  // namespace

std::string near_miss(const std::string& key, std::initializer_list<const char*> keys) {
    std::string k = lower(key), best;
    size_t best_d = key.size() <= 4 ? 1 : 2;
    for (auto* candidate : keys) {
        size_t d = distance(k, lower(candidate));
        if (d < best_d || (d == best_d && best.empty())) {
            best = candidate;
            best_d = d;
        }
    }
    return best;
}

std::string did_you_mean(const std::string& key, std::initializer_list<const char*> keys) {
    auto m = near_miss(key, keys);
    return m.empty() ? "" : " (did you mean \"" + m + "\"?)";
}

std::vector<std::string> unknown_keys(const json& raw) {
    std::vector<std::string> out;
    if (!raw.is_object()) return out;
    // Top level: another tool's key is allowed, a near miss of ours is a typo.
    for (auto it = raw.begin(); it != raw.end(); ++it)
        if (!known(it.key(), kTopLevel))
            if (auto m = near_miss(it.key(), kTopLevel); !m.empty())
                out.push_back(it.key() + ": unknown key, ignored (did you mean \"" + m + "\"?)");
    // host-local's object is ours; another IPAM plugin's keys are its own.
    if (auto* ipam = member(raw, "ipam"); ipam && ipam->is_object() && ipam->value("type", json()) == "host-local") {
        check_object(*ipam, "ipam", kHostLocal, out);
        if (auto* ranges = member(*ipam, "ranges"); ranges && ranges->is_array())
            for (size_t i = 0; i < ranges->size(); ++i) check_list(&(*ranges)[i], index("ipam.ranges", i), kRange, out);
        check_list(member(*ipam, "routes"), "ipam.routes", kRoute, out);
    }
    if (auto* dns = member(raw, "dns")) check_object(*dns, "dns", kDns, out);
    return out;
}

}  // namespace conf
