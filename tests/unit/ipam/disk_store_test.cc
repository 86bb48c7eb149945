// Crash leftovers and foreign files in the store directory.
#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <set>

#include "helpers.h"
#include "ipam/allocator.h"
#include "ipam/disk_store.h"
#include "ipam/lock.h"
#include "ipam/owner_index.h"

using ipam_test::exists;
using ipam_test::ip;
using ipam_test::read_file;
using ipam_test::write_file;
using json = nlohmann::json;

namespace {

const json kSmall = json::parse(R"({"ranges": [[{"subnet": "10.0.0.0/29", "rangeStart": "10.0.0.2", "rangeEnd": "10.0.0.5"}]]})");

ipam::DiskStore open(const std::string& root, bool durable = false) {
    return ipam::DiskStore(root + "/n", root + "/.topocni/n", std::chrono::milliseconds(1000), durable,
                           ipam::DiskStore::Mode::Create);
}

using V = std::vector<std::string>;

std::string first_ip(ipam::HostLocal& h, const std::string& cid) {
    return h.allocate({cid, "eth0"}, {}).ips.at(0).address.addr.str();
}

}  // namespace

TEST_CASE("disk store: temp files left by a crash are removed and never count as reservations") {
    ipam_test::TempDir tmp;
    auto h = ipam_test::host_local(kSmall, tmp.path());
    first_ip(h, "x");
    h.release({"x", "eth0"});
    write_file(h.own_dir() + "/tmp/tmp-999-0", "a\r\neth0");   // died before link()
    write_file(h.own_dir() + "/tmp/tmp-999-1", "a\r");          // died mid-write
    write_file(h.dir() + "/.stray", "a\r\neth0");                     // some other dot-file
    write_file(h.dir() + "/last_reserved_ip.0", "garbage");           // torn cursor of the reference
    CHECK(h.list().empty());
    CHECK(ipam_test::list_dir(h.own_dir() + "/tmp").empty());
    CHECK(ipam_test::failure([&] { h.find({"a", "eth0"}); }) == "not reserved");
    CHECK(first_ip(h, "a") == "10.0.0.2");   // garbage cursor: start from the beginning
    CHECK(exists(h.dir() + "/.stray"));
}

TEST_CASE("disk store: an index entry pointing at someone else's file is ignored") {
    ipam_test::TempDir tmp;
    auto h = ipam_test::host_local(kSmall, tmp.path());
    CHECK(first_ip(h, "b") == "10.0.0.2");
    // As if "a" had held 10.0.0.2, was released by the reference plugin (which does
    // not know our index), and "b" then got the address.
    write_file(h.own_dir() + "/owners/a_eth0", ipam::format_index({{"a", "eth0"}, {ip("10.0.0.2")}}));
    CHECK(ipam_test::failure([&] { h.find({"a", "eth0"}); }) == "not reserved");
    CHECK(first_ip(h, "a") == "10.0.0.3");        // not "already holds 10.0.0.2"
    CHECK(h.find({"a", "eth0"}).size() == 1);
    h.release({"a", "eth0"});
    CHECK(read_file(h.dir() + "/10.0.0.2") == "b\r\neth0");
    SUBCASE("gc drops the stale entries") {
        write_file(h.own_dir() + "/owners/a_eth0", ipam::format_index({{"a", "eth0"}, {ip("10.0.0.2")}}));
        write_file(h.own_dir() + "/owners/garbage", "not an index");
        h.gc({{"a", "eth0"}, {"b", "eth0"}});
        CHECK(ipam_test::list_dir(h.own_dir() + "/owners") == std::vector<std::string>{"b_eth0"});
        CHECK(h.list().size() == 1);
    }
}

TEST_CASE("disk store: an empty reservation file blocks its address until gc") {
    ipam_test::TempDir tmp;
    auto h = ipam_test::host_local(kSmall, tmp.path());
    write_file(h.dir() + "/10.0.0.2", "");
    CHECK(first_ip(h, "a") == "10.0.0.3");
    std::string msg;
    CHECK(ipam_test::failure([&] { h.allocate({"b", "eth0"}, {ip("10.0.0.2")}); }, &msg) == "taken");
    CHECK(msg.find("empty reservation file") != std::string::npos);
    auto gone = h.gc({{"a", "eth0"}});
    REQUIRE(gone.size() == 1);
    CHECK(gone[0].ip == ip("10.0.0.2"));
    CHECK(h.allocate({"b", "eth0"}, {ip("10.0.0.2")}).ips[0].address.addr == ip("10.0.0.2"));
}

TEST_CASE("disk store: an index written before a crash that prevented the reservation is harmless") {
    ipam_test::TempDir tmp;
    auto h = ipam_test::host_local(kSmall, tmp.path());
    // The index is written first; the process died before link().
    write_file(h.own_dir() + "/owners/a_eth0", ipam::format_index({{"a", "eth0"}, {ip("10.0.0.4")}}));
    CHECK(first_ip(h, "a") == "10.0.0.2");
    CHECK(first_ip(h, "b") == "10.0.0.3");
    CHECK(first_ip(h, "c") == "10.0.0.4");
    CHECK(first_ip(h, "a") == "10.0.0.2");
    h.release({"a", "eth0"});
    CHECK(read_file(h.dir() + "/10.0.0.4") == "c\r\neth0");
}

