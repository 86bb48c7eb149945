// The block-style YAML subset that kubeconfigs (kubectl, Multus) and NAD manifests use,
// read into JSON. Debian has no C++ YAML library in our dependency set, and these files
// need only a small part of YAML.
#pragma once
#include <string>

#include <nlohmann/json.hpp>

namespace cni {

/// Parses `text` into JSON. Supported: block mappings and sequences (a sequence may sit
/// at its parent key's indentation, as kubectl writes it), "- key: value" items, plain,
/// 'single' and "double" quoted scalars, literal (|) and folded (>) block scalars,
/// comments, "---" at the start, and flow collections written as JSON ({}, [], ["a"]).
/// Plain true/false become booleans and null/~ null; every other scalar is a string.
/// Anchors, aliases, tags and several documents are refused. Text whose first character
/// is '{' or '[' is read as JSON. Errors are code 7: "<what>: line N: <why>".
nlohmann::json parse_yaml(const std::string& text, const std::string& what);

}  // namespace cni
