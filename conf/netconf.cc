#include "conf/netconf.h"

#include <algorithm>

#include "base/text.h"
#include "conf/error.h"
#include "conf/fields.h"
#include "conf/known_keys.h"
#include "netns/netlink.h"

namespace conf {

namespace {

void check_mac(const std::string& mac, const std::string& path) {
    if (!netns::nl::parse_mac(mac)) bad(path, "'" + mac + "' is not a MAC address (aa:bb:cc:dd:ee:ff)");
    auto bytes = *netns::nl::parse_mac(mac);
    if (bytes[0] & 1) bad(path, "'" + mac + "' is a multicast address");
}

std::vector<base::IpAddr> parse_ip_list(const json& obj, const std::string& key, const std::string& path) {
    std::vector<base::IpAddr> out;
    auto strs = opt_strings(obj, key, path);
    for (size_t i = 0; i < strs.size(); ++i) {
        auto s = strs[i].substr(0, strs[i].find('/'));
        auto a = base::IpAddr::parse(s);
        if (!a) bad(index(join(path, key), i), "'" + strs[i] + "' is not an IP address");
        out.push_back(*a);
    }
    return out;
}

/// Teardown's fallback when the ipam object is invalid: the type and, for host-local,
/// dataDir (else its default), which is all a release needs.
void parse_ipam_location(NetConf& c) {
    c.ipam_type.clear();
    c.host_local.reset();
    c.requested_ips.clear();
    auto* ipam = member(c.raw, "ipam");
    if (!ipam || !ipam->is_object()) return;
    auto type = ipam->find("type");
    if (type == ipam->end() || !type->is_string()) return;
    std::string t = type->get<std::string>();
    if (t.empty() || t.find('/') != std::string::npos || t == "." || t == "..") return;
    c.ipam_type = t;
    if (t != "host-local") return;
    auto dir = ipam->find("dataDir");
    if (dir != ipam->end() && !dir->is_null()) {
        // Present but not a usable path: ADD refused it, so nothing is in any store; the
        // default store holds other networks' addresses.
        if (!dir->is_string() || dir->get<std::string>().empty() || dir->get<std::string>()[0] != '/') {
            c.ipam_type.clear();
            return;
        }
    }
    c.host_local.emplace();
    if (dir != ipam->end() && dir->is_string()) c.host_local->data_dir = dir->get<std::string>();
}

void parse_ipam(NetConf& c, const ArgsView& args) {
    auto* ipam = opt_object(c.raw, "ipam", "");
    if (!ipam) return;
    c.ipam_type = opt_string(*ipam, "type", "ipam").value_or("");
    if (c.ipam_type.empty()) {
        if (!ipam->empty()) bad("ipam.type", "missing (an empty ipam means L2 only; remove the other ipam keys)");
        return;
    }
    // Delegation execs CNI_PATH/<type>: a type with a path in it would run anything.
    if (c.ipam_type.find('/') != std::string::npos || c.ipam_type == "." || c.ipam_type == "..")
        bad("ipam.type", "'" + c.ipam_type + "' must be a plugin name, not a path");
    if (c.ipam_type == "host-local") c.host_local = ipam::parse_config(c.raw, c.cni_version);

    // Requested addresses, in host-local's order: CNI_ARGS IP=, args.cni.ips, runtimeConfig.ips.
    for (auto& ip : args.ips) c.requested_ips.push_back(ip);
    if (auto* a = opt_object(c.raw, "args", ""))
        if (auto* cniargs = opt_object(*a, "cni", "args"))
            for (auto& ip : parse_ip_list(*cniargs, "ips", "args.cni")) c.requested_ips.push_back(ip);
    if (auto* rc = opt_object(c.raw, "runtimeConfig", ""))
        if (auto* ips = member_ci(*rc, "ips")) {
            json tmp = {{"ips", *ips}};
            for (auto& ip : parse_ip_list(tmp, "ips", "runtimeConfig")) c.requested_ips.push_back(ip);
        }
}

// The runtime reads "capabilities" to decide what goes into runtimeConfig; a list or a
// non-boolean would be silently ignored by it, so say so here.
void parse_capabilities(const NetConf& c) {
    auto* caps = opt_object(c.raw, "capabilities", "");
    if (!caps) return;
    for (auto it = caps->begin(); it != caps->end(); ++it)
        if (!it->is_boolean())
            bad(label("capabilities", it.key()), "expected true or false, got " + std::string(it->type_name()));
}

void parse_state_dirs(NetConf& c) {
    if (auto d = opt_string(c.raw, "stateDir", "")) {
        if (d->empty() || (*d)[0] != '/') bad("stateDir", "'" + *d + "' must be an absolute path");
        c.state_dir = *d;
    }
    if (auto d = opt_string(c.raw, "sysfsRoot", "")) {
        if (d->empty() || (*d)[0] != '/') bad("sysfsRoot", "'" + *d + "' must be an absolute path");
        c.sysfs_root = *d;
    }
}

void parse_logging(NetConf& c) {
    auto file = opt_string(c.raw, "logFile", "");
    if (file && (file->empty() || (*file)[0] != '/')) bad("logFile", "'" + *file + "' must be an absolute path");
    c.log_file = file;
    if (auto l = opt_string(c.raw, "logLevel", "")) {
        if (*l != "error" && *l != "warning" && *l != "info" && *l != "debug")
            bad("logLevel", "'" + *l + "' is not one of error, warning, info, debug");
        c.log_level = *l;
    }
}

void parse_gc(NetConf& c) {
    // libcni sends both keys (cni#1101): the 1.1.0 text said cni.dev/attachments.
    const json* list = member(c.raw, "cni.dev/valid-attachments");
    std::string key = "cni.dev/valid-attachments";
    if (!list) { list = member(c.raw, "cni.dev/attachments"); key = "cni.dev/attachments"; }
    if (!list) return;
    if (!list->is_array()) bad(key, "expected a list");
    std::vector<ipam::Owner> owners;
    for (size_t i = 0; i < list->size(); ++i) {
        auto& o = (*list)[i];
        std::string p = index(key, i);
        if (!o.is_object()) bad(p, "expected an object with containerID and ifname");
        auto cid = opt_string(o, "containerID", p);
        auto ifn = opt_string(o, "ifname", p);
        if (!cid || cid->empty()) bad(join(p, "containerID"), "missing");
        if (!ifn || ifn->empty()) bad(join(p, "ifname"), "missing");
        owners.push_back({*cid, *ifn});
    }
    c.valid_attachments = std::move(owners);
}

}  // namespace

// libcni (and so Multus) sends "cniVersion": "" for a NAD that has none, and the
// reference plugins read it as 0.1.0, as they read a missing key.
std::string peek_version(const std::string& text) {
    auto j = json::parse(text, nullptr, false);
    if (!j.is_object()) return {};
    auto it = j.find("cniVersion");
    if (it == j.end() || it->is_null()) return "0.1.0";
    if (!it->is_string()) return {};
    return it->get<std::string>().empty() ? "0.1.0" : it->get<std::string>();
}

NetConf parse(const std::string& input, const ArgsView& args, const Protocol& protocol, Purpose purpose) {
    NetConf c;
    // Teardown reads bytes that are not UTF-8 as Go's encoding/json does (U+FFFD), so a
    // config ADD could not decode still lets DEL run; nothing was added under it.
    std::string replaced;
    if (purpose == Purpose::Teardown && !base::valid_utf8(input)) replaced = base::utf8_replaced(input);
    const std::string& text = replaced.empty() ? input : replaced;
    // Depth is bounded by nlohmann's recursive parser; guard against stack exhaustion
    // from hostile, deeply nested input before handing it over.
    int depth = 0, max_depth = 0;
    bool in_str = false, esc = false;
    for (char ch : text) {
        if (in_str) { if (esc) esc = false; else if (ch == '\\') esc = true; else if (ch == '"') in_str = false; continue; }
        if (ch == '"') in_str = true;
        else if (ch == '{' || ch == '[') max_depth = std::max(max_depth, ++depth);
        else if (ch == '}' || ch == ']') --depth;
    }
    if (max_depth > 64) throw Error(Error::Kind::Decoding, "failed to decode config: nested deeper than 64 levels");
    try {
        c.raw = json::parse(text);
    } catch (const json::exception& e) {
        throw Error(Error::Kind::Decoding, std::string("failed to decode config: ") + e.what());
    }
    if (!c.raw.is_object()) throw Error(Error::Kind::Decoding, "failed to decode config: not a JSON object");

    // Missing and "" both mean 0.1.0 (libcni sends "" for a NAD without cniVersion).
    // Teardown reads a cniVersion that is no string as missing, like any other bad key.
    auto* version = member(c.raw, "cniVersion");
    if (version && !version->is_string() && purpose == Purpose::Teardown)
        c.ignored.push_back("cniVersion: expected a string, got " + std::string(version->type_name()));
    else
        c.cni_version = opt_string(c.raw, "cniVersion", "").value_or("");
    if (c.cni_version.empty()) c.cni_version = "0.1.0";
    protocol.check_version(c.cni_version);

    // Each group of keys is one step; for teardown a step that fails is dropped (its
    // keys keep their defaults) and remembered, so DEL still deletes what it can find.
    const bool teardown = purpose == Purpose::Teardown;
    auto step = [&](auto&& parse_keys) {
        if (!teardown) return parse_keys();
        try {
            parse_keys();
        } catch (const base::Error& e) {
            if (!is_invalid_config(e)) throw;
            c.ignored.push_back(e.what());
        }
    };

    step([&] {
        auto name = opt_string(c.raw, "name", "").value_or("");
        if (name.empty()) bad("name", "missing");
        // The name becomes a directory under dataDir and stateDir.
        if (!base::valid_container_id(name))
            bad("name", "'" + name + "' has invalid characters (allowed: [a-zA-Z0-9][a-zA-Z0-9_.-]*)");
        if (name.size() > 253) bad("name", "longer than 253 characters");
        c.name = name;
    });
    step([&] { c.type = opt_string(c.raw, "type", "").value_or(""); });
    step([&] {
        // Which kind reads the rest: "delegate" wraps another plugin, "attachment" names
        // one of ours. The kind itself is looked up, and reads its keys, in cni/attach/.
        opt_string(c.raw, "attachment", "");   // a string when present
        if (member(c.raw, "delegate") && member(c.raw, "attachment"))
            bad("delegate", "cannot be combined with \"attachment\" (the delegate is the attachment)");
        c.kind = kind_of(c.raw);
    });
    step([&] { if (auto mtu = opt_int(c.raw, "mtu", "", 68, 65535)) c.mtu = static_cast<int>(*mtu); });
    step([&] {
        // MAC precedence: runtimeConfig.mac > CNI_ARGS MAC= > config mac.
        if (auto m = opt_string(c.raw, "mac", "")) { check_mac(*m, "mac"); c.mac = *m; }
        if (args.mac) { check_mac(*args.mac, "CNI_ARGS MAC"); c.mac = *args.mac; }
        if (auto* rc = opt_object(c.raw, "runtimeConfig", "")) {
            if (auto* m = member_ci(*rc, "mac")) {
                if (!m->is_string()) bad("runtimeConfig.mac", "expected a string");
                check_mac(m->get<std::string>(), "runtimeConfig.mac");
                c.mac = m->get<std::string>();
            }
        }
    });
    step([&] {
        if (auto* dns = opt_object(c.raw, "dns", "")) {
            c.dns.nameservers = opt_strings(*dns, "nameservers", "dns");
            c.dns.domain = opt_string(*dns, "domain", "dns").value_or("");
            c.dns.search = opt_strings(*dns, "search", "dns");
            c.dns.options = opt_strings(*dns, "options", "dns");
        }
    });
    step([&] {
        try {
            parse_state_dirs(c);
        } catch (const base::Error&) {
            // Nothing can be found through a stateDir or sysfsRoot ADD refuses; the defaults
            // are other attachments' places.
            if (teardown) c.name.clear();
            throw;
        }
    });
    step([&] { parse_logging(c); });
    step([&] { parse_capabilities(c); });
    step([&] {
        try {
            parse_ipam(c, args);
        } catch (const base::Error&) {
            // Releasing needs only the type and the store's place.
            if (teardown) parse_ipam_location(c);
            throw;
        }
    });
    step([&] { parse_placement(c); });
    step([&] { parse_bandwidth(c); });
    step([&] { parse_on_refusal(c); });
    step([&] { if (auto* prev = member(c.raw, "prevResult")) c.prev_result = protocol.read_result(*prev, "prevResult"); });
    parse_gc(c);   // GC's input: never ignored, a wrong list would release the wrong things
    if (!teardown) c.unknown_keys = unknown_keys(c.raw);
    return c;
}

std::string kind_of(const nlohmann::json& raw) {
    if (member(raw, "delegate")) return "delegate";
    auto* a = member(raw, "attachment");
    return a && a->is_string() ? a->get<std::string>() : "veth";
}

}  // namespace conf
