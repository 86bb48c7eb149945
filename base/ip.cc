#include "base/ip.h"

#include <arpa/inet.h>
#include <charconv>
#include <algorithm>
#include <cstring>

namespace base {

std::optional<IpAddr> IpAddr::parse(std::string_view s) {
    if (s.empty() || s.size() > INET6_ADDRSTRLEN) return std::nullopt;
    std::string z(s);
    IpAddr a;
    if (inet_pton(AF_INET, z.c_str(), a.b.data()) == 1) { a.family = AF_INET; return a; }
    if (inet_pton(AF_INET6, z.c_str(), a.b.data()) == 1) {
        // Go prints v4-mapped v6 addresses as v4; host-local canonicalises them the same way.
        static const uint8_t mapped[12] = {0,0,0,0,0,0,0,0,0,0,0xff,0xff};
        if (std::memcmp(a.b.data(), mapped, 12) == 0) {
            std::memmove(a.b.data(), a.b.data() + 12, 4);
            std::memset(a.b.data() + 4, 0, 12);
            a.family = AF_INET;
        } else {
            a.family = AF_INET6;
        }
        return a;
    }
    return std::nullopt;
}

std::string IpAddr::str() const {
    char buf[INET6_ADDRSTRLEN] = {};
    if (family == 0 || !inet_ntop(family, b.data(), buf, sizeof buf)) return "<invalid>";
    return buf;
}

IpAddr IpAddr::next() const {
    IpAddr r = *this;
    for (int i = size() - 1; i >= 0; --i)
        if (++r.b[i] != 0) break;
    return r;
}

IpAddr IpAddr::prev() const {
    IpAddr r = *this;
    for (int i = size() - 1; i >= 0; --i)
        if (r.b[i]-- != 0) break;
    return r;
}

std::optional<IpNet> IpNet::parse(std::string_view s) {
    auto slash = s.find('/');
    if (slash == std::string_view::npos) return std::nullopt;
    auto a = IpAddr::parse(s.substr(0, slash));
    if (!a) return std::nullopt;
    auto p = s.substr(slash + 1);
    int prefix = -1;
    auto [ptr, ec] = std::from_chars(p.data(), p.data() + p.size(), prefix);
    if (p.empty() || ec != std::errc() || ptr != p.data() + p.size()) return std::nullopt;
    if (prefix < 0 || prefix > a->bits()) return std::nullopt;
    return IpNet{*a, prefix};
}

std::string IpNet::str() const { return addr.str() + "/" + std::to_string(prefix); }

IpNet IpNet::network() const {
    IpNet n = *this;
    for (int i = 0; i < addr.size(); ++i) {
        int keep = std::clamp(prefix - i * 8, 0, 8);
        n.addr.b[i] &= static_cast<uint8_t>(0xff00 >> keep);
    }
    return n;
}

IpAddr IpNet::last() const {
    IpAddr a = network().addr;
    for (int i = 0; i < a.size(); ++i) {
        int keep = std::clamp(prefix - i * 8, 0, 8);
        a.b[i] |= static_cast<uint8_t>(0xff >> keep);
    }
    return a;
}

bool IpNet::contains(const IpAddr& a) const {
    if (a.family != addr.family) return false;
    return IpNet{a, prefix}.network().addr == network().addr;
}

IpNet host_prefix(const IpAddr& a) { return IpNet{a, a.bits()}; }

}  // namespace base
