#include "cluster/cmd/refusal_agent.h"

#include <CLI/CLI.hpp>
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <map>
#include <memory>

#include "base/backoff.h"
#include "base/dir_watch.h"
#include "base/fd.h"
#include "base/files.h"
#include "base/log.h"
#include "base/stop_signal.h"
#include "cluster/cmd/api_credentials.h"
#include "cluster/cmd/commands.h"
#include "cni/error.h"
#include "placement/evictions.h"
#include "placement/placement.h"
#include "placement/refusal_record.h"
#include "kube/client.h"
#include "kube/error.h"
#include "kube/events.h"
#include "kube/eviction.h"

namespace cluster::cmd {

namespace {

using json = nlohmann::json;
using placement::refusal_record::Record;
using Clock = std::chrono::steady_clock;

constexpr const char* kComponent = "topocni";
constexpr const char* kReasonRefused = "TopocniPlacementRefused";
constexpr const char* kReasonEvicted = "TopocniEvicted";
constexpr const char* kReasonStopped = "TopocniEvictionStopped";

std::string pod_of(const Record& r) { return r.pod_namespace + "/" + r.pod_name; }

int64_t unix_nanos() {
    return std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::system_clock::now().time_since_epoch())
        .count();
}

/// What an operator reads in `kubectl describe pod`: the network, the node, what failed and why.
std::string refusal_message(const Record& r, const std::string& node) {
    std::string names;
    for (auto& c : r.constraints) names += (names.empty() ? "" : ", ") + c;
    std::string m = "network '" + r.network + "' refused on node '" + node + "': placement constraint not met: " + names;
    if (r.evict)
        m += " (onRefusal: evict after " + std::to_string(r.after) + " refusals within " +
             std::to_string(r.window_seconds) + "s)";
    return kube::cut_utf8(m + ": " + r.evidence, kube::kMaxEventMessage);
}

/// inotify on <stateDir> (for refused/ to appear) and <stateDir>/refused.
class RecordWatch {
public:
    explicit RecordWatch(std::string state_dir) : state_dir_(std::move(state_dir)) { rewatch(); }
    void rewatch() {
        for (auto& d : {state_dir_, placement::refusal_record::dir(state_dir_)}) (void)watch_.add(d);
    }
    bool wait(int ms) { return watch_.wait(ms); }

private:
    std::string state_dir_;
    base::DirWatch watch_{"reading every resync only"};
};

/// What the agent remembers of a pod's record, as long as the record is there.
struct PodMemo {
    std::string uid;                 ///< the pod uid this memo is about
    std::string event_name;          ///< the TopocniPlacementRefused Event, once created
    uint64_t reported = 0;           ///< the record's count the Event carries
    bool done = false;               ///< evicted, or left alone on purpose: no more eviction
    std::time_t next_try = 0;        ///< no eviction attempt before (blocked, failed, loop guard)
    int failures = 0;                ///< failed eviction attempts in a row
    std::time_t checked = 0;         ///< when the API last said the pod is there
    std::time_t retry_record = 0;    ///< a request about this record failed: not before
};

/// The loop guard's memory of one controller.
struct OwnerMemo {
    std::deque<std::time_t> evicted;   ///< times of its pods' evictions within the window
    bool told = false;                 ///< the stop was said in an Event in this window
};

class Agent {
public:
    explicit Agent(const RefusalAgentOptions& o) : o_(o) {}

    /// One look at every record; false when the API failed (then back off).
    bool pass() {
        std::time_t now = std::time(nullptr);
        auto names = placement::refusal_record::list(o_.state_dir);
        for (auto it = pods_.begin(); it != pods_.end();)   // records that went: forget them
            it = std::binary_search(names.begin(), names.end(), it->first) ? std::next(it) : pods_.erase(it);
        try {
            for (auto& name : names) one(name, now);
        } catch (const kube::Error& e) {
            retry_in_ = backoff_.next();
            base::log::warn(std::string("refusal agent on node '") + o_.node + "': the API failed (attempt " +
                            std::to_string(backoff_.failures()) + (e.http_status ? ", HTTP " + std::to_string(e.http_status) : "") +
                            "): " + e.what());
            client_.reset();
            return false;
        } catch (const base::Error& e) {   // a kubeconfig that cannot be read (yet)
            retry_in_ = backoff_.next();
            base::log::warn(std::string("refusal agent on node '") + o_.node + "': attempt " + std::to_string(backoff_.failures()) +
                            ": " + e.what());
            client_.reset();
            return false;
        }
        backoff_.reset();
        return true;
    }

    /// Seconds to wait before the next pass after an API failure (base/backoff.h).
    double backoff() const { return retry_in_; }

