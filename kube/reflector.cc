#include "kube/reflector.h"

#include <chrono>
#include <optional>
#include <thread>

#include "kube/error.h"

namespace kube {

namespace {

using Clock = std::chrono::steady_clock;

/// Sleeps `seconds` in short steps, so that stop() is seen soon.
void pause(double seconds, const std::function<bool()>& stop) {
    auto until = Clock::now() + std::chrono::milliseconds(static_cast<long long>(seconds * 1000));
    while (!stop() && Clock::now() < until) std::this_thread::sleep_for(std::chrono::milliseconds(50));
}

/// One reflector's state between its LISTs and WATCHes.
class Loop {
public:
    Loop(Client& c, const std::string& path, const std::string& resource, const ReflectorHandlers& h,
         const std::function<bool()>& stop, const ReflectorOptions& o)
        : c_(c), path_(path), resource_(resource), h_(h), stop_(stop), o_(o), backoff_(o.backoff, o.random) {}

    void run() {
        while (!stop_()) {
            if (!listed_ && !list()) continue;
            watch();
        }
    }

private:
    /// client-go's relistResourceVersion: "0" at first (the watch cache), the last version
    /// seen after that, "" (etcd, the latest) once the server said it cannot serve that one.
    std::string relist_version() const { return unavailable_ ? "" : rv_.empty() ? "0" : rv_; }

    /// A LIST at a version in one page (the watch cache ignores a limit only at "0", and a
    /// paged LIST at any other version would go to etcd: client-go's list()); else pages.
    Page list_at(const std::string& version) {
        size_t pages = version.empty() || version == "0" ? o_.page_size : 0;
        return c_.list(path_, resource_, pages, version);
    }

    bool list() {
        try {
            Page page;
            try {
                page = list_at(relist_version());
            } catch (const ResourceVersionUnavailable& e) {
                trouble(std::string("listing again from scratch: ") + e.what());
                unavailable_ = true;
                page = list_at(relist_version());
            }
            h_.replace(page.items, page.resource_version);
            rv_ = page.resource_version;
            listed_ = true;
            unavailable_ = false;
            if (!lost_in_a_row_) backoff_.reset();   // the API answers; a 410 storm still backs off
            return true;
        } catch (const Error& e) {
            trouble(e.what());
            pause(backoff_.next(), stop_);
            return false;
        }
    }

    void watch() {
        // Ran well: delivered an event, or stayed open a second after the server's 200. Counted
        // from the 200, not from the request: a connect time-out or a 5xx from an overloaded
        // server also takes seconds, and must not reset the back-off it is there to grow.
        std::optional<Clock::time_point> opened;
        bool any = false;
        auto ran_well = [&] { return any || (opened && Clock::now() - *opened >= std::chrono::seconds(1)); };
        try {
            // client-go: minWatchTimeout * (1 + rand), so that watches end (and list) apart.
            int timeout = static_cast<int>(base::jittered(o_.watch_timeout, 1.0, o_.random));
            rv_ = c_.watch(path_, rv_, resource_, [&](const Event& e) {
                any = true;
                seen(e.object);   // kept when the stream fails after it, as client-go's handleWatch does
                h_.event(e);
                return true;
            }, stop_, timeout, [&] { opened = Clock::now(); });
            if (ran_well()) return healthy();
            // A server that ends every WATCH at once (client-go's VeryShortWatchError).
            if (!stop_()) pause(backoff_.next(), stop_);
        } catch (const ResourceVersionUnavailable& e) {
            if (ran_well()) healthy();
            trouble(std::string("resource version expired, listing again: ") + e.what());
            listed_ = false;
            if (lost_in_a_row_) pause(backoff_.next(), stop_);   // the first at once, then back off
            lost_in_a_row_ = true;
        } catch (const Error& e) {
            if (ran_well()) healthy();
            trouble(e.what());
            pause(backoff_.next(), stop_);
        }
    }

    void seen(const nlohmann::json& o) {
        if (!o.is_object()) return;
        if (auto md = o.find("metadata"); md != o.end() && md->is_object())
            if (auto v = md->find("resourceVersion"); v != md->end() && v->is_string()) rv_ = v->get<std::string>();
    }

    void healthy() {
        backoff_.reset();
        lost_in_a_row_ = false;
    }

    void trouble(const std::string& what) {
        if (h_.trouble) h_.trouble(what);
    }

    Client& c_;
    const std::string& path_;
    const std::string& resource_;
    const ReflectorHandlers& h_;
    const std::function<bool()>& stop_;
    const ReflectorOptions& o_;
    base::Backoff backoff_;
    std::string rv_;              ///< the last version seen (a list's, an event's, a bookmark's)
    bool listed_ = false;
    bool unavailable_ = false;    ///< the server said it cannot serve rv_: list from scratch
    bool lost_in_a_row_ = false;  ///< a WATCH lost its version, with no WATCH that ran well since
};

}  // namespace

void reflect(Client& client, const std::string& path, const std::string& resource, const ReflectorHandlers& h,
             const std::function<bool()>& stop, const ReflectorOptions& o) {
    Loop(client, path, resource, h, stop, o).run();
}

void reflect(Client& client, const std::string& path, const std::string& resource, const ReflectorHandlers& h,
             const std::function<bool()>& stop, int watch_timeout) {
    ReflectorOptions o;
    o.watch_timeout = watch_timeout;
    reflect(client, path, resource, h, stop, o);
}

}  // namespace kube
