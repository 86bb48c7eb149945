#include "base/json_text.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>

#ifdef __SSE2__
#include <emmintrin.h>
#endif

namespace base::json_text {

namespace {

bool is_digit(char c) { return c >= '0' && c <= '9'; }

int hex_value(char c) {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
}

void append_utf8(std::string& out, unsigned cp) {
    if (cp < 0x80) {
        out += static_cast<char>(cp);
    } else if (cp < 0x800) {
        out += static_cast<char>(0xC0 | (cp >> 6));
        out += static_cast<char>(0x80 | (cp & 0x3F));
    } else if (cp < 0x10000) {
        out += static_cast<char>(0xE0 | (cp >> 12));
        out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
        out += static_cast<char>(0x80 | (cp & 0x3F));
    } else {
        out += static_cast<char>(0xF0 | (cp >> 18));
        out += static_cast<char>(0x80 | ((cp >> 12) & 0x3F));
        out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
        out += static_cast<char>(0x80 | (cp & 0x3F));
    }
}

/// A byte a string may hold as it is: printable ASCII other than '"' and '\'.
bool plain(unsigned char c) { return c >= 0x20 && c < 0x80 && c != '"' && c != '\\'; }

/// What a one-character escape stands for (\" \\ \/ \b \f \n \r \t); 0 for \u and the invalid ones.
char one_char_escape(char e) {
    switch (e) {
        case '"': return '"';
        case '\\': return '\\';
        case '/': return '/';
        case 'b': return '\b';
        case 'f': return '\f';
        case 'n': return '\n';
        case 'r': return '\r';
        case 't': return '\t';
        default: return 0;
    }
}

/// A byte named in an error message: as itself when printable, else in hex (a message
/// must stay valid UTF-8, whatever the input).
std::string describe(char c) {
    unsigned char u = static_cast<unsigned char>(c);
    if (u >= 0x20 && u < 0x7f) return std::string("character '") + c + "'";
    static const char* hex = "0123456789abcdef";
    return std::string("byte 0x") + hex[u >> 4] + hex[u & 15];
}

}  // namespace

void Reader::fail(const std::string& what) const { throw SyntaxError("JSON: " + what, p_); }

void Reader::ws() {
    while (p_ < s_.size() && (s_[p_] == ' ' || s_[p_] == '\n' || s_[p_] == '\r' || s_[p_] == '\t')) ++p_;
}

char Reader::must(const char* what) {
    ws();
    if (p_ >= s_.size()) fail(std::string("the text ends where ") + what + " was expected");
    return s_[p_];
}

Reader::Kind Reader::peek() {
    char c = must("a value");
    switch (c) {
        case '{': return Kind::Object;
        case '[': return Kind::Array;
        case '"': return Kind::String;
        case 't': return Kind::True;
        case 'f': return Kind::False;
        case 'n': return Kind::Null;
        default:
            if (c == '-' || is_digit(c)) return Kind::Number;
            fail("unexpected " + describe(c));
    }
}

void Reader::enter(size_t depth) {
    if (depth > kMaxDepth) fail("containers nested deeper than " + std::to_string(kMaxDepth) + " levels");
}

void Reader::begin_object() {
    if (must("'{'") != '{') fail("expected an object");
    enter(first_.size() + 1);
    ++p_;
    first_.push_back('{');
}

bool Reader::next_in(char open, char close, const char* what) {
    // first_.back() is `open` until the container's first item, then its uppercase twin.
    char after = static_cast<char>(open == '{' ? 'O' : 'A');
    if (first_.empty() || (first_.back() != open && first_.back() != after)) fail(std::string("not inside an ") + what);
    char c = must("an item or a closing bracket");
    if (c == close) {
        ++p_;
        first_.pop_back();
        return false;
    }
    if (first_.back() == after) {   // after an item: a comma first
        if (c != ',') fail(std::string("expected ',' or '") + close + "' after an " + what + " item");
        ++p_;
        must("an item");
    }
    first_.back() = after;
    return true;
}

bool Reader::next_member(std::string& key) {
    if (!next_in('{', '}', "object")) return false;
    if (s_[p_] != '"') fail("expected a member name");
    key.clear();
    scan_string(&key);
    if (must("':'") != ':') fail("expected ':' after a member name");
    ++p_;
    return true;
}

void Reader::begin_array() {
    if (must("'['") != '[') fail("expected an array");
    enter(first_.size() + 1);
    ++p_;
    first_.push_back('[');
}

bool Reader::next_element() { return next_in('[', ']', "array"); }

std::string Reader::string() {
    if (must("a string") != '"') fail("expected a string");
    std::string out;
    scan_string(&out);
    return out;
}

bool Reader::null() {
    if (must("a value") != 'n') return false;
    literal("null");
    return true;
}

void Reader::end() {
    ws();
    if (p_ != s_.size()) fail("more after the value");
}

void Reader::literal(std::string_view word) {
    if (s_.substr(p_, word.size()) != word) fail("not a JSON value");
    p_ += word.size();
}

void Reader::number() {
    size_t start = p_;
    if (s_[p_] == '-') ++p_;
    if (p_ < s_.size() && s_[p_] == '0') {
        ++p_;
    } else {
        if (p_ >= s_.size() || !is_digit(s_[p_])) fail("a number without digits");
        while (p_ < s_.size() && is_digit(s_[p_])) ++p_;
    }
    if (p_ < s_.size() && s_[p_] == '.') {
        ++p_;
        if (p_ >= s_.size() || !is_digit(s_[p_])) fail("no digit after a decimal point");
        while (p_ < s_.size() && is_digit(s_[p_])) ++p_;
    }
    if (p_ < s_.size() && (s_[p_] == 'e' || s_[p_] == 'E')) {
        ++p_;
        if (p_ < s_.size() && (s_[p_] == '+' || s_[p_] == '-')) ++p_;
        if (p_ >= s_.size() || !is_digit(s_[p_])) fail("no digit in an exponent");
        while (p_ < s_.size() && is_digit(s_[p_])) ++p_;
    }
    // As nlohmann (and Go, into a number): one that no double can hold is refused.
    std::string_view n = s_.substr(start, p_ - start);
    if (n.size() > 18 || n.find_first_of(".eE") != std::string_view::npos) {
        std::string copy(n);
        if (!std::isfinite(std::strtod(copy.c_str(), nullptr))) fail("a number too large for a double");
    }
}

void Reader::utf8_sequence(std::string* out) {
    // Unicode's table of well-formed byte sequences (no overlongs, no surrogates, <= U+10FFFF).
    auto byte = [&](size_t i) -> unsigned { return p_ + i < s_.size() ? static_cast<unsigned char>(s_[p_ + i]) : 0u; };
    auto tail = [&](size_t i, unsigned lo = 0x80, unsigned hi = 0xBF) { return byte(i) >= lo && byte(i) <= hi; };
    unsigned c = byte(0);
    size_t n = 0;
    if (c >= 0xC2 && c <= 0xDF) n = tail(1) ? 2 : 0;
    else if (c == 0xE0) n = tail(1, 0xA0) && tail(2) ? 3 : 0;
    else if ((c >= 0xE1 && c <= 0xEC) || c == 0xEE || c == 0xEF) n = tail(1) && tail(2) ? 3 : 0;
    else if (c == 0xED) n = tail(1, 0x80, 0x9F) && tail(2) ? 3 : 0;
    else if (c == 0xF0) n = tail(1, 0x90) && tail(2) && tail(3) ? 4 : 0;
    else if (c >= 0xF1 && c <= 0xF3) n = tail(1) && tail(2) && tail(3) ? 4 : 0;
    else if (c == 0xF4) n = tail(1, 0x80, 0x8F) && tail(2) && tail(3) ? 4 : 0;
    if (n == 0) fail("invalid UTF-8 in a string");
    if (out) out->append(s_.data() + p_, n);
    p_ += n;
}

void Reader::scan_string(std::string* out) {
    ++p_;   // the opening quote
    const size_t size = s_.size();
    for (;;) {
        size_t run = p_;
#ifdef __SSE2__
        // Sixteen bytes at a time. A one-character escape is taken inside its block, so a
        // string of escaped JSON (the facts annotation: a \" every 8 bytes or so) stays here
        // instead of leaving the loop at every escape. The closing quote ends the string;
        // anything else (a \u escape, a bad escape, a control or non-ASCII byte) is left to
        // the byte-wise steps below. Signed compare: 0x80-0xFF are negative, below 0x20 too.
        const __m128i quote = _mm_set1_epi8('"'), backslash = _mm_set1_epi8('\\'), space = _mm_set1_epi8(0x20);
        bool slow = false;
        while (!slow && p_ + 17 <= size) {   // 17: the byte after a backslash in the block's last place
            __m128i x = _mm_loadu_si128(reinterpret_cast<const __m128i*>(s_.data() + p_));
            auto q = static_cast<unsigned>(_mm_movemask_epi8(_mm_cmpeq_epi8(x, quote)));
            auto b = static_cast<unsigned>(_mm_movemask_epi8(_mm_cmpeq_epi8(x, backslash)));
            auto stops = q | b | static_cast<unsigned>(_mm_movemask_epi8(_mm_cmplt_epi8(x, space)));
            size_t next = p_ + 16;
            while (stops) {
                auto k = static_cast<unsigned>(__builtin_ctz(stops));
                size_t at = p_ + k;
                if (q >> k & 1) {
                    if (out) out->append(s_.data() + run, at - run);
                    p_ = at + 1;
                    return;
                }
                char simple = b >> k & 1 ? one_char_escape(s_[at + 1]) : 0;
                if (!simple) {
                    next = at;
                    slow = true;
                    break;
                }
                if (out) {
                    out->append(s_.data() + run, at - run);
                    *out += simple;
                }
                run = at + 2;
                next = std::max(next, run);
                stops &= ~(3u << k);   // the backslash and the byte it escapes
            }
            p_ = next;
        }
#endif
        while (p_ < size && plain(static_cast<unsigned char>(s_[p_]))) ++p_;
        if (out) out->append(s_.data() + run, p_ - run);
        if (p_ >= size) fail("a string that does not end");
        unsigned char c = static_cast<unsigned char>(s_[p_]);
        if (c == '"') {
            ++p_;
            return;
        }
        if (c < 0x20) fail("a control character in a string");
        if (c >= 0x80) {
            utf8_sequence(out);
            continue;
        }
        // A backslash.
        if (p_ + 1 >= size) fail("a string that does not end");
        char e = s_[p_ + 1];
        p_ += 2;
        char simple = one_char_escape(e);
        if (!simple && e != 'u') {
            p_ -= 1;
            fail("an invalid escape in a string");
        }
        if (simple) {
            if (out) *out += simple;
            continue;
        }
        auto hex4 = [&]() -> unsigned {
            if (p_ + 4 > size) fail("a \\u escape cut short");
            unsigned v = 0;
            for (int i = 0; i < 4; ++i) {
                int h = hex_value(s_[p_ + i]);
                if (h < 0) fail("a \\u escape with a non-hex digit");
                v = v * 16 + static_cast<unsigned>(h);
            }
            p_ += 4;
            return v;
        };
        unsigned cp = hex4();
        if (cp >= 0xDC00 && cp <= 0xDFFF) fail("a lone low surrogate");
        if (cp >= 0xD800 && cp <= 0xDBFF) {
            if (p_ + 2 > size || s_[p_] != '\\' || s_[p_ + 1] != 'u') fail("a high surrogate without its low half");
            p_ += 2;
            unsigned lo = hex4();
            if (lo < 0xDC00 || lo > 0xDFFF) fail("a high surrogate without its low half");
            cp = 0x10000 + ((cp - 0xD800) << 10) + (lo - 0xDC00);
        }
        if (out) append_utf8(*out, cp);
    }
}

std::string_view Reader::skip() {
    char c = must("a value");
    size_t start = p_;
    std::string open;   // the containers entered, innermost last
    bool want_value = true;
    for (;;) {
        if (want_value) {
            c = must("a value");
            if (c == '{' || c == '[') {
                enter(first_.size() + open.size() + 1);
                ++p_;
                char close = c == '{' ? '}' : ']';
                if (must("a value or a closing bracket") == close) {
                    ++p_;
                } else {
                    open.push_back(c);
                    if (c == '{') {
                        if (s_[p_] != '"') fail("expected a member name");
                        scan_string(nullptr);
                        if (must("':'") != ':') fail("expected ':' after a member name");
                        ++p_;
                    }
                    continue;   // the first value inside
                }
            } else if (c == '"') {
                scan_string(nullptr);
            } else if (c == '-' || is_digit(c)) {
                number();
            } else if (c == 't') {
                literal("true");
            } else if (c == 'f') {
                literal("false");
            } else if (c == 'n') {
                literal("null");
            } else {
                fail("unexpected " + describe(c));
            }
            want_value = false;
        }
        if (open.empty()) return s_.substr(start, p_ - start);
        c = must("',' or a closing bracket");
        if (c == ',') {
            ++p_;
            if (open.back() == '{') {
                if (must("a member name") != '"') fail("expected a member name");
                scan_string(nullptr);
                if (must("':'") != ':') fail("expected ':' after a member name");
                ++p_;
            }
            want_value = true;
        } else if ((c == '}' && open.back() == '{') || (c == ']' && open.back() == '[')) {
            ++p_;
            open.pop_back();
        } else {
            fail("expected ',' or a closing bracket");
        }
    }
}

void append_string(std::string& out, std::string_view s) {
    static const char* hex = "0123456789abcdef";
    out += '"';
    size_t run = 0;
    for (size_t i = 0; i < s.size(); ++i) {
        unsigned char c = static_cast<unsigned char>(s[i]);
        if (c >= 0x20 && c != '"' && c != '\\') continue;
        out.append(s.data() + run, i - run);
        run = i + 1;
        switch (c) {
            case '"': out += "\\\""; break;
            case '\\': out += "\\\\"; break;
            case '\n': out += "\\n"; break;
            case '\r': out += "\\r"; break;
            case '\t': out += "\\t"; break;
            case '\b': out += "\\b"; break;
            case '\f': out += "\\f"; break;
            default:
                out += "\\u00";
                out += hex[c >> 4];
                out += hex[c & 15];
        }
    }
    out.append(s.data() + run, s.size() - run);
    out += '"';
}

bool same_key(std::string_view a, std::string_view b) {
    if (a.size() != b.size()) return false;
    for (size_t i = 0; i < a.size(); ++i) {
        char x = a[i], y = b[i];
        if (x >= 'A' && x <= 'Z') x = static_cast<char>(x - 'A' + 'a');
        if (y >= 'A' && y <= 'Z') y = static_cast<char>(y - 'A' + 'a');
        if (x != y) return false;
    }
    return true;
}

}  // namespace base::json_text
