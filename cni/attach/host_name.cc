#include "cni/attach/host_name.h"

#include <cstdint>
#include <cstdio>
#include <sstream>

#include "base/hash.h"
#include "netns/netlink.h"

namespace cni {

namespace {
uint64_t attachment_hash(const std::string& container_id, const std::string& ifname) {
    return base::fnv1a64(container_id + '\0' + ifname, base::kNameSeed);
}
}  // namespace

std::string host_link_name(const std::string& container_id, const std::string& ifname) {
    char buf[16];
    std::snprintf(buf, sizeof buf, "veth%011llx",
                  static_cast<unsigned long long>(attachment_hash(container_id, ifname) & 0xfffffffffffull));
    return buf;
}

std::string ifb_link_name(const std::string& container_id, const std::string& ifname) {
    char buf[16];
    std::snprintf(buf, sizeof buf, "ifb%012llx",
                  static_cast<unsigned long long>(attachment_hash(container_id, ifname) & 0xffffffffffffull));
    return buf;
}

std::string owner_alias(const std::string& network, const std::string& container_id, const std::string& ifname) {
    return "topocni " + network + " " + container_id + " " + ifname;
}

std::optional<AliasOwner> parse_owner_alias(const std::string& alias) {
    std::istringstream in(alias);
    std::string tag;
    AliasOwner o;
    if (!(in >> tag >> o.network >> o.container_id >> o.ifname) || tag != "topocni") return std::nullopt;
    return o;
}

void gc_host_links(Context& ctx, const std::string& kind) {
    netns::nl::Socket h;
    // Attachments known from their records, even when the host link never got its alias
    // (a crash between creating the link and marking it).
    auto name_of = kind == "ifb" ? ifb_link_name : host_link_name;
    if (ctx.stale)
        for (auto& r : *ctx.stale)
            if (auto l = h.get_link(name_of(r.container_id, r.ifname)); l && l->kind == kind)
                try { h.del_link(l->index); } catch (...) {}
    const auto& valid = ctx.conf.valid_attachments;
    for (auto& l : h.list_links()) {
        if (l.kind != kind) continue;
        auto owner = parse_owner_alias(l.alias);
        if (!owner || owner->network != ctx.conf.name) continue;
        bool keep = false;
        if (valid)
            for (auto& v : *valid) keep = keep || (v.container_id == owner->container_id && v.ifname == owner->ifname);
        if (keep) continue;
        try { h.del_link(l.index); } catch (...) {}
    }
}

}  // namespace cni
