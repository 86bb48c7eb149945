#include "kube/events.h"

#include <cstdio>
#include <random>

#include "kube/client.h"

namespace kube {

using json = nlohmann::json;

std::string rfc3339(std::time_t t) {
    std::tm tm{};
    ::gmtime_r(&t, &tm);
    char buf[32];
    std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", &tm);
    return buf;
}

std::string cut_utf8(const std::string& s, size_t max) {
    if (s.size() <= max) return s;
    size_t n = max;
    while (n > 0 && (static_cast<unsigned char>(s[n]) & 0xC0) == 0x80) --n;
    return s.substr(0, n);
}

namespace {

std::string random_uuid() {
    std::random_device rd;
    unsigned char b[16];
    for (auto& x : b) x = static_cast<unsigned char>(rd());
    b[6] = (b[6] & 0x0f) | 0x40;   // version 4
    b[8] = (b[8] & 0x3f) | 0x80;   // RFC 4122 variant
    char out[37];
    std::snprintf(out, sizeof out, "%02x%02x%02x%02x-%02x%02x-%02x%02x-%02x%02x-%02x%02x%02x%02x%02x%02x", b[0], b[1],
                  b[2], b[3], b[4], b[5], b[6], b[7], b[8], b[9], b[10], b[11], b[12], b[13], b[14], b[15]);
    return out;
}

}  // namespace

std::string event_name(const std::string& object_name, int64_t unix_nanos) {
    char hex[20];
    std::snprintf(hex, sizeof hex, "%llx", static_cast<unsigned long long>(unix_nanos));
    std::string name = object_name + "." + hex;
    // The object's name is a DNS subdomain already (a pod's is); only the length can fail.
    return name.size() <= 253 ? name : random_uuid();
}

json event_body(const std::string& name, const EventSpec& e) {
    json ref = json::object();
    if (!e.object.kind.empty()) ref["kind"] = e.object.kind;
    if (!e.object.namespace_.empty()) ref["namespace"] = e.object.namespace_;
    if (!e.object.name.empty()) ref["name"] = e.object.name;
    if (!e.object.uid.empty()) ref["uid"] = e.object.uid;
    if (!e.object.api_version.empty()) ref["apiVersion"] = e.object.api_version;
    return {{"kind", "Event"},
            {"apiVersion", "v1"},
            {"metadata", {{"name", name}, {"namespace", e.object.namespace_.empty() ? "default" : e.object.namespace_}}},
            {"involvedObject", ref},
            {"reason", e.reason},
            {"message", cut_utf8(e.message, kMaxEventMessage)},
            {"source", {{"component", e.component}, {"host", e.host}}},
            {"firstTimestamp", rfc3339(e.first)},
            {"lastTimestamp", rfc3339(e.last)},
            {"count", e.count},
            {"type", e.type},
            {"eventTime", nullptr},
            {"reportingComponent", e.component},
            {"reportingInstance", e.host}};
}

json event_patch(int64_t count, std::time_t last, const std::string& message) {
    return {{"count", count}, {"lastTimestamp", rfc3339(last)}, {"message", cut_utf8(message, kMaxEventMessage)}};
}

std::string events_path(const std::string& ns, const std::string& name) {
    std::string p = "/api/v1/namespaces/" + url_escape(ns.empty() ? "default" : ns) + "/events";
    return name.empty() ? p : p + "/" + url_escape(name);
}

}  // namespace kube
