// Attachment records: what ADD attached, where (netns) and its result, one small JSON
// file per attachment under <stateDir>/attachments/<network>/. They let the operator CLI
// tell whether an address's owner still exists, give `topocni exec` the prevResult for
// CHECK and DEL (as libcni's cache does), and let GC find leftovers. A record is a
// hint: losing one never breaks DEL.
#pragma once
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace cni {

struct Record {
    std::string network, container_id, ifname, netns;
    nlohmann::json result;          ///< the ADD result as printed
    int64_t completed_ns = 0;       ///< CLOCK_BOOTTIME when ADD finished (0: intent only, in flight or died)
    nlohmann::json config;          ///< the network config ADD ran with (record_config()): what `topocni collect` DELs with
    std::string cni_path;           ///< CNI_PATH of the ADD, for the DEL of its IPAM or delegate plugin
    std::string cni_args;           ///< CNI_ARGS of the ADD
    std::string link;               ///< the shared link it uses (master, PF PCI address, bridge): for metrics
};

/// The config as kept in a record: all of it but what belongs to one call (prevResult,
/// GC's list), so that a DEL can be run later without the runtime.
nlohmann::json record_config(const nlohmann::json& raw);

/// CLOCK_BOOTTIME now, in ns (the clock process start times are kept in).
int64_t boottime_ns();
/// When this process was started, on the same clock: static initialisation, or the fork
/// (to the 10 ms tick below it) when start-up took more than 20 ms.
int64_t process_start_ns();

std::string records_dir(const std::string& state_dir, const std::string& network);
/// Written so that a kill leaves the old record or the new one (see records.cc); errors
/// are logged, not thrown.
void write_record(const std::string& state_dir, const Record& r);
/// Unlinks the record; a missing one is fine.
void remove_record(const std::string& state_dir, const std::string& network, const std::string& container_id,
                   const std::string& ifname);
std::optional<Record> read_record(const std::string& state_dir, const std::string& network,
                                  const std::string& container_id, const std::string& ifname);
std::vector<Record> list_records(const std::string& state_dir, const std::string& network);
/// Serialises GC against ADD for one network: every ADD holds it shared for its whole
/// run, GC holds it exclusively, so GC never sees (and never releases) an attachment
/// that is half-way through ADD. Waits are bounded: code 11 after `timeout_ms`.
class NetworkLock {
public:
    enum Mode { Shared, Exclusive };
    /// Creates the network's records directory when missing (see created()).
    NetworkLock(const std::string& state_dir, const std::string& network, Mode mode, int timeout_ms);
    /// The same lock on another directory under stateDir (the bandwidth ledger of a link);
    /// `busy` says who holds it in the timeout message.
    static NetworkLock on_dir(const std::string& dir, const std::string& state_dir, Mode mode, int timeout_ms,
                              const std::string& busy);
    ~NetworkLock();
    NetworkLock(const NetworkLock&) = delete;
    NetworkLock& operator=(const NetworkLock&) = delete;
    /// Undo of a refused ADD: removes the directories this lock created when they are
    /// empty and nobody else holds the lock.
    void release_created() noexcept;

private:
    NetworkLock(const std::string& dir, const std::string& state_dir, Mode mode, int timeout_ms, const std::string& busy,
                int);
    std::string dir_;
    std::vector<std::string> created_;
    int fd_ = -1;
};

/// True when `path` still names a network namespace.
bool netns_exists(const std::string& path);
/// True only when `path` provably names no namespace any more: it does not exist while its
/// directory does. A path that exists but is no namespace (a bind mount that did not
/// propagate into this mount namespace), or whose directory is not there (not mounted
/// here), proves nothing: false.
bool netns_gone(const std::string& path);

}  // namespace cni
