#include "cluster/cmd/publish.h"

#include "cluster/dra_sync.h"

#include <csignal>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <ctime>
#include <optional>
#include <thread>

#include "base/backoff.h"
#include "base/dir_watch.h"
#include "base/fd.h"
#include "base/files.h"
#include "base/log.h"
#include "base/stop_signal.h"
#include "cluster/cmd/api_credentials.h"
#include "cluster/nad_informer.h"
#include "cluster/own_node.h"
#include "cluster/resources.h"
#include "cni/error.h"
#include "kube/client.h"
#include "kube/error.h"
#include "kube/reflector.h"

namespace cluster::cmd {

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
    explicit StateWatch(std::string state_dir) : dir_(std::move(state_dir)) { rewatch(); }
    /// Adds directories that appeared since; true when the state directory itself has just
    /// become watchable: whatever is in it is news.
    bool rewatch() {
        std::vector<std::string> dirs = {dir_, dir_ + "/attachments", dir_ + "/sriov", dir_ + "/bandwidth"};
        for (auto& n : base::fs::list_dir(dir_ + "/attachments")) dirs.push_back(dir_ + "/attachments/" + n);
        for (auto& n : base::fs::list_dir(dir_ + "/bandwidth")) dirs.push_back(dir_ + "/bandwidth/" + n);
        bool appeared = false;
        for (auto& d : dirs)
            if (watch_.add(d) && d == dir_ && !dir_watched_) appeared = dir_watched_ = true;   // a missing one: later
        return appeared && !first_;
    }
    void started() { first_ = false; }
    bool wait(int ms) { return watch_.wait(ms); }

private:
    std::string dir_;
    base::DirWatch watch_{"reading every interval only"};
    bool dir_watched_ = false, first_ = true;
};

/// What the publisher reads from the API besides its own Node's annotation: the NADs
/// (each parsed once per version) and its own Node (labels, status), each kept by a
/// LIST+WATCH; `changed` wakes the publisher.
class ClusterView {
public:
    explicit ClusterView(std::shared_ptr<cluster::NadInformer> nads) : nads_(std::move(nads)) {}
    void replace_nads(const std::vector<json>& items) {
        nads_->store().replace(items);
        changed = true;
    }
    void nad_event(const kube::Event& e) {
        if (e.type != "ADDED" && e.type != "MODIFIED" && e.type != "DELETED") return;
        nads_->store().event(e);
        changed = true;
    }
    void replace_node(const std::vector<json>& items) {
        node_.replace(items);
        changed = true;
    }
    void node_event(const kube::Event& e) {
        if (e.type != "ADDED" && e.type != "MODIFIED" && e.type != "DELETED") return;
        node_.event(e);
        changed = true;
    }
    /// Around each status PATCH (cluster/own_node.h says why both halves).
    void sending() { node_.sending(); }
    void sent(const json& patched, const json& capacity, const json& allocatable) {
        node_.sent(patched, capacity, allocatable);
    }
    bool synced() const { return nads_->synced() && node_.listed(); }
    std::vector<cluster::PodNetwork> networks() const { return nads_->all(); }
    json node() const { return node_.node(); }
    std::atomic<bool> changed{false};

private:
    std::shared_ptr<cluster::NadInformer> nads_;   // thread-safe itself
    cluster::OwnNode node_;                        // likewise
};

std::map<std::string, std::string> labels_of(const json& node) {
    std::map<std::string, std::string> labels;
    if (auto md = node.find("metadata"); md != node.end() && md->is_object())
        if (auto l = md->find("labels"); l != md->end() && l->is_object())
            for (auto it = l->begin(); it != l->end(); ++it)
                if (it->is_string()) labels[it.key()] = it->get<std::string>();
    return labels;
}

class Publisher {
public:
    Publisher(const PublishOptions& o, ClusterView* view) : o_(o), view_(view) {}

