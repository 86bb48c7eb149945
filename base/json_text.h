// JSON read and written as text, without building a tree. The scheduler extender gets
// every candidate Node in one request (15 MB for 5,000 nodes) and answers with the ones
// that fit: a tree of the whole body costs ten times its size and most of the time, while
// all it needs is each node's name, resourceVersion, labels and one annotation, and the
// node's own bytes to send back. The reader validates everything it passes over, strictly
// as RFC 8259 (and nlohmann's parser) does, UTF-8 included, so the spans it hands out are
// JSON that can be echoed as is.
#pragma once
#include <cstddef>
#include <string>
#include <string_view>

#include "base/error.h"

namespace base::json_text {

/// Malformed JSON; `offset` is where the reader stopped.
struct SyntaxError : Error {
    size_t offset;
    SyntaxError(const std::string& what, size_t at) : Error(what + " at byte " + std::to_string(at)), offset(at) {}
};

/// How deep containers may nest: Go's encoding/json refuses deeper text (maxNestingDepth in
/// its scanner.go), and so does the API server, which decodes with it; nothing Kubernetes
/// sends comes near. A reader stops there rather than follow an attacker's nesting.
inline constexpr size_t kMaxDepth = 10000;

/// A cursor over one JSON text. Walk objects with `next_member`, arrays with
/// `next_element`; read what matters with `string`, skip the rest with `skip` (which
/// still validates it). Every call throws SyntaxError on malformed input.
class Reader {
public:
    explicit Reader(std::string_view text) : s_(text) {}

    enum class Kind { Object, Array, String, Number, True, False, Null };
    /// The kind of the value at the cursor, without consuming it.
    Kind peek();

    /// Consumes '{'. Then `next_member(key)` until it returns false (after the '}'), each
    /// true leaving the cursor on the member's value, which the caller must consume.
    void begin_object();
    bool next_member(std::string& key);
    /// Consumes '['. Then `next_element()` until false, each true leaving the cursor on one.
    void begin_array();
    bool next_element();

    /// Reads a string value, escapes decoded.
    std::string string();
    /// Passes over one value of any kind, validated; returns its bytes.
    std::string_view skip();
    /// Consumes `null` if that is what comes next.
    bool null();
    /// Requires that nothing but whitespace is left.
    void end();

    size_t offset() const { return p_; }
    std::string_view text() const { return s_; }

private:
    [[noreturn]] void fail(const std::string& what) const;
    /// The step shared by next_member and next_element: the closing bracket, or the comma
    /// before any item but the first; leaves the cursor on the item.
    bool next_in(char open, char close, const char* what);
    void ws();
    char must(const char* what);
    void literal(std::string_view word);
    void number();
    void scan_string(std::string* out);   ///< the cursor on '"'; decodes into out if given
    void enter(size_t depth);             ///< refuses nesting beyond kMaxDepth
    void utf8_sequence(std::string* out);

    std::string_view s_;
    size_t p_ = 0;
    // Per open container, innermost last: its bracket until its first item, then 'O' or 'A'.
    std::string first_;
};

/// `s` as a JSON string literal, appended to `out` (quotes, escapes; UTF-8 passed through).
void append_string(std::string& out, std::string_view s);

/// Go's encoding/json matches a member to a field ignoring case (ASCII here: the
/// scheduler's names are ASCII).
bool same_key(std::string_view a, std::string_view b);

}  // namespace base::json_text
