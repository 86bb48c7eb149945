// The rtnetlink message builder and attribute tables that netlink.cc and vf.cc share: a
// request in a fixed buffer with every append checked, nests that close with their
// scope, tb[] tables of a message's or nest's attributes, and MAC addresses as text.
// Internal to netns/.
#pragma once
#include <linux/netlink.h>

#include <cstdint>
#include <cstdio>
#include <cstring>
#include <optional>
#include <string>
#include <vector>

#include "base/ip.h"
#include "netns/error.h"
#include "netns/mnl.h"
#include "netns/netlink.h"

namespace netns::nl {

// Requests are small: the largest (a veth pair with a nested peer) is a few hundred bytes.
constexpr size_t kMsgBufferSize = 1024;

/// One request under construction: fixed capacity, every append checked.
class Msg {
public:
    Msg(uint16_t type, uint16_t flags) {
        nlh_ = mnl::mnl_nlmsg_put_header(buf_);
        nlh_->nlmsg_type = type;
        nlh_->nlmsg_flags = NLM_F_REQUEST | NLM_F_ACK | flags;
    }
    nlmsghdr* nlh() { return nlh_; }
    /// The request as bytes, for a caller that sends it later (Socket::request).
    std::vector<uint8_t> bytes() const {
        auto* p = reinterpret_cast<const uint8_t*>(nlh_);
        return {p, p + nlh_->nlmsg_len};
    }

    /// Appends a zeroed fixed header (ifinfomsg, rtmsg...) at the tail, also inside a nest.
    template <class T>
    T* header() {
        if (nlh_->nlmsg_len + mnl::MNL_ALIGN(sizeof(T)) > sizeof(buf_)) overflow();
        return static_cast<T*>(mnl::mnl_nlmsg_put_extra_header(nlh_, sizeof(T)));
    }
    void put(uint16_t type, const void* data, size_t len) {
        if (!mnl::mnl_attr_put_check(nlh_, sizeof(buf_), type, len, data)) overflow();
    }
    /// A fixed-size kernel struct (ifla_vf_rate...) or integer as the payload.
    template <class T>
    void put(uint16_t type, const T& v) {
        put(type, &v, sizeof v);
    }
    void u32(uint16_t type, uint32_t v) { put(type, &v, sizeof(v)); }
    void str(uint16_t type, const std::string& s) { put(type, s.c_str(), s.size() + 1); }
    void ip(uint16_t type, const base::IpAddr& a) { put(type, a.b.data(), a.size()); }
    void mac(uint16_t type, const std::string& s) {
        auto b = parse_mac(s);
        if (!b) netns::fail_invalid("invalid MAC address '" + s + "'");
        put(type, b->data(), b->size());
    }
    nlattr* nest_start(uint16_t type) {
        nlattr* a = mnl::mnl_attr_nest_start_check(nlh_, sizeof(buf_), type);
        if (!a) overflow();
        return a;
    }
    void nest_end(nlattr* a) { mnl::mnl_attr_nest_end(nlh_, a); }

private:
    [[noreturn]] static void overflow() { netns::fail("netlink request does not fit in its buffer"); }

    alignas(nlmsghdr) char buf_[kMsgBufferSize];
    nlmsghdr* nlh_;
};

/// Closes a nested attribute when its scope ends, so opens and closes always pair up.
class Nest {
public:
    Nest(Msg& m, uint16_t type) : m_(m), a_(m.nest_start(type)) {}
    ~Nest() { m_.nest_end(a_); }
    Nest(const Nest&) = delete;
    Nest& operator=(const Nest&) = delete;

private:
    Msg& m_;
    nlattr* a_;
};

/// tb[type] table of a message's or nest's attributes; unknown (newer) types are skipped.
template <int Max>
struct Attrs {
    const nlattr* tb[Max + 1] = {};

    static int collect(const nlattr* a, void* data) {
        if (mnl::mnl_attr_type_valid(a, Max) < 0) return mnl::MNL_CB_OK;   // newer kernel than our headers
        static_cast<Attrs*>(data)->tb[mnl::mnl_attr_get_type(a)] = a;
        return mnl::MNL_CB_OK;
    }
    void parse(const nlmsghdr* h, size_t offset) { mnl::mnl_attr_parse(h, offset, collect, this); }
    void parse_nested(const nlattr* nest) {
        if (nest) mnl::mnl_attr_parse_nested(nest, collect, this);
    }
    const nlattr* operator[](int type) const { return tb[type]; }

    /// The payload as a fixed-size kernel struct, if it is at least that long.
    template <class T>
    const T* get(int type) const {
        if (!tb[type] || mnl::mnl_attr_get_payload_len(tb[type]) < sizeof(T)) return nullptr;
        return static_cast<const T*>(mnl::mnl_attr_get_payload(tb[type]));
    }
    std::optional<uint32_t> u32(int type) const {
        if (!tb[type] || mnl::mnl_attr_validate(tb[type], mnl::MNL_TYPE_U32) < 0) return std::nullopt;
        return mnl::mnl_attr_get_u32(tb[type]);
    }
    std::optional<uint8_t> u8(int type) const {
        if (!tb[type] || mnl::mnl_attr_validate(tb[type], mnl::MNL_TYPE_U8) < 0) return std::nullopt;
        return mnl::mnl_attr_get_u8(tb[type]);
    }
    std::string str(int type) const {
        if (!tb[type] || mnl::mnl_attr_validate(tb[type], mnl::MNL_TYPE_NUL_STRING) < 0) return {};
        return mnl::mnl_attr_get_str(tb[type]);
    }
    std::optional<base::IpAddr> ip(int type, int family) const {
        base::IpAddr a;
        a.family = family;
        if (!tb[type] || mnl::mnl_attr_get_payload_len(tb[type]) != unsigned(a.size())) return std::nullopt;
        std::memcpy(a.b.data(), mnl::mnl_attr_get_payload(tb[type]), a.size());
        return a;
    }
};

/// "aa:bb:cc:dd:ee:ff" from a link-layer address's bytes.
inline std::string format_mac(const uint8_t* p, size_t len) {
    std::string out;
    for (size_t i = 0; i < len; ++i) {
        char hex[4];
        std::snprintf(hex, sizeof hex, i ? ":%02x" : "%02x", p[i]);
        out += hex;
    }
    return out;
}

}  // namespace netns::nl
