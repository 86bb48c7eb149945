// rtnetlink over the libmnl-style helpers of netns/mnl.h: a bounds-checked message
// builder, one send/receive loop that keeps the kernel's extended-ack text, and the
// link/address/route operations on top.
#include "netns/netlink.h"

#include <linux/if_link.h>
#include <linux/rtnetlink.h>
#include <linux/veth.h>
#include <net/if.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <ctime>
#include <functional>
#include <memory>
#include <system_error>

#include "netns/error.h"
#include "netns/mnl.h"
#include "netns/nlmsg.h"

using namespace netns::mnl;   // the libmnl-compatible helpers

namespace netns::nl {
namespace {

// A dump is flagged NLM_F_DUMP_INTR when links/addresses/routes change while the kernel
// walks them (interface churn on a busy node), so the result may be inconsistent. Retry
// from scratch a bounded number of times rather than act on a torn view or loop forever.
constexpr int kMaxDumpAttempts = 5;

// Dump replies are built by the kernel in skbs of at most 32 KiB (it sizes them from our
// recvmsg buffer), so a smaller buffer would truncate multi-part replies. A single reply
// can be larger: a PF's RTM_GETLINK with VF info carries ~240 bytes per VF even without
// stats, so 256 VFs need about 60 KiB.
constexpr size_t kRecvBufferSize = 128 * 1024;

std::string errno_text(int err) { return std::generic_category().message(err); }

// Not "quoted": with <iomanip> in sight (the precompiled header) a call on a std::string
// would find std::quoted by argument-dependent lookup too.
std::string in_quotes(const std::string& s) { return "'" + s + "'"; }

/// The kernel's verdict on one request.
struct Reply {
    int err = 0;              ///< positive errno, 0 on success
    std::string extack;       ///< NLMSGERR_ATTR_MSG, if the kernel gave one
    bool interrupted = false; ///< NLM_F_DUMP_INTR seen on any part of a dump
};

/// Reads the error code and extended-ack text of an NLMSG_ERROR (or NLMSG_DONE) reply.
/// Like iproute2's nl_dump_ext_ack: TLVs follow the echoed request, which with
/// NETLINK_CAP_ACK is only its header.
void parse_error(const nlmsghdr* h, Reply& r) {
    size_t len = mnl_nlmsg_get_payload_len(h);
    size_t tlv_offset;
    if (h->nlmsg_type == NLMSG_DONE) {
        if (len < sizeof(int)) return;   // a plain end of dump
        r.err = -*static_cast<const int*>(mnl_nlmsg_get_payload(h));
        tlv_offset = sizeof(int);
    } else {
        if (len < sizeof(nlmsgerr)) { r.err = EBADMSG; return; }
        auto* e = static_cast<const nlmsgerr*>(mnl_nlmsg_get_payload(h));
        r.err = -e->error;
        tlv_offset = sizeof(nlmsgerr);
        if (!(h->nlmsg_flags & NLM_F_CAPPED)) tlv_offset += e->msg.nlmsg_len - sizeof(nlmsghdr);
    }
    if (r.err == 0) return;   // an ACK's TLVs are only warnings
    if (!(h->nlmsg_flags & NLM_F_ACK_TLVS) || tlv_offset > len) return;
    Attrs<NLMSGERR_ATTR_MAX> tb;
    tb.parse(h, tlv_offset);
    r.extack = tb.str(NLMSGERR_ATTR_MSG);
}

std::optional<Link> parse_link(const nlmsghdr* h) {
    if (h->nlmsg_type != RTM_NEWLINK || mnl_nlmsg_get_payload_len(h) < sizeof(ifinfomsg)) return std::nullopt;
    auto* ifi = static_cast<const ifinfomsg*>(mnl_nlmsg_get_payload(h));
    Attrs<IFLA_MAX> tb;
    tb.parse(h, sizeof(ifinfomsg));
    Link l;
    l.index = ifi->ifi_index;
    l.flags = ifi->ifi_flags;
    l.name = tb.str(IFLA_IFNAME);
    if (tb[IFLA_ADDRESS])
        l.mac = format_mac(static_cast<const uint8_t*>(mnl_attr_get_payload(tb[IFLA_ADDRESS])),
                           mnl_attr_get_payload_len(tb[IFLA_ADDRESS]));
    l.mtu = int(tb.u32(IFLA_MTU).value_or(0));
    l.master = int(tb.u32(IFLA_MASTER).value_or(0));
    l.link = int(tb.u32(IFLA_LINK).value_or(0));
    if (auto id = tb.u32(IFLA_LINK_NETNSID)) l.link_netnsid = int32_t(*id);
    l.operstate = tb.u8(IFLA_OPERSTATE).value_or(0);
    l.alias = tb.str(IFLA_IFALIAS);

    Attrs<IFLA_INFO_MAX> info;
    info.parse_nested(tb[IFLA_LINKINFO]);
    l.kind = info.str(IFLA_INFO_KIND);
    if (l.kind == "macvlan") {
        Attrs<IFLA_MACVLAN_MAX> data;
        data.parse_nested(info[IFLA_INFO_DATA]);
        l.macvlan_mode = data.u32(IFLA_MACVLAN_MODE);
    }
    return l;
}

std::optional<Addr> parse_addr(const nlmsghdr* h) {
    if (h->nlmsg_type != RTM_NEWADDR || mnl_nlmsg_get_payload_len(h) < sizeof(ifaddrmsg)) return std::nullopt;
    auto* ifa = static_cast<const ifaddrmsg*>(mnl_nlmsg_get_payload(h));
    Attrs<IFA_MAX> tb;
    tb.parse(h, sizeof(ifaddrmsg));
    // For v4, IFA_LOCAL is the interface's own address; IFA_ADDRESS is the peer on
    // point-to-point links. v6 only sends IFA_ADDRESS (plus IFA_LOCAL for peer setups).
    auto ip = tb.ip(IFA_LOCAL, ifa->ifa_family);
    if (!ip) ip = tb.ip(IFA_ADDRESS, ifa->ifa_family);
    if (!ip) return std::nullopt;
    return Addr{{*ip, ifa->ifa_prefixlen}, int(ifa->ifa_index),
                tb.u32(IFA_FLAGS).value_or(ifa->ifa_flags), ifa->ifa_scope};
}

std::optional<RouteSpec> parse_route(const nlmsghdr* h) {
    if (h->nlmsg_type != RTM_NEWROUTE || mnl_nlmsg_get_payload_len(h) < sizeof(rtmsg)) return std::nullopt;
    auto* rtm = static_cast<const rtmsg*>(mnl_nlmsg_get_payload(h));
    // RouteSpec describes unicast routes only; local/broadcast/blackhole... are not ours.
    if (rtm->rtm_type != RTN_UNICAST) return std::nullopt;
    Attrs<RTA_MAX> tb;
    tb.parse(h, sizeof(rtmsg));
    RouteSpec r;
    r.dst.prefix = rtm->rtm_dst_len;
    r.dst.addr.family = rtm->rtm_family;   // the zero address of the family when no RTA_DST
    if (auto d = tb.ip(RTA_DST, rtm->rtm_family)) r.dst.addr = *d;
    r.gw = tb.ip(RTA_GATEWAY, rtm->rtm_family);
    r.src = tb.ip(RTA_PREFSRC, rtm->rtm_family);
    r.oif = int(tb.u32(RTA_OIF).value_or(0));
    r.scope = rtm->rtm_scope;
    r.table = tb.u32(RTA_TABLE).value_or(rtm->rtm_table);
    r.priority = tb.u32(RTA_PRIORITY);
    r.protocol = rtm->rtm_protocol;
    Attrs<RTAX_MAX> metrics;
    metrics.parse_nested(tb[RTA_METRICS]);
    r.mtu = metrics.u32(RTAX_MTU);
    r.advmss = metrics.u32(RTAX_ADVMSS);
    return r;
}

/// One receive buffer per thread, shared by its sockets: a socket reads only inside
/// exchange(), and nothing an exchange calls starts another one. (As a member it made
/// every Socket a 128 KiB allocation: an mmap, page faults and a munmap, several per
/// ADD. A thread_local array would be zeroed at every process start instead.)
char* recv_buffer() {
    static thread_local std::unique_ptr<char[]> buf;   // new[] is aligned for any header
    if (!buf) buf.reset(new char[kRecvBufferSize]);
    return buf.get();
}

}  // namespace

struct Socket::Impl {
    mnl_socket* nl = nullptr;
    ~Impl() {
        if (nl) mnl_socket_close(nl);
    }
    uint32_t seq = uint32_t(std::time(nullptr));