    /// Reads the facts and PATCHes them when the Node's copy differs or is due a heartbeat;
    /// true when the Node carries them now. API failures are logged and return false.
    bool step() {
        FactsOptions fo = o_.facts;
        std::vector<cluster::PodNetwork> nets;
        if (view_) {
            nets = view_->networks();
            fo.masters = cluster::masters_of(nets);
        }
        placement::NodeFacts f = read_node_facts(fo);
        bool ok = true;
        if (o_.annotation) ok = publish_facts(f);
        if (o_.slices) ok = publish_slices(f, nets) && ok;
        // Apart from the facts: a cluster whose RBAC lacks nodes/status still gets them.
        if (ok && o_.capacities && view_ && view_->synced()) {
            try {
                keep_capacities(f, nets);
            } catch (const base::Error& e) {
                base::log::warn("keeping the extended resources of node '" + o_.facts.node + "' failed: " + e.what());
            }
        }
        return ok;
    }

private:
    bool publish_facts(const placement::NodeFacts& f) {
        std::string content = placement::facts_content(f);
        try {
            if (!client_) connect();
            if (!known_) learn_what_the_node_has();
            bool due = sent_at_ && std::time(nullptr) - *sent_at_ >= static_cast<std::time_t>(o_.heartbeat);
            if (content == sent_ && !due) {
                backoff_.reset();
                return true;
            }
            std::string text = to_json(f).dump();
            json patch = {{"metadata", {{"annotations", {{placement::kFactsAnnotation, text}}}}}};
            client_->patch("/api/v1/nodes/" + kube::url_escape(o_.facts.node), patch, "application/merge-patch+json",
                           "node '" + o_.facts.node + "'", "nodes");
            base::log::info("published facts of node '" + o_.facts.node + "' (" + std::to_string(text.size()) + " bytes, " +
                            (content == sent_ ? "unchanged, heartbeat" : "changed") + ")");
            sent_ = content;
            sent_at_ = parse_time(f.taken_at);
            backoff_.reset();
            return true;
        } catch (const base::Error& e) {
            return failed("publishing facts", e);
        }
    }

    /// After an API failure: the back-off's next wait, the failure logged with its attempt
    /// and HTTP status; a connection that failed is opened again, and what the Node has is
    /// asked again.
    bool failed(const char* doing, const base::Error& e) {
        retry_in_ = backoff_.next();
        auto* k = dynamic_cast<const kube::Error*>(&e);
        base::log::warn(std::string(doing) + " of node '" + o_.facts.node + "' failed (attempt " +
                        std::to_string(backoff_.failures()) +
                        (k && k->http_status ? ", HTTP " + std::to_string(k->http_status) : "") + "): " + e.what());
        client_.reset();
        known_ = false;
        return false;
    }

    /// The node's ResourceSlices made to hold the devices of `f` (nothing sent when they do).
    /// The slices offer the pools of the NADs that can land here before the first ADD uses
    /// them (the facts document knows a pool once an attachment has used it).
    bool publish_slices(const placement::NodeFacts& f, const std::vector<cluster::PodNetwork>& nets) {
        try {
            if (!client_) connect();
            placement::NodeFacts offered = f;
            cluster::dra::SliceOptions so = o_.devices;
            if (view_) {
                const json node = view_->node();
                const auto labels = labels_of(node);
                if (node.is_object())
                    for (auto& pool : cluster::unused_pools(nets, f, labels)) offered.networks.push_back(std::move(pool));
                // Before the Node is known: the reserves of the NADs that need no label.
                so.address_reserve = cluster::address_reserves(nets, labels);
            }
            slice_sync_.sync(*client_, cluster::dra::devices(offered, so));
            backoff_.reset();
            return true;
        } catch (const base::Error& e) {
            return failed("keeping the resourceslices", e);
        }
    }

public:
    /// Seconds to wait before the next attempt after a failure (base/backoff.h).
    double backoff() const { return retry_in_; }

