/* bench_floor: the kernel floor for the benchmarks (see bench/README.md).
 *
 * The least rtnetlink work that leaves a pod attached the way topocni (and the
 * reference plugins) leave it, done in one long-lived process, so the figures hold no
 * process start, no config parsing and no IPAM. bench/run.py starts it inside a node
 * netns and sends one command per line on stdin; each answer is one line:
 *   "ok <microseconds>" or "err <message>".
 *
 * Commands (addresses are "-" when absent; a second family makes it dual stack):
 *   bridge <name> <gw4/len|-> <gw6/len|->          create a bridge with gateway addresses, up (untimed)
 *   add ptp <podns> <ifname> <hostif> <ip4/len> <gw4> <ip6/len> <gw6>
 *   add bridge:<br> <podns> <ifname> <hostif> <ip4/len> <gw4> <ip6/len> <gw6>
 *   add macvlan:<master> <podns> <ifname> <hostif> <ip4/len> <gw4> <ip6/len> <gw6>
 *   del ptp|bridge:<br> <podns> <ifname> <hostif>     delete the host end (takes the pair)
 *   del macvlan:<master> <podns> <ifname> <hostif>    delete the macvlan inside the pod
 *
 * ptp:     veth created from inside the pod netns with its peer in the node netns;
 *          pod: addresses (nodad, noprefixroute), up, gateway /32 on-link + subnet via
 *          gateway; node: host end up, gateway /32 (/128) on it, host route to the pod.
 * bridge:  veth as above; pod: addresses with their subnet route, up; node: host end
 *          enslaved to the bridge and up in one request.
 * macvlan: created off <master> straight into the pod netns under its final name; pod:
 *          addresses, up.
 * Every request waits for its ACK, as a plugin does. Sysctls are not touched.
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <libmnl/libmnl.h>
#include <linux/if_addr.h>
#include <linux/if_link.h>
#include <linux/rtnetlink.h>
#include <linux/veth.h>
#include <net/if.h>
#include <sched.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static int node_fd = -1;
static struct mnl_socket* node_nl;
static char errbuf[512];
static uint32_t seq;

struct addr {
    int family;   /* 0 when absent */
    unsigned char b[16];
    int len;      /* prefix length */
};

static int fail(const char* fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(errbuf, sizeof errbuf, fmt, ap);
    va_end(ap);
    return -1;
}

static int parse_addr(const char* s, struct addr* a) {
    memset(a, 0, sizeof *a);
    if (!s || strcmp(s, "-") == 0) return 0;
    char buf[128];
    snprintf(buf, sizeof buf, "%s", s);
    char* slash = strchr(buf, '/');
    if (slash) *slash++ = 0;
    a->family = strchr(buf, ':') ? AF_INET6 : AF_INET;
    if (inet_pton(a->family, buf, a->b) != 1) return fail("bad address '%s'", s);
    a->len = slash ? atoi(slash) : (a->family == AF_INET ? 32 : 128);
    return 0;
}

static int alen(const struct addr* a) { return a->family == AF_INET ? 4 : 16; }

/* The network address of a (host bits cleared). */
static struct addr network(const struct addr* a) {
    struct addr n = *a;
    for (int bit = a->len; bit < alen(a) * 8; ++bit) n.b[bit / 8] &= (unsigned char)~(0x80 >> (bit % 8));
    return n;
}

static struct mnl_socket* open_socket(void) {
    struct mnl_socket* nl = mnl_socket_open2(NETLINK_ROUTE, SOCK_CLOEXEC);
    if (!nl) return NULL;
    if (mnl_socket_bind(nl, 0, MNL_SOCKET_AUTOPID) < 0) {
        mnl_socket_close(nl);
        return NULL;
    }
    int one = 1;
    mnl_socket_setsockopt(nl, NETLINK_CAP_ACK, &one, sizeof one);
    return nl;
}

/* Sends one request and waits for its ACK. */
static int talk(struct mnl_socket* nl, struct nlmsghdr* nlh, const char* what) {
    char buf[8192];
    nlh->nlmsg_flags |= NLM_F_REQUEST | NLM_F_ACK;
    nlh->nlmsg_seq = ++seq;
    if (mnl_socket_sendto(nl, nlh, nlh->nlmsg_len) < 0) return fail("%s: send: %s", what, strerror(errno));
    for (;;) {
        ssize_t n = mnl_socket_recvfrom(nl, buf, sizeof buf);
        if (n < 0) {
            if (errno == EINTR) continue;
            return fail("%s: recv: %s", what, strerror(errno));
        }
        int ret = mnl_cb_run(buf, (size_t)n, seq, mnl_socket_get_portid(nl), NULL, NULL);
        if (ret == MNL_CB_STOP) return 0;
        if (ret < 0) return fail("%s: %s", what, strerror(errno));
    }
}

