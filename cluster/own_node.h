// The Node publisher's view of its own Node: what the LIST+WATCH delivered, with the
// extended resources its own last status PATCH sent laid over events older than that PATCH.
//
// Why the overlay: a watch delivers changes in order, and the publisher's PATCH answer
// arrives on another connection. Until the watch brings the version the PATCH made, the
// events it delivers are older (our own facts annotation PATCH, say); their status must
// not undo what was sent, or the next PATCH removes a resource that is gone already (422).
//
// Why `sending()`: the watch may bring the PATCH's version, and later changes after it (a
// relabel), before the PATCH's answer reaches us. Laying the answer over the view then
// would put the old labels back, and no event would ever correct them: a lost update. So
// the view remembers the versions the watch delivers while a PATCH is in flight; the
// answer is laid over only when its version is not among them. Kubernetes' resource
// versions are opaque (compared only for equality), so this never orders them.
#pragma once
#include <chrono>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "kube/client.h"

namespace cluster {

class OwnNode {
public:
    using Clock = std::chrono::steady_clock;
    using json = nlohmann::json;

    /// A LIST (the field-selected Node, or nothing): newer than anything sent before it.
    void replace(const std::vector<json>& items);
    /// A WATCH event.
    void event(const kube::Event& e);
    /// A status PATCH is about to go out: the versions the watch brings from now on are kept
    /// until `sent` (or the next `sending`).
    void sending();
    /// The PATCH's answer (the Node as it left it) and the capacity and allocatable it
    /// sent. `now` is for tests.
    void sent(const json& patched, const json& capacity, const json& allocatable, Clock::time_point now = Clock::now());
    /// The Node now (null when there is none).
    json node() const;
    bool listed() const;

    static std::string resource_version(const json& o);

    /// How long an overlay waits for the watch to bring its version: a watch that resumed
    /// past it (it does not, in order) must not freeze the view.
    static constexpr std::chrono::seconds kOverlayFor{30};
    /// Versions kept while one PATCH is in flight; past that, the view trusts the watch.
    static constexpr size_t kSeenBound = 4096;

private:
    void overlay_locked(Clock::time_point now);

    mutable std::mutex mu_;
    json node_;
    bool listed_ = false;
    struct Overlay {
        std::string version;
        json capacity, allocatable;
        Clock::time_point until;
    };
    std::optional<Overlay> overlay_;
    // No default member initialisers: clang cannot default-construct a nested class that
    // has them inside std::optional::emplace (is_constructible is false there).
    struct InFlight {
        std::set<std::string> seen;   ///< versions the watch brought since `sending`
        bool relisted;                ///< a LIST since: its order against the PATCH is unknown
        bool overflowed;
    };
    std::optional<InFlight> in_flight_;
};

}  // namespace cluster
