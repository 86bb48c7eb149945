#include "ipam/owner_index.h"
#include "base/hash.h"

#include <cctype>
#include <cstdint>
#include <cstdio>

namespace ipam {

namespace {

constexpr std::string_view kHeader = "# topocni owner index v1\n";
constexpr size_t kMaxName = 200;

bool plain(unsigned char c) { return std::isalnum(c) || c == '.' || c == '-'; }

std::string escape(std::string_view s) {
    std::string out;
    for (size_t i = 0; i < s.size(); ++i) {
        auto c = static_cast<unsigned char>(s[i]);
        if (plain(c) && !(i == 0 && c == '.')) {
            out += static_cast<char>(c);
        } else {
            char buf[4];
            std::snprintf(buf, sizeof buf, "%%%02X", c);
            out += buf;
        }
    }
    return out;
}

int hex(char c) {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
}

std::optional<std::string> unescape(std::string_view s) {
    std::string out;
    for (size_t i = 0; i < s.size(); ++i) {
        if (s[i] != '%') { out += s[i]; continue; }
        if (i + 2 >= s.size() || hex(s[i + 1]) < 0 || hex(s[i + 2]) < 0) return std::nullopt;
        out += static_cast<char>(hex(s[i + 1]) * 16 + hex(s[i + 2]));
        i += 2;
    }
    return out;
}

}  // namespace

std::string index_file_name(const Owner& o) {
    std::string name = escape(o.container_id) + "_" + escape(o.ifname);
    if (name.size() <= kMaxName) return name;
    // Two differently seeded 64-bit FNV-1a hashes; a collision would only make the
    // hint useless (the owner line inside would not match), never wrong.
    std::string key = o.container_id + '\0' + o.ifname;
    char buf[40];
    std::snprintf(buf, sizeof buf, "h-%016llx%016llx", static_cast<unsigned long long>(base::fnv1a64(key)),
                  static_cast<unsigned long long>(base::fnv1a64(key, 0x84222325cbf29ce4ULL)));
    return buf;
}

std::string format_index(const OwnerIndex& idx) {
    std::string out(kHeader);
    out += "cid=" + escape(idx.owner.container_id) + "\n";
    out += "ifname=" + escape(idx.owner.ifname) + "\n";
    for (auto& ip : idx.ips) out += "ip=" + ip.str() + "\n";
    return out;
}

std::optional<OwnerIndex> parse_index(std::string_view content) {
    if (content.substr(0, kHeader.size()) != kHeader) return std::nullopt;
    content.remove_prefix(kHeader.size());
    OwnerIndex idx;
    bool have_cid = false, have_if = false;
    while (!content.empty()) {
        auto nl = content.find('\n');
        if (nl == std::string_view::npos) return std::nullopt;   // torn write
        auto line = content.substr(0, nl);
        content.remove_prefix(nl + 1);
        auto eq = line.find('=');
        if (eq == std::string_view::npos) return std::nullopt;
        auto key = line.substr(0, eq), value = line.substr(eq + 1);
        if (key == "ip") {
            auto ip = base::IpAddr::parse(value);
            if (!ip) return std::nullopt;
            idx.ips.push_back(*ip);
            continue;
        }
        auto text = unescape(value);
        if (!text) return std::nullopt;
        if (key == "cid") { idx.owner.container_id = *text; have_cid = true; }
        else if (key == "ifname") { idx.owner.ifname = *text; have_if = true; }
    }
    if (!have_cid || !have_if) return std::nullopt;
    return idx;
}

}  // namespace ipam