static struct nlmsghdr* start(char* buf, uint16_t type, uint16_t flags) {
    memset(buf, 0, MNL_SOCKET_BUFFER_SIZE);
    struct nlmsghdr* nlh = mnl_nlmsg_put_header(buf);
    nlh->nlmsg_type = type;
    nlh->nlmsg_flags = flags;
    return nlh;
}

/* A link message naming `ifname`, with an RTM_NEWLINK's LINKINFO of `kind` opened when one is given
 * (closed by the caller, after the kind's data). */
static struct nlmsghdr* link_msg(char* buf, uint16_t type, uint16_t flags, const char* ifname, const char* kind,
                                 struct nlattr** info) {
    struct nlmsghdr* nlh = start(buf, type, flags);
    mnl_nlmsg_put_extra_header(nlh, sizeof(struct ifinfomsg));
    mnl_attr_put_strz(nlh, IFLA_IFNAME, ifname);
    if (kind) {
        *info = mnl_attr_nest_start(nlh, IFLA_LINKINFO);
        mnl_attr_put_strz(nlh, IFLA_INFO_KIND, kind);
    }
    return nlh;
}

static int link_up(struct mnl_socket* nl, int index, int master) {
    char buf[MNL_SOCKET_BUFFER_SIZE];
    struct nlmsghdr* nlh = start(buf, RTM_NEWLINK, 0);
    struct ifinfomsg* ifi = mnl_nlmsg_put_extra_header(nlh, sizeof *ifi);
    ifi->ifi_index = index;
    ifi->ifi_flags = IFF_UP;
    ifi->ifi_change = IFF_UP;
    if (master) mnl_attr_put_u32(nlh, IFLA_MASTER, (uint32_t)master);
    return talk(nl, nlh, "set link up");
}

static int add_addr(struct mnl_socket* nl, int index, const struct addr* a, int len, uint32_t flags) {
    char buf[MNL_SOCKET_BUFFER_SIZE];
    struct nlmsghdr* nlh = start(buf, RTM_NEWADDR, NLM_F_CREATE | NLM_F_EXCL);
    struct ifaddrmsg* ifa = mnl_nlmsg_put_extra_header(nlh, sizeof *ifa);
    ifa->ifa_family = (uint8_t)a->family;
    ifa->ifa_prefixlen = (uint8_t)len;
    ifa->ifa_index = (uint32_t)index;
    mnl_attr_put(nlh, IFA_ADDRESS, (size_t)alen(a), a->b);
    if (a->family == AF_INET) {
        mnl_attr_put(nlh, IFA_LOCAL, 4, a->b);
        flags &= ~(uint32_t)IFA_F_NODAD;
    }
    if (flags) mnl_attr_put_u32(nlh, IFA_FLAGS, flags);
    return talk(nl, nlh, "add address");
}

/* dst/len via gw (optional) out of index, with preferred source src (optional). */
static int add_route(struct mnl_socket* nl, int index, const struct addr* dst, int len, const struct addr* gw,
                     const struct addr* src, uint8_t scope) {
    char buf[MNL_SOCKET_BUFFER_SIZE];
    struct nlmsghdr* nlh = start(buf, RTM_NEWROUTE, NLM_F_CREATE | NLM_F_EXCL);
    struct rtmsg* rtm = mnl_nlmsg_put_extra_header(nlh, sizeof *rtm);
    rtm->rtm_family = (uint8_t)dst->family;
    rtm->rtm_dst_len = (uint8_t)len;
    rtm->rtm_table = RT_TABLE_MAIN;
    rtm->rtm_protocol = RTPROT_BOOT;
    rtm->rtm_scope = scope;
    rtm->rtm_type = RTN_UNICAST;
    mnl_attr_put(nlh, RTA_DST, (size_t)alen(dst), dst->b);
    if (gw) mnl_attr_put(nlh, RTA_GATEWAY, (size_t)alen(gw), gw->b);
    if (src) mnl_attr_put(nlh, RTA_PREFSRC, (size_t)alen(src), src->b);
    mnl_attr_put_u32(nlh, RTA_OIF, (uint32_t)index);
    return talk(nl, nlh, "add route");
}

static int create_veth(struct mnl_socket* nl, const char* ifname, const char* peer) {
    char buf[MNL_SOCKET_BUFFER_SIZE];
    struct nlattr* info;
    struct nlmsghdr* nlh = link_msg(buf, RTM_NEWLINK, NLM_F_CREATE | NLM_F_EXCL, ifname, "veth", &info);
    struct nlattr* data = mnl_attr_nest_start(nlh, IFLA_INFO_DATA);
    struct nlattr* p = mnl_attr_nest_start(nlh, VETH_INFO_PEER);
    mnl_nlmsg_put_extra_header(nlh, sizeof(struct ifinfomsg));
    mnl_attr_put_strz(nlh, IFLA_IFNAME, peer);
    mnl_attr_put_u32(nlh, IFLA_NET_NS_FD, (uint32_t)node_fd);
    mnl_attr_nest_end(nlh, p);
    mnl_attr_nest_end(nlh, data);
    mnl_attr_nest_end(nlh, info);
    return talk(nl, nlh, "create veth");
}

