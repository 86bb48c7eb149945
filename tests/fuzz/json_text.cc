// The tree-less JSON reader (base/json_text.h), whose spans the scheduler extender sends
// back as they are: it must accept exactly what nlohmann's parser accepts, and decode
// every string the same. A difference aborts, so libFuzzer reports it.
#include <cstdlib>

#include <nlohmann/json.hpp>

#include "base/json_text.h"
#include "fuzz.h"

TOPOCNI_FUZZ_TARGET({
    bool ours = true;   // (one declarator a line: a comma here would split the macro argument)
    bool too_deep = false;
    std::string first;
    bool first_is_string = false;
    try {
        base::json_text::Reader r(input);
        if (r.peek() == base::json_text::Reader::Kind::String) {
            first = r.string();
            first_is_string = true;
        } else {
            r.skip();
        }
        r.end();
    } catch (const base::json_text::SyntaxError& e) {
        ours = false;
        too_deep = std::string(e.what()).find("nested deeper") != std::string::npos;
    }
    if (too_deep) return 0;   // beyond kMaxDepth, refused by design (nlohmann has no limit)
    // nlohmann stops at a NUL byte as at the end of the text; JSON has no place for one.
    bool nul = input.find('\0') != std::string::npos;
    if (nul ? ours : ours != nlohmann::json::accept(input)) std::abort();
    if (ours && first_is_string) {
        auto j = nlohmann::json::parse(input, nullptr, false);
        if (!j.is_string() || j.get<std::string>() != first) std::abort();
    }
})