    /// Sends one request and reads replies up to its ACK, error or end of dump; every
    /// other message with our sequence number goes to on_msg.
    Reply exchange(Msg& m, const std::function<void(const nlmsghdr*)>& on_msg = {}) { return exchange(m.nlh(), on_msg); }

    Reply exchange(nlmsghdr* req, const std::function<void(const nlmsghdr*)>& on_msg) {
        req->nlmsg_seq = ++seq;
        Reply r;
        if (mnl_socket_sendto(nl, req, req->nlmsg_len) < 0) return {errno};
        char* rbuf = recv_buffer();
        for (;;) {
            ssize_t n = mnl_socket_recvfrom(nl, rbuf, kRecvBufferSize);
            if (n < 0) {
                if (errno == EINTR) continue;
                return {errno};
            }
            int left = int(n);
            for (auto* h = reinterpret_cast<const nlmsghdr*>(rbuf); mnl_nlmsg_ok(h, left);
                 h = mnl_nlmsg_next(h, &left)) {
                // Late replies to an earlier request abandoned by an exception.
                if (h->nlmsg_seq != seq) continue;
                if (h->nlmsg_flags & NLM_F_DUMP_INTR) r.interrupted = true;
                if (h->nlmsg_type == NLMSG_ERROR || h->nlmsg_type == NLMSG_DONE) {
                    parse_error(h, r);
                    return r;
                }
                if (h->nlmsg_type >= NLMSG_MIN_TYPE && on_msg) on_msg(h);
            }
        }
    }

