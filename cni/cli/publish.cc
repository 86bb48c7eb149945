#include "cni/cli/publish.h"

#include <poll.h>
#include <sys/inotify.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <ctime>
#include <optional>
#include <set>

#include "base/fd.h"
#include "base/files.h"
#include "base/log.h"
#include "cni/cli/api_credentials.h"
#include "cni/error.h"
#include "kube/client.h"
#include "kube/error.h"

namespace cni::cli {

namespace {

using json = nlohmann::json;
using Clock = std::chrono::steady_clock;

/// Seconds since the epoch of an RFC 3339 UTC time ("2026-12-04T13:00:00Z"); nullopt when
/// it is not one.
std::optional<std::time_t> parse_time(const std::string& s) {
    std::tm tm{};
    const char* end = ::strptime(s.c_str(), "%Y-%m-%dT%H:%M:%SZ", &tm);
    if (!end || *end) return std::nullopt;
    return ::timegm(&tm);
}

/// inotify on the directories ADD, DEL and GC write: the state directory, the attachment
/// records of each network, the SR-IOV records and each link's ledger.
class StateWatch {
public:
    explicit StateWatch(std::string state_dir) : dir_(std::move(state_dir)), fd_(::inotify_init1(IN_NONBLOCK | IN_CLOEXEC)) {
        if (fd_.get() < 0) base::log::warn(std::string("inotify: ") + strerror(errno) + "; reading every interval only");
        rewatch();
    }
    /// Adds directories that appeared since (a directory watched already costs nothing);
    /// true when the state directory itself has just become watchable: whatever is in it
    /// is news.
    bool rewatch() {
        if (fd_.get() < 0) return false;
        const uint32_t mask = IN_CREATE | IN_DELETE | IN_MOVED_TO | IN_MOVED_FROM | IN_CLOSE_WRITE | IN_ONLYDIR;
        std::vector<std::string> dirs = {dir_, dir_ + "/attachments", dir_ + "/sriov", dir_ + "/bandwidth"};
        for (auto& n : base::fs::list_dir(dir_ + "/attachments")) dirs.push_back(dir_ + "/attachments/" + n);
        for (auto& n : base::fs::list_dir(dir_ + "/bandwidth")) dirs.push_back(dir_ + "/bandwidth/" + n);
        bool appeared = false;
        for (auto& d : dirs) {
            int wd = ::inotify_add_watch(fd_.get(), d.c_str(), mask);   // a missing one: later
            if (d == dir_ && wd >= 0 && !dir_watched_) appeared = dir_watched_ = true;
        }
        return appeared && !first_;
    }
    void started() { first_ = false; }
    /// Waits up to `ms` for a change; true when one came. Drains what arrived.
    bool wait(int ms) {
        if (fd_.get() < 0) {
            ::poll(nullptr, 0, ms);
            return false;
        }
        pollfd p{fd_.get(), POLLIN, 0};
        int n = ::poll(&p, 1, ms);
        if (n <= 0) return false;
        char buf[16384];
        while (::read(fd_.get(), buf, sizeof buf) > 0) {
        }
        return true;
    }

private:
    std::string dir_;
    base::UniqueFd fd_;
    bool dir_watched_ = false, first_ = true;
};

class Publisher {
public:
    explicit Publisher(const PublishOptions& o) : o_(o) {}

