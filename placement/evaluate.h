// Placement's judgement: each constraint over the facts gathered for it (facts.h), with
// the evidence it was decided on. Pure: nothing here reads the node, so every verdict can
// be tested with facts made by hand.
#pragma once
#include <string>
#include <vector>

#include "placement/facts.h"
#include "conf/bandwidth.h"
#include "conf/placement.h"

namespace placement {

Verdict evaluate_selector(const conf::LabelSelector& sel, const NodeLabels& node);
Verdict evaluate_numa_policy(const conf::Topology& t, const Fact& device, const PodNuma& pod);
Verdict evaluate_numa_node(const conf::Topology& t, const Fact& device);
Verdict evaluate_link_speed(const conf::Topology& t, const Fact& speed);
Verdict evaluate_attachments(const conf::Topology& t, const DeviceUse& use);
Verdict evaluate_free_addresses(const conf::Topology& t, const std::vector<PoolSet>& sets);

/// The bandwidth constraint for `request` by attachment `me` (network, container,
/// ifname), with topology `t` (null: none; unknownTopology allow, overcommit 1).
BandwidthAdmission evaluate_bandwidth_facts(const conf::Bandwidth& request, const conf::Topology* t,
                                            const ledger::Entry& me, const BandwidthFacts& f);

/// "1 Gb/s", "12.5 Mb/s": rates in evidence.
std::string rate_text(double bps);

}  // namespace placement
