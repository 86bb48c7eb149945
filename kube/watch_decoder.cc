#include "kube/watch_decoder.h"

#include "kube/error.h"

namespace kube {

namespace {
using json = nlohmann::json;
}

void WatchDecoder::line(std::string_view line, const std::function<bool(const Event&)>& on_event) {
    while (!line.empty() && (line.back() == '\r' || line.back() == ' ')) line.remove_suffix(1);
    if (line.empty()) return;
    auto j = json::parse(line, nullptr, false);
    if (!j.is_object() || !j.contains("type") || !j["type"].is_string() || !j.contains("object"))
        throw Error(Error::Kind::Unavailable, where_ + "not a watch event");
    Event ev{j["type"].get<std::string>(), std::move(j["object"])};
    if (ev.type == "ERROR") {
        int code = 0;
        std::string msg = "error event";
        if (ev.object.is_object()) {
            if (auto c = ev.object.find("code"); c != ev.object.end() && c->is_number_integer()) {
                auto v = c->get<long long>();
                code = v >= 100 && v <= 599 ? static_cast<int>(v) : 0;
            }
            if (auto m = ev.object.find("message"); m != ev.object.end() && m->is_string()) msg = m->get<std::string>();
        }
        if (code == 410 || resource_version_too_large(code, ev.object))
            throw ResourceVersionUnavailable(Error::Kind::Unavailable, where_ + msg, code ? code : 410);
        throw Error(Error::Kind::Unavailable, where_ + msg, code ? code : 500);
    }
    if (ev.object.is_object())
        if (auto md = ev.object.find("metadata"); md != ev.object.end() && md->is_object())
            if (auto v = md->find("resourceVersion"); v != md->end() && v->is_string()) rv_ = v->get<std::string>();
    if (ev.type == "BOOKMARK") return;
    if (!on_event(ev)) going_ = false;
}

bool WatchDecoder::feed(std::string_view piece, const std::function<bool(const Event&)>& on_event) {
    pending_.append(piece);
    size_t start = 0, nl;
    while (going_ && (nl = pending_.find('\n', start)) != std::string::npos) {
        line(std::string_view(pending_).substr(start, nl - start), on_event);
        start = nl + 1;
    }
    pending_.erase(0, start);
    if (pending_.size() > max_line_)
        throw Error(Error::Kind::Unavailable, where_ + "an event over " + std::to_string(max_line_) + " bytes");
    return going_;
}

bool WatchDecoder::finish(const std::function<bool(const Event&)>& on_event) {
    if (going_ && !pending_.empty()) {
        std::string last;
        last.swap(pending_);
        line(last, on_event);
    }
    return going_;
}

}  // namespace kube
