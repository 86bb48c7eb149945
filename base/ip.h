// IP addresses and prefixes, v4 and v6, in one small value type. Formatting follows
// Go's net.IP.String() (dotted quad; RFC 5952 for v6) because host-local's file
// names are exactly that string.
#pragma once
#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <sys/socket.h>

namespace base {

struct IpAddr {
    int family = 0;                    ///< AF_INET or AF_INET6; 0 = unset
    std::array<uint8_t, 16> b{};       ///< network order; v4 uses b[0..3]

    static std::optional<IpAddr> parse(std::string_view s);   ///< "10.0.0.1" or "fd00::1"
    std::string str() const;
    bool is_v4() const { return family == AF_INET; }
    int size() const { return is_v4() ? 4 : 16; }   ///< bytes
    int bits() const { return size() * 8; }
    IpAddr next() const;               ///< +1, wrapping
    IpAddr prev() const;               ///< -1, wrapping
    auto operator<=>(const IpAddr&) const = default;
};

struct IpNet {
    IpAddr addr;                       ///< may have host bits set (an interface address)
    int prefix = 0;

    static std::optional<IpNet> parse(std::string_view s);    ///< "10.0.0.5/24"
    std::string str() const;           ///< "10.0.0.5/24"
    IpNet network() const;             ///< host bits cleared
    IpAddr last() const;               ///< all host bits set
    bool contains(const IpAddr& a) const;
    bool operator==(const IpNet&) const = default;
};

/// Host route for one address: /32 or /128.
IpNet host_prefix(const IpAddr& a);

}  // namespace base
