#include "netns/tc.h"

#include <linux/if_ether.h>
#include <linux/netlink.h>
#include <linux/pkt_sched.h>
#include <linux/tc_act/tc_mirred.h>
#include <net/if.h>
#include <sys/socket.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <memory>
#include <system_error>

#include <netlink/attr.h>
#include <netlink/handlers.h>
#include <netlink/netlink.h>
#include <netlink/route/act/mirred.h>
#include <netlink/route/action.h>
#include <netlink/route/classifier.h>
#include <netlink/route/cls/u32.h>
#include <netlink/route/link.h>
#include <netlink/route/qdisc.h>
#include <netlink/route/qdisc/tbf.h>
#include <netlink/route/tc.h>
#include <netlink/socket.h>
#include <netlink/utils.h>

#include "netns/error.h"

// The static release binary defers libnl's start-up registrations (bin/static_guards.cc);
// other builds run them from libnl's constructors and have no such function.
extern "C" void topocni_nl_replay() __attribute__((weak));

namespace netns::tc {

namespace {

// Owning handles for libnl objects: each freed (or its reference dropped) with its own function.
struct SockFree { void operator()(nl_sock* s) const { nl_socket_free(s); } };
struct CbPut { void operator()(nl_cb* c) const { nl_cb_put(c); } };
struct QdiscPut { void operator()(rtnl_qdisc* q) const { rtnl_qdisc_put(q); } };
struct ClsPut { void operator()(rtnl_cls* c) const { rtnl_cls_put(c); } };
struct ActPut { void operator()(rtnl_act* a) const { rtnl_act_put(a); } };
struct LinkPut { void operator()(rtnl_link* l) const { rtnl_link_put(l); } };
struct CacheFree { void operator()(nl_cache* c) const { nl_cache_free(c); } };
using Sock = std::unique_ptr<nl_sock, SockFree>;
using Cb = std::unique_ptr<nl_cb, CbPut>;
using Qdisc = std::unique_ptr<rtnl_qdisc, QdiscPut>;
using Cls = std::unique_ptr<rtnl_cls, ClsPut>;
using Act = std::unique_ptr<rtnl_act, ActPut>;
using Link = std::unique_ptr<rtnl_link, LinkPut>;
using Cache = std::unique_ptr<nl_cache, CacheFree>;

constexpr uint64_t kLatencyUs = 25'000;   // the reference plugin's tbf latency
constexpr uint32_t kIngress = TC_HANDLE(0xffff, 0);
constexpr uint64_t kIntMax = 0x7fffffff;   // libnl's tbf setters take int

template <class T>
T* alloc(T* p, const char* what) {
    if (!p) throw netns::Error(netns::Error::Kind::Failed, std::string("tc: out of memory allocating ") + what, {}, ENOMEM);
    return p;
}

/// The kernel's own answer to the last request it refused. libnl folds errno into its own
/// codes (EEXIST and ENOENT keep a meaning, most others become "Unspecific failure") and
/// drops the extended ack, which is the only text that says which check failed.
struct KernelError {
    int err = 0;   ///< positive errno
    std::string extack;
};

/// NLMSGERR_ATTR_MSG of an error reply, as iproute2's nl_dump_ext_ack finds it.
std::string extack_of(const nlmsgerr* e) {
    auto* h = reinterpret_cast<const nlmsghdr*>(reinterpret_cast<const char*>(e) - NLMSG_HDRLEN);
    if (!(h->nlmsg_flags & NLM_F_ACK_TLVS)) return {};
    // The TLVs follow the echoed request: only its header with NETLINK_CAP_ACK.
    size_t off = NLMSG_HDRLEN + sizeof(nlmsgerr);
    if (!(h->nlmsg_flags & NLM_F_CAPPED)) off += NLMSG_ALIGN(e->msg.nlmsg_len) - NLMSG_HDRLEN;
    if (off >= h->nlmsg_len) return {};
    nlattr* tb[NLMSGERR_ATTR_MAX + 1] = {};
    auto* first = reinterpret_cast<nlattr*>(const_cast<char*>(reinterpret_cast<const char*>(h) + off));
    if (nla_parse(tb, NLMSGERR_ATTR_MAX, first, static_cast<int>(h->nlmsg_len - off), nullptr) < 0) return {};
    const nlattr* msg = tb[NLMSGERR_ATTR_MSG];
    if (!msg) return {};
    auto* text = static_cast<const char*>(nla_data(msg));
    return std::string(text, strnlen(text, static_cast<size_t>(nla_len(msg))));
}

int remember_error(sockaddr_nl*, nlmsgerr* e, void* arg) {
    auto* k = static_cast<KernelError*>(arg);
    k->err = -e->error;
    k->extack = extack_of(e);
    return NL_STOP;   // libnl then returns its own code for e->error, as it does without a callback
}

/// One route netlink socket in the calling thread's netns that remembers what the kernel
/// said when it refused a request.
class Conn {
public:
    Conn();
    Conn(const Conn&) = delete;
    Conn& operator=(const Conn&) = delete;

