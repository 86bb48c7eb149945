#include "ipam/store.h"

namespace ipam {

namespace {

// Go's strings.TrimSpace, for the ASCII whitespace that can occur here.
std::string_view trim(std::string_view s) {
    constexpr std::string_view ws = " \t\n\v\f\r";
    auto b = s.find_first_not_of(ws);
    if (b == std::string_view::npos) return {};
    return s.substr(b, s.find_last_not_of(ws) - b + 1);
}

}  // namespace

std::string reservation_content(const Owner& o) { return std::string(trim(o.container_id)) + "\r\n" + o.ifname; }

Reservation parse_reservation(const base::IpAddr& ip, std::string_view content) {
    auto t = trim(content);
    auto sep = t.find("\r\n");
    if (sep == std::string_view::npos) return {ip, std::string(t), ""};
    return {ip, std::string(t.substr(0, sep)), std::string(t.substr(sep + 2))};
}

bool held_by(const Reservation& r, const Owner& o) {
    return !r.ifname.empty() && r.container_id == trim(o.container_id) && r.ifname == o.ifname;
}

bool legacy_of(const Reservation& r, const Owner& o) {
    return r.ifname.empty() && !r.container_id.empty() && r.container_id == trim(o.container_id);
}

}  // namespace ipam
