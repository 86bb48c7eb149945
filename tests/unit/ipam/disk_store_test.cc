// Crash leftovers and foreign files in the store directory.
#include <set>

#include "helpers.h"
#include "ipam/disk_store.h"
#include "ipam/owner_index.h"

using ipam_test::exists;
using ipam_test::ip;
using ipam_test::read_file;
using ipam_test::write_file;
using json = nlohmann::json;

namespace {

const json kSmall = json::parse(R"({"ranges": [[{"subnet": "10.0.0.0/29", "rangeStart": "10.0.0.2", "rangeEnd": "10.0.0.5"}]]})");

std::string first_ip(ipam::HostLocal& h, const std::string& cid) {
    return h.allocate({cid, "eth0"}, {}).ips.at(0).address.addr.str();
}

}  // namespace

TEST_CASE("disk store: temp files left by a crash are removed and never count as reservations") {
    ipam_test::TempDir tmp;
    auto h = ipam_test::host_local(kSmall, tmp.path());
    h.list();
    write_file(h.dir() + "/.topocni/tmp/.tmp-999-0", "a\r\neth0");   // died before link()
    write_file(h.dir() + "/.topocni/tmp/.tmp-999-1", "a\r");          // died mid-write
    write_file(h.dir() + "/.stray", "a\r\neth0");                     // some other dot-file
    write_file(h.dir() + "/last_reserved_ip.0", "garbage");           // torn cursor of the reference
    CHECK(h.list().empty());
    CHECK(ipam_test::list_dir(h.dir() + "/.topocni/tmp").empty());
    CHECK(ipam_test::error_code([&] { h.find({"a", "eth0"}); }) == cni::kCheckFailed);
    CHECK(first_ip(h, "a") == "10.0.0.2");   // garbage cursor: start from the beginning
    CHECK(exists(h.dir() + "/.stray"));
}

TEST_CASE("disk store: an index entry pointing at someone else's file is ignored") {
    ipam_test::TempDir tmp;
    auto h = ipam_test::host_local(kSmall, tmp.path());
    CHECK(first_ip(h, "b") == "10.0.0.2");
    // As if "a" had held 10.0.0.2, was released by the reference plugin (which does
    // not know our index), and "b" then got the address.
    write_file(h.dir() + "/.topocni/owners/a_eth0", ipam::format_index({{"a", "eth0"}, {ip("10.0.0.2")}}));
    CHECK(ipam_test::error_code([&] { h.find({"a", "eth0"}); }) == cni::kCheckFailed);
    CHECK(first_ip(h, "a") == "10.0.0.3");        // not "already holds 10.0.0.2"
    CHECK(h.find({"a", "eth0"}).size() == 1);
    h.release({"a", "eth0"});
    CHECK(read_file(h.dir() + "/10.0.0.2") == "b\r\neth0");
    SUBCASE("gc drops the stale entries") {
        write_file(h.dir() + "/.topocni/owners/a_eth0", ipam::format_index({{"a", "eth0"}, {ip("10.0.0.2")}}));
        write_file(h.dir() + "/.topocni/owners/garbage", "not an index");
        h.gc({{"a", "eth0"}, {"b", "eth0"}});
        CHECK(ipam_test::list_dir(h.dir() + "/.topocni/owners") == std::vector<std::string>{"b_eth0"});
        CHECK(h.list().size() == 1);
    }
}

TEST_CASE("disk store: an empty reservation file blocks its address until gc") {
    ipam_test::TempDir tmp;
    auto h = ipam_test::host_local(kSmall, tmp.path());
    h.list();
    write_file(h.dir() + "/10.0.0.2", "");
    CHECK(first_ip(h, "a") == "10.0.0.3");
    std::string msg;
    CHECK(ipam_test::error_code([&] { h.allocate({"b", "eth0"}, {ip("10.0.0.2")}); }, &msg) == cni::kAddressTaken);
    CHECK(msg.find("empty reservation file") != std::string::npos);
    auto gone = h.gc({{"a", "eth0"}});
    REQUIRE(gone.size() == 1);
    CHECK(gone[0].ip == ip("10.0.0.2"));
    CHECK(h.allocate({"b", "eth0"}, {ip("10.0.0.2")}).ips[0].address.addr == ip("10.0.0.2"));
}

