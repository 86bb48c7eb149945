// Placement for ADD and CHECK: the one evaluation (placement/) on this node's live facts,
// and what only the attach path does with it: refuse with code 100, count and record the
// refusal, and commit the bandwidth ledger entry under the link's lock.
#pragma once
#include "base/rollback.h"
#include "cni/context.h"
#include "placement/placement.h"

namespace cni {

/// Throws code 100 naming every constraint that failed (evidence in details); no-op without
/// constraints. Warnings (best-effort, unknown topology allowed) are logged. ADD counts and
/// records its refusals (`count_refusals`); CHECK does not.
void check_placement(Context& ctx, const placement::Subject& s, bool count_refusals);

/// Logs the verdicts that passed and throws code 100 naming every one that did not; with
/// `count`, the refusal is counted and recorded for the refusal agent (ADD's refusals).
void enforce(const Context& ctx, const std::vector<placement::Verdict>& verdicts, bool count);

/// ADD, after the nothing-changed checks passed: re-evaluates bandwidth under the link's
/// ledger lock and commits this attachment's rates (undo registered), so that concurrent
/// ADDs never overcommit.
void admit_bandwidth(Context& ctx, const placement::Subject& s, base::Rollback& undo);

}  // namespace cni
