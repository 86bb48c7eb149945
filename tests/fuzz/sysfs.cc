// sysfs values: numa_node, speed, PCI addresses, driver names.
#include <sys/stat.h>
#include <unistd.h>

#include <cstdio>

#include "placement/topology.h"
#include "fuzz.h"
#include "netns/sysfs.h"

TOPOCNI_FUZZ_TARGET({
    static FuzzScratch scratch{[] {
        char tmpl[] = "/tmp/topocni-fuzz-sysfs-XXXXXX";
        std::string r = mkdtemp(tmpl);
        mkdir((r + "/class").c_str(), 0755);
        mkdir((r + "/class/net").c_str(), 0755);
        mkdir((r + "/class/net/eth0").c_str(), 0755);
        return r;
    }()};
    const std::string& root = scratch.path;
    for (auto* name : {"/numa_node", "/class/net/eth0/speed"}) {
        if (FILE* f = std::fopen((root + name).c_str(), "w")) {
            std::fwrite(input.data(), 1, input.size(), f);
            std::fclose(f);
        }
    }
    (void)placement::topo::read_numa_node(root + "/numa_node");
    (void)placement::topo::read_speed(root, "eth0");
    (void)netns::sysfs::is_pci_address(input);
    (void)netns::sysfs::is_userspace_driver(input);
})