    /// Seconds until something is due without a change: a retry, a pod to look at again.
    double next_due(double cap) const {
        std::time_t now = std::time(nullptr);
        double best = cap;
        for (auto& [name, m] : pods_) {
            if (!m.done && m.next_try > now) best = std::min(best, double(m.next_try - now));
            if (m.retry_record > now) best = std::min(best, double(m.retry_record - now));
        }
        return std::max(best, 0.05);
    }

private:
    kube::Client& client() {
        if (!client_)
            client_ = std::make_unique<kube::Client>(pick_kubeconfig(o_.kubeconfig, o_.kubeconfig_set),
                                                     std::chrono::milliseconds(static_cast<long long>(o_.api_timeout * 1000)));
        return *client_;
    }

    void one(const std::string& name, std::time_t now) {
        auto text = placement::refusal_record::read_text(o_.state_dir, name);
        if (!text) return;
        Record r;
        try {
            r = placement::refusal_record::parse(*text);
        } catch (const base::Error& e) {
            // Ours, and of no use: the pod's next refusal writes a good one.
            base::log::warn("refusal record '" + name + "' removed: " + e.what());
            placement::refusal_record::remove_if_same(o_.state_dir, name, *text);
            return;
        }
        PodMemo& m = pods_[name];
        if (m.uid != r.pod_uid) m = PodMemo{r.pod_uid};
        if (m.retry_record > now) return;
        try {
            if (r.count != m.reported) report_refusal(r, m, now);
            if (!m.done && placement::refusal_record::eviction_due(r, now) && now >= m.next_try) {
                if (!consider_eviction(r, m, now)) return forget(name, *text, r, "is gone");
            }
            if (now - m.checked >= static_cast<std::time_t>(o_.resync)) {
                if (!pod_there(r)) return forget(name, *text, r, "is gone");
                m.checked = now;
            }
        } catch (const kube::Error& e) {
            if (e.kind == kube::Error::Kind::Unavailable || e.http_status == 0 || e.http_status == 401) throw;
            // A refusal about this pod alone (403, 422...): the others go on.
            base::log::warn("refusal agent: pod '" + pod_of(r) + "': " + e.what());
            m.retry_record = now + 60;
        }
    }

    void forget(const std::string& name, const std::string& text, const Record& r, const std::string& why) {
        base::log::info("refusal record of pod '" + pod_of(r) + "' removed: the pod " + why);
        placement::refusal_record::remove_if_same(o_.state_dir, name, text);
        pods_.erase(name);
    }

    /// GET the pod: false when it is gone, or when it is another pod of the same name.
    bool pod_there(const Record& r) {
        auto res = client().send("GET", "/api/v1/namespaces/" + kube::url_escape(r.pod_namespace) + "/pods/" +
                                            kube::url_escape(r.pod_name));
        if (res.status == 404) return false;
        if (res.status != 200) fail_get(res, r);
        auto v = kube::pod_view(json::parse(res.body, nullptr, false));
        return r.pod_uid.empty() || v.uid == r.pod_uid;
    }

    [[noreturn]] void fail_get(const kube::https::Response& res, const Record& r) {
        bool transient = res.status == 429 || res.status >= 500;
        throw kube::Error(transient ? kube::Error::Kind::Unavailable : kube::Error::Kind::Invalid,
                          "GET pod '" + pod_of(r) + "': HTTP " + std::to_string(res.status) + ": " +
                              kube::status_message(res.body),
                          res.status);
    }

    kube::EventSpec event_for(const Record& r, std::string reason, std::string type, std::string message,
                              std::time_t now) const {
        kube::EventSpec e;
        e.object = {"Pod", r.pod_namespace, r.pod_name, r.pod_uid, "v1"};
        e.reason = std::move(reason);
        e.type = std::move(type);
        e.message = std::move(message);
        e.component = kComponent;
        e.host = o_.node;
        e.first = e.last = now;
        return e;
    }

    /// One Event per pod with the count of its refusals: created the first time, then
    /// its count, lastTimestamp and message patched (a new one when it went, 404).
    void report_refusal(const Record& r, PodMemo& m, std::time_t) {
        std::string msg = refusal_message(r, o_.node.empty() ? r.node : o_.node);
        if (!m.event_name.empty()) {
            try {
                client().patch(kube::events_path(r.pod_namespace, m.event_name),
                               kube::event_patch(static_cast<int64_t>(r.count), r.last, msg),
                               "application/strategic-merge-patch+json", "event '" + m.event_name + "'", "events");
                m.reported = r.count;
                return;
            } catch (const kube::Error& e) {
                if (e.http_status != 404) throw;
                m.event_name.clear();   // deleted (events expire after an hour): a new one
            }
        }
        kube::EventSpec e = event_for(r, kReasonRefused, "Warning", msg, r.last);
        e.first = r.first;
        e.count = static_cast<int64_t>(r.count);
        std::string name = kube::event_name(r.pod_name, unix_nanos());
        client().create(kube::events_path(r.pod_namespace), kube::event_body(name, e), "event '" + name + "'", "events");
        base::log::info("pod '" + pod_of(r) + "': " + msg);
        m.event_name = name;
        m.reported = r.count;
    }

