#include "kube/reflector.h"

#include <algorithm>
#include <chrono>
#include <thread>

#include "kube/error.h"

namespace kube {

namespace {

/// Sleeps `seconds` in short steps, so that stop() is seen soon.
void pause(double seconds, const std::function<bool()>& stop) {
    auto until = std::chrono::steady_clock::now() + std::chrono::milliseconds(static_cast<long long>(seconds * 1000));
    while (!stop() && std::chrono::steady_clock::now() < until) std::this_thread::sleep_for(std::chrono::milliseconds(50));
}

}  // namespace

void reflect(Client& client, const std::string& path, const std::string& resource, const ReflectorHandlers& h,
             const std::function<bool()>& stop, int watch_timeout) {
    std::string rv;
    bool listed = false;
    double backoff = 1;
    while (!stop()) {
        try {
            if (!listed) {
                Page page = client.list(path, resource);
                h.replace(page.items, page.resource_version);
                rv = page.resource_version;
                listed = true;
            }
            auto began = std::chrono::steady_clock::now();
            bool any = false;
            rv = client.watch(path, rv, resource, [&](const Event& e) {
                any = true;
                h.event(e);
                return true;
            }, stop, watch_timeout);
            // A server that ends every WATCH at once would otherwise be asked again and again.
            if (!any && std::chrono::steady_clock::now() - began < std::chrono::seconds(1)) pause(1, stop);
            backoff = 1;
        } catch (const Error& e) {
            if (e.http_status == 410) {   // too old: only a new list brings the view back
                if (h.trouble) h.trouble(std::string("resource version expired, listing again: ") + e.what());
                listed = false;
                continue;
            }
            if (h.trouble) h.trouble(e.what());
            pause(backoff, stop);
            backoff = std::min(30.0, backoff * 2);
        }
    }
}

}  // namespace kube
