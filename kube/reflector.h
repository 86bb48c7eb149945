// LIST then WATCH, again and again, as client-go's reflector does: a consumer's view of a
// kind of object kept current. A resource version the server no longer has (410 Gone,
// as a status or as an ERROR event) lists again; any other failure waits (1 s doubling to
// 30 s) and watches again from the last version seen.
#pragma once
#include <functional>
#include <string>
#include <vector>

#include "kube/client.h"

namespace kube {

struct ReflectorHandlers {
    /// A full list: the consumer's view becomes exactly these objects.
    std::function<void(const std::vector<nlohmann::json>& items, const std::string& resource_version)> replace;
    /// One change after it.
    std::function<void(const Event& e)> event;
    /// A failure that will be retried (logged by the consumer).
    std::function<void(const std::string& what)> trouble;
};

/// Runs until `stop()`; `path` is a collection ("/api/v1/nodes"), `resource` names it for
/// errors ("nodes"). `watch_timeout` bounds each WATCH request (the server ends it then).
void reflect(Client& client, const std::string& path, const std::string& resource, const ReflectorHandlers& h,
             const std::function<bool()>& stop, int watch_timeout = 300);

}  // namespace kube
