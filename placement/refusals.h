// The placement refusal counter behind topocni_placement_refusals_total: every ADD
// refused with code 100 adds one per failed constraint, in <stateDir>/metrics/refusals.json
// ({"<network>": {"<constraint>": n}}). It is the one file a refused ADD writes: the
// operator's only trace of a pod the scheduler keeps putting on the wrong node.
#pragma once
#include <cstdint>
#include <map>
#include <string>
#include <vector>

namespace placement::refusals {

using Counts = std::map<std::string, std::map<std::string, uint64_t>>;   ///< network -> constraint -> n

std::string path(const std::string& state_dir);
/// Adds one refusal of `network` per constraint. Never throws: a counter must not change
/// the verdict (failures are logged).
void count(const std::string& state_dir, const std::string& network, const std::vector<std::string>& constraints);
/// The counts so far (empty when none).
Counts read(const std::string& state_dir);

}  // namespace placement::refusals