static int create_macvlan(struct mnl_socket* nl, const char* ifname, int master, int pod_fd) {
    char buf[MNL_SOCKET_BUFFER_SIZE];
    struct nlmsghdr* nlh = link_msg(buf, RTM_NEWLINK, NLM_F_CREATE | NLM_F_EXCL, ifname, NULL, NULL);
    mnl_attr_put_u32(nlh, IFLA_LINK, (uint32_t)master);
    mnl_attr_put_u32(nlh, IFLA_NET_NS_FD, (uint32_t)pod_fd);
    struct nlattr* info = mnl_attr_nest_start(nlh, IFLA_LINKINFO);
    mnl_attr_put_strz(nlh, IFLA_INFO_KIND, "macvlan");
    struct nlattr* data = mnl_attr_nest_start(nlh, IFLA_INFO_DATA);
    mnl_attr_put_u32(nlh, IFLA_MACVLAN_MODE, MACVLAN_MODE_BRIDGE);
    mnl_attr_nest_end(nlh, data);
    mnl_attr_nest_end(nlh, info);
    return talk(nl, nlh, "create macvlan");
}

static int del_link(struct mnl_socket* nl, const char* name) {
    char buf[MNL_SOCKET_BUFFER_SIZE];
    struct nlmsghdr* nlh = link_msg(buf, RTM_DELLINK, 0, name, NULL, NULL);
    return talk(nl, nlh, "delete link");
}

static int create_bridge(const char* name, struct addr gws[2]) {
    char buf[MNL_SOCKET_BUFFER_SIZE];
    struct nlattr* info;
    struct nlmsghdr* nlh = link_msg(buf, RTM_NEWLINK, NLM_F_CREATE | NLM_F_EXCL, name, "bridge", &info);
    mnl_attr_nest_end(nlh, info);
    if (talk(node_nl, nlh, "create bridge") < 0) return -1;
    int index = (int)if_nametoindex(name);
    for (int i = 0; i < 2; ++i)
        if (gws[i].family && add_addr(node_nl, index, &gws[i], gws[i].len, IFA_F_NODAD) < 0) return -1;
    return link_up(node_nl, index, 0);
}

/* Runs fn inside the pod netns (with a socket opened there), then returns to the node. */
static int in_pod(int pod_fd, int (*fn)(struct mnl_socket*, void*), void* arg) {
    if (setns(pod_fd, CLONE_NEWNET) < 0) return fail("setns pod: %s", strerror(errno));
    struct mnl_socket* nl = open_socket();
    int ret = nl ? fn(nl, arg) : fail("socket: %s", strerror(errno));
    if (nl) mnl_socket_close(nl);
    if (setns(node_fd, CLONE_NEWNET) < 0) {
        fprintf(stderr, "bench_floor: cannot return to the node netns: %s\n", strerror(errno));
        exit(2);
    }
    return ret;
}

struct op {
    char kind[64];
    char arg[64];   /* bridge or master name */
    char ifname[IFNAMSIZ], hostif[IFNAMSIZ];
    struct addr ip[2], gw[2];
    int pod_fd;
};

static int pod_side(struct mnl_socket* nl, void* p) {
    struct op* o = p;
    int ptp = strcmp(o->kind, "ptp") == 0;
    if (strcmp(o->kind, "macvlan") != 0 && create_veth(nl, o->ifname, o->hostif) < 0) return -1;
    int index = (int)if_nametoindex(o->ifname);
    if (!index) return fail("no %s in the pod", o->ifname);
    for (int i = 0; i < 2; ++i)
        if (o->ip[i].family &&
            add_addr(nl, index, &o->ip[i], o->ip[i].len, IFA_F_NODAD | (ptp ? IFA_F_NOPREFIXROUTE : 0)) < 0)
            return -1;
    if (link_up(nl, index, 0) < 0) return -1;
    if (!ptp) return 0;
    for (int i = 0; i < 2; ++i) {
        if (!o->ip[i].family) continue;
        struct addr net = network(&o->ip[i]);
        int hostlen = alen(&o->gw[i]) * 8;
        if (add_route(nl, index, &o->gw[i], hostlen, NULL, &o->ip[i], RT_SCOPE_LINK) < 0) return -1;
        if (add_route(nl, index, &net, o->ip[i].len, &o->gw[i], &o->ip[i], RT_SCOPE_UNIVERSE) < 0) return -1;
    }
    return 0;
}

