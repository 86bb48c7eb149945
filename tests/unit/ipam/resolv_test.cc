#include "helpers.h"
#include "ipam/resolv.h"

TEST_CASE("resolv: nameservers and search words append, the last domain wins, comments are skipped") {
    ipam_test::TempDir tmp;
    std::string path = tmp.path() + "/resolv.conf";
    ipam_test::write_file(path,
                          "# generated\n"
                          "nameserver 10.0.0.53\n"
                          "  nameserver   fd00::53  \n"
                          "; nameserver 1.1.1.1\n"
                          "#nameserver 8.8.8.8\n"
                          "domain first.example\n"
                          "domain cluster.local\n"
                          "search a.example b.example\n"
                          "search c.example\n"
                          "options ndots:5 edns0\n"
                          "nameserver\n"
                          "sortlist 10.0.0.0\n");
    auto dns = ipam::parse_resolv_conf(path);
    CHECK(dns.nameservers == std::vector<std::string>{"10.0.0.53", "fd00::53"});
    CHECK(dns.domain == "cluster.local");
    CHECK(dns.search == std::vector<std::string>{"a.example", "b.example", "c.example"});
    CHECK(dns.options == std::vector<std::string>{"ndots:5", "edns0"});
}

TEST_CASE("resolv: an unreadable file is a config error naming the file") {
    std::string msg;
    CHECK(ipam_test::failure([] { ipam::parse_resolv_conf("/nonexistent/resolv.conf"); }, &msg) == "invalid");
    CHECK(msg.find("'/nonexistent/resolv.conf'") != std::string::npos);
    CHECK(msg.rfind("ipam.resolvConf: ", 0) == 0);
}