    /// Reads the facts and PATCHes them when the Node's copy differs or is due a heartbeat;
    /// true when the Node carries them now. API failures are logged and return false.
    bool step() {
        NodeFacts f = read_node_facts(o_.facts);
        std::string content = facts_content(f);
        try {
            if (!client_) connect();
            if (!known_) learn_what_the_node_has();
            bool due = sent_at_ && std::time(nullptr) - *sent_at_ >= static_cast<std::time_t>(o_.heartbeat);
            if (content == sent_ && !due) return true;
            std::string text = to_json(f).dump();
            json patch = {{"metadata", {{"annotations", {{kFactsAnnotation, text}}}}}};
            client_->patch("/api/v1/nodes/" + kube::url_escape(o_.facts.node), patch, "application/merge-patch+json",
                           "node '" + o_.facts.node + "'", "nodes");
            base::log::info("published facts of node '" + o_.facts.node + "' (" + std::to_string(text.size()) + " bytes, " +
                            (content == sent_ ? "unchanged, heartbeat" : "changed") + ")");
            sent_ = content;
            sent_at_ = parse_time(f.taken_at);
            failures_ = 0;
            return true;
        } catch (const base::Error& e) {
            ++failures_;
            auto* k = dynamic_cast<const kube::Error*>(&e);
            base::log::warn(std::string("publishing facts of node '") + o_.facts.node + "' failed (attempt " +
                            std::to_string(failures_) + (k && k->http_status ? ", HTTP " + std::to_string(k->http_status) : "") +
                            "): " + e.what());
            // A connection that failed is opened again; what the Node has is asked again.
            client_.reset();
            known_ = false;
            return false;
        }
    }

    /// Seconds to wait before the next attempt after failures: 1, 2, 4 ... 60.
    double backoff() const { return failures_ ? std::min(60.0, double(1u << std::min(failures_ - 1, 6))) : 0; }

private:
    void connect() {
        client_ = std::make_unique<kube::Client>(pick_kubeconfig(o_.kubeconfig, o_.kubeconfig_set), std::chrono::milliseconds(
                                                                           static_cast<long long>(o_.api_timeout * 1000)));
    }

    /// What the Node carries already: a publisher restarted with nothing changed sends nothing.
    void learn_what_the_node_has() {
        json node = client_->get("/api/v1/nodes/" + kube::url_escape(o_.facts.node), "node '" + o_.facts.node + "'", "nodes");
        sent_.clear();
        sent_at_.reset();
        auto md = node.find("metadata");
        if (md != node.end() && md->is_object())
            if (auto an = md->find("annotations"); an != md->end() && an->is_object())
                if (auto it = an->find(kFactsAnnotation); it != an->end() && it->is_string()) {
                    try {
                        NodeFacts had = facts_from_json(json::parse(it->get<std::string>()));
                        sent_ = facts_content(had);
                        sent_at_ = parse_time(had.taken_at);
                    } catch (const std::exception& e) {
                        base::log::info(std::string("the Node's facts annotation is replaced: ") + e.what());
                    }
                }
        known_ = true;
    }

    const PublishOptions& o_;
    std::unique_ptr<kube::Client> client_;
    bool known_ = false;
    std::string sent_;                      ///< facts_content of what the Node carries
    std::optional<std::time_t> sent_at_;    ///< its takenAt
    int failures_ = 0;
};

}  // namespace

int publish(const PublishOptions& o, const std::atomic<bool>& stop) {
    Publisher p(o);
    if (o.once) return p.step() ? 0 : 1;
    StateWatch watch(o.facts.state_dir);
    watch.started();
    base::log::info("publishing facts of node '" + o.facts.node + "' as annotation " + kFactsAnnotation);
    while (!stop) {
        bool ok = p.step();
        // Until the next read: a change (then a moment for the rest of it), the interval,
        // or, after a failure, the back-off.
        const auto next = Clock::now() + std::chrono::milliseconds(static_cast<long long>((ok ? o.interval : p.backoff()) * 1000));
        while (!stop && Clock::now() < next) {
            auto left = std::chrono::duration_cast<std::chrono::milliseconds>(next - Clock::now()).count();
            // A state directory made after the start (the first ADD makes it) is news too.
            bool appeared = watch.rewatch();
            if ((watch.wait(static_cast<int>(std::min<long long>(left, 200))) || appeared) && ok) {
                ::usleep(static_cast<useconds_t>(o.settle * 1e6));
                watch.wait(0);
                break;
            }
        }
        watch.rewatch();
    }
    base::log::info("stopped publishing facts of node '" + o.facts.node + "'");
    return 0;
}

}  // namespace cni::cli
