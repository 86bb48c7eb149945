// The eviction counter behind topocni_evictions_total: what the refusal agent did about a
// pod whose refusals asked for a move (onRefusal: evict), per network and outcome, in
// <stateDir>/metrics/evictions.json ({"<network>": {"evicted": n, "blocked": n,
// "skipped": n}}): at most three numbers per network, kept across agent restarts.
#pragma once
#include <cstdint>
#include <map>
#include <string>

namespace placement::evictions {

/// evicted: the Eviction API accepted it; blocked: a PodDisruptionBudget refused it (429);
/// skipped: not evicted on purpose (a bare pod, a DaemonSet or static pod, the per-owner
/// loop guard).
inline constexpr const char* kOutcomes[] = {"evicted", "blocked", "skipped"};

using Counts = std::map<std::string, std::map<std::string, uint64_t>>;   ///< network -> outcome -> n

std::string path(const std::string& state_dir);
/// Adds one to `outcome` of `network`. Never throws (failures are logged).
void count(const std::string& state_dir, const std::string& network, const std::string& outcome);
/// The counts so far (empty when none).
Counts read(const std::string& state_dir);

}  // namespace placement::evictions
