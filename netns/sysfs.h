// sysfs reads through a root directory (config key sysfsRoot, "/sys" on a node), so tests
// run on a fake tree in a temp dir. Only read-only lookups: PCI devices (SR-IOV layout,
// driver, NUMA node, RDMA devices) and netdevs. Links are read with readlink and only
// their last component is used, so a tree can be built with relative or absolute links.
#pragma once
#include <optional>
#include <string>
#include <vector>

namespace netns::sysfs {

/// "dddd:bb:dd.f" in hex (0000:af:06.0), either case: the only form ever joined into a path.
bool is_pci_address(const std::string& s);

class Tree {
public:
    explicit Tree(std::string root);
    const std::string& root() const { return root_; }

    /// <root>/bus/pci/devices/<addr>
    std::string pci_path(const std::string& addr) const;
    bool pci_exists(const std::string& addr) const;
    /// Netdev names under <dev>/net/, sorted. Empty when the device has none in this
    /// netns: bound to a userspace driver, or moved into another netns.
    std::vector<std::string> netdevs(const std::string& addr) const;
    /// PCI address of the PF of a VF (<dev>/physfn); nullopt when the device is no VF.
    std::optional<std::string> physfn(const std::string& addr) const;
    /// N of the PF's virtfnN link that points at `vf`.
    std::optional<int> vf_index(const std::string& pf, const std::string& vf) const;
    /// Driver name (last component of <dev>/driver); nullopt when unbound.
    std::optional<std::string> driver(const std::string& addr) const;
    /// <dev>/numa_node; -1 means no affinity; nullopt when absent or not a number.
    std::optional<int> numa_node(const std::string& addr) const;
    /// The PCIe root complex of a device, "pci<domain>:<bus>" (the standard DRA attribute
    /// resource.kubernetes.io/pcieRoot): the first such component of its real sysfs path.
    std::optional<std::string> pcie_root(const std::string& addr) const;
    /// RDMA devices of the device (<dev>/infiniband/), sorted.
    std::vector<std::string> rdma_devices(const std::string& addr) const;
    /// One attribute file of a device with the trailing newline removed; nullopt when absent.
    std::optional<std::string> attribute(const std::string& addr, const std::string& name) const;
    /// PCI address behind a netdev (<root>/class/net/<if>/device); nullopt for virtual links.
    std::optional<std::string> netdev_pci(const std::string& ifname) const;
    /// PCI address of the PF's virtfn<index>; nullopt when there is none.
    std::optional<std::string> virtfn(const std::string& pf, int index) const;

    // --- netdevs and NUMA nodes ---
    /// Every netdev of this netns (<root>/class/net), sorted.
    std::vector<std::string> netdev_names() const;
    /// Whether the netdev has a device behind it (PCI or not): false for virtual links.
    bool netdev_has_device(const std::string& ifname) const;
    /// One attribute file of a netdev (speed, ...), trailing whitespace removed; nullopt when absent.
    std::optional<std::string> netdev_attribute(const std::string& ifname, const std::string& name) const;
    /// How many NUMA nodes the node has (<root>/devices/system/node/node<N>).
    int numa_node_count() const;
    /// Whether the root holds devices, class or bus: one that does not would read as a
    /// node with no SR-IOV and no NUMA.
    bool looks_like_sysfs() const;

private:
    std::string root_;
};

/// Userspace (DPDK) drivers: a VF bound to one has no netdev.
bool is_userspace_driver(const std::string& driver);

}  // namespace netns::sysfs