static int pod_del(struct mnl_socket* nl, void* p) { return del_link(nl, ((struct op*)p)->ifname); }

static int do_add(struct op* o) {
    if (strcmp(o->kind, "macvlan") == 0) {
        int master = (int)if_nametoindex(o->arg);
        if (!master) return fail("no master '%s'", o->arg);
        if (create_macvlan(node_nl, o->ifname, master, o->pod_fd) < 0) return -1;
        return in_pod(o->pod_fd, pod_side, o);
    }
    if (in_pod(o->pod_fd, pod_side, o) < 0) return -1;
    int host = (int)if_nametoindex(o->hostif);
    if (!host) return fail("no host end '%s'", o->hostif);
    if (strcmp(o->kind, "bridge") == 0) {
        int br = (int)if_nametoindex(o->arg);
        if (!br) return fail("no bridge '%s'", o->arg);
        return link_up(node_nl, host, br);
    }
    if (link_up(node_nl, host, 0) < 0) return -1;
    for (int i = 0; i < 2; ++i) {
        if (!o->ip[i].family) continue;
        int hostlen = alen(&o->ip[i]) * 8;
        if (add_addr(node_nl, host, &o->gw[i], hostlen, IFA_F_NODAD | IFA_F_NOPREFIXROUTE) < 0) return -1;
        if (add_route(node_nl, host, &o->ip[i], hostlen, NULL, NULL, RT_SCOPE_LINK) < 0) return -1;
    }
    return 0;
}

static int do_del(struct op* o) {
    if (strcmp(o->kind, "macvlan") == 0) return in_pod(o->pod_fd, pod_del, o);
    return del_link(node_nl, o->hostif);
}

static double now_us(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e6 + (double)ts.tv_nsec / 1e3;
}

/* Splits "kind[:arg]". */
static void split_kind(const char* s, struct op* o) {
    snprintf(o->kind, sizeof o->kind, "%s", s);
    char* colon = strchr(o->kind, ':');
    o->arg[0] = 0;
    if (colon) {
        *colon = 0;
        snprintf(o->arg, sizeof o->arg, "%s", colon + 1);
    }
}

static int command(char* line, double* took) {
    char* w[12] = {0};
    int n = 0;
    for (char* t = strtok(line, " \t\n"); t && n < 12; t = strtok(NULL, " \t\n")) w[n++] = t;
    if (n == 0) return fail("empty command");
    if (strcmp(w[0], "bridge") == 0 && n == 4) {
        struct addr gws[2];
        if (parse_addr(w[2], &gws[0]) < 0 || parse_addr(w[3], &gws[1]) < 0) return -1;
        *took = 0;
        return create_bridge(w[1], gws);
    }
    int add = strcmp(w[0], "add") == 0;
    if (!((add && n == 9) || (strcmp(w[0], "del") == 0 && n == 5))) return fail("bad command '%s' (%d words)", w[0], n);
    struct op o;
    memset(&o, 0, sizeof o);
    split_kind(w[1], &o);
    snprintf(o.ifname, sizeof o.ifname, "%s", w[3]);
    snprintf(o.hostif, sizeof o.hostif, "%s", w[4]);
    if (add)
        for (int i = 0; i < 2; ++i)
            if (parse_addr(w[5 + 2 * i], &o.ip[i]) < 0 || parse_addr(w[6 + 2 * i], &o.gw[i]) < 0) return -1;
    double t0 = now_us();
    /* Opening the pod's netns is part of the work: a plugin gets only its path. */
    o.pod_fd = open(w[2], O_RDONLY | O_CLOEXEC);
    if (o.pod_fd < 0) return fail("open %s: %s", w[2], strerror(errno));
    int ret = add ? do_add(&o) : do_del(&o);
    close(o.pod_fd);
    *took = now_us() - t0;
    return ret;
}

int main(int argc, char** argv) {
    (void)argv;
    if (argc != 1) {
        fprintf(stderr, "usage: bench_floor < commands (see the comment at the top of bench/floor.c)\n");
        return 2;
    }
    node_fd = open("/proc/thread-self/ns/net", O_RDONLY | O_CLOEXEC);
    node_nl = open_socket();
    if (node_fd < 0 || !node_nl) {
        fprintf(stderr, "bench_floor: cannot open the node netns or a netlink socket: %s\n", strerror(errno));
        return 2;
    }
    char line[1024];
    while (fgets(line, sizeof line, stdin)) {
        double took = 0;
        errbuf[0] = 0;
        if (command(line, &took) < 0) printf("err %s\n", errbuf);
        else printf("ok %.1f\n", took);
        fflush(stdout);
    }
    return 0;
}