    void post_event(const Record& r, const char* reason, const char* type, const std::string& msg, std::time_t now) {
        std::string name = kube::event_name(r.pod_name, unix_nanos());
        client().create(kube::events_path(r.pod_namespace), kube::event_body(name, event_for(r, reason, type, msg, now)),
                        "event '" + name + "'", "events");
    }

    void skip(const Record& r, PodMemo& m, const std::string& why) {
        base::log::info("pod '" + pod_of(r) + "' refused " + std::to_string(placement::refusal_record::refusals_within(r, std::time(nullptr))) +
                        " times by network '" + r.network + "' is not evicted: " + why);
        placement::evictions::count(o_.state_dir, r.network, "skipped");
        m.done = true;
    }

    /// The eviction, when the pod may be moved; false when the pod is gone.
    bool consider_eviction(const Record& r, PodMemo& m, std::time_t now) {
        auto res = client().send("GET", "/api/v1/namespaces/" + kube::url_escape(r.pod_namespace) + "/pods/" +
                                            kube::url_escape(r.pod_name));
        if (res.status == 404) return false;
        if (res.status != 200) fail_get(res, r);
        kube::PodView v;
        try {
            v = kube::pod_view(json::parse(res.body, nullptr, false));
        } catch (const kube::Error& e) {
            throw kube::Error(kube::Error::Kind::Unavailable, "GET pod '" + pod_of(r) + "': " + e.what(), 0);
        }
        if (!r.pod_uid.empty() && v.uid != r.pod_uid) return false;
        m.checked = now;
        if (v.terminating) {
            m.done = true;   // on its way out already
            return true;
        }
        if (!v.controller) {
            skip(r, m, "a bare pod (no controller ownerReference): nothing would replace it");
            return true;
        }
        const kube::OwnerRef& c = *v.controller;
        std::string owner = c.kind + " '" + c.name + "'";
        if (c.kind == "DaemonSet") {
            skip(r, m, "a DaemonSet pod: its replacement would be made for this node again");
            return true;
        }
        if (c.kind == "Node") {
            skip(r, m, "a static pod (owned by its Node): kubelet would start it here again");
            return true;
        }
        // The loop guard: without the admission webhook or the scheduler extender the
        // replacement may land here again, and be refused and evicted again.
        OwnerMemo& om = owners_[c.uid];
        while (!om.evicted.empty() && om.evicted.front() <= now - static_cast<std::time_t>(o_.owner_window))
            om.evicted.pop_front();
        if (om.evicted.size() < static_cast<size_t>(o_.owner_max)) om.told = false;
        if (om.evicted.size() >= static_cast<size_t>(o_.owner_max)) {
            m.next_try = om.evicted.front() + static_cast<std::time_t>(o_.owner_window);
            if (!om.told) {
                std::string msg = "not evicted: topocni evicted " + std::to_string(om.evicted.size()) + " pods of " +
                                  owner + " from node '" + o_.node + "' within " +
                                  std::to_string(static_cast<long long>(o_.owner_window)) +
                                  "s already (their replacements were refused again); evictions of its pods stop until " +
                                  kube::rfc3339(m.next_try) +
                                  ". Steer the pods away with the admission webhook, the scheduler extender or a nodeSelector.";
                post_event(r, kReasonStopped, "Warning", msg, now);
                base::log::warn("pod '" + pod_of(r) + "': " + msg);
                placement::evictions::count(o_.state_dir, r.network, "skipped");
                om.told = true;
            }
            return true;
        }
        auto answer = kube::eviction_answer(client().send("POST", kube::eviction_path(r.pod_namespace, r.pod_name),
                                                          kube::eviction_body(r.pod_namespace, r.pod_name).dump(),
                                                          "application/json"));
        using Outcome = kube::EvictionAnswer::Outcome;
        switch (answer.outcome) {
            case Outcome::Evicted: {
                om.evicted.push_back(now);
                m.done = true;
                std::string msg = "evicted: network '" + r.network + "' refused it " +
                                  std::to_string(placement::refusal_record::refusals_within(r, now)) + " times within " +
                                  std::to_string(r.window_seconds) + "s on node '" + o_.node + "' (" +
                                  (r.constraints.empty() ? std::string("placement") : r.constraints.front()) +
                                  (r.constraints.size() > 1 ? " and more" : "") + "; onRefusal: evict); its " + owner +
                                  " makes a new pod for another node";
                base::log::info("pod '" + pod_of(r) + "': " + msg);
                placement::evictions::count(o_.state_dir, r.network, "evicted");
                post_event(r, kReasonEvicted, "Normal", msg, now);
                return true;
            }
            case Outcome::Blocked: {
                int wait = std::max(answer.retry_after_seconds, static_cast<int>(o_.blocked_retry));
                m.next_try = now + wait;
                base::log::warn("pod '" + pod_of(r) + "': eviction refused by a PodDisruptionBudget (HTTP 429): " +
                                answer.message + "; asking again in " + std::to_string(wait) + "s");
                placement::evictions::count(o_.state_dir, r.network, "blocked");
                return true;
            }
            case Outcome::Gone:
                return false;
            case Outcome::Failed:
                break;
        }
        ++m.failures;
        int wait = std::min(300, 10 << std::min(m.failures - 1, 5));
        m.next_try = now + wait;
        base::log::warn("pod '" + pod_of(r) + "': eviction failed (attempt " + std::to_string(m.failures) + ", HTTP " +
                        std::to_string(answer.status) + "): " + answer.message + "; trying again in " +
                        std::to_string(wait) + "s");
        return true;
    }