    /// Seconds until the heartbeat is due: the facts on the Node are `heartbeat` old then.
    /// Without it, a `--heartbeat` shorter than `--interval` would wait for the interval.
    double until_heartbeat() const {
        if (!sent_at_) return o_.heartbeat;
        return std::max(0.0, double(*sent_at_ + static_cast<std::time_t>(o_.heartbeat) - std::time(nullptr)));
    }

private:
    /// The Node's topocni extended resources made what the facts and NADs say: added or
    /// changed, and removed when no NAD offers them any more; the marker always
    /// (cluster/resources.h says why). Allocatable gets the same
    /// (kubelet would copy it at its next status update; the scheduler reads allocatable).
    void keep_capacities(const placement::NodeFacts& f, const std::vector<cluster::PodNetwork>& nets) {
        json node = view_->node();
        if (!node.is_object()) return;   // not there (yet): the watch brings it
        cluster::Resources want = cluster::capacities(nets, f, labels_of(node));
        json status = node.value("status", json::object());
        if (!status.is_object()) status = json::object();
        json capacity = status.value("capacity", json::object());
        json pods = capacity.is_object() ? capacity.value("pods", json()) : json();
        want[cluster::kMarkerResource] = cluster::marker_capacity(pods.is_string() ? pods.get<std::string>() : "");
        json patch = json::array();
        std::string said;
        json after[2];
        const char* keys[2] = {"capacity", "allocatable"};
        for (int i = 0; i < 2; ++i) {
            json have = status.value(keys[i], json::object());
            if (!have.is_object()) have = json::object();
            json next = have;
            for (auto& [name, v] : want) next[name] = std::to_string(v);
            for (auto it = have.begin(); it != have.end(); ++it)
                if (cluster::is_topocni_resource(it.key()) && !want.count(it.key())) next.erase(it.key());
            after[i] = next;
            if (next == have) continue;
            if (!node.contains("status") || !node["status"].is_object()) {
                patch.push_back({{"op", "add"}, {"path", "/status"}, {"value", json::object()}});
                node["status"] = json::object();
            }
            if (!status.contains(keys[i]) || !status[keys[i]].is_object()) {
                patch.push_back({{"op", "add"}, {"path", std::string("/status/") + keys[i]}, {"value", next}});
                continue;
            }
            for (auto it = next.begin(); it != next.end(); ++it)
                if (!have.contains(it.key()) || have[it.key()] != *it) {
                    patch.push_back({{"op", "add"}, {"path", std::string("/status/") + keys[i] + "/" + cluster::pointer_token(it.key())}, {"value", *it}});
                    if (i == 0) said += (said.empty() ? "" : ", ") + it.key() + "=" + it->get<std::string>();
                }
            for (auto it = have.begin(); it != have.end(); ++it)
                if (!next.contains(it.key())) {
                    patch.push_back({{"op", "remove"}, {"path", std::string("/status/") + keys[i] + "/" + cluster::pointer_token(it.key())}});
                    if (i == 0) said += (said.empty() ? "" : ", ") + std::string("removed ") + it.key();
                }
        }
        if (patch.empty()) return;
        view_->sending();
        json patched = client_->patch("/api/v1/nodes/" + kube::url_escape(o_.facts.node) + "/status", patch,
                                      "application/json-patch+json", "node '" + o_.facts.node + "' status", "nodes");
        view_->sent(patched, after[0], after[1]);
        base::log::info("extended resources of node '" + o_.facts.node + "': " + (said.empty() ? "allocatable updated" : said));
    }

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
                if (auto it = an->find(placement::kFactsAnnotation); it != an->end() && it->is_string()) {
                    try {
                        placement::NodeFacts had = placement::facts_from_json(json::parse(it->get<std::string>()));
                        sent_ = placement::facts_content(had);
                        sent_at_ = parse_time(had.taken_at);
                    } catch (const std::exception& e) {
                        base::log::info(std::string("the Node's facts annotation is replaced: ") + e.what());
                    }
                }
        known_ = true;
    }

    const PublishOptions& o_;
    ClusterView* view_;
    std::unique_ptr<kube::Client> client_;
    bool known_ = false;
    std::string sent_;                      ///< facts_content of what the Node carries
    std::optional<std::time_t> sent_at_;    ///< its takenAt
    base::Backoff backoff_;
    double retry_in_ = 0;
    // Listed again at each interval: slices deleted behind the agent's back (kubelet deletes
    // a node's slices when it starts) come back within one.
    cluster::dra::SliceSync slice_sync_{o_.facts.node, o_.driver, o_.interval * 0.9};
};

}  // namespace