    /// Like exchange, but a non-zero errno other than those in `ok` throws.
    int call(Msg& m, const std::string& what, std::initializer_list<int> ok = {},
             const std::function<void(const nlmsghdr*)>& on_msg = {}) {
        Reply r = exchange(m, on_msg);
        if (r.err == 0) return 0;
        for (int e : ok)
            if (r.err == e) return r.err;
        fail(what, r);
    }

    [[noreturn]] static void fail(const std::string& what, const Reply& r) {
        std::string msg = "failed to " + what + ": " + errno_text(r.err);
        if (!r.extack.empty()) msg += ": " + r.extack;
        throw netns::Error(netns::Error::Kind::Failed, msg, {}, r.err);
    }

    /// Runs a dump, retrying from scratch while the kernel reports it as interrupted.
    template <class T, class Parse>
    std::vector<T> dump(Msg& m, const std::string& what, Parse parse) {
        std::vector<T> out;
        for (int attempt = 0; attempt < kMaxDumpAttempts; ++attempt) {
            out.clear();
            Reply r = exchange(m, [&](const nlmsghdr* h) {
                if (auto v = parse(h)) out.push_back(std::move(*v));
            });
            if (r.err) fail(what, r);
            if (!r.interrupted) return out;
        }
        throw netns::Error(netns::Error::Kind::Failed,
                         "failed to " + what + ": dump interrupted by concurrent changes " +
                             std::to_string(kMaxDumpAttempts) + " times",
                         {}, EINTR);
    }

    std::optional<Link> get_link(int index, const std::string& name) {
        if (index <= 0 && name.empty()) return std::nullopt;   // the kernel would say EINVAL
        Msg m(RTM_GETLINK, 0);
        m.header<ifinfomsg>()->ifi_index = index;
        if (!name.empty()) m.str(IFLA_IFNAME, name);
        std::optional<Link> link;
        auto what = "get link " + (name.empty() ? in_quotes("#" + std::to_string(index)) : in_quotes(name));
        if (call(m, what, {ENODEV}, [&](const nlmsghdr* h) { link = parse_link(h); })) return std::nullopt;
        return link;
    }

