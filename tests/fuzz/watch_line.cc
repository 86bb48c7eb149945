// The WATCH stream decoder (kube/watch_decoder.h): whatever the API server, or whatever
// answers in its place, streams is either events or a kube::Error, however the bytes are
// cut into reads. The first byte of the input picks where the body is cut; the events
// (and the resource version after them) must be the same as when it arrives whole.
#include <vector>

#include "fuzz.h"
#include "kube/watch_decoder.h"

namespace {

struct Outcome {
    std::vector<std::string> events;   // type and object, dumped
    std::string rv, error;
    bool operator==(const Outcome&) const = default;
};

Outcome decode(const std::string& body, size_t step) {
    Outcome out;
    kube::WatchDecoder d("WATCH: ", "1", 4096);
    auto on_event = [&](const kube::Event& e) {
        out.events.push_back(e.type + " " + e.object.dump());
        return out.events.size() < 64;
    };
    try {
        bool more = true;
        for (size_t at = 0; more && at < body.size(); at += step)
            more = d.feed(std::string_view(body).substr(at, step), on_event);
        if (more) d.finish(on_event);
    } catch (const kube::Error& e) {
        out.error = e.what();
    }
    out.rv = d.resource_version();
    return out;
}

}  // namespace

TOPOCNI_FUZZ_TARGET({
    if (input.empty()) return 0;
    size_t step = static_cast<unsigned char>(input[0]) % 17 + 1;
    std::string body = input.substr(1);
    Outcome whole = decode(body, body.size() + 1);
    Outcome cut = decode(body, step);
    // An over-long line is refused either way, but where it is seen depends on the cuts.
    bool long_line = whole.error.find("an event over") != std::string::npos ||
                     cut.error.find("an event over") != std::string::npos;
    if (!long_line && !(whole == cut)) __builtin_trap();
})
