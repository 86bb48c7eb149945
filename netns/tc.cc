#include "netns/tc.h"

#include <linux/if_ether.h>
#include <linux/pkt_sched.h>
#include <linux/tc_act/tc_mirred.h>
#include <net/if.h>

#include <algorithm>
#include <memory>

#include <netlink/netlink.h>
#include <netlink/route/act/mirred.h>
#include <netlink/route/action.h>
#include <netlink/route/classifier.h>
#include <netlink/route/cls/u32.h>
#include <netlink/route/link.h>
#include <netlink/route/qdisc.h>
#include <netlink/route/qdisc/tbf.h>
#include <netlink/route/tc.h>

#include "cni/error.h"
#include "netns/netlink.h"

namespace netns::tc {

namespace {

// Owning handles for libnl objects: each freed (or its reference dropped) with its own function.
struct SockFree { void operator()(nl_sock* s) const { nl_socket_free(s); } };
struct QdiscPut { void operator()(rtnl_qdisc* q) const { rtnl_qdisc_put(q); } };
struct ClsPut { void operator()(rtnl_cls* c) const { rtnl_cls_put(c); } };
struct ActPut { void operator()(rtnl_act* a) const { rtnl_act_put(a); } };
struct LinkPut { void operator()(rtnl_link* l) const { rtnl_link_put(l); } };
struct CacheFree { void operator()(nl_cache* c) const { nl_cache_free(c); } };
using Sock = std::unique_ptr<nl_sock, SockFree>;
using Qdisc = std::unique_ptr<rtnl_qdisc, QdiscPut>;
using Cls = std::unique_ptr<rtnl_cls, ClsPut>;
using Act = std::unique_ptr<rtnl_act, ActPut>;
using Link = std::unique_ptr<rtnl_link, LinkPut>;
using Cache = std::unique_ptr<nl_cache, CacheFree>;

constexpr int kLatencyUs = 25'000;   // the reference plugin's tbf latency
constexpr uint32_t kIngress = TC_HANDLE(0xffff, 0);

[[noreturn]] void fail(const std::string& what, int err) {
    throw cni::Error(cni::kInternal, "tc: " + what + ": " + nl_geterror(err));
}

void check(int err, const std::string& what) {
    if (err < 0) fail(what, err);
}

template <class T>
T* alloc(T* p, const char* what) {
    if (!p) throw cni::Error(cni::kInternal, std::string("tc: out of memory allocating ") + what);
    return p;
}

}  // namespace
}  // namespace netns::tc

// The static release binary defers libnl's start-up registrations (cni/static_guards.cc);
// other builds run them from libnl's constructors and have no such function.
extern "C" void topocni_nl_replay() __attribute__((weak));