    /// A link's name for an error message; falls back to its index (never throws).
    std::string label(int index) {
        try {
            if (auto l = get_link(index, {})) return in_quotes(l->name);
        } catch (const base::Error&) {
        }
        return in_quotes("#" + std::to_string(index));
    }

    /// Throws for a failed request about a link, naming it only now: the lookup costs a
    /// round trip we do not want on the success path.
    [[noreturn]] void fail_link(int index, const std::function<std::string(const std::string&)>& what,
                                const Reply& r) {
        fail(what(label(index)), r);
    }

    /// RTM_NEWLINK on an existing link: change one property.
    void modify(int index, const std::function<std::string(const std::string&)>& what,
                const std::function<void(Msg&, ifinfomsg*)>& fill) {
        Msg m(RTM_NEWLINK, 0);
        auto* ifi = m.header<ifinfomsg>();
        ifi->ifi_index = index;
        fill(m, ifi);
        if (Reply r = exchange(m); r.err) fail_link(index, what, r);
    }
};

Socket::Socket() : impl_(std::make_unique<Impl>()) {
    auto fail = [](const char* what) {
        int err = errno;
        throw netns::Error(netns::Error::Kind::Failed, std::string("failed to ") + what + " netlink socket: " + errno_text(err),
                         {}, err);
    };
    impl_->nl = mnl_socket_open2(NETLINK_ROUTE, SOCK_CLOEXEC);
    if (!impl_->nl) fail("open");
    if (mnl_socket_bind(impl_->nl, 0, MNL_SOCKET_AUTOPID) < 0) fail("bind");
    // Extended acks carry the kernel's explanation ("mtu greater than device maximum"...);
    // capped acks keep error replies small by not echoing our request back.
    int one = 1;
    if (mnl_socket_setsockopt(impl_->nl, NETLINK_EXT_ACK, &one, sizeof(one)) < 0) fail("configure");
    if (mnl_socket_setsockopt(impl_->nl, NETLINK_CAP_ACK, &one, sizeof(one)) < 0) fail("configure");
}

Socket::~Socket() = default;

// --- links ---

std::optional<Link> Socket::get_link(const std::string& name) { return impl_->get_link(0, name); }

std::optional<Link> Socket::get_link(int index) { return impl_->get_link(index, {}); }

std::vector<Link> Socket::list_links() {
    Msg m(RTM_GETLINK, NLM_F_DUMP);
    m.header<ifinfomsg>();
    return impl_->dump<Link>(m, "list links", parse_link);
}

void Socket::create_veth(const VethSpec& s) {
    Msg m(RTM_NEWLINK, NLM_F_CREATE | NLM_F_EXCL);
    m.header<ifinfomsg>();
    m.str(IFLA_IFNAME, s.name);
    if (s.mtu) m.u32(IFLA_MTU, *s.mtu);
    // MACs are set at creation: changing them afterwards races with udev's
    // MACAddressPolicy, which may rewrite the address of a freshly added link.
    if (s.mac) m.mac(IFLA_ADDRESS, *s.mac);
    {
        Nest info(m, IFLA_LINKINFO);
        m.str(IFLA_INFO_KIND, "veth");
        Nest data(m, IFLA_INFO_DATA);
        // The peer is described like a link of its own: ifinfomsg, then its attributes.
        Nest peer(m, VETH_INFO_PEER);
        m.header<ifinfomsg>();
        m.str(IFLA_IFNAME, s.peer_name);
        if (s.peer_netns_fd >= 0) m.u32(IFLA_NET_NS_FD, s.peer_netns_fd);
        if (s.mtu) m.u32(IFLA_MTU, *s.mtu);
        if (s.peer_mac) m.mac(IFLA_ADDRESS, *s.peer_mac);
    }
    impl_->call(m, "create veth " + in_quotes(s.name) + " (peer " + in_quotes(s.peer_name) + ")");
}

void Socket::create_macvlan(const MacvlanSpec& s) {
    Msg m(RTM_NEWLINK, NLM_F_CREATE | NLM_F_EXCL);
    m.header<ifinfomsg>();
    m.str(IFLA_IFNAME, s.name);
    m.u32(IFLA_LINK, s.master_index);   // resolved in the socket's netns, even with IFLA_NET_NS_FD
    if (s.netns_fd >= 0) m.u32(IFLA_NET_NS_FD, s.netns_fd);
    if (s.mtu) m.u32(IFLA_MTU, *s.mtu);
    if (s.mac) m.mac(IFLA_ADDRESS, *s.mac);
    {
        Nest info(m, IFLA_LINKINFO);
        m.str(IFLA_INFO_KIND, "macvlan");
        Nest data(m, IFLA_INFO_DATA);
        m.u32(IFLA_MACVLAN_MODE, s.mode);
    }
    impl_->call(m, "create macvlan " + in_quotes(s.name));
}

Link Socket::ensure_bridge(const std::string& name, std::optional<int> mtu) {
    Msg m(RTM_NEWLINK, NLM_F_CREATE | NLM_F_EXCL);
    m.header<ifinfomsg>();
    m.str(IFLA_IFNAME, name);
    if (mtu) m.u32(IFLA_MTU, *mtu);
    {
        Nest info(m, IFLA_LINKINFO);
        m.str(IFLA_INFO_KIND, "bridge");
    }
    impl_->call(m, "create bridge " + in_quotes(name), {EEXIST});
    auto link = get_link(name);
    if (!link) netns::fail("bridge " + in_quotes(name) + " vanished right after creation", ENODEV);
    if (link->kind != "bridge") netns::fail_invalid(in_quotes(name) + " already exists but is not a bridge");
    return *link;
}

void Socket::set_up(int index) {
    impl_->modify(index, [](auto& l) { return "bring up link " + l; }, [](Msg&, ifinfomsg* ifi) {
        ifi->ifi_flags = IFF_UP;
        ifi->ifi_change = IFF_UP;
    });
}

void Socket::set_down(int index) {
    impl_->modify(index, [](auto& l) { return "bring down link " + l; },
                  [](Msg&, ifinfomsg* ifi) { ifi->ifi_change = IFF_UP; });
}

void Socket::set_master(int index, int master_index) {
    impl_->modify(
        index,
        [&](auto& l) {
            return master_index ? "attach link " + l + " to " + impl_->label(master_index)
                                : "release link " + l + " from its master";
        },
        [&](Msg& m, ifinfomsg*) { m.u32(IFLA_MASTER, master_index); });
}

void Socket::rename(int index, const std::string& new_name) {
    impl_->modify(index, [&](auto& l) { return "rename link " + l + " to " + in_quotes(new_name); },
                  [&](Msg& m, ifinfomsg*) { m.str(IFLA_IFNAME, new_name); });
}

void Socket::set_mac(int index, const std::string& mac) {
    impl_->modify(index, [&](auto& l) { return "set MAC " + in_quotes(mac) + " on link " + l; },
                  [&](Msg& m, ifinfomsg*) { m.mac(IFLA_ADDRESS, mac); });
}

void Socket::set_mtu(int index, int mtu) {
    impl_->modify(index, [&](auto& l) { return "set MTU " + std::to_string(mtu) + " on link " + l; },
                  [&](Msg& m, ifinfomsg*) { m.u32(IFLA_MTU, mtu); });
}

void Socket::set_alias(int index, const std::string& alias) {
    impl_->modify(index, [&](auto& l) { return "set alias on link " + l; },
                  [&](Msg& m, ifinfomsg*) { m.str(IFLA_IFALIAS, alias); });
}

void Socket::set_netns(int index, int netns_fd) {
    impl_->modify(index, [](auto& l) { return "move link " + l + " to another netns"; },
                  [&](Msg& m, ifinfomsg*) { m.u32(IFLA_NET_NS_FD, netns_fd); });
}

void Socket::move_link(int index, int netns_fd, const std::string& name) {
    // do_setlink moves first (using IFLA_IFNAME as the name to take if the current one is
    // in use in the target), then renames the link, now in the target, to IFLA_IFNAME.
    impl_->modify(index, [&](auto& l) { return "move link " + l + " to another netns as " + in_quotes(name); },
                  [&](Msg& m, ifinfomsg*) {
                      m.u32(IFLA_NET_NS_FD, netns_fd);
                      m.str(IFLA_IFNAME, name);
                  });
}

void Socket::request(nlmsghdr* msg, const std::string& what, const std::function<void(const nlmsghdr*)>& on_msg) {
    msg->nlmsg_flags |= NLM_F_REQUEST | NLM_F_ACK;
    if (Reply r = impl_->exchange(msg, on_msg); r.err) Impl::fail(what, r);
}

bool Socket::del_link(int index) {
    Msg m(RTM_DELLINK, 0);
    m.header<ifinfomsg>()->ifi_index = index;
    Reply r = impl_->exchange(m);
    if (r.err == ENODEV) return false;
    if (r.err) impl_->fail_link(index, [](auto& l) { return "delete link " + l; }, r);
    return true;
}

bool Socket::del_link(const std::string& name) {
    Msg m(RTM_DELLINK, 0);
    m.header<ifinfomsg>();
    m.str(IFLA_IFNAME, name);
    return impl_->call(m, "delete link " + in_quotes(name), {ENODEV}) == 0;
}

// --- addresses ---

void Socket::add_addr(int index, const base::IpNet& addr, bool nodad, uint8_t scope) {
    add_addr_flags(index, addr, nodad && !addr.addr.is_v4() ? IFA_F_NODAD : 0, scope);
}

void Socket::add_addr_flags(int index, const base::IpNet& addr, uint32_t flags, uint8_t scope) {
    Msg m(RTM_NEWADDR, NLM_F_CREATE | NLM_F_EXCL);
    auto* ifa = m.header<ifaddrmsg>();
    ifa->ifa_family = addr.addr.family;
    ifa->ifa_prefixlen = addr.prefix;
    ifa->ifa_scope = scope;
    ifa->ifa_index = index;
    m.ip(IFA_ADDRESS, addr.addr);
    if (addr.addr.is_v4()) {
        m.ip(IFA_LOCAL, addr.addr);
        // Like the Go plugins (vishvananda/netlink), give v4 subnets their broadcast address.
        if (addr.prefix < 31 && !(flags & IFA_F_NOPREFIXROUTE)) m.ip(IFA_BROADCAST, addr.last());
        flags &= ~uint32_t(IFA_F_NODAD);   // DAD is an IPv6 notion
    }
    if (flags) m.u32(IFA_FLAGS, flags);
    Reply r = impl_->exchange(m);
    if (r.err && r.err != EEXIST)
        impl_->fail_link(
            index, [&](auto& l) { return "add address " + in_quotes(addr.str()) + " to link " + l; }, r);
}

void Socket::del_addr(int index, const base::IpNet& addr) {
    Msg m(RTM_DELADDR, 0);
    auto* ifa = m.header<ifaddrmsg>();
    ifa->ifa_family = addr.addr.family;
    ifa->ifa_prefixlen = addr.prefix;
    ifa->ifa_index = index;
    m.ip(IFA_ADDRESS, addr.addr);
    if (addr.addr.is_v4()) m.ip(IFA_LOCAL, addr.addr);
    // A missing address (or a link already gone, taking its addresses) is the goal state.
    Reply r = impl_->exchange(m);
    if (r.err && r.err != EADDRNOTAVAIL && r.err != ENODEV)
        impl_->fail_link(
            index, [&](auto& l) { return "delete address " + in_quotes(addr.str()) + " from link " + l; }, r);
}

std::vector<Addr> Socket::list_addrs(int family, int index) {
    Msg m(RTM_GETADDR, NLM_F_DUMP);
    m.header<ifaddrmsg>()->ifa_family = family;
    return impl_->dump<Addr>(m, "list addresses", [&](const nlmsghdr* h) {
        auto a = parse_addr(h);
        if (a && index && a->index != index) a.reset();
        return a;
    });
}

// --- routes ---

namespace {

/// rtmsg + the attributes that identify a route (shared by add and delete).
void put_route(Msg& m, const RouteSpec& r) {
    int family = r.dst.addr.family ? r.dst.addr.family : r.gw ? r.gw->family : 0;
    if (family != AF_INET && family != AF_INET6) netns::fail_invalid("route has no address family");
    auto* rtm = m.header<rtmsg>();
    rtm->rtm_family = family;
    rtm->rtm_dst_len = r.dst.prefix;
    // rtm_table is 8 bits; larger table ids only fit in RTA_TABLE (as iproute2 does).
    rtm->rtm_table = r.table < 256 ? r.table : RT_TABLE_UNSPEC;
    if (r.table >= 256) m.u32(RTA_TABLE, r.table);
    if (r.dst.prefix > 0) m.ip(RTA_DST, r.dst.addr);
    if (r.gw) m.ip(RTA_GATEWAY, *r.gw);
    if (r.oif) m.u32(RTA_OIF, r.oif);
    if (r.priority) m.u32(RTA_PRIORITY, *r.priority);
}

std::string route_label(const RouteSpec& r) {
    std::string s = in_quotes(r.dst.str());
    if (r.gw) s += " via " + r.gw->str();
    return s;
}

}  // namespace

void Socket::add_route(const RouteSpec& r) {
    Msg m(RTM_NEWROUTE, NLM_F_CREATE | NLM_F_EXCL);
    put_route(m, r);
    auto* rtm = static_cast<rtmsg*>(mnl_nlmsg_get_payload(m.nlh()));
    rtm->rtm_protocol = r.protocol;
    rtm->rtm_scope = r.scope;
    rtm->rtm_type = RTN_UNICAST;
    if (r.src) m.ip(RTA_PREFSRC, *r.src);
    if (r.mtu || r.advmss) {
        Nest metrics(m, RTA_METRICS);
        if (r.mtu) m.u32(RTAX_MTU, *r.mtu);
        if (r.advmss) m.u32(RTAX_ADVMSS, *r.advmss);
    }
    impl_->call(m, "add route " + route_label(r), {EEXIST});
}

void Socket::del_route(const RouteSpec& r) {
    Msg m(RTM_DELROUTE, 0);
    put_route(m, r);
    // Scope NOWHERE, protocol and type 0 are wildcards: delete whatever matches dst/gw/oif.
    static_cast<rtmsg*>(mnl_nlmsg_get_payload(m.nlh()))->rtm_scope = RT_SCOPE_NOWHERE;
    // v4 reports a missing route as ESRCH, v6 as ENOENT.
    impl_->call(m, "delete route " + route_label(r), {ESRCH, ENOENT});
}

std::vector<RouteSpec> Socket::list_routes(int family, int oif, uint32_t table) {
    Msg m(RTM_GETROUTE, NLM_F_DUMP);
    m.header<rtmsg>()->rtm_family = family;
    return impl_->dump<RouteSpec>(m, "list routes", [&](const nlmsghdr* h) {
        auto r = parse_route(h);
        if (r && ((family && r->dst.addr.family != family) || (oif && r->oif != oif) ||
                  (table && r->table != table)))
            r.reset();
        return r;
    });
}

std::optional<std::vector<uint8_t>> parse_mac(const std::string& s) {
    // Exactly "xx:xx:xx:xx:xx:xx": 17 characters, a colon after every octet but the last.
    if (s.size() != 17) return std::nullopt;
    auto nibble = [](char c) -> int {
        if (c >= '0' && c <= '9') return c - '0';
        if (c >= 'a' && c <= 'f') return c - 'a' + 10;
        if (c >= 'A' && c <= 'F') return c - 'A' + 10;
        return -1;
    };
    std::vector<uint8_t> out;
    for (size_t i = 0; i < 17; i += 3) {
        int hi = nibble(s[i]), lo = nibble(s[i + 1]);
        if (hi < 0 || lo < 0 || (i + 2 < 17 && s[i + 2] != ':')) return std::nullopt;
        out.push_back(uint8_t(hi << 4 | lo));
    }
    return out;
}

std::optional<std::string> default_route_interface(Socket& s) {
    for (int family : {AF_INET, AF_INET6})
        for (auto& r : s.list_routes(family))
            if (r.dst.prefix == 0 && r.oif)
                if (auto l = s.get_link(r.oif)) return l->name;
    return std::nullopt;
}

}  // namespace netns::nl