TEST_CASE("disk store: an index written before a crash that prevented the reservation is harmless") {
    ipam_test::TempDir tmp;
    auto h = ipam_test::host_local(kSmall, tmp.path());
    h.list();
    // The index is written first; the process died before link().
    write_file(h.dir() + "/.topocni/owners/a_eth0", ipam::format_index({{"a", "eth0"}, {ip("10.0.0.4")}}));
    CHECK(first_ip(h, "a") == "10.0.0.2");
    CHECK(first_ip(h, "b") == "10.0.0.3");
    CHECK(first_ip(h, "c") == "10.0.0.4");
    CHECK(first_ip(h, "a") == "10.0.0.2");
    h.release({"a", "eth0"});
    CHECK(read_file(h.dir() + "/10.0.0.4") == "c\r\neth0");
}

TEST_CASE("disk store: the store reads names only where it can") {
    ipam_test::TempDir tmp;
    ipam::DiskStore s(tmp.path() + "/n", std::chrono::milliseconds(1000));
    CHECK(s.reserve(ip("10.0.0.2"), {"a", "eth0"}));
    CHECK_FALSE(s.reserve(ip("10.0.0.2"), {"b", "eth0"}));
    CHECK(s.taken(ip("10.0.0.2")));
    CHECK_FALSE(s.taken(ip("10.0.0.3")));
    write_file(tmp.path() + "/n/010.0.0.3", "x\r\neth0");   // not how an address prints: not a reservation
    CHECK(s.addresses() == std::vector<ipam::IpAddr>{ip("10.0.0.2")});
    CHECK(s.indexed({"a", "eth0"}) == std::vector<ipam::IpAddr>{ip("10.0.0.2")});
    CHECK(s.indexed({"b", "eth0"}).empty());
    s.set_cursor(0, ip("10.0.0.2"));
    CHECK(s.cursor(0) == ip("10.0.0.2"));
    CHECK_FALSE(s.cursor(1));
    s.check_writable();
    CHECK(ipam_test::list_dir(tmp.path() + "/n") ==
          std::vector<std::string>{".topocni", "010.0.0.3", "10.0.0.2", "last_reserved_ip.0", "lock"});
}

TEST_CASE("disk store: a cursor rewritten in place holds exactly the last address") {
    ipam_test::TempDir tmp;
    ipam::DiskStore s(tmp.path() + "/n", std::chrono::milliseconds(1000));
    s.set_cursor(0, ip("10.0.0.100"));
    s.set_cursor(0, ip("10.0.0.9"));   // shorter: the old tail must not survive
    CHECK(read_file(tmp.path() + "/n/last_reserved_ip.0") == "10.0.0.9");
    CHECK(s.cursor(0) == ip("10.0.0.9"));
    write_file(tmp.path() + "/n/last_reserved_ip.0", "10.0.0.90");   // a rewrite cut short by a crash
    CHECK(s.cursor(0) == ip("10.0.0.90"));                            // only moves where the search starts
}

TEST_CASE("disk store: the owner index is replaced whole, and only free spares are left in tmp") {
    ipam_test::TempDir tmp;
    ipam::DiskStore s(tmp.path() + "/n", std::chrono::milliseconds(1000));
    CHECK(s.reserve(ip("10.0.0.2"), {"a", "eth0"}));
    CHECK(s.reserve(ip("fd00::2"), {"a", "eth0"}));   // rewrites the existing index
    CHECK(s.indexed({"a", "eth0"}) == std::vector<ipam::IpAddr>{ip("10.0.0.2"), ip("fd00::2")});
    CHECK(ipam_test::only_spares(tmp.path() + "/n/.topocni/tmp"));
    CHECK(ipam_test::list_dir(tmp.path() + "/n/.topocni/owners").size() == 1);
    s.remove({ip("10.0.0.2"), "a", "eth0"});
    CHECK(s.indexed({"a", "eth0"}) == std::vector<ipam::IpAddr>{ip("fd00::2")});
    CHECK(s.release({"a", "eth0"}).size() == 1);
    CHECK(ipam_test::list_dir(tmp.path() + "/n/.topocni/owners").empty());
    CHECK(ipam_test::only_spares(tmp.path() + "/n/.topocni/tmp"));
}

