// Node labels and label selectors with Kubernetes semantics (apimachinery
// labels.Requirement.Matches): NotIn matches an absent key, Gt/Lt compare as int64.
#pragma once
#include <map>
#include <string>

#include "conf/placement.h"

namespace placement {

using Labels = std::map<std::string, std::string>;

/// Whether one requirement holds for `labels`.
bool matches(const conf::LabelRequirement& r, const Labels& labels);
/// Whether every requirement holds (an empty selector matches every node).
bool matches(const conf::LabelSelector& s, const Labels& labels);

/// "zone in (a,b)", "!gpu", "cores>8": the form kubectl prints.
std::string to_string(const conf::LabelRequirement& r);
/// What the node has for the requirement's key: "zone=a" or "zone absent".
std::string evidence(const conf::LabelRequirement& r, const Labels& labels);

/// Parses a labels file: a JSON object of labels, or NFD features.d lines
/// "<name>[=<value>]" (value defaults to "true"; a name without a '/' gets NFD's
/// "feature.node.kubernetes.io/" prefix; "-<name>" removes a label; '#' starts a
/// comment). Errors are code 7 naming `path` and the line.
Labels parse_labels(const std::string& text, const std::string& path);

}  // namespace placement
