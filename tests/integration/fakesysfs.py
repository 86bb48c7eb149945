"""A fake sysfs tree for SR-IOV tests (this kernel has no SR-IOV hardware).

Modelled on sriov-cni's CreateTmpSysFs (pkg/utils/testing.go) with the links the kernel
makes, relative as in /sys:

    devices/pci0000:00/<bdf>/            a PCI device
        net/<ifname>/device -> ../../../<bdf>
        driver -> ../../../bus/pci/drivers/<name>
        numa_node, sriov_numvfs, sriov_totalvfs (PF), infiniband/<rdma> (RDMA)
        virtfnN -> ../<vf bdf>             (PF)      physfn -> ../<pf bdf>   (VF)
    bus/pci/devices/<bdf> -> ../../../devices/pci0000:00/<bdf>
    bus/pci/drivers/<name>/
    class/net/<ifname> -> ../../devices/pci0000:00/<bdf>/net/<ifname>

The netdev names are the names of real links (veths) the test creates in its node netns.
"""
import os


class FakeSysfs:
    def __init__(self, root):
        self.root = root
        self.devices = os.path.join(root, "devices", "pci0000:00")
        for d in (self.devices, "bus/pci/devices", "bus/pci/drivers", "class/net"):
            os.makedirs(os.path.join(root, d), exist_ok=True)

    def dev(self, bdf):
        return os.path.join(self.devices, bdf)

    def add_device(self, bdf, netdev=None, driver=None, numa_node=0):
        """A plain PCI device (no SR-IOV)."""
        path = self.dev(bdf)
        os.makedirs(path)
        os.symlink(f"../../../devices/pci0000:00/{bdf}", os.path.join(self.root, "bus/pci/devices", bdf))
        self._write(path, "numa_node", numa_node)
        if driver:
            self.bind(bdf, driver)
        if netdev:
            self.add_netdev(bdf, netdev)
        return path

    def add_pf(self, bdf, netdev, totalvfs=8, driver="ice", numa_node=0):
        path = self.add_device(bdf, netdev, driver, numa_node)
        self._write(path, "sriov_totalvfs", totalvfs)
        self._write(path, "sriov_numvfs", 0)
        return path

    def add_vf(self, pf, index, bdf, netdev=None, driver="iavf", numa_node=0):
        """VF number `index` of PF `pf`; netdev None for a VF bound to a userspace driver."""
        path = self.add_device(bdf, netdev, driver, numa_node)
        os.symlink(f"../{pf}", os.path.join(path, "physfn"))
        os.symlink(f"../{bdf}", os.path.join(self.dev(pf), f"virtfn{index}"))
        numvfs = len([e for e in os.listdir(self.dev(pf)) if e.startswith("virtfn")])
        self._write(self.dev(pf), "sriov_numvfs", numvfs)
        return path

    def add_netdev(self, bdf, name):
        net = os.path.join(self.dev(bdf), "net", name)
        os.makedirs(net)
        os.symlink(f"../../../{bdf}", os.path.join(net, "device"))
        os.symlink(f"../../devices/pci0000:00/{bdf}/net/{name}", os.path.join(self.root, "class/net", name))

    def remove_netdev(self, bdf, name):
        net = os.path.join(self.dev(bdf), "net", name)
        os.unlink(os.path.join(net, "device"))
        os.rmdir(net)
        os.unlink(os.path.join(self.root, "class/net", name))

    def rename_netdev(self, bdf, old, new):
        """What the kernel shows after the netdev got a new name (e.g. back from a dead netns)."""
        self.remove_netdev(bdf, old)
        self.add_netdev(bdf, new)

    def bind(self, bdf, driver):
        os.makedirs(os.path.join(self.root, "bus/pci/drivers", driver), exist_ok=True)
        link = os.path.join(self.dev(bdf), "driver")
        if os.path.islink(link):
            os.unlink(link)
        os.symlink(f"../../../bus/pci/drivers/{driver}", link)

    def add_rdma(self, bdf, name):
        os.makedirs(os.path.join(self.dev(bdf), "infiniband", name))

    @staticmethod
    def _write(path, name, value):
        with open(os.path.join(path, name), "w") as f:
            f.write(f"{value}\n")
