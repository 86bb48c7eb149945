// Kubeconfigs (kubectl, Multus) and NAD manifests read into JSON, with libyaml (Debian's
// libyaml, linked statically into the release binary) doing the YAML.
#pragma once
#include <string>

#include <nlohmann/json.hpp>

namespace kube {

/// Parses one YAML document into JSON. Mappings become objects (keys must be scalars and
/// unique), sequences arrays. A plain scalar true/false becomes a boolean and null/~ (or
/// nothing) null; inside a flow collection ([..], {..}: JSON), a plain scalar that is a
/// JSON number becomes a number, as JSON would read it; every other scalar is a string
/// (so "port: 8080" stays the string kubeconfig readers expect). Refused: anchors,
/// aliases and tags (nothing a kubeconfig or NAD needs, and an alias is how a small
/// document expands into a huge one), several documents, nesting deeper than 64 levels.
/// Errors are code 7: "<what>: line N: <why>".
nlohmann::json parse_yaml(const std::string& text, const std::string& what);

}  // namespace kube