TEST_CASE("disk store: the store reads names only where it can") {
    ipam_test::TempDir tmp;
    auto s = open(tmp.path());
    CHECK(s.reserve(ip("10.0.0.2"), {"a", "eth0"}));
    CHECK_FALSE(s.reserve(ip("10.0.0.2"), {"b", "eth0"}));
    CHECK(s.taken(ip("10.0.0.2")));
    CHECK_FALSE(s.taken(ip("10.0.0.3")));
    write_file(tmp.path() + "/n/010.0.0.3", "x\r\neth0");   // not how an address prints: not a reservation
    CHECK(s.addresses() == std::vector<base::IpAddr>{ip("10.0.0.2")});
    CHECK(s.indexed({"a", "eth0"}) == std::vector<base::IpAddr>{ip("10.0.0.2")});
    CHECK(s.indexed({"b", "eth0"}).empty());
    s.set_cursor(0, ip("10.0.0.2"));
    CHECK(s.cursor(0) == ip("10.0.0.2"));
    CHECK_FALSE(s.cursor(1));
    s.check_writable();
    CHECK(ipam_test::list_dir(tmp.path() + "/n") == V{"010.0.0.3", "10.0.0.2", "last_reserved_ip.0", "lock"});
}

TEST_CASE("disk store: a cursor rewritten in place holds exactly the last address") {
    ipam_test::TempDir tmp;
    auto s = open(tmp.path());
    s.set_cursor(0, ip("10.0.0.100"));
    s.set_cursor(0, ip("10.0.0.9"));   // shorter: the old tail must not survive
    CHECK(read_file(tmp.path() + "/n/last_reserved_ip.0") == "10.0.0.9");
    CHECK(s.cursor(0) == ip("10.0.0.9"));
    write_file(tmp.path() + "/n/last_reserved_ip.0", "10.0.0.90");   // a rewrite cut short by a crash
    CHECK(s.cursor(0) == ip("10.0.0.90"));                            // only moves where the search starts
    s.remove_cursor(0);
    CHECK_FALSE(exists(tmp.path() + "/n/last_reserved_ip.0"));
}

TEST_CASE("disk store: the owner index is replaced whole, and a release leaves no file of the owner") {
    ipam_test::TempDir tmp;
    auto s = open(tmp.path());
    CHECK(s.reserve(ip("10.0.0.2"), {"a", "eth0"}));
    CHECK(s.reserve(ip("fd00::2"), {"a", "eth0"}));   // rewrites the existing index
    CHECK(s.indexed({"a", "eth0"}) == std::vector<base::IpAddr>{ip("10.0.0.2"), ip("fd00::2")});
    CHECK(ipam_test::list_dir(tmp.path() + "/.topocni/n/tmp").empty());
    CHECK(ipam_test::list_dir(tmp.path() + "/.topocni/n/owners").size() == 1);
    s.remove({ip("10.0.0.2"), "a", "eth0"});
    CHECK(s.indexed({"a", "eth0"}) == std::vector<base::IpAddr>{ip("fd00::2")});
    CHECK(s.release({"a", "eth0"}).size() == 1);
    CHECK(ipam_test::tree(tmp.path()) == V{".topocni", ".topocni/n", ".topocni/n/owners", ".topocni/n/tmp", "n", "n/lock"});
}

TEST_CASE("disk store: durable mode (ipam.fsync) reserves and releases the same way") {
    ipam_test::TempDir tmp;
    auto s = open(tmp.path(), true);
    CHECK(s.reserve(ip("10.0.0.2"), {"a", "eth0"}));
    CHECK_FALSE(s.reserve(ip("10.0.0.2"), {"b", "eth0"}));
    CHECK(read_file(tmp.path() + "/n/10.0.0.2") == "a\r\neth0");
    CHECK(s.release({"a", "eth0"}).size() == 1);
    CHECK_FALSE(s.taken(ip("10.0.0.2")));
}

TEST_CASE("disk store: nothing of ours sits inside the network's directory, which the reference walks") {
    ipam_test::TempDir tmp;
    auto h = ipam_test::host_local(kSmall, tmp.path());
    first_ip(h, "a");
    first_ip(h, "b");
    h.release({"a", "eth0"});
    h.gc({{"b", "eth0"}});
    CHECK(ipam_test::tree(h.dir()) == V{"10.0.0.3", "last_reserved_ip.0", "lock"});
    CHECK(exists(h.own_dir() + "/owners/b_eth0"));
}

