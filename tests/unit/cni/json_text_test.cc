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

TEST_CASE("strings are decoded as nlohmann decodes them, long ones included") {
    std::string long_one = "\"" + std::string(100, 'x') + "\\n" + std::string(37, 'y') + "\xc3\xa9\\u20ac\"";
    for (std::string text : {std::string("\"\\u00e9\\ud83d\\ude00\\\"\\\\\\/\\b\\f\\n\\r\\t\""), long_one}) {
        Reader r(text);
        CHECK(r.string() == nlohmann::json::parse(text).get<std::string>());
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