TEST_CASE("disk store: durable mode (ipam.fsync) reserves and releases the same way") {
    ipam_test::TempDir tmp;
    ipam::DiskStore s(tmp.path() + "/n", std::chrono::milliseconds(1000), true);
    CHECK(s.reserve(ip("10.0.0.2"), {"a", "eth0"}));
    CHECK_FALSE(s.reserve(ip("10.0.0.2"), {"b", "eth0"}));
    CHECK(read_file(tmp.path() + "/n/10.0.0.2") == "a\r\neth0");
    CHECK(s.release({"a", "eth0"}).size() == 1);
    CHECK_FALSE(s.taken(ip("10.0.0.2")));
}

namespace {
ino_t inode_of(const std::string& p) {
    struct stat st;
    REQUIRE(::lstat(p.c_str(), &st) == 0);
    return st.st_ino;
}
}  // namespace

TEST_CASE("disk store: a released reservation's file becomes the next reservation, so no inode is allocated") {
    ipam_test::TempDir tmp;
    const std::string dir = tmp.path() + "/n";
    {
        ipam::DiskStore s(dir, std::chrono::milliseconds(1000));
        CHECK(s.reserve(ip("10.0.0.2"), {"a", "eth0"}));
    }
    ino_t reservation = inode_of(dir + "/10.0.0.2");
    ino_t index = inode_of(dir + "/.topocni/owners/a_eth0");
    {
        ipam::DiskStore s(dir, std::chrono::milliseconds(1000));
        CHECK(s.release({"a", "eth0"}).size() == 1);
    }
    CHECK_FALSE(exists(dir + "/10.0.0.2"));
    CHECK(ipam_test::list_dir(dir + "/.topocni/tmp").size() == 2);   // the reservation and the index, as spares
    CHECK(ipam_test::only_spares(dir + "/.topocni/tmp"));
    {
        ipam::DiskStore s(dir, std::chrono::milliseconds(1000));   // a new process finds them
        CHECK(s.reserve(ip("10.0.0.3"), {"bb", "net1"}));
    }
    CHECK(read_file(dir + "/10.0.0.3") == "bb\r\nnet1");   // rewritten whole: shorter and longer content
    CHECK(read_file(dir + "/.topocni/owners/bb_net1").find("ip=10.0.0.3") != std::string::npos);
    std::set<ino_t> reused{inode_of(dir + "/10.0.0.3"), inode_of(dir + "/.topocni/owners/bb_net1")};
    CHECK(reused == std::set<ino_t>{reservation, index});
    CHECK(ipam_test::list_dir(dir + "/.topocni/tmp").empty());
}

TEST_CASE("disk store: a spare that still names a reservation (a crash between link and unlink) is never rewritten") {
    ipam_test::TempDir tmp;
    const std::string dir = tmp.path() + "/n";
    {
        ipam::DiskStore s(dir, std::chrono::milliseconds(1000));
        CHECK(s.reserve(ip("10.0.0.2"), {"a", "eth0"}));
    }
    REQUIRE(::link((dir + "/10.0.0.2").c_str(), (dir + "/.topocni/tmp/spare-1-0").c_str()) == 0);
    {
        ipam::DiskStore s(dir, std::chrono::milliseconds(1000));
        CHECK(s.reserve(ip("10.0.0.3"), {"b", "eth0"}));
    }
    CHECK(read_file(dir + "/10.0.0.2") == "a\r\neth0");
    CHECK(read_file(dir + "/10.0.0.3") == "b\r\neth0");
    CHECK(inode_of(dir + "/10.0.0.2") != inode_of(dir + "/10.0.0.3"));
    CHECK(ipam_test::only_spares(dir + "/.topocni/tmp"));
}

TEST_CASE("disk store: at most 256 spares are kept, and crash leftovers in tmp are removed") {
    ipam_test::TempDir tmp;
    const std::string dir = tmp.path() + "/n";
    { ipam::DiskStore s(dir, std::chrono::milliseconds(1000)); }
    for (int i = 0; i < 300; ++i) write_file(dir + "/.topocni/tmp/spare-9-" + std::to_string(i), "x");
    write_file(dir + "/.topocni/tmp/.tmp-9-0", "half");
    { ipam::DiskStore s(dir, std::chrono::milliseconds(1000)); }
    auto left = ipam_test::list_dir(dir + "/.topocni/tmp");
    CHECK(left.size() == 256);
    CHECK(ipam_test::only_spares(dir + "/.topocni/tmp"));
}
