// NUMA facts for placement: cpusets, the kubelet's cpu_manager_state, CPU -> NUMA node
// from sysfs, and the NUMA node and speed of a device. All sysfs reads go through
// sysfsRoot, so tests use a fake tree.
#pragma once
#include <map>
#include <optional>
#include <set>
#include <string>
#include <string_view>

namespace placement::topo {

using CpuSet = std::set<int>;

/// k8s cpuset / kernel cpulist syntax: "" (empty), or comma-separated "N" and "A-B"
/// (A <= B), decimal, no spaces; one trailing newline is allowed. nullopt when malformed.
std::optional<CpuSet> parse_cpuset(std::string_view s);
/// The canonical form: "0-3,8,10-11".
std::string format_cpuset(const CpuSet& s);

struct PodCpus {
    std::string policy;   ///< policyName ("static", "none")
    CpuSet cpus;          ///< exclusive CPUs: every container's entry and the pod-level one
};

/// The pod's exclusive CPUs from cpu_manager_state text. Reads v2 "entries"
/// (pod UID -> container -> cpuset), v3 "podEntries" (pod UID -> {"cpuSet"}), and v4,
/// whose "data" string holds the same fields and is authoritative when present.
/// Unknown keys are ignored, the checksum is not verified. Throws code 6 when malformed.
PodCpus parse_cpu_manager_state(const std::string& text, const std::string& pod_uid);

/// NUMA node -> its CPUs, from <sysfs>/devices/system/node/node<N>/cpulist.
std::map<int, CpuSet> numa_cpus(const std::string& sysfs_root);
/// NUMA nodes holding any of `cpus`; CPUs on no node are returned in `unplaced`.
std::set<int> nodes_of(const CpuSet& cpus, const std::map<int, CpuSet>& numa, CpuSet* unplaced = nullptr);
/// "0" or "0,1".
std::string format_nodes(const std::set<int>& nodes);

/// A numa_node file: the node, -1 (no affinity), or nullopt when absent or malformed.
std::optional<int> read_numa_node(const std::string& path);
/// <sysfs>/class/net/<if>/speed in Mb/s; nullopt when absent, unknown (-1) or unreadable
/// (the kernel returns EINVAL while the link is down).
std::optional<long long> read_speed(const std::string& sysfs_root, const std::string& ifname);

}  // namespace placement::topo