int publish(const PublishOptions& o, const std::atomic<bool>& stop) {
    std::unique_ptr<ClusterView> view;
    std::vector<std::thread> loops;
    std::atomic<bool> loops_stop{false};
    // The NADs and this Node: for the extended resources, and for the pools the slices offer.
    if (o.capacities || o.slices) {
        view = std::make_unique<ClusterView>(o.nads ? o.nads : std::make_shared<cluster::NadInformer>());
        auto kc = pick_kubeconfig(o.kubeconfig, o.kubeconfig_set);
        auto timeout = std::chrono::milliseconds(static_cast<long long>(o.api_timeout * 1000));
        const std::string node_path = "/api/v1/nodes?fieldSelector=" + kube::url_escape("metadata.name=" + o.facts.node);
        if (o.once) {
            kube::Client c(kc, timeout);
            try {
                view->replace_nads(c.list(cluster::kNadPath, cluster::kNadResource).items);
                view->replace_node(c.list(node_path, "nodes").items);
            } catch (const base::Error& e) {
                base::log::warn(std::string("the NADs and the Node not read: ") + e.what());
            }
        } else {
            auto loop = [&, kc, timeout](std::string path, std::string resource, auto replace, auto event) {
                loops.emplace_back([=, &view, &loops_stop, &stop] {
                    kube::Client client(kc, timeout);
                    kube::ReflectorHandlers h;
                    h.replace = [&](const std::vector<json>& items, const std::string&) { ((*view).*replace)(items); };
                    h.event = [&](const kube::Event& e) { ((*view).*event)(e); };
                    h.trouble = [resource](const std::string& what) { base::log::warn(resource + ": " + what); };
                    kube::reflect(client, path, resource, h, [&] { return stop.load() || loops_stop.load(); });
                });
            };
            loop(cluster::kNadPath, cluster::kNadResource,
                 &ClusterView::replace_nads, &ClusterView::nad_event);
            loop(node_path, "nodes", &ClusterView::replace_node, &ClusterView::node_event);
        }
    }
    struct Join {
        std::vector<std::thread>& t;
        std::atomic<bool>& s;
        ~Join() {
            s = true;
            for (auto& x : t) x.join();
        }
    } join{loops, loops_stop};
    Publisher p(o, view.get());
    if (o.once) return p.step() ? 0 : 1;
    StateWatch watch(o.facts.state_dir);
    watch.started();
    if (o.annotation)
        base::log::info("publishing facts of node '" + o.facts.node + "' as annotation " + placement::kFactsAnnotation);
    if (o.slices)
        base::log::info("keeping the resourceslices of node '" + o.facts.node + "' for driver " + o.driver);
    // The slices offer the NADs' pools: written before the NADs and the Node have listed,
    // they would be written again a moment later. Up to 2 s (an API that denies the LIST
    // does not hold the devices back).
    if (view && o.slices)
        for (int i = 0; i < 40 && !stop && !view->synced(); ++i) ::usleep(50000);
    while (!stop) {
        bool ok = p.step();
        // Until the next read: a change (then a moment for the rest of it), the interval or
        // the heartbeat, whichever is due first, or, after a failure, the back-off. (The
        // heartbeat is counted in whole seconds of takenAt: a moment after it, it is due.)
        const double wait = ok ? std::min(o.interval, p.until_heartbeat() + 0.05) : p.backoff();
        const auto next = Clock::now() + std::chrono::milliseconds(static_cast<long long>(wait * 1000));
        while (!stop && Clock::now() < next) {
            auto left = std::chrono::duration_cast<std::chrono::milliseconds>(next - Clock::now()).count();
            // A state directory made after the start (the first ADD makes it) is news too.
            bool appeared = watch.rewatch();
            if (view && view->changed.exchange(false) && ok) break;   // a NAD or the Node changed
            if ((watch.wait(static_cast<int>(std::min<long long>(left, 200))) || appeared) && ok) {
                ::usleep(static_cast<useconds_t>(o.settle * 1e6));
                watch.wait(0);
                break;
            }
        }
        watch.rewatch();
    }
    base::log::info("stopped publishing for node '" + o.facts.node + "'");
    return 0;
}

int publish_until_signal(const PublishOptions& o) {
    auto& stop = base::stop_on_signal();
    base::log::configure("info", "");
    return publish(o, stop);
}

}  // namespace cluster::cmd
