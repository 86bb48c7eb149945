// The bandwidth ledger: what is committed on each link topocni admits bandwidth on (a
// macvlan master, an SR-IOV PF), one small JSON file per attachment under
// <stateDir>/bandwidth/<link>/<network>:<containerID>:<ifname>.json. ADD commits under the link's lock (placement/placement.cc,
// admit_bandwidth), DEL and GC take the entry away, node-report sums it up. Links are
// named by interface (macvlan master) or PCI address (PF).
#pragma once
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace placement::ledger {

struct Entry {
    std::string network, container_id, ifname;
    uint64_t egress_bps = 0, ingress_bps = 0;   ///< committed rates (0: not shaped in that direction)
    uint64_t capacity_bps = 0;                  ///< the link's capacity when admitted (0: unknown)
    double overcommit = 1.0;                    ///< topology.bandwidthOvercommit when admitted
    std::string capacity_source;                ///< "topology.linkCapacityMbps", "link speed of 'eth1'"
    std::string pod;                            ///< "<namespace>/<name>" from CNI_ARGS, when known: names the holder
};

std::string root(const std::string& state_dir);
std::string dir(const std::string& state_dir, const std::string& link);
/// Every link with a ledger directory, sorted.
std::vector<std::string> links(const std::string& state_dir);
/// The entries of `link` (unreadable files are skipped and logged).
std::vector<Entry> entries(const std::string& state_dir, const std::string& link);
/// Writes the entry atomically; the link's directory must exist (its lock made it). Not
/// `durable` (no fsync) only for entries rebuilt from another durable record after a crash
/// (a prepared claim's: cluster/claim_prepare.h).
void commit(const std::string& state_dir, const std::string& link, const Entry& e, bool durable = true);
/// Remembers the capacity (and overcommit) the last admission on `link` counted against,
/// in <link>/capacity, which stays when the entries go: node-report's numbers do not jump
/// back to the link speed when the link is idle. Call under the link's lock.
void record_capacity(const std::string& state_dir, const std::string& link, const Entry& e);
/// That capacity (capacity_bps, overcommit, capacity_source, network), if recorded.
std::optional<Entry> capacity(const std::string& state_dir, const std::string& link);
/// Removes the attachment's entry from `link`; false when there was none. Not `durable`:
/// as commit's.
bool remove(const std::string& state_dir, const std::string& link, const std::string& network,
            const std::string& container_id, const std::string& ifname, bool durable = true);
/// Removes the attachment's entry from every link (DEL need not know the link: the
/// default-route master may have changed since ADD). Returns how many went.
int remove_everywhere(const std::string& state_dir, const std::string& network, const std::string& container_id,
                      const std::string& ifname);

}  // namespace placement::ledger
