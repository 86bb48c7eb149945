#include <sys/stat.h>

#include "helpers.h"

using ipam_test::exists;
using ipam_test::ip;
using ipam_test::read_file;
using ipam_test::write_file;
using json = nlohmann::json;

namespace {

// .2 to .5 in a /29 with the gateway at .1.
const json kSmall = json::parse(R"({"ranges": [[{"subnet": "10.0.0.0/29", "rangeStart": "10.0.0.2", "rangeEnd": "10.0.0.5"}]]})");
const json kDual = json::parse(R"({"ranges": [[{"subnet": "10.0.0.0/29", "rangeStart": "10.0.0.2", "rangeEnd": "10.0.0.5"}],
                                              [{"subnet": "fd00::/120", "rangeStart": "fd00::2", "rangeEnd": "fd00::3"}]]})");

std::string first_ip(ipam::HostLocal& h, const std::string& cid, const std::string& ifname = "eth0") {
    return h.allocate({cid, ifname}, {}).ips.at(0).address.addr.str();
}

std::vector<std::string> listed(ipam::HostLocal& h) {
    std::vector<std::string> out;
    for (auto& r : h.list()) out.push_back(r.ip.str() + " " + r.container_id + " " + r.ifname);
    return out;
}

using V = std::vector<std::string>;

}  // namespace

TEST_CASE("host-local: files are byte-compatible with the reference plugin") {
    ipam_test::TempDir tmp;
    auto h = ipam_test::host_local(kSmall, tmp.path());
    CHECK(h.dir() == tmp.path() + "/net1");
    CHECK(first_ip(h, "cid") == "10.0.0.2");
    auto file = h.dir() + "/10.0.0.2";
    CHECK(read_file(file) == "cid\r\neth0");
    struct stat st;
    REQUIRE(::stat(file.c_str(), &st) == 0);
    CHECK((st.st_mode & 0777) == 0600);
    CHECK(st.st_nlink == 1);   // the temp name it was linked from is gone
    CHECK(read_file(h.dir() + "/last_reserved_ip.0") == "10.0.0.2");
    CHECK(exists(h.dir() + "/lock"));
    SUBCASE("the container id is trimmed like the reference does") {
        first_ip(h, "  spaced\n", "net1");
        CHECK(read_file(h.dir() + "/10.0.0.3") == "spaced\r\nnet1");
        h.release({"spaced", "net1"});
        CHECK_FALSE(exists(h.dir() + "/10.0.0.3"));
    }
}

TEST_CASE("host-local: dual stack gives one address per set, each with its own cursor") {
    ipam_test::TempDir tmp;
    auto h = ipam_test::host_local(kDual, tmp.path());
    auto r = h.allocate({"cid", "eth0"}, {});
    REQUIRE(r.ips.size() == 2);
    CHECK(r.ips[0].address.str() == "10.0.0.2/29");
    CHECK(r.ips[1].address.str() == "fd00::2/120");
    CHECK(read_file(h.dir() + "/fd00::2") == "cid\r\neth0");
    CHECK(read_file(h.dir() + "/last_reserved_ip.1") == "fd00::2");
    CHECK(listed(h) == V{"10.0.0.2 cid eth0", "fd00::2 cid eth0"});
}

TEST_CASE("host-local: round robin across allocate and release") {
    ipam_test::TempDir tmp;
    auto h = ipam_test::host_local(kSmall, tmp.path());
    CHECK(first_ip(h, "a") == "10.0.0.2");
    CHECK(first_ip(h, "b") == "10.0.0.3");
    h.release({"a", "eth0"});
    CHECK(first_ip(h, "c") == "10.0.0.4");
    CHECK(first_ip(h, "d") == "10.0.0.5");
    CHECK(first_ip(h, "e") == "10.0.0.2");
    std::string msg;
    CHECK(ipam_test::failure([&] { first_ip(h, "f"); }, &msg) == "exhausted");
    CHECK(listed(h).size() == 4);
    CHECK_FALSE(exists(h.own_dir() + "/owners/f_eth0"));
}

