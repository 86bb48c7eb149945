#include <doctest/doctest.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>

#include "netns/sysfs.h"

namespace fs = std::filesystem;
using netns::sysfs::Tree;

namespace {

/// The layout of sriov-cni's CreateTmpSysFs: a PF with two VFs (one on a userspace
/// driver), relative links as the kernel makes them, plus a device that is no VF.
struct FakeTree {
    fs::path root;
    FakeTree() {
        char tmpl[] = "/tmp/topocni-sysfs-XXXXXX";
        REQUIRE(::mkdtemp(tmpl));
        root = tmpl;
        auto devs = root / "devices/pci0000:ae/0000:ae:00.0";
        auto pf = devs / "0000:af:00.1", vf0 = devs / "0000:af:06.0", vf1 = devs / "0000:af:06.1";
        fs::create_directories(pf / "net/enp175s0f1");
        fs::create_directories(vf0 / "net/enp175s6");
        fs::create_directories(vf0 / "infiniband/mlx5_3");
        fs::create_directories(vf1);
        fs::create_directories(root / "bus/pci/devices");
        fs::create_directories(root / "bus/pci/drivers/iavf");
        fs::create_directories(root / "bus/pci/drivers/vfio-pci");
        fs::create_directories(root / "class/net");
        for (auto& d : {pf, vf0, vf1})
            fs::create_directory_symlink("../../../devices/pci0000:ae/0000:ae:00.0/" + d.filename().string(),
                                         root / "bus/pci/devices" / d.filename());
        fs::create_directory_symlink("../0000:af:06.0", pf / "virtfn0");
        fs::create_directory_symlink("../0000:af:06.1", pf / "virtfn1");
        fs::create_directory_symlink("../0000:af:00.1", vf0 / "physfn");
        fs::create_directory_symlink("../0000:af:00.1", vf1 / "physfn");
        fs::create_directory_symlink("../../../../bus/pci/drivers/iavf", vf0 / "driver");
        fs::create_directory_symlink("../../../../bus/pci/drivers/vfio-pci", vf1 / "driver");
        std::ofstream(pf / "sriov_numvfs") << "2\n";
        std::ofstream(vf0 / "numa_node") << "1\n";
        std::ofstream(vf1 / "numa_node") << "-1\n";
        fs::create_directory_symlink("../../devices/pci0000:ae/0000:ae:00.0/0000:af:06.0/net/enp175s6",
                                     root / "class/net/enp175s6");
        fs::create_directory_symlink("../../../0000:af:06.0", vf0 / "net/enp175s6/device");
    }
    ~FakeTree() { fs::remove_all(root); }
};

}  // namespace

TEST_CASE("sysfs: a PCI address is dddd:bb:dd.f in hex with a function of 0-7") {
    for (auto ok : {"0000:af:06.0", "0000:AF:06.7", "ffff:ff:1f.3"}) CHECK(netns::sysfs::is_pci_address(ok));
    for (auto bad : {"", "0000:af:06.8", "000:af:06.0", "0000:af:06.00", "0000-af-06.0", "0000:af:06.0/",
                     "../af:06.0.0", "0000:ag:06.0", "0000:af:06:0"}) {
        CAPTURE(bad);
        CHECK_FALSE(netns::sysfs::is_pci_address(bad));
    }
}

TEST_CASE("sysfs: VF, PF, index, netdev, driver and NUMA node are read through the root") {
    FakeTree t;
    Tree tree(t.root.string() + "/");
    CHECK(tree.root() == t.root.string());
    CHECK(tree.pci_exists("0000:af:06.0"));
    CHECK_FALSE(tree.pci_exists("0000:af:06.5"));
    CHECK(tree.netdevs("0000:af:06.0") == std::vector<std::string>{"enp175s6"});
    CHECK(tree.netdevs("0000:af:06.1").empty());
    CHECK(tree.physfn("0000:af:06.0") == "0000:af:00.1");
    CHECK_FALSE(tree.physfn("0000:af:00.1"));   // the PF is no VF
    CHECK(tree.vf_index("0000:af:00.1", "0000:af:06.1") == 1);
    CHECK_FALSE(tree.vf_index("0000:af:00.1", "0000:af:00.1"));
    CHECK(tree.driver("0000:af:06.0") == "iavf");
    CHECK(tree.driver("0000:af:06.1") == "vfio-pci");
    CHECK_FALSE(tree.driver("0000:af:00.1"));
    CHECK(netns::sysfs::is_userspace_driver("vfio-pci"));
    CHECK_FALSE(netns::sysfs::is_userspace_driver("iavf"));
    CHECK(tree.numa_node("0000:af:06.0") == 1);
    CHECK(tree.numa_node("0000:af:06.1") == -1);
    CHECK_FALSE(tree.numa_node("0000:af:00.1"));
    CHECK(tree.attribute("0000:af:00.1", "sriov_numvfs") == "2");
    CHECK_FALSE(tree.attribute("0000:af:00.1", "../0000:af:06.0/numa_node"));
    CHECK(tree.rdma_devices("0000:af:06.0") == std::vector<std::string>{"mlx5_3"});
    CHECK(tree.netdev_pci("enp175s6") == "0000:af:06.0");
    CHECK_FALSE(tree.netdev_pci("lo"));
    CHECK_FALSE(tree.netdev_pci("../enp175s6"));
}

TEST_CASE("sysfs: netdevs, their attributes, a PF's VFs by index and the NUMA nodes, as node-report reads them") {
    FakeTree t;
    Tree tree(t.root.string());
    CHECK(tree.virtfn("0000:af:00.1", 0) == "0000:af:06.0");
    CHECK(tree.virtfn("0000:af:00.1", 1) == "0000:af:06.1");
    CHECK_FALSE(tree.virtfn("0000:af:00.1", 2));
    CHECK_FALSE(tree.virtfn("0000:af:06.0", 0));   // a VF has no VFs
    CHECK_FALSE(tree.virtfn("../0000:af:00.1", 0));
    CHECK(tree.netdev_names() == std::vector<std::string>{"enp175s6"});
    CHECK(tree.netdev_has_device("enp175s6"));
    CHECK_FALSE(tree.netdev_has_device("lo"));
    CHECK_FALSE(tree.netdev_has_device(".."));
    std::ofstream(t.root / "devices/pci0000:ae/0000:ae:00.0/0000:af:06.0/net/enp175s6/speed") << "25000\n";
    CHECK(tree.netdev_attribute("enp175s6", "speed") == "25000");
    CHECK_FALSE(tree.netdev_attribute("enp175s6", "duplex"));
    CHECK_FALSE(tree.netdev_attribute("enp175s6", "../device"));
    CHECK_FALSE(tree.netdev_attribute("../enp175s6", "speed"));
    CHECK(tree.numa_node_count() == 0);
    for (auto d : {"node0", "node1", "nodeX", "possible"}) fs::create_directories(t.root / "devices/system/node" / d);
    CHECK(tree.numa_node_count() == 2);
    CHECK(tree.looks_like_sysfs());
    CHECK_FALSE(Tree((t.root / "devices/system").string() + "/nowhere").looks_like_sysfs());
}

TEST_CASE("sysfs: paths are never built from anything but a PCI address") {
    FakeTree t;
    Tree tree(t.root.string());
    CHECK_FALSE(tree.pci_exists("../devices"));
    CHECK(tree.netdevs("../../class").empty());
    CHECK_FALSE(tree.physfn("0000:af:06.0/.."));
}
