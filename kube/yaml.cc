#include "kube/yaml.h"

#include <yaml.h>

#include <cstring>
#include <memory>
#include <vector>

#include "kube/error.h"

namespace kube {

namespace {

using json = nlohmann::json;

constexpr size_t kMaxDepth = 64;

/// libyaml's event stream, one event at a time, each freed when the next is read.
class Events {
public:
    Events(const std::string& text, std::string what) : what_(std::move(what)), text_(text) {
        if (!yaml_parser_initialize(&parser_)) throw Error(Error::Kind::Internal, what_ + ": cannot start the YAML parser");
        yaml_parser_set_input_string(&parser_, reinterpret_cast<const unsigned char*>(text_.data()), text_.size());
    }
    ~Events() {
        if (has_) yaml_event_delete(&event_);
        yaml_parser_delete(&parser_);
    }
    Events(const Events&) = delete;
    Events& operator=(const Events&) = delete;

    const yaml_event_t& next() {
        if (has_) yaml_event_delete(&event_);
        has_ = false;
        if (!yaml_parser_parse(&parser_, &event_)) fail_parser();
        has_ = true;
        return event_;
    }

    [[noreturn]] void fail(size_t line0, const std::string& why) const {
        throw Error(Error::Kind::Invalid, what_ + ": line " + std::to_string(line0 + 1) + ": " + why);
    }

private:
    [[noreturn]] void fail_parser() const {
        const yaml_mark_t& m = parser_.problem_mark;
        std::string why = parser_.problem ? parser_.problem : "not valid YAML";
        // libyaml's "found character that cannot start any token" is a tab, nearly always.
        if (m.index < text_.size() && text_[m.index] == '\t') why = "tabs are not allowed for indentation";
        if (parser_.context) why += std::string(" (") + parser_.context + ")";
        fail(m.line, why);
    }

    std::string what_;
    const std::string& text_;
    yaml_parser_t parser_{};
    yaml_event_t event_{};
    bool has_ = false;
};

class Builder {
public:
    explicit Builder(Events& ev) : ev_(ev) {}

    json document() {
        expect(ev_.next(), YAML_STREAM_START_EVENT);
        const yaml_event_t& start = ev_.next();
        if (start.type == YAML_STREAM_END_EVENT) return nullptr;   // empty text
        expect(start, YAML_DOCUMENT_START_EVENT);
        json out = node(ev_.next(), 0, false);
        expect(ev_.next(), YAML_DOCUMENT_END_EVENT);
        const yaml_event_t& after = ev_.next();
        if (after.type == YAML_DOCUMENT_START_EVENT)
            ev_.fail(after.start_mark.line, "several YAML documents are not supported");
        expect(after, YAML_STREAM_END_EVENT);
        return out;
    }

private:
    void expect(const yaml_event_t& e, yaml_event_type_t type) const {
        if (e.type != type) ev_.fail(e.start_mark.line, "unexpected YAML structure");
    }

    /// Anchors, aliases and explicit tags are refused where they appear.
    void refuse_extras(const yaml_event_t& e, const unsigned char* anchor, const unsigned char* tag,
                       bool implicit) const {
        if (anchor || (tag && !implicit)) ev_.fail(e.start_mark.line, "anchors, aliases and tags are not supported");
    }

    json node(const yaml_event_t& e, size_t depth, bool in_flow) {
        if (depth > kMaxDepth) ev_.fail(e.start_mark.line, "nested deeper than " + std::to_string(kMaxDepth) + " levels");
        switch (e.type) {
            case YAML_ALIAS_EVENT:
                ev_.fail(e.start_mark.line, "anchors, aliases and tags are not supported");
            case YAML_SCALAR_EVENT: {
                auto& s = e.data.scalar;
                refuse_extras(e, s.anchor, s.tag, s.plain_implicit || s.quoted_implicit);
                return scalar(std::string(reinterpret_cast<const char*>(s.value), s.length),
                              s.style == YAML_PLAIN_SCALAR_STYLE, in_flow);
            }
            case YAML_SEQUENCE_START_EVENT: {
                auto& s = e.data.sequence_start;
                refuse_extras(e, s.anchor, s.tag, s.implicit);
                bool flow = s.style == YAML_FLOW_SEQUENCE_STYLE;
                json out = json::array();
                for (;;) {
                    const yaml_event_t& item = ev_.next();
                    if (item.type == YAML_SEQUENCE_END_EVENT) return out;
                    out.push_back(node(item, depth + 1, flow));
                }
            }
            case YAML_MAPPING_START_EVENT: {
                auto& m = e.data.mapping_start;
                refuse_extras(e, m.anchor, m.tag, m.implicit);
                bool flow = m.style == YAML_FLOW_MAPPING_STYLE;
                json out = json::object();
                for (;;) {
                    const yaml_event_t& k = ev_.next();
                    if (k.type == YAML_MAPPING_END_EVENT) return out;
                    size_t line = k.start_mark.line;
                    if (k.type != YAML_SCALAR_EVENT) ev_.fail(line, "a mapping key must be a scalar");
                    refuse_extras(k, k.data.scalar.anchor, k.data.scalar.tag,
                                  k.data.scalar.plain_implicit || k.data.scalar.quoted_implicit);
                    std::string key(reinterpret_cast<const char*>(k.data.scalar.value), k.data.scalar.length);
                    if (out.contains(key)) ev_.fail(line, "duplicate key '" + key + "'");
                    out[key] = node(ev_.next(), depth + 1, flow);
                }
            }
            default:
                ev_.fail(e.start_mark.line, "unexpected YAML structure");
        }
    }

    static json scalar(const std::string& v, bool plain, bool in_flow) {
        if (!plain) return v;
        if (v == "true") return true;
        if (v == "false") return false;
        if (v.empty() || v == "null" || v == "~") return nullptr;
        if (in_flow && looks_numeric(v)) {
            json n = json::parse(v, nullptr, false);
            if (n.is_number()) return n;
        }
        return v;
    }

    static bool looks_numeric(const std::string& v) {
        return !v.empty() && (v[0] == '-' || (v[0] >= '0' && v[0] <= '9')) &&
               v.find_first_not_of("0123456789+-.eE") == std::string::npos;
    }

    Events& ev_;
};

}  // namespace

json parse_yaml(const std::string& text, const std::string& what) {
    Events ev(text, what);
    return Builder(ev).document();
}

}  // namespace kube