TEST_CASE("host-local: a failing allocate leaves no file and no index entry behind") {
    ipam_test::TempDir tmp;
    auto h = ipam_test::host_local(kDual, tmp.path());
    h.allocate({"a", "eth0"}, {});
    h.allocate({"b", "eth0"}, {});   // the v6 set is now full
    CHECK(ipam_test::failure([&] { h.allocate({"c", "eth0"}, {}); }) == "exhausted");
    CHECK(listed(h) == V{"10.0.0.2 a eth0", "10.0.0.3 b eth0", "fd00::2 a eth0", "fd00::3 b eth0"});
    CHECK(ipam_test::list_dir(h.own_dir() + "/owners") == V{"a_eth0", "b_eth0"});
    CHECK(ipam_test::list_dir(h.own_dir() + "/tmp").empty());
}

TEST_CASE("host-local: a retried allocate returns the same address and writes nothing new") {
    ipam_test::TempDir tmp;
    auto h = ipam_test::host_local(kDual, tmp.path());
    auto first = h.allocate({"a", "eth0"}, {});
    auto again = h.allocate({"a", "eth0"}, {});
    CHECK(again.ips[0].address == first.ips[0].address);
    CHECK(again.ips[1].address == first.ips[1].address);
    CHECK(h.list().size() == 2);
    auto held = h.find({"a", "eth0"});
    CHECK(held.size() == 2);
}

TEST_CASE("host-local: release is idempotent and removes the owner's index") {
    ipam_test::TempDir tmp;
    auto h = ipam_test::host_local(kDual, tmp.path());
    h.allocate({"a", "eth0"}, {});
    h.allocate({"b", "eth0"}, {});
    CHECK(exists(h.own_dir() + "/owners/a_eth0"));
    h.release({"a", "eth0"});
    h.release({"a", "eth0"});
    h.release({"never", "eth0"});
    CHECK(listed(h) == V{"10.0.0.3 b eth0", "fd00::3 b eth0"});
    CHECK_FALSE(exists(h.own_dir() + "/owners/a_eth0"));
    CHECK(ipam_test::failure([&] { h.find({"a", "eth0"}); }) == "not reserved");
}

TEST_CASE("host-local: release finds files the index does not know about") {
    ipam_test::TempDir tmp;
    auto h = ipam_test::host_local(kSmall, tmp.path());
    h.list();   // creates the store directory
    SUBCASE("a legacy id-only file") {
        write_file(h.dir() + "/10.0.0.4", "legacy-cid");
        CHECK(listed(h) == V{"10.0.0.4 legacy-cid "});
        CHECK(h.find({"legacy-cid", "eth0"}).size() == 1);
        h.release({"legacy-cid", "eth0"});
        CHECK_FALSE(exists(h.dir() + "/10.0.0.4"));
    }
    SUBCASE("a file written by another host-local, with a trailing newline") {
        write_file(h.dir() + "/10.0.0.4", "other\r\neth0\n");
        h.release({"other", "eth0"});
        CHECK_FALSE(exists(h.dir() + "/10.0.0.4"));
    }
}

TEST_CASE("host-local: requested addresses on disk") {
    ipam_test::TempDir tmp;
    auto h = ipam_test::host_local(kSmall, tmp.path());
    CHECK(h.allocate({"a", "eth0"}, {ip("10.0.0.4")}).ips[0].address.str() == "10.0.0.4/29");
    CHECK(h.allocate({"a", "eth0"}, {ip("10.0.0.4")}).ips[0].address.str() == "10.0.0.4/29");
    std::string msg;
    CHECK(ipam_test::failure([&] { h.allocate({"b", "eth0"}, {ip("10.0.0.4")}); }, &msg) == "taken");
    CHECK(msg.find("10.0.0.4") != std::string::npos);
    CHECK(msg.find("'a'") != std::string::npos);
    CHECK(ipam_test::failure([&] { h.allocate({"b", "eth0"}, {ip("10.0.0.1")}); }) == "invalid");
    CHECK(ipam_test::failure([&] { h.allocate({"b", "eth0"}, {ip("10.0.1.1")}); }) == "invalid");
    CHECK(listed(h) == V{"10.0.0.4 a eth0"});
    CHECK_FALSE(exists(h.own_dir() + "/owners/b_eth0"));
}

