// The libmnl-compatible helpers: what they build is what the kernel expects (4-byte
// alignment, nested flag, lengths), and the parsers stop at the bounds they are given.
#include <doctest/doctest.h>

#include <linux/rtnetlink.h>

#include <map>
#include <string>

#include "netns/mnl.h"

using namespace netns::mnl;

namespace {

std::map<int, const nlattr*> collect(const nlmsghdr* h, unsigned offset) {
    std::map<int, const nlattr*> out;
    mnl_attr_parse(h, offset, [](const nlattr* a, void* data) {
        (*static_cast<std::map<int, const nlattr*>*>(data))[mnl_attr_get_type(a)] = a;
        return MNL_CB_OK;
    }, &out);
    return out;
}

}  // namespace

TEST_CASE("mnl: a message with padded, nested attributes parses back to what was put") {
    alignas(nlmsghdr) char buf[256];
    nlmsghdr* h = mnl_nlmsg_put_header(buf);
    h->nlmsg_type = RTM_NEWLINK;
    auto* ifi = static_cast<ifinfomsg*>(mnl_nlmsg_put_extra_header(h, sizeof(ifinfomsg)));
    ifi->ifi_index = 7;
    mnl_attr_put_strz(h, IFLA_IFNAME, "eth0");   // 5 bytes: padded to 8
    CHECK(h->nlmsg_len == MNL_NLMSG_HDRLEN + MNL_ALIGN(sizeof(ifinfomsg)) + MNL_ATTR_HDRLEN + 8);
    mnl_attr_put_u32(h, IFLA_MTU, 1450);
    nlattr* nest = mnl_attr_nest_start(h, IFLA_LINKINFO);
    mnl_attr_put(h, IFLA_INFO_KIND, 4, "veth");
    mnl_attr_nest_end(h, nest);
    CHECK(h->nlmsg_len % 4 == 0);
    CHECK((nest->nla_type & NLA_F_NESTED) != 0);
    CHECK(nest->nla_len == MNL_ATTR_HDRLEN + MNL_ATTR_HDRLEN + 4);

    CHECK(static_cast<ifinfomsg*>(mnl_nlmsg_get_payload(h))->ifi_index == 7);
    CHECK(mnl_nlmsg_get_payload_len(h) == h->nlmsg_len - MNL_NLMSG_HDRLEN);
    auto attrs = collect(h, sizeof(ifinfomsg));
    REQUIRE(attrs.size() == 3);
    CHECK(std::string(mnl_attr_get_str(attrs[IFLA_IFNAME])) == "eth0");
    CHECK(mnl_attr_validate(attrs[IFLA_IFNAME], MNL_TYPE_NUL_STRING) == 0);
    CHECK(mnl_attr_get_u32(attrs[IFLA_MTU]) == 1450);
    CHECK(mnl_attr_validate(attrs[IFLA_MTU], MNL_TYPE_U32) == 0);
    CHECK(mnl_attr_get_type(attrs[IFLA_LINKINFO]) == IFLA_LINKINFO);   // the nested flag is masked off

    std::map<int, const nlattr*> inner;
    mnl_attr_parse_nested(attrs[IFLA_LINKINFO], [](const nlattr* a, void* data) {
        (*static_cast<std::map<int, const nlattr*>*>(data))[mnl_attr_get_type(a)] = a;
        return MNL_CB_OK;
    }, &inner);
    REQUIRE(inner.count(IFLA_INFO_KIND));
    CHECK(std::string(static_cast<char*>(mnl_attr_get_payload(inner[IFLA_INFO_KIND])), 4) == "veth");
}

TEST_CASE("mnl: validation rejects wrong sizes and unterminated strings, as libmnl does") {
    alignas(nlmsghdr) char buf[128];
    nlmsghdr* h = mnl_nlmsg_put_header(buf);
    mnl_attr_put(h, 1, 2, "ab");       // a U32 of 2 bytes
    mnl_attr_put(h, 2, 2, "ab");       // a NUL_STRING without its NUL
    mnl_attr_put(h, 3, 0, nullptr);    // an empty string
    uint8_t two[2] = {1, 2};
    mnl_attr_put(h, 4, 2, two);        // a U8 of 2 bytes
    auto attrs = collect(h, 0);
    errno = 0;
    CHECK(mnl_attr_validate(attrs[1], MNL_TYPE_U32) == -1);
    CHECK(errno == ERANGE);
    CHECK(mnl_attr_validate(attrs[2], MNL_TYPE_NUL_STRING) == -1);
    CHECK(errno == EINVAL);
    CHECK(mnl_attr_validate(attrs[3], MNL_TYPE_STRING) == -1);
    CHECK(errno == ERANGE);
    CHECK(mnl_attr_validate(attrs[4], MNL_TYPE_U8) == -1);
    CHECK(mnl_attr_type_valid(attrs[4], 3) == -1);
    CHECK(errno == EOPNOTSUPP);
    CHECK(mnl_attr_type_valid(attrs[4], 4) == 1);
}

TEST_CASE("mnl: the checked builders refuse what does not fit, and parsers stop at a short length") {
    alignas(nlmsghdr) char buf[64];
    nlmsghdr* h = mnl_nlmsg_put_header(buf);
    char big[64] = {};
    CHECK_FALSE(mnl_attr_put_check(h, sizeof buf, 1, sizeof big, big));
    CHECK(h->nlmsg_len == MNL_NLMSG_HDRLEN);   // nothing written
    CHECK(mnl_attr_put_check(h, sizeof buf, 1, 8, big));
    CHECK(mnl_attr_nest_start_check(h, MNL_NLMSG_HDRLEN + MNL_ATTR_HDRLEN + 8, 2) == nullptr);

    // An attribute claiming more than the message holds is not visited.
    auto* a = static_cast<nlattr*>(mnl_nlmsg_get_payload(h));
    a->nla_len = 200;
    CHECK(collect(h, 0).empty());
    CHECK_FALSE(mnl_attr_ok(a, 40));

    // A datagram of two messages walks to both and then stops.
    alignas(nlmsghdr) char two[2 * 20];
    nlmsghdr* m1 = mnl_nlmsg_put_header(two);
    m1->nlmsg_len = 17;   // the next one starts at the aligned offset 20
    nlmsghdr* m2 = mnl_nlmsg_put_header(two + 20);
    m2->nlmsg_len = 16;
    int left = 36, seen = 0;
    for (auto* m = m1; mnl_nlmsg_ok(m, left); m = mnl_nlmsg_next(m, &left)) ++seen;
    CHECK(seen == 2);
    CHECK(left <= 0);
}