TEST_CASE("disk store: our files from earlier releases inside the network's directory are removed") {
    ipam_test::TempDir tmp;
    auto h = ipam_test::host_local(kSmall, tmp.path());
    write_file(h.dir() + "/.topocni/owners/a_eth0", "topocni-owner-index 1\ncid=a\nifname=eth0\nip=10.0.0.2\n");
    write_file(h.dir() + "/.topocni/tmp/spare-1-0", "x");
    write_file(h.dir() + "/lock", "");
    h.gc({});
    CHECK(ipam_test::tree(h.dir()) == V{"lock"});
}

TEST_CASE("disk store: verbs other than ADD create nothing for a network that was never used") {
    ipam_test::TempDir tmp;
    auto h = ipam_test::host_local(kSmall, tmp.path() + "/data");
    h.release({"a", "eth0"});
    CHECK(h.gc({}).empty());
    CHECK(h.list().empty());
    CHECK(ipam_test::failure([&] { h.find({"a", "eth0"}); }) == "not reserved");
    ::mkdir((tmp.path() + "/data").c_str(), 0755);
    h.status();
    CHECK(ipam_test::tree(tmp.path()) == V{"data"});
}

TEST_CASE("disk store: an ADD and its DEL leave only the lock, the cursors and the directories") {
    ipam_test::TempDir tmp;
    auto h = ipam_test::host_local(kSmall, tmp.path());
    first_ip(h, "a");
    h.release({"a", "eth0"});
    auto after_one = ipam_test::tree(tmp.path());
    CHECK(after_one == V{".topocni", ".topocni/net1", ".topocni/net1/owners", ".topocni/net1/tmp", "net1",
                         "net1/last_reserved_ip.0", "net1/lock"});
    for (int i = 0; i < 5; ++i) {
        first_ip(h, "b" + std::to_string(i));
        h.release({"b" + std::to_string(i), "eth0"});
    }
    CHECK(ipam_test::tree(tmp.path()) == after_one);
}

TEST_CASE("disk store: undo of a first allocation removes every file and directory it created") {
    ipam_test::TempDir tmp;
    auto h = ipam_test::host_local(json::parse(R"({"ranges": [[{"subnet": "10.0.0.0/29"}], [{"subnet": "fd00::/120"}]]})"),
                                   tmp.path() + "/data");
    ipam::AllocationUndo u;
    h.allocate({"a", "eth0"}, {}, &u);
    CHECK(ipam_test::tree(tmp.path()).size() > 5);
    h.undo(u);
    CHECK(ipam_test::tree(tmp.path()).empty());
}

TEST_CASE("disk store: undo puts the cursor back, unless another allocation moved it since") {
    ipam_test::TempDir tmp;
    auto h = ipam_test::host_local(kSmall, tmp.path());
    CHECK(first_ip(h, "a") == "10.0.0.2");
    ipam::AllocationUndo u;
    h.allocate({"b", "eth0"}, {}, &u);
    CHECK(read_file(h.dir() + "/last_reserved_ip.0") == "10.0.0.3");
    h.undo(u);
    CHECK(read_file(h.dir() + "/last_reserved_ip.0") == "10.0.0.2");
    CHECK_FALSE(exists(h.dir() + "/10.0.0.3"));
    CHECK_FALSE(exists(h.own_dir() + "/owners/b_eth0"));
    CHECK(exists(h.dir() + "/10.0.0.2"));   // a's, untouched

    h.allocate({"c", "eth0"}, {}, &u);   // 10.0.0.3 again
    CHECK(first_ip(h, "d") == "10.0.0.4");
    h.undo(u);
    CHECK(read_file(h.dir() + "/last_reserved_ip.0") == "10.0.0.4");   // d's move stands
    CHECK_FALSE(exists(h.dir() + "/10.0.0.3"));
}

TEST_CASE("disk store: a lock whose file was removed while held is taken again on the new file") {
    ipam_test::TempDir tmp;
    const std::string path = tmp.path() + "/lock";
    int go[2];
    REQUIRE(::pipe(go) == 0);
    pid_t child = ::fork();   // before the lock is taken, so the child shares no fd of it
    REQUIRE(child >= 0);
    if (child == 0) {
        char c;
        int rc = ::read(go[0], &c, 1) == 1 ? 1 : 3;
        try {
            ipam::FileLock mine(path, std::chrono::milliseconds(5000));
            // Held on the file the name now points at: another try on it must fail.
            int fd = ::open(path.c_str(), O_RDONLY);
            rc = fd >= 0 && ::flock(fd, LOCK_EX | LOCK_NB) != 0 ? 0 : 2;
        } catch (...) {
        }
        ::_exit(rc);
    }
    {
        ipam::FileLock held(path, std::chrono::milliseconds(1000));
        REQUIRE(::write(go[1], "x", 1) == 1);
        ::usleep(100000);   // the child waits for `held` now
        REQUIRE(::unlink(path.c_str()) == 0);   // as HostLocal::undo does for a store it created
    }
    int status = 0;
    REQUIRE(::waitpid(child, &status, 0) == child);
    CHECK(WIFEXITED(status));
    CHECK(WEXITSTATUS(status) == 0);
    ::close(go[0]);
    ::close(go[1]);
}
