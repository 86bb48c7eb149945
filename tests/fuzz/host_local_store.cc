// host-local store files: reservation contents, owner index files, resolv.conf.
#include <unistd.h>

#include <cstdio>

#include "fuzz.h"
#include "ipam/owner_index.h"
#include "ipam/resolv.h"
#include "ipam/store.h"

TOPOCNI_FUZZ_TARGET({
    auto ip = *base::IpAddr::parse("10.0.0.1");
    auto r = ipam::parse_reservation(ip, input);
    (void)ipam::held_by(r, {"c1", "eth0"});
    (void)ipam::legacy_of(r, {"c1", "eth0"});
    if (auto idx = ipam::parse_index(input)) (void)ipam::format_index(*idx);
    static FuzzScratch scratch{[] {
        char tmpl[] = "/tmp/topocni-fuzz-resolv-XXXXXX";
        int fd = mkstemp(tmpl);
        close(fd);
        return std::string(tmpl);
    }()};
    const std::string& path = scratch.path;
    if (FILE* f = std::fopen(path.c_str(), "w")) {
        std::fwrite(input.data(), 1, input.size(), f);
        std::fclose(f);
    }
    (void)ipam::parse_resolv_conf(path);
})