TEST_CASE("host-local: gc releases what no valid attachment owns") {
    ipam_test::TempDir tmp;
    auto h = ipam_test::host_local(kSmall, tmp.path());
    first_ip(h, "a");
    first_ip(h, "b");
    write_file(h.dir() + "/10.0.0.4", "legacy");
    write_file(h.dir() + "/10.0.0.5", "");   // the reference crashed between create and write
    SUBCASE("an empty list releases everything") {
        auto gone = h.gc({});
        CHECK(gone.size() == 4);
        CHECK(h.list().empty());
        CHECK(ipam_test::list_dir(h.own_dir() + "/owners").empty());
    }
    SUBCASE("a list keeps its owners, and legacy files of their containers") {
        auto gone = h.gc({{"a", "eth0"}, {"legacy", "net1"}});
        REQUIRE(gone.size() == 2);
        CHECK(gone[0].ip == ip("10.0.0.3"));
        CHECK(gone[0].container_id == "b");
        CHECK(gone[1].ip == ip("10.0.0.5"));
        CHECK(listed(h) == V{"10.0.0.2 a eth0", "10.0.0.4 legacy "});
        CHECK(ipam_test::list_dir(h.own_dir() + "/owners") == V{"a_eth0"});
    }
    SUBCASE("the same container with another interface is not a match") {
        CHECK(h.gc({{"a", "net1"}}).size() == 4);
        CHECK(h.list().empty());
    }
}

TEST_CASE("host-local: status reports a full range set and an unusable store as code 50") {
    ipam_test::TempDir tmp;
    auto h = ipam_test::host_local(kDual, tmp.path());
    h.status();
    h.allocate({"a", "eth0"}, {});
    h.status();
    h.allocate({"b", "eth0"}, {});   // the v6 set (2 addresses) is now full
    std::string msg;
    CHECK(ipam_test::failure([&] { h.status(); }, &msg) == "unavailable");
    CHECK(msg == "range set 1 (fd00::2-fd00::3) has no free address");
    h.release({"a", "eth0"});
    h.status();
    SUBCASE("the data directory is a file") {
        write_file(tmp.path() + "/file", "x");
        auto bad = ipam_test::host_local(kSmall, tmp.path() + "/file");
        CHECK(ipam_test::failure([&] { bad.status(); }, &msg) == "unavailable");
        CHECK(msg.find(tmp.path() + "/file/net1") != std::string::npos);
    }
}

TEST_CASE("host-local: the result carries routes and the resolv.conf DNS") {
    ipam_test::TempDir tmp;
    write_file(tmp.path() + "/resolv.conf", "nameserver 10.0.0.53\nsearch svc.local\n");
    json cfg = kSmall;
    cfg["routes"] = json::parse(R"([{"dst": "0.0.0.0/0"}])");
    cfg["resolvConf"] = tmp.path() + "/resolv.conf";
    auto r = ipam_test::host_local(cfg, tmp.path()).allocate({"a", "eth0"}, {});
    REQUIRE(r.routes.size() == 1);
    CHECK(r.routes[0].dst.str() == "0.0.0.0/0");
    CHECK(r.dns.nameservers == std::vector<std::string>{"10.0.0.53"});
    CHECK(r.dns.search == std::vector<std::string>{"svc.local"});
    SUBCASE("an unreadable resolv.conf is code 7 and reserves nothing") {
        cfg["resolvConf"] = tmp.path() + "/missing";
        auto h = ipam_test::host_local(cfg, tmp.path());
        CHECK(ipam_test::failure([&] { h.allocate({"b", "eth0"}, {}); }) == "invalid");
        CHECK(h.list().size() == 1);
    }
}

TEST_CASE("host-local: the network name must be a single path component") {
    ipam_test::TempDir tmp;
    auto cfg = ipam::parse_config(ipam_test::net_config(kSmall, tmp.path()), "1.0.0");
    for (const char* name : {"", ".", "..", "a/b", "/abs"}) {
        SUBCASE(name) {
            std::string msg;
            CHECK(ipam_test::failure([&] { ipam::HostLocal(cfg, name); }, &msg) == "invalid");
            CHECK(msg.rfind("name: ", 0) == 0);
        }
    }
    CHECK_NOTHROW(ipam::HostLocal(cfg, "..net"));
}
