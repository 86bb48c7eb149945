// The body of a WATCH response, split into events as it arrives: one JSON object per line
// ({"type": ..., "object": ...}), a line possibly cut across reads or several in one. It
// is the part of the client that reads what the API server (or whatever answers in its
// place) streams, so it is fuzzed (tests/fuzz/watch_line.cc).
#pragma once
#include <functional>
#include <string>
#include <string_view>

#include "kube/client.h"

namespace kube {

class WatchDecoder {
public:
    /// `where` starts every error message ("Kubernetes API: WATCH https://...: ").
    WatchDecoder(std::string where, std::string resource_version, size_t max_line = 16u << 20)
        : where_(std::move(where)), rv_(std::move(resource_version)), max_line_(max_line) {}

    /// Takes the next piece of the body; `on_event` gets every complete event but
    /// bookmarks (which only move the resource version on) and says whether to go on.
    /// False once it said no. Throws Error (Unavailable) for a line that is not an event or
    /// is over `max_line` bytes, and for an ERROR event: ResourceVersionUnavailable when
    /// its Status says the version is gone (410) or too large.
    bool feed(std::string_view piece, const std::function<bool(const Event&)>& on_event);

    /// The body ended: a last line without its newline is an event too.
    bool finish(const std::function<bool(const Event&)>& on_event);

    /// The last resource version seen (an event's or a bookmark's), else the one started from.
    const std::string& resource_version() const { return rv_; }

private:
    void line(std::string_view line, const std::function<bool(const Event&)>& on_event);
    std::string where_, rv_, pending_;
    size_t max_line_;
    bool going_ = true;
};

}  // namespace kube
