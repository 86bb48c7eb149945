// Crash-safe state records for attachments that change node hardware (SR-IOV VFs): what
// ADD found before it changed anything, so DEL can put it back even after a crash, a
// lost netns or a new kernel name. One JSON file per VF, <stateDir>/sriov/<pci>.json,
// written before the first irreversible step (temp file, fsync, rename, fsync of the
// directory); its presence marks the VF as in use. A flock on the VF's sysfs directory
// serialises every verb on one VF.
#pragma once
#include <chrono>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "base/flock.h"
#include "netns/sysfs.h"
#include "netns/vf.h"

namespace cni::state {

// --- SR-IOV VF records ---

struct Owner {
    std::string network, container_id, ifname, netns;
    bool same_attachment(const Owner& o) const {
        return network == o.network && container_id == o.container_id && ifname == o.ifname;
    }
    std::string str() const;   ///< "container 'c1' interface 'net1' of network 'n'"
};

struct VfRecord {
    std::string pci;              ///< VF PCI address (the record's key)
    std::string pf_pci;           ///< PF PCI address
    std::string pf;               ///< PF netdev name
    int vf_index = 0;
    bool dpdk = false;            ///< bound to a userspace driver: no netdev
    Owner owner;
    // kernel mode: the VF netdev as ADD found it in the node netns
    std::string netdev;
    std::string mac;
    int mtu = 0;
    bool up = false;
    netns::vf::VfConfig original; ///< PF-side settings before ADD (what the PF reported)
    netns::vf::VfConfig applied;  ///< PF-side settings ADD changes and DEL restores
    std::optional<std::string> device_info_file;   ///< written by us, removed by DEL
    std::vector<std::string> device_info_dirs;     ///< its directories ADD created, removed by DEL when empty
};

nlohmann::json to_json(const VfRecord& r);
/// Code 6 naming `what` when a required field is missing or malformed.
VfRecord vf_record_from_json(const nlohmann::json& j, const std::string& what);

class VfStore {
public:
    explicit VfStore(const std::string& state_dir);
    const std::string& dir() const { return dir_; }
    std::string path(const std::string& pci) const { return dir_ + "/" + pci + ".json"; }
    /// Takes the VF's lock (its sysfs directory), waiting at most `timeout`; nullopt when
    /// the VF no longer exists, so there is nothing on it to serialise.
    std::optional<base::DirLock> lock(const netns::sysfs::Tree& tree, const std::string& pci,
                             std::chrono::milliseconds timeout = std::chrono::seconds(30)) const;
    /// Whether VF `pci` has a record, that is, an attachment holds it (one stat, nothing read).
    bool holds(const std::string& pci) const;
    /// nullopt when there is no record; throws when it cannot be read.
    std::optional<VfRecord> read(const std::string& pci) const;
    /// Returns the directories it created (see write_file).
    std::vector<std::string> write(const VfRecord& r) const;
    void remove(const std::string& pci) const;
    /// The PCI addresses with a record, sorted.
    std::vector<std::string> pcis() const;
    /// Every readable record; unreadable ones are logged and skipped.
    std::vector<VfRecord> list() const;

private:
    std::string dir_;
};

/// VFs of the PF `pf_pci` that are in use according to the SR-IOV state records
/// (<stateDir>/sriov/<vf-pci>.json), not counting `vf`. A record belongs to the PF
/// when its record says so, or else (a record that cannot be read) when sysfs says the VF's physfn is the PF.
std::vector<std::string> vfs_in_use(const std::string& state_dir, const std::string& sysfs_root,
                                    const std::string& pf_pci, const std::string& vf);

}  // namespace cni::state
