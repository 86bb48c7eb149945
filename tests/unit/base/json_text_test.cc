// base/json_text.h: the tree-less reader accepts exactly the JSON nlohmann's parser
// accepts, decodes strings the same, and hands back each value's own bytes.
#include <doctest/doctest.h>

#include <nlohmann/json.hpp>

#include "base/json_text.h"

using base::json_text::Reader;

namespace {

bool reader_accepts(const std::string& text) {
    try {
        Reader r(text);
        r.skip();
        r.end();
        return true;
    } catch (const base::json_text::SyntaxError&) {
        return false;
    }
}

}  // namespace

TEST_CASE("the reader accepts and refuses exactly what nlohmann's parser does") {
    const char* cases[] = {
        "{}", "[]", "0", "-0", "1.5e+3", "-12.0E-7", "true", "false", "null", "\"\"", " [1, {\"a\": [null]}, \"x\"] ",
        "\"\\u00e9\\ud83d\\ude00\\\"\\\\\\/\\b\\f\\n\\r\\t\"", "\"caf\xc3\xa9 \xf0\x9f\x98\x80\"", "{\"a\":{\"b\":{\"c\":[[[]]]}}}",
        // refused
        "", " ", "{", "[1,]", "{\"a\":1,}", "{\"a\" 1}", "{1:2}", "01", "1.", ".5", "1e", "-", "+1", "tru", "nul",
        "\"abc", "\"a\nb\"", "\"\\x\"", "\"\\u12\"", "\"\\ud800\"", "\"\\udc00\"", "\"\\ud800\\u0041\"", "\"\xc3\"",
        "\"\xc0\xaf\"", "\"\xed\xa0\x80\"", "\"\xf4\x90\x80\x80\"", "\"\xff\"", "[1] [2]", "{}}", "[\"a\" \"b\"]",
        "\"0123456789abcdef0123456789abcdef\x01\"", "\"0123456789abcdef0123456789abcde\"", "1e400", "-1e400", "1e-400",
        "123456789012345678901234567890", "1.7976931348623157e308",
    };
    for (const char* c : cases) {
        CAPTURE(c);
        CHECK(reader_accepts(c) == nlohmann::json::accept(c));
    }
}

TEST_CASE("containers nest as deep as Go's encoding/json allows and no deeper, however they are read") {
    using base::json_text::kMaxDepth;
    auto nested = [](size_t depth, const std::string& open, const std::string& close) {
        std::string s;
        for (size_t i = 0; i < depth; ++i) s += open;
        for (size_t i = 0; i < depth; ++i) s += close;
        return s;
    };
    CHECK(reader_accepts(nested(kMaxDepth, "[", "]")));
    CHECK(reader_accepts(nested(kMaxDepth, "{\"a\":", "}").replace(kMaxDepth * 5, 0, "1")));
    CHECK_FALSE(reader_accepts(nested(kMaxDepth + 1, "[", "]")));
    CHECK_FALSE(reader_accepts(nested(kMaxDepth + 1, "{\"a\":", "}").replace((kMaxDepth + 1) * 5, 0, "1")));
    // Entered member by member, then skipped: the levels add up.
    std::string deep = "{\"x\":" + nested(kMaxDepth, "[", "]") + "}";
    Reader r(deep);
    std::string key;
    r.begin_object();
    REQUIRE(r.next_member(key));
    try {
        r.skip();
        FAIL("one level too deep was read");
    } catch (const base::json_text::SyntaxError& e) {
        CHECK(std::string(e.what()).find("nested deeper than 10000 levels") != std::string::npos);
    }
}

TEST_CASE("strings are decoded as nlohmann decodes them, long ones included") {
    std::string long_one = "\"" + std::string(100, 'x') + "\\n" + std::string(37, 'y') + "\xc3\xa9\\u20ac\"";
    for (std::string text : {std::string("\"\\u00e9\\ud83d\\ude00\\\"\\\\\\/\\b\\f\\n\\r\\t\""), long_one}) {
        Reader r(text);
        CHECK(r.string() == nlohmann::json::parse(text).get<std::string>());
    }
}

TEST_CASE("escapes at every place of a 16-byte block, and at the end of the text, read as nlohmann reads them") {
    // The block loop takes one-character escapes inside the block (and the byte after a
    // backslash in its last place); the rest falls back to the byte-wise steps.
    const char* escapes[] = {"\\\"", "\\\\", "\\n", "\\/", "\\u00e9", "\\ud83d\\ude00", "\xc3\xa9", "\\x", "\\", "\x01", "\""};
    for (size_t lead = 0; lead < 40; ++lead) {
        for (const char* e : escapes) {
            for (size_t tail : {0, 1, 15, 16, 17, 40}) {
                std::string text = "\"" + std::string(lead, 'a') + e + "\\\"" + std::string(tail, 'b') + "\"";
                for (std::string t : {text, "[" + text + ",1]", text.substr(0, text.size() - 1)}) {
                    CAPTURE(t);
                    bool ok = nlohmann::json::accept(t);
                    REQUIRE(reader_accepts(t) == ok);
                    if (ok && t[0] == '"') {
                        Reader r(t);
                        CHECK(r.string() == nlohmann::json::parse(t).get<std::string>());
                    }
                }
            }
        }
    }
}

TEST_CASE("objects and arrays are walked member by member, and a skipped value is its own bytes") {
    std::string text = R"( {"a": [1, 2 ,3], "b" : {"c": "d"}, "e": null} )";
    Reader r(text);
    r.begin_object();
    std::string key;
    REQUIRE(r.next_member(key));
    CHECK(key == "a");
    r.begin_array();
    int n = 0;
    while (r.next_element()) {
        CHECK(r.peek() == Reader::Kind::Number);
        r.skip();
        ++n;
    }
    CHECK(n == 3);
    REQUIRE(r.next_member(key));
    CHECK(key == "b");
    CHECK(r.skip() == R"({"c": "d"})");
    REQUIRE(r.next_member(key));
    CHECK(r.null());
    CHECK_FALSE(r.next_member(key));
    r.end();
}

TEST_CASE("strings are written back as JSON that reads the same") {
    for (std::string s : {std::string("plain"), std::string("q\"b\\n\n\t\x01\x1f"), std::string("caf\xc3\xa9")}) {
        std::string out;
        base::json_text::append_string(out, s);
        CHECK(nlohmann::json::parse(out).get<std::string>() == s);
    }
    CHECK(base::json_text::same_key("NodeNames", "nodenames"));
    CHECK_FALSE(base::json_text::same_key("Nodes", "NodeNames"));
}