    const RefusalAgentOptions& o_;
    std::unique_ptr<kube::Client> client_;
    std::map<std::string, PodMemo> pods_;        ///< record file name -> memo
    std::map<std::string, OwnerMemo> owners_;    ///< controller uid -> memo
    base::Backoff backoff_;
    double retry_in_ = 0;
};

}  // namespace

int refusal_agent(const RefusalAgentOptions& o, const std::atomic<bool>& stop) {
    Agent agent(o);
    RecordWatch watch(o.state_dir);
    base::log::info("refusal agent on node '" + o.node + "': watching '" + placement::refusal_record::dir(o.state_dir) + "'");
    while (!stop) {
        bool ok = agent.pass();
        double wait = ok ? agent.next_due(o.resync) : agent.backoff();
        const auto next = Clock::now() + std::chrono::milliseconds(static_cast<long long>(wait * 1000));
        while (!stop && Clock::now() < next) {
            auto left = std::chrono::duration_cast<std::chrono::milliseconds>(next - Clock::now()).count();
            if (watch.wait(static_cast<int>(std::min<long long>(left, 200))) && ok) {
                ::usleep(static_cast<useconds_t>(o.settle * 1e6));
                watch.wait(0);
                break;
            }
        }
        watch.rewatch();
    }
    base::log::info("refusal agent on node '" + o.node + "' stopped");
    return 0;
}

void add_refusal_agent(CLI::App& app, int& status) {
    auto o = std::make_shared<RefusalAgentOptions>();
    auto* cmd = app.add_subcommand("refusal-agent",
                                   "Turn this node's placement refusals into Events on the pods, and evict pods whose "
                                   "network asks for it (runs until SIGTERM)");
    cmd->add_option("--state-dir", o->state_dir, "topocni stateDir (the refusal records)")->capture_default_str();
    cmd->add_option("--node", o->node, "the Node's name (default: $NODE_NAME, else the host name lower-cased)");
    auto* kc = cmd->add_option("--kubeconfig", o->kubeconfig,
                               "default: the pod's service account, else topocni's, else Multus's kubeconfig");
    cmd->add_option("--api-timeout", o->api_timeout, "seconds per API request")
        ->check(CLI::Range(0.5, 120.0))
        ->capture_default_str();
    cmd->add_option("--resync", o->resync, "look at every record, and whether its pod is still there, this often (s)")
        ->check(CLI::Range(1.0, 3600.0))
        ->capture_default_str();
    cmd->add_option("--max-evictions-per-owner", o->owner_max,
                    "the loop guard: evict at most this many pods of one controller ...")
        ->check(CLI::Range(1, 1000))
        ->capture_default_str();
    cmd->add_option("--owner-window", o->owner_window, "... within this many seconds")
        ->check(CLI::Range(1.0, 7.0 * 86400))
        ->capture_default_str();
    cmd->add_option("--blocked-retry", o->blocked_retry,
                    "seconds before asking again when a PodDisruptionBudget refused an eviction")
        ->check(CLI::Range(1.0, 3600.0))
        ->capture_default_str();
    cmd->footer("Examples:\n  topocni refusal-agent --state-dir /host/var/lib/cni/topocni --node \"$NODE_NAME\"\n"
                "Needs: create and patch on events, get on pods, create on pods/eviction (examples/rbac.yaml).");
    cmd->callback([o, kc, &status] {
        o->node = node_of(o->node);
        o->kubeconfig_set = kc->count() > 0;
        auto& stop = base::stop_on_signal();
        base::log::configure("info", "");
        status = refusal_agent(*o, stop);
    });
}

}  // namespace cluster::cmd
