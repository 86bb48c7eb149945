#include "base/text.h"

#include <cctype>

#include <cstdio>

namespace base {

namespace {

/// Length of the valid UTF-8 sequence starting at s[i], or 0 when the byte there does
/// not start one (RFC 3629: shortest form, no surrogates, nothing above U+10FFFF).
size_t sequence_length(std::string_view s, size_t i) {
    auto b = [&](size_t k) { return static_cast<unsigned char>(s[k]); };
    unsigned char c = b(i);
    if (c < 0x80) return 1;
    size_t n;
    unsigned char lo = 0x80, hi = 0xbf;   // allowed range of the second byte
    if (c >= 0xc2 && c <= 0xdf) n = 2;
    else if (c >= 0xe0 && c <= 0xef) {
        n = 3;
        if (c == 0xe0) lo = 0xa0;
        if (c == 0xed) hi = 0x9f;
    } else if (c >= 0xf0 && c <= 0xf4) {
        n = 4;
        if (c == 0xf0) lo = 0x90;
        if (c == 0xf4) hi = 0x8f;
    } else {
        return 0;
    }
    if (i + n > s.size()) return 0;
    if (b(i + 1) < lo || b(i + 1) > hi) return 0;
    for (size_t k = 2; k < n; ++k)
        if (b(i + k) < 0x80 || b(i + k) > 0xbf) return 0;
    return n;
}

}  // namespace

bool valid_utf8(std::string_view s) {
    for (size_t i = 0; i < s.size();) {
        size_t n = sequence_length(s, i);
        if (!n) return false;
        i += n;
    }
    return true;
}

namespace {

/// `s` with valid sequences copied and every other byte given to `other`.
template <class F>
std::string each_invalid_byte(std::string_view s, F&& other) {
    std::string out;
    out.reserve(s.size());
    for (size_t i = 0; i < s.size();) {
        if (size_t n = sequence_length(s, i)) {
            out.append(s.substr(i, n));
            i += n;
        } else {
            other(out, static_cast<unsigned char>(s[i++]));
        }
    }
    return out;
}

}  // namespace

std::string utf8_escaped(std::string_view s) {
    return each_invalid_byte(s, [](std::string& out, unsigned char b) {
        char buf[5];
        std::snprintf(buf, sizeof buf, "\\x%02X", b);
        out += buf;
    });
}

std::string utf8_replaced(std::string_view s) {
    return each_invalid_byte(s, [](std::string& out, unsigned char) { out += "\xEF\xBF\xBD"; });
}

std::string ifname_problem(const std::string& n) {
    if (n.empty()) return "is empty";
    if (!valid_utf8(n)) return "is not valid UTF-8";   // it goes into JSON results
    if (n.size() > 15) return "is longer than 15 bytes";
    if (n == "." || n == "..") return "may not be '.' or '..'";
    for (unsigned char c : n)
        if (c == '/' || c == ':' || std::isspace(c) || c < 0x20 || c == 0x7f)
            return "may not contain '/', ':', whitespace or control characters";
    return {};
}

bool valid_container_id(const std::string& id) {
    if (id.empty() || !std::isalnum(static_cast<unsigned char>(id[0]))) return false;
    for (unsigned char c : id)
        if (!std::isalnum(c) && c != '_' && c != '.' && c != '-') return false;
    return true;
}

}  // namespace base
