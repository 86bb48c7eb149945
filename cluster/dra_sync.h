// Keeps this node's ResourceSlices in the API what its devices are (dra_slices.h), with the
// resource.k8s.io/v1 endpoints: the pool is the node's name; every change bumps
// pool.generation in every slice, as the v1 API's ResourcePool says a driver must; slices
// are named <node>-<driver>-<index>, owned by the Node (the API's garbage collector takes
// them with a deleted Node), created, replaced and deleted in the upstream helper's order
// (obsolete ones first, then updates, then new ones). Quiet: devices equal to what the
// slices hold send nothing, and a restarted agent learns what the slices hold before it
// writes.
#pragma once
#include <chrono>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "kube/client.h"

namespace cluster::dra {

inline constexpr const char* kSlicesPath = "/apis/resource.k8s.io/v1/resourceslices";

class SliceSync {
public:
    /// `relist_after`: seconds after which the next sync lists the slices again before it
    /// compares. kubelet deletes a node's slices when it starts, and a driver's when the
    /// driver's kubelet plugin is gone for 30 s; without a LIST now and then, slices deleted
    /// behind the agent's back would stay deleted until the devices change.
    SliceSync(std::string node, std::string driver, double relist_after = 60)
        : node_(std::move(node)), driver_(std::move(driver)), relist_after_(relist_after) {}

    /// Makes the node's slices hold exactly `devices`; the number of writes it took (0: they
    /// did). Throws kube::Error on an API failure, after which the next call lists again.
    int sync(kube::Client& c, const std::vector<nlohmann::json>& devices);

    /// The API server dropped the fields of shared devices from a slice it stored (its
    /// DRAConsumableCapacity gate is off: Kubernetes before 1.36 with default gates). It
    /// would keep them as exclusive devices and give a whole link or pool to one claim, so
    /// from then on only exclusive devices (the VFs) are offered. Learnt from what the
    /// server answers to a write, never guessed from a version.
    bool shared_devices_dropped() const { return shared_dropped_; }

    /// The name of slice `index` of the node's pool (a DNS subdomain of at most 253).
    std::string slice_name(size_t index) const;

    /// What a LIST's items say of the node's pool: our slices by index, other slices of
    /// ours (named otherwise: deleted at the next write), the devices they hold when they
    /// are one whole generation ("" otherwise) and the highest generation. Any JSON is
    /// read without throwing (a fuzz target's subject).
    struct Held {
        std::vector<nlohmann::json> slices, strays;
        std::string content;
        long long generation = 0;
    };
    Held read_held(const std::vector<nlohmann::json>& items) const;

private:
    void learn(kube::Client& c);
    int write(kube::Client& c, const std::vector<nlohmann::json>& devices, const std::string& content);
    /// Notes when the server dropped the fields of shared devices from slice `index`.
    void check_kept(const nlohmann::json& sent, const nlohmann::json& answer, size_t index);

    std::string node_, driver_;
    bool known_ = false;
    double relist_after_;
    std::chrono::steady_clock::time_point learnt_at_;
    std::vector<nlohmann::json> slices_;   ///< ours in the API, by index (null: none at that index)
    std::vector<nlohmann::json> strays_;   ///< ours in the API under other names: deleted at the next write
    std::string content_;                  ///< the devices they hold, as one JSON text; "" unknown
    long long generation_ = 0;
    nlohmann::json owner_;                 ///< ownerReferences to the Node, when it exists
    bool shared_dropped_ = false;
};

}  // namespace cluster::dra
