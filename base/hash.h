// FNV-1a: the hash behind every name topocni derives (link names, owner index files,
// default container ids, label suffixes). Tiny, and stable across versions, compilers
// and platforms, which std::hash is not: a derived name must come out the same in the
// ADD that made it and in the DEL of a later release.
#pragma once
#include <cstdint>
#include <string_view>

namespace base {

inline constexpr uint64_t kFnv64Offset = 0xcbf29ce484222325ull;
/// The seed link names and default container ids have always been hashed with (FNV's
/// offset basis with its last digit lost). Names already on nodes depend on it, so it stays.
inline constexpr uint64_t kNameSeed = 1469598103934665603ull;
inline constexpr uint32_t kFnv32Offset = 2166136261u;

constexpr uint64_t fnv1a64(std::string_view s, uint64_t h = kFnv64Offset) {
    for (unsigned char c : s) h = (h ^ c) * 1099511628211ull;
    return h;
}

constexpr uint32_t fnv1a32(std::string_view s, uint32_t h = kFnv32Offset) {
    for (unsigned char c : s) h = (h ^ c) * 16777619u;
    return h;
}

}  // namespace base