    /// Runs one libnl call on the socket: 0 or a negative libnl error (then kernel_errno()
    /// says why, when the kernel refused).
    template <class F>
    int run(F&& call) {
        kernel_ = {};
        return call(sock_.get());
    }
    /// Runs one libnl call that must succeed; otherwise throws "tc: <what>: ...".
    template <class F>
    void must(const std::string& what, F&& call) {
        if (int err = run(call); err < 0) fail(what, err);
    }
    int kernel_errno() const { return kernel_.err; }
    [[noreturn]] void fail(const std::string& what, int err) const;

private:
    KernelError kernel_;   // before sock_: the socket's callback points at it
    Sock sock_;
};

Conn::Conn() {
    if (topocni_nl_replay) topocni_nl_replay();
    // Explicitly NL_CB_DEFAULT: libnl's own default follows $NLCB, and NLCB=debug prints
    // every message to stdout, which carries the CNI result.
    Cb cb(alloc(nl_cb_alloc(NL_CB_DEFAULT), "netlink callbacks"));
    sock_.reset(alloc(nl_socket_alloc_cb(cb.get()), "a netlink socket"));
    nl_socket_modify_err_cb(sock_.get(), NL_CB_CUSTOM, remember_error, &kernel_);
    must("failed to open a route netlink socket", [](nl_sock* s) { return nl_connect(s, NETLINK_ROUTE); });
    // Best effort (older kernels lack them): the kernel's reason in words, and error replies
    // that echo only our request's header.
    int one = 1;
    ::setsockopt(nl_socket_get_fd(sock_.get()), SOL_NETLINK, NETLINK_EXT_ACK, &one, sizeof(one));
    ::setsockopt(nl_socket_get_fd(sock_.get()), SOL_NETLINK, NETLINK_CAP_ACK, &one, sizeof(one));
}

void Conn::fail(const std::string& what, int err) const {
    std::string msg = "tc: " + what + ": " + nl_geterror(err);
    if (kernel_.err) {
        msg += " (" + std::generic_category().message(kernel_.err);
        if (!kernel_.extack.empty()) msg += ": " + kernel_.extack;
        msg += ")";
    }
    throw netns::Error(netns::Error::Kind::Failed, msg, {}, kernel_.err);
}

void set_kind(rtnl_tc* obj, const char* kind) {
    // Fails only when libnl's module for the kind is not registered.
    if (int err = rtnl_tc_set_kind(obj, kind); err < 0)
        throw netns::Error(netns::Error::Kind::Failed, std::string("tc: libnl has no '") + kind + "' module: " + nl_geterror(err));
}

/// The link named `dev`, or null when there is none.
Link find_link(Conn& c, const std::string& dev) {
    rtnl_link* l = nullptr;
    int err = c.run([&](nl_sock* s) { return rtnl_link_get_kernel(s, 0, dev.c_str(), &l); });
    if (err == -NLE_NODEV || c.kernel_errno() == ENODEV) return nullptr;
    if (err < 0) c.fail("failed to look up device '" + dev + "'", err);
    return Link(l);
}

Link require_link(Conn& c, const std::string& dev) {
    Link l = find_link(c, dev);
    if (!l) throw netns::Error(netns::Error::Kind::Failed, "tc: device '" + dev + "' does not exist", {}, ENODEV);
    return l;
}

/// A tbf's parameters in libnl's units (bytes), computed before anything is created.
struct TbfParams {
    uint64_t rate = 0;     ///< bytes per second
    uint64_t bucket = 0;   ///< bytes
    uint64_t limit = 0;    ///< bytes queued at most
};

/// The largest bucket tbf can hold at `rate` bytes/s. libnl turns the bucket into the time
/// it takes to send it, in whole microseconds, then into scheduler ticks in a u32 (15.625
/// per microsecond on every current kernel, read from /proc/net/psched): beyond that the
/// value wraps around. One microsecond less than the bound absorbs libnl's rounding.
uint64_t max_bucket(uint64_t rate) {
    uint64_t ticks_per_s = std::max<uint64_t>(nl_us2ticks(1'000'000), 1);
    uint64_t max_us = std::min<uint64_t>(0xffffffffULL * 1'000'000 / ticks_per_s, 0xffffffffULL) - 1;
    return std::max<uint64_t>(rate * max_us / 1'000'000, 1);
}

TbfParams tbf_params(const Tbf& t, const std::string& dev) {
    if (t.rate_bps < 8 || t.rate_bps > kMaxRateBps)
        throw netns::Error(netns::Error::Kind::Failed, "tc: failed to shape '" + dev + "' at " + std::to_string(t.rate_bps) +
                                             " bits/s: a tbf takes 8 to " + std::to_string(kMaxRateBps) + " bits/s");
    TbfParams p;
    p.rate = t.rate_bps / 8;
    p.bucket = std::clamp<uint64_t>(t.burst_bits / 8, 1, std::min(max_bucket(p.rate), kIntMax));
    p.limit = std::min(p.rate * kLatencyUs / 1'000'000 + p.bucket, kIntMax);
    return p;
}

void add_tbf(Conn& c, int ifindex, const std::string& dev, const TbfParams& p) {
    Qdisc q(alloc(rtnl_qdisc_alloc(), "a qdisc"));
    rtnl_tc_set_ifindex(TC_CAST(q.get()), ifindex);
    rtnl_tc_set_parent(TC_CAST(q.get()), TC_H_ROOT);
    rtnl_tc_set_handle(TC_CAST(q.get()), TC_HANDLE(1, 0));
    set_kind(TC_CAST(q.get()), "tbf");
    rtnl_qdisc_tbf_set_limit(q.get(), static_cast<int>(p.limit));
    rtnl_qdisc_tbf_set_rate(q.get(), static_cast<int>(p.rate), static_cast<int>(p.bucket), 0);
    c.must("failed to add a tbf qdisc on '" + dev + "'",
           [&](nl_sock* s) { return rtnl_qdisc_add(s, q.get(), NLM_F_CREATE | NLM_F_EXCL); });
}

void create_ifb(Conn& c, const std::string& ifb, unsigned mtu) {
    Link l(alloc(rtnl_link_alloc(), "a link"));
    rtnl_link_set_name(l.get(), ifb.c_str());
    if (int err = rtnl_link_set_type(l.get(), "ifb"); err < 0) c.fail("failed to create ifb '" + ifb + "'", err);
    if (mtu > 0) rtnl_link_set_mtu(l.get(), mtu);
    rtnl_link_set_flags(l.get(), IFF_UP);
    c.must("failed to create ifb '" + ifb + "'",
           [&](nl_sock* s) { return rtnl_link_add(s, l.get(), NLM_F_CREATE | NLM_F_EXCL); });
}

void set_alias(Conn& c, rtnl_link* link, const std::string& name, const std::string& alias) {
    // Not part of the creating request: the kernel ignores IFLA_IFALIAS there.
    Link change(alloc(rtnl_link_alloc(), "a link"));
    rtnl_link_set_ifalias(change.get(), alias.c_str());
    c.must("failed to set the alias of '" + name + "'",
           [&](nl_sock* s) { return rtnl_link_change(s, link, change.get(), 0); });
}

void add_ingress_qdisc(Conn& c, int ifindex, const std::string& dev) {
    Qdisc q(alloc(rtnl_qdisc_alloc(), "a qdisc"));
    rtnl_tc_set_ifindex(TC_CAST(q.get()), ifindex);
    rtnl_tc_set_parent(TC_CAST(q.get()), TC_H_INGRESS);
    rtnl_tc_set_handle(TC_CAST(q.get()), kIngress);
    set_kind(TC_CAST(q.get()), "ingress");
    c.must("failed to add an ingress qdisc on '" + dev + "'",
           [&](nl_sock* s) { return rtnl_qdisc_add(s, q.get(), NLM_F_CREATE | NLM_F_EXCL); });
}

/// `tc filter add dev <dev> parent ffff: protocol all prio 1 u32 match u32 0 0 flowid 1:1
///  action mirred egress redirect dev <ifb>`, as the reference plugin adds it.
void add_redirect(Conn& c, int ifindex, const std::string& dev, int ifb_index, const std::string& ifb) {
    std::string what = "failed to add a filter redirecting '" + dev + "' to '" + ifb + "'";
    Act act(alloc(rtnl_act_alloc(), "an action"));
    set_kind(TC_CAST(act.get()), "mirred");
    rtnl_mirred_set_action(act.get(), TCA_EGRESS_REDIR);
    rtnl_mirred_set_policy(act.get(), TC_ACT_STOLEN);
    rtnl_mirred_set_ifindex(act.get(), static_cast<uint32_t>(ifb_index));

    Cls cls(alloc(rtnl_cls_alloc(), "a classifier"));
    rtnl_tc_set_ifindex(TC_CAST(cls.get()), ifindex);
    rtnl_tc_set_parent(TC_CAST(cls.get()), kIngress);
    set_kind(TC_CAST(cls.get()), "u32");
    rtnl_cls_set_prio(cls.get(), 1);
    rtnl_cls_set_protocol(cls.get(), ETH_P_ALL);
    auto local = [&](int err) {   // builds the object only: fails on allocation alone
        if (err < 0) c.fail(what, err);
    };
    local(rtnl_u32_add_key_uint32(cls.get(), 0, 0, 0, 0));   // match u32 0 0: every packet
    local(rtnl_u32_set_cls_terminal(cls.get()));
    local(rtnl_u32_set_classid(cls.get(), TC_HANDLE(1, 1)));
    local(rtnl_u32_add_action(cls.get(), act.get()));
    c.must(what, [&](nl_sock* s) { return rtnl_cls_add(s, cls.get(), NLM_F_CREATE | NLM_F_EXCL); });
}

void delete_qdisc(Conn& c, int ifindex, const std::string& dev, uint32_t parent) {
    Qdisc q(alloc(rtnl_qdisc_alloc(), "a qdisc"));
    rtnl_tc_set_ifindex(TC_CAST(q.get()), ifindex);
    // No handle and no kind, as `tc qdisc del dev <dev> root|ingress`: with either, a device
    // that once had an ingress qdisc answers EINVAL (its placeholder has neither) instead of ENOENT.
    rtnl_tc_set_parent(TC_CAST(q.get()), parent);
    int err = c.run([&](nl_sock* s) { return rtnl_qdisc_delete(s, q.get()); });
    // ENOENT: no such qdisc, or only the device's default one (which cannot be deleted);
    // ENODEV: the device went away meanwhile. Either way nothing is left to delete.
    if (err < 0 && c.kernel_errno() != ENOENT && c.kernel_errno() != ENODEV)
        c.fail(std::string("failed to delete the ") + (parent == TC_H_INGRESS ? "ingress" : "root") + " qdisc of '" + dev +
                   "'",
               err);
}

bool delete_ifb_on(Conn& c, const std::string& ifb) {
    Link l = find_link(c, ifb);
    const char* type = l ? rtnl_link_get_type(l.get()) : nullptr;
    if (!type || std::strcmp(type, "ifb") != 0) return false;
    int err = c.run([&](nl_sock* s) { return rtnl_link_delete(s, l.get()); });
    if (err < 0 && c.kernel_errno() == ENODEV) return false;   // deleted by someone else meanwhile
    if (err < 0) c.fail("failed to delete ifb '" + ifb + "'", err);
    return true;
}

std::optional<Tbf> root_tbf(nl_cache* qdiscs, int ifindex) {
    Qdisc q(rtnl_qdisc_get_by_parent(qdiscs, ifindex, TC_H_ROOT));
    const char* kind = q ? rtnl_tc_get_kind(TC_CAST(q.get())) : nullptr;
    if (!kind || std::strcmp(kind, "tbf") != 0) return std::nullopt;
    return Tbf{uint64_t(rtnl_qdisc_tbf_get_rate(q.get())) * 8, uint64_t(rtnl_qdisc_tbf_get_rate_bucket(q.get())) * 8};
}

/// Where the u32 filters under dev's ingress qdisc redirect to (the last mirred egress
/// redirect found), by name.
std::optional<std::string> redirect_target(Conn& c, int ifindex, const std::string& dev) {
    nl_cache* raw = nullptr;
    c.must("failed to list the ingress filters of '" + dev + "'",
           [&](nl_sock* s) { return rtnl_cls_alloc_cache(s, ifindex, kIngress, &raw); });
    Cache filters(raw);
    int target = 0;
    for (nl_object* o = nl_cache_get_first(filters.get()); o; o = nl_cache_get_next(o)) {
        auto* cls = reinterpret_cast<rtnl_cls*>(o);
        const char* kind = rtnl_tc_get_kind(TC_CAST(cls));
        if (!kind || std::strcmp(kind, "u32") != 0) continue;
        for (rtnl_act* a = rtnl_u32_get_action(cls); a; a = rtnl_act_next(a)) {
            const char* ak = rtnl_tc_get_kind(TC_CAST(a));
            if (ak && !std::strcmp(ak, "mirred") && rtnl_mirred_get_action(a) == TCA_EGRESS_REDIR)
                target = static_cast<int>(rtnl_mirred_get_ifindex(a));
        }
    }
    if (!target) return std::nullopt;
    rtnl_link* l = nullptr;
    // A target that is gone redirects nowhere.
    if (c.run([&](nl_sock* s) { return rtnl_link_get_kernel(s, target, nullptr, &l); }) < 0) return std::nullopt;
    Link link(l);
    const char* name = rtnl_link_get_name(link.get());
    return name ? std::optional<std::string>(name) : std::nullopt;
}

}  // namespace

void add_root_tbf(const std::string& dev, const Tbf& t) {
    TbfParams p = tbf_params(t, dev);
    Conn c;
    Link l = require_link(c, dev);
    add_tbf(c, rtnl_link_get_ifindex(l.get()), dev, p);
}

void add_ingress_shaping(const std::string& dev, const std::string& ifb, const Tbf& t, const std::string& alias) {
    TbfParams p = tbf_params(t, ifb);
    Conn c;
    Link l = require_link(c, dev);
    int ifindex = rtnl_link_get_ifindex(l.get());
    create_ifb(c, ifb, rtnl_link_get_mtu(l.get()));
    bool added_ingress = false;
    try {
        Link i = require_link(c, ifb);
        if (!alias.empty()) set_alias(c, i.get(), ifb, alias);
        add_tbf(c, rtnl_link_get_ifindex(i.get()), ifb, p);
        add_ingress_qdisc(c, ifindex, dev);
        added_ingress = true;
        add_redirect(c, ifindex, dev, rtnl_link_get_ifindex(i.get()), ifb);
    } catch (...) {
        // Only what this call made (an ingress qdisc already there stays): the ingress
        // qdisc takes its filter with it, the ifb its tbf. The first error is the one reported.
        try {
            if (added_ingress) delete_qdisc(c, ifindex, dev, TC_H_INGRESS);
        } catch (...) {}
        try {
            delete_ifb_on(c, ifb);
        } catch (...) {}
        throw;
    }
}

void remove_shaping(const std::string& dev) {
    Conn c;
    Link l = find_link(c, dev);
    if (!l) return;
    int ifindex = rtnl_link_get_ifindex(l.get());
    delete_qdisc(c, ifindex, dev, TC_H_ROOT);
    delete_qdisc(c, ifindex, dev, TC_H_INGRESS);
}

bool delete_ifb(const std::string& ifb) {
    Conn c;
    return delete_ifb_on(c, ifb);
}

State read_state(const std::string& dev) {
    Conn c;
    Link l = require_link(c, dev);
    int ifindex = rtnl_link_get_ifindex(l.get());
    nl_cache* raw = nullptr;
    c.must("failed to list the qdiscs of '" + dev + "'", [&](nl_sock* s) { return rtnl_qdisc_alloc_cache(s, &raw); });
    Cache qdiscs(raw);
    State out;
    out.root_tbf = root_tbf(qdiscs.get(), ifindex);
    Qdisc ingress(rtnl_qdisc_get_by_parent(qdiscs.get(), ifindex, TC_H_INGRESS));
    const char* kind = ingress ? rtnl_tc_get_kind(TC_CAST(ingress.get())) : nullptr;
    out.ingress_qdisc = kind && !std::strcmp(kind, "ingress");   // not a clsact, which has the same parent
    if (out.ingress_qdisc) out.redirect_to = redirect_target(c, ifindex, dev);
    return out;
}

}  // namespace netns::tc
