// A thin rtnetlink client over libmnl. One request at a time, always with NLM_F_ACK;
// a kernel error becomes netns::Error carrying errno (sys_errno) and the kernel's own
// extended-ack text. The socket lives in the netns of the thread that created it.
#pragma once
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "base/result_model.h"
#include "base/ip.h"
#include "base/fd.h"

struct nlmsghdr;

namespace netns::nl {

struct Link {
    int index = 0;
    std::string name;
    std::string kind;            ///< IFLA_INFO_KIND: "veth", "macvlan", "bridge", "" for physical
    std::string mac;             ///< "aa:bb:cc:dd:ee:ff" (lower case); empty if none
    int mtu = 0;
    unsigned flags = 0;          ///< IFF_UP etc.
    int master = 0;              ///< IFLA_MASTER ifindex, 0 if none
    int link = 0;                ///< IFLA_LINK (veth peer ifindex / macvlan lower), 0 if none
    std::optional<int> link_netnsid;  ///< IFLA_LINK_NETNSID if present
    std::optional<uint32_t> macvlan_mode;  ///< IFLA_MACVLAN_MODE for macvlan links
    uint8_t operstate = 0;       ///< IFLA_OPERSTATE
    std::string alias;           ///< IFLA_IFALIAS (topocni marks its host links with it)
};

struct Addr {
    base::IpNet net;             ///< address/prefix
    int index = 0;
    unsigned flags = 0;          ///< IFA_F_* (from IFA_FLAGS when present)
    uint8_t scope = 0;
};

struct RouteSpec {
    base::IpNet dst;             ///< prefix (host bits cleared by caller)
    std::optional<base::IpAddr> gw;
    int oif = 0;                 ///< output ifindex
    std::optional<base::IpAddr> src;  ///< preferred source
    uint8_t scope = 0;           ///< RT_SCOPE_UNIVERSE(0), LINK(253), HOST(254)
    uint32_t table = 254;        ///< RT_TABLE_MAIN
    std::optional<uint32_t> priority;
    std::optional<uint32_t> mtu;     ///< RTAX_MTU
    std::optional<uint32_t> advmss;  ///< RTAX_ADVMSS
    uint8_t protocol = 4;        ///< RTPROT_STATIC; kernel-made routes are RTPROT_KERNEL(2)
};

struct VethSpec {
    std::string name;            ///< this end, created in the socket's netns
    std::string peer_name;
    int peer_netns_fd = -1;      ///< where the peer goes (-1: same netns)
    std::optional<int> mtu;      ///< both ends
    std::optional<std::string> mac;       ///< this end
    std::optional<std::string> peer_mac;
};

struct MacvlanSpec {
    std::string name;
    int master_index = 0;
    uint32_t mode = 4;           ///< MACVLAN_MODE_BRIDGE
    std::optional<int> mtu;
    std::optional<std::string> mac;
    int netns_fd = -1;           ///< create directly in this netns (-1: same netns)
};

class Socket {
public:
    Socket();                    ///< opens NETLINK_ROUTE in the current thread's netns
    ~Socket();
    Socket(const Socket&) = delete;
    Socket& operator=(const Socket&) = delete;

    // --- links ---
    std::optional<Link> get_link(const std::string& name);   ///< nullopt if no such link
    std::optional<Link> get_link(int index);
    std::vector<Link> list_links();
    void create_veth(const VethSpec& spec);
    void create_macvlan(const MacvlanSpec& spec);
    /// Creates a bridge if absent (EEXIST is fine); returns it; throws if `name` exists
    /// and is not a bridge.
    Link ensure_bridge(const std::string& name, std::optional<int> mtu);
    void set_up(int index);
    void set_down(int index);
    void set_master(int index, int master_index);   ///< 0 = release
    void rename(int index, const std::string& new_name);
    void set_mac(int index, const std::string& mac);
    void set_mtu(int index, int mtu);
    void set_netns(int index, int netns_fd);
    void set_alias(int index, const std::string& alias);
    /// Deletes a link; returns false if it did not exist.
    bool del_link(int index);
    bool del_link(const std::string& name);

    // --- addresses ---
    /// Adds addr with IFA_F_NODAD when nodad (v6); EEXIST is ignored.
    void add_addr(int index, const base::IpNet& addr, bool nodad = false, uint8_t scope = 0);
    /// Same with raw IFA_F_* flags (IFA_F_NODAD, IFA_F_NOPREFIXROUTE...).
    void add_addr_flags(int index, const base::IpNet& addr, uint32_t flags, uint8_t scope = 0);
    void del_addr(int index, const base::IpNet& addr);   ///< missing address is fine
    std::vector<Addr> list_addrs(int family, int index = 0);   ///< index 0 = all links

    // --- routes ---
    void add_route(const RouteSpec& r);                  ///< EEXIST is ignored
    void del_route(const RouteSpec& r);                  ///< ESRCH/ENOENT is ignored
    /// Unicast routes of the main table (or `table`; 0 = every table), filtered by family
    /// (0 = both) and optionally oif.
    std::vector<RouteSpec> list_routes(int family, int oif = 0, uint32_t table = 254);

    // --- moving links, prebuilt requests (netns/vf.cc) ---
    /// Moves a link into another netns and names it `name` there, in one request: when
    /// its current name is taken in the target the kernel takes `name` at once, so the
    /// link never collides there. The move brings the link down.
    void move_link(int index, int netns_fd, const std::string& name);
    /// Sends one request built by the caller (type, flags, payload; NLM_F_REQUEST and
    /// NLM_F_ACK are added) and passes every reply message to on_msg. A kernel error
    /// throws like every operation here: "failed to <what>: <errno text>[: <extack>]".
    void request(nlmsghdr* msg, const std::string& what, const std::function<void(const nlmsghdr*)>& on_msg = {});

private:
    struct Impl;
    std::unique_ptr<Impl> impl_;
};

/// "aa:bb:cc:dd:ee:ff" -> 6 bytes; nullopt if malformed. Also used by config validation.
std::optional<std::vector<uint8_t>> parse_mac(const std::string& s);

/// The interface of the node's first default route (IPv4, then IPv6), as the reference
/// macvlan plugin picks a master when none is configured.
std::optional<std::string> default_route_interface(Socket& s);

}  // namespace netns::nl