namespace netns::tc {
namespace {

Sock connect() {
    if (topocni_nl_replay) topocni_nl_replay();
    Sock s(alloc(nl_socket_alloc(), "a netlink socket"));
    check(nl_connect(s.get(), NETLINK_ROUTE), "cannot open a route netlink socket");
    return s;
}

/// The link named `dev`, or null when there is none.
Link find_link(nl_sock* s, const std::string& dev) {
    rtnl_link* l = nullptr;
    int err = rtnl_link_get_kernel(s, 0, dev.c_str(), &l);
    if (err == -NLE_NODEV || err == -NLE_OBJ_NOTFOUND) return nullptr;
    check(err, "cannot look up '" + dev + "'");
    return Link(l);
}

Link require_link(nl_sock* s, const std::string& dev) {
    Link l = find_link(s, dev);
    if (!l) throw cni::Error(cni::kInternal, "tc: device '" + dev + "' does not exist");
    return l;
}

void add_tbf(nl_sock* s, int ifindex, const std::string& dev, const Tbf& t) {
    uint64_t rate = std::min<uint64_t>(t.rate_bps, kMaxRateBps) / 8;
    if (rate == 0) throw cni::Error(cni::kInternal, "tc: a tbf on '" + dev + "' needs a rate of at least 8 bits/s");
    // tbf keeps the bucket as the time it takes to send it, in scheduler ticks (u32, ~15.6 per
    // microsecond): a bucket of more than ~250 s of traffic would wrap around, so cap it there.
    uint64_t bucket = std::min<uint64_t>({t.burst_bits / 8, rate * 250, 0x7fffffffULL});
    bucket = std::max<uint64_t>(bucket, 1);
    Qdisc q(alloc(rtnl_qdisc_alloc(), "a qdisc"));
    rtnl_tc_set_ifindex(TC_CAST(q.get()), ifindex);
    rtnl_tc_set_parent(TC_CAST(q.get()), TC_H_ROOT);
    rtnl_tc_set_handle(TC_CAST(q.get()), TC_HANDLE(1, 0));
    check(rtnl_tc_set_kind(TC_CAST(q.get()), "tbf"), "tbf");
    uint64_t limit = std::min<uint64_t>(rate * kLatencyUs / 1'000'000 + bucket, 0x7fffffffULL);
    rtnl_qdisc_tbf_set_limit(q.get(), static_cast<int>(limit));
    rtnl_qdisc_tbf_set_rate(q.get(), static_cast<int>(rate), static_cast<int>(bucket), 0);
    check(rtnl_qdisc_add(s, q.get(), NLM_F_CREATE | NLM_F_EXCL), "cannot add a tbf qdisc on '" + dev + "'");
}

void create_ifb(nl_sock* s, const std::string& ifb, int mtu) {
    Link l(alloc(rtnl_link_alloc(), "a link"));
    rtnl_link_set_name(l.get(), ifb.c_str());
    check(rtnl_link_set_type(l.get(), "ifb"), "ifb");
    if (mtu > 0) rtnl_link_set_mtu(l.get(), static_cast<unsigned>(mtu));
    rtnl_link_set_flags(l.get(), IFF_UP);
    check(rtnl_link_add(s, l.get(), NLM_F_CREATE | NLM_F_EXCL), "cannot create ifb '" + ifb + "'");
}

void add_ingress_qdisc(nl_sock* s, int ifindex, const std::string& dev) {
    Qdisc q(alloc(rtnl_qdisc_alloc(), "a qdisc"));
    rtnl_tc_set_ifindex(TC_CAST(q.get()), ifindex);
    rtnl_tc_set_parent(TC_CAST(q.get()), TC_H_INGRESS);
    rtnl_tc_set_handle(TC_CAST(q.get()), kIngress);
    check(rtnl_tc_set_kind(TC_CAST(q.get()), "ingress"), "ingress");
    check(rtnl_qdisc_add(s, q.get(), NLM_F_CREATE | NLM_F_EXCL), "cannot add an ingress qdisc on '" + dev + "'");
}

void add_redirect(nl_sock* s, int ifindex, const std::string& dev, int ifb_index, const std::string& ifb) {
    Act act(alloc(rtnl_act_alloc(), "an action"));
    check(rtnl_tc_set_kind(TC_CAST(act.get()), "mirred"), "mirred");
    rtnl_mirred_set_action(act.get(), TCA_EGRESS_REDIR);
    rtnl_mirred_set_policy(act.get(), TC_ACT_STOLEN);
    rtnl_mirred_set_ifindex(act.get(), static_cast<uint32_t>(ifb_index));

    Cls cls(alloc(rtnl_cls_alloc(), "a classifier"));
    rtnl_tc_set_ifindex(TC_CAST(cls.get()), ifindex);
    rtnl_tc_set_parent(TC_CAST(cls.get()), kIngress);
    check(rtnl_tc_set_kind(TC_CAST(cls.get()), "u32"), "u32");
    rtnl_cls_set_prio(cls.get(), 1);
    rtnl_cls_set_protocol(cls.get(), ETH_P_ALL);
    // "match u32 0 0": every packet.
    check(rtnl_u32_add_key_uint32(cls.get(), 0, 0, 0, 0), "u32 key");
    check(rtnl_u32_set_cls_terminal(cls.get()), "u32 terminal");
    check(rtnl_u32_set_classid(cls.get(), TC_HANDLE(1, 1)), "u32 classid");
    check(rtnl_u32_add_action(cls.get(), act.get()), "u32 action");
    check(rtnl_cls_add(s, cls.get(), NLM_F_CREATE | NLM_F_EXCL),
          "cannot add a filter redirecting '" + dev + "' to '" + ifb + "'");
}

void delete_qdisc(nl_sock* s, int ifindex, uint32_t parent) {
    Qdisc q(alloc(rtnl_qdisc_alloc(), "a qdisc"));
    rtnl_tc_set_ifindex(TC_CAST(q.get()), ifindex);
    rtnl_tc_set_parent(TC_CAST(q.get()), parent);
    if (parent == TC_H_INGRESS) rtnl_tc_set_handle(TC_CAST(q.get()), kIngress);
    int err = rtnl_qdisc_delete(s, q.get());
    // No such qdisc (the default one cannot be deleted either): nothing to do.
    if (err < 0 && err != -NLE_OBJ_NOTFOUND && err != -NLE_NOATTR && err != -NLE_INVAL && err != -NLE_NODEV)
        fail("cannot delete a qdisc", err);
}

}  // namespace

void add_root_tbf(const std::string& dev, const Tbf& t) {
    Sock s = connect();
    Link l = require_link(s.get(), dev);
    add_tbf(s.get(), rtnl_link_get_ifindex(l.get()), dev, t);
}

void add_ingress_shaping(const std::string& dev, const std::string& ifb, const Tbf& t, const std::string& alias) {
    Sock s = connect();
    Link l = require_link(s.get(), dev);
    int ifindex = rtnl_link_get_ifindex(l.get());
    create_ifb(s.get(), ifb, static_cast<int>(rtnl_link_get_mtu(l.get())));
    try {
        Link i = require_link(s.get(), ifb);
        // The kernel ignores IFLA_IFALIAS in a request that creates a link: set it after.
        if (!alias.empty()) nl::Socket().set_alias(rtnl_link_get_ifindex(i.get()), alias);
        add_tbf(s.get(), rtnl_link_get_ifindex(i.get()), ifb, t);
        add_ingress_qdisc(s.get(), ifindex, dev);
        add_redirect(s.get(), ifindex, dev, rtnl_link_get_ifindex(i.get()), ifb);
    } catch (...) {
        // The ingress qdisc goes with its filter; the ifb with its tbf.
        try { delete_qdisc(s.get(), ifindex, TC_H_INGRESS); } catch (...) {}
        try { delete_ifb(ifb); } catch (...) {}
        throw;
    }
}

void remove_shaping(const std::string& dev) {
    Sock s = connect();
    Link l = find_link(s.get(), dev);
    if (!l) return;
    int ifindex = rtnl_link_get_ifindex(l.get());
    delete_qdisc(s.get(), ifindex, TC_H_ROOT);
    delete_qdisc(s.get(), ifindex, TC_H_INGRESS);
}

bool delete_ifb(const std::string& ifb) {
    Sock s = connect();
    Link l = find_link(s.get(), ifb);
    if (!l) return false;
    const char* type = rtnl_link_get_type(l.get());
    if (!type || std::string(type) != "ifb") return false;
    int err = rtnl_link_delete(s.get(), l.get());
    if (err == -NLE_NODEV || err == -NLE_OBJ_NOTFOUND) return false;
    check(err, "cannot delete ifb '" + ifb + "'");
    return true;
}

State read_state(const std::string& dev) {
    State out;
    Sock s = connect();
    Link l = require_link(s.get(), dev);
    int ifindex = rtnl_link_get_ifindex(l.get());
    nl_cache* raw = nullptr;
    check(rtnl_qdisc_alloc_cache(s.get(), &raw), "cannot list qdiscs");
    Cache qdiscs(raw);
    for (nl_object* o = nl_cache_get_first(qdiscs.get()); o; o = nl_cache_get_next(o)) {
        auto* q = reinterpret_cast<rtnl_qdisc*>(o);
        if (rtnl_tc_get_ifindex(TC_CAST(q)) != ifindex) continue;
        std::string kind = rtnl_tc_get_kind(TC_CAST(q)) ? rtnl_tc_get_kind(TC_CAST(q)) : "";
        if (kind == "tbf" && rtnl_tc_get_parent(TC_CAST(q)) == TC_H_ROOT)
            out.root_tbf = Tbf{uint64_t(rtnl_qdisc_tbf_get_rate(q)) * 8, uint64_t(rtnl_qdisc_tbf_get_rate_bucket(q)) * 8};
        if (kind == "ingress") out.ingress_qdisc = true;
    }
    if (!out.ingress_qdisc) return out;
    raw = nullptr;
    check(rtnl_cls_alloc_cache(s.get(), ifindex, kIngress, &raw), "cannot list filters of '" + dev + "'");
    Cache filters(raw);
    for (nl_object* o = nl_cache_get_first(filters.get()); o; o = nl_cache_get_next(o)) {
        auto* c = reinterpret_cast<rtnl_cls*>(o);
        const char* kind = rtnl_tc_get_kind(TC_CAST(c));
        if (!kind || std::string(kind) != "u32") continue;
        for (rtnl_act* a = rtnl_u32_get_action(c); a; a = rtnl_act_next(a)) {
            const char* ak = rtnl_tc_get_kind(TC_CAST(a));
            if (!ak || std::string(ak) != "mirred") continue;
            char name[IF_NAMESIZE] = {};
            Link target = nullptr;
            rtnl_link* t = nullptr;
            if (rtnl_link_get_kernel(s.get(), static_cast<int>(rtnl_mirred_get_ifindex(a)), nullptr, &t) == 0) {
                target.reset(t);
                out.redirect_to = rtnl_link_get_name(t);
            } else if (if_indextoname(rtnl_mirred_get_ifindex(a), name)) {
                out.redirect_to = name;
            }
        }
    }
    return out;
}

}  // namespace netns::tc
