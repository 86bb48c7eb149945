#include "helpers.h"
#include "ipam/owner_index.h"

using ipam_test::ip;

TEST_CASE("owner index: file names are readable, distinct per owner and never dot-files") {
    CHECK(ipam::index_file_name({"f81d4fae7dec", "eth0"}) == "f81d4fae7dec_eth0");
    // "a_b"+"c" and "a"+"b_c" must not share a file.
    CHECK(ipam::index_file_name({"a_b", "c"}) != ipam::index_file_name({"a", "b_c"}));
    CHECK(ipam::index_file_name({"x/y", "eth0"}).find('/') == std::string::npos);
    CHECK(ipam::index_file_name({".hidden", "eth0"})[0] != '.');
    auto long_name = ipam::index_file_name({std::string(300, 'a'), "eth0"});
    CHECK(long_name.size() < 64);
    CHECK(long_name.rfind("h-", 0) == 0);
    CHECK(long_name != ipam::index_file_name({std::string(300, 'a'), "eth1"}));
}

TEST_CASE("owner index: contents round-trip and can never look like a reservation") {
    ipam::OwnerIndex idx{{"c 1\r\nx", "net1"}, {ip("10.0.0.5"), ip("fd00::5")}};
    auto text = ipam::format_index(idx);
    // The reference compares whole files to "<id>\r\n<ifname>"; ours hold no '\r'.
    CHECK(text.find('\r') == std::string::npos);
    auto back = ipam::parse_index(text);
    REQUIRE(back);
    CHECK(back->owner == idx.owner);
    CHECK(back->ips == idx.ips);
    SUBCASE("torn or foreign files are not indexes") {
        CHECK_FALSE(ipam::parse_index(text.substr(0, text.size() - 3)));
        CHECK_FALSE(ipam::parse_index("cid\r\neth0"));
        CHECK_FALSE(ipam::parse_index(""));
    }
}
