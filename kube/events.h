// core/v1 Events as client-go's record.EventRecorder writes them (tools/record event.go,
// events_cache.go): the object, its name "<object name>.<hex unix nanos>", and the
// strategic-merge patch of a repeat ({"count","lastTimestamp","message"}). The wire format
// follows kubernetes/api core/v1 types.go and client-go; what is sent when is the caller's.
#pragma once
#include <cstdint>
#include <ctime>
#include <string>

#include <nlohmann/json.hpp>

namespace kube {

/// metav1.Time: RFC 3339 in UTC, whole seconds ("2024-05-01T12:00:00Z").
std::string rfc3339(std::time_t t);

/// The object an Event is about (core/v1 ObjectReference).
struct ObjectRef {
    std::string kind, namespace_, name, uid, api_version = "v1";
};

struct EventSpec {
    ObjectRef object;
    std::string type = "Warning";   ///< "Normal" or "Warning"
    std::string reason, message;    ///< the message is cut to kMaxEventMessage bytes
    std::string component, host;    ///< source: "topocni", the node
    std::time_t first = 0, last = 0;
    int64_t count = 1;
};

inline constexpr size_t kMaxEventMessage = 1024;   ///< the API's note limit; kept for legacy events too

/// util.GenerateEventName: "<name>.<lowercase hex unix nanos>", or a random UUID when that
/// is no DNS subdomain (a name of more than 236 bytes).
std::string event_name(const std::string& object_name, int64_t unix_nanos);

/// POST /api/v1/namespaces/<ns>/events body: a legacy core/v1 Event (eventTime null,
/// reportingComponent and reportingInstance from the source, as makeEvent fills them).
nlohmann::json event_body(const std::string& name, const EventSpec& e);

/// The PATCH of a repeat (application/strategic-merge-patch+json): exactly
/// {"count":N,"lastTimestamp":"...","message":"..."}.
nlohmann::json event_patch(int64_t count, std::time_t last, const std::string& message);

/// "/api/v1/namespaces/<ns>/events", and with a name "/.../events/<name>".
std::string events_path(const std::string& ns, const std::string& name = "");

/// `s` cut to at most `max` bytes without splitting a UTF-8 sequence.
std::string cut_utf8(const std::string& s, size_t max);

}  // namespace kube
