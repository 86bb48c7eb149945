// LIST then WATCH, again and again, as client-go's reflector (tools/cache/reflector.go)
// does: a consumer's view of a kind of object kept current.
//
//   - The first LIST asks for resourceVersion=0 (any version: the API server answers from
//     its watch cache, not etcd); a LIST again after a WATCH lost its version asks for the
//     last version seen (in one page: a paged LIST at a version skips the watch cache).
//   - A version the server cannot serve on a LIST (410 Gone, or a 504 "Too large resource
//     version") lists again at once from scratch (no resourceVersion: the latest, from
//     etcd).
//   - A WATCH that loses its version (410, as a status or an ERROR event) lists again at
//     once; a second in a row, with no WATCH that ran well in between, waits the back-off
//     first, so an API server answering every WATCH with 410 is not listed back to back.
//   - Any other failure, and a WATCH that ended within a second with no event, waits the
//     back-off (base/backoff.h: 0.8 s doubling to 30 s, plus up to as much again at random)
//     and watches again from the last version seen. A good LIST and a WATCH that ran well
//     (an event, or a second or more) reset the back-off.
//   - Each WATCH asks the server to end it after `watch_timeout` seconds plus up to as
//     much again at random, so that node agents do not all list again at the same moment.
#pragma once
#include <functional>
#include <string>
#include <vector>

#include "base/backoff.h"
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

struct ReflectorOptions {
    int watch_timeout = 300;        ///< seconds: each WATCH lasts this, plus up to as much again at random
    size_t page_size = 500;         ///< objects per page of a LIST from scratch or from the watch cache
    base::BackoffPolicy backoff;    ///< after failures
    std::function<double()> random = base::uniform01;   ///< the jitter's source, uniform in [0, 1)
};

/// Runs until `stop()`; `path` is a collection ("/api/v1/nodes"), `resource` names it for
/// errors ("nodes").
void reflect(Client& client, const std::string& path, const std::string& resource, const ReflectorHandlers& h,
             const std::function<bool()>& stop, const ReflectorOptions& o);

/// The same with `watch_timeout` and the other options as they are by default.
void reflect(Client& client, const std::string& path, const std::string& resource, const ReflectorHandlers& h,
             const std::function<bool()>& stop, int watch_timeout = 300);

}  // namespace kube
