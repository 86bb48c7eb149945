// Side by side with the real reference plugin (containernetworking-plugins'
// host-local) on one store directory. Skipped when it is not installed.
#include <map>
#include <set>
#include <fcntl.h>
#include <sys/wait.h>
#include <unistd.h>

#include "helpers.h"

using ipam_test::exists;
using ipam_test::ip;
using ipam_test::read_file;
using json = nlohmann::json;

namespace {

constexpr const char* kReference = "/usr/lib/cni/host-local";

const json kRanges = json::parse(R"({"ranges": [[{"subnet": "10.0.0.0/28", "rangeStart": "10.0.0.2", "rangeEnd": "10.0.0.14"}]]})");

struct Run {
    int exit_code = -1;
    std::string out;
};

// Starts the reference plugin the way a runtime does: CNI_* variables, the config on
// stdin; its stdout goes to the file `out`.
pid_t spawn_reference(const std::string& command, const std::string& cid, const json& config, const std::string& out,
                      const std::string& ifname = "eth0") {
    int in[2];
    // O_CLOEXEC: the plugin must not inherit the write end, or it never sees EOF.
    REQUIRE(::pipe2(in, O_CLOEXEC) == 0);
    int out_fd = ::open(out.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    REQUIRE(out_fd >= 0);
    pid_t pid = ::fork();
    REQUIRE(pid >= 0);
    if (pid == 0) {
        ::dup2(in[0], 0);
        ::dup2(out_fd, 1);
        std::vector<std::string> env = {"CNI_COMMAND=" + command, "CNI_CONTAINERID=" + cid, "CNI_NETNS=/proc/self/ns/net",
                                        "CNI_IFNAME=" + ifname, "CNI_PATH=/usr/lib/cni"};
        std::vector<char*> envp;
        for (auto& e : env) envp.push_back(e.data());
        envp.push_back(nullptr);
        char* argv[] = {const_cast<char*>(kReference), nullptr};
        ::execve(kReference, argv, envp.data());
        ::_exit(127);
    }
    ::close(in[0]);
    ::close(out_fd);
    // The config is far smaller than a pipe buffer, so this cannot block.
    std::string text = config.dump();
    REQUIRE(::write(in[1], text.data(), text.size()) == static_cast<ssize_t>(text.size()));
    ::close(in[1]);
    return pid;
}

int wait_exit(pid_t pid) {
    int status = 0;
    REQUIRE(::waitpid(pid, &status, 0) == pid);
    return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

Run reference(const std::string& command, const std::string& cid, const json& config) {
    ipam_test::TempDir tmp;
    Run r;
    r.exit_code = wait_exit(spawn_reference(command, cid, config, tmp.path() + "/out"));
    r.out = read_file(tmp.path() + "/out");
    return r;
}

std::string address_of(const std::string& out) {
    auto address = json::parse(out)["ips"][0]["address"].get<std::string>();
    return address.substr(0, address.find('/'));
}

std::string reference_add(const std::string& cid, const json& config) {
    auto r = reference("ADD", cid, config);
    INFO("reference ADD output: ", r.out);
    REQUIRE(r.exit_code == 0);
    return address_of(r.out);
}

json config_for(const std::string& data_dir) {
    auto c = ipam_test::net_config(kRanges, data_dir);
    c["cniVersion"] = "0.4.0";   // the installed 1.1.1 plugin predates 1.1.0
    return c;
}

}  // namespace

TEST_CASE("reference compatibility: we never hand out what the reference plugin reserved") {
    if (::access(kReference, X_OK) != 0) {
        MESSAGE("skipped: ", kReference, " is not installed");
        return;
    }
    ipam_test::TempDir tmp;
    auto config = config_for(tmp.path());
    std::set<std::string> theirs;
    for (const char* cid : {"r1", "r2", "r3"}) theirs.insert(reference_add(cid, config));
    CHECK(theirs.size() == 3);

    auto h = ipam::HostLocal(ipam::parse_config(config, "0.4.0"), "net1");
    for (const char* cid : {"t1", "t2", "t3", "t4", "t5"}) {
        auto mine = h.allocate({cid, "eth0"}, {}).ips.at(0).address.addr.str();
        CHECK(theirs.count(mine) == 0);
    }
    std::map<std::string, std::string> owners;
    for (auto& r : h.list()) owners[r.ip.str()] = r.container_id + "/" + r.ifname;
    CHECK(owners.size() == 8);
    for (auto& a : theirs) CHECK(owners[a].rfind("r", 0) == 0);

    // The reference wrote no index: CHECK and DEL fall back to a scan.
    auto r2 = h.find({"r2", "eth0"});
    REQUIRE(r2.size() == 1);
    h.release({"r2", "eth0"});
    CHECK_FALSE(exists(h.dir() + "/" + r2[0].ip.str()));
    CHECK(h.list().size() == 7);
}

TEST_CASE("reference compatibility: the reference plugin respects and releases our reservations") {
    if (::access(kReference, X_OK) != 0) {
        MESSAGE("skipped: ", kReference, " is not installed");
        return;
    }
    ipam_test::TempDir tmp;
    auto config = config_for(tmp.path());
    auto h = ipam::HostLocal(ipam::parse_config(config, "0.4.0"), "net1");
    auto ours = h.allocate({"ours", "eth0"}, {}).ips.at(0).address.addr.str();
    auto other = h.allocate({"other", "eth0"}, {}).ips.at(0).address.addr.str();
    for (const char* cid : {"r1", "r2", "r3"}) {
        auto theirs = reference_add(cid, config);
        CHECK(theirs != ours);
        CHECK(theirs != other);
    }
    // The reference sees our file as the owner's: a duplicate ADD is refused...
    CHECK(reference("ADD", "ours", config).exit_code != 0);
    CHECK(reference("CHECK", "ours", config).exit_code == 0);

    // ...and its DEL removes it, walking past our index without touching it.
    REQUIRE(reference("DEL", "ours", config).exit_code == 0);
    CHECK_FALSE(exists(h.dir() + "/" + ours));
    CHECK(exists(h.own_dir() + "/owners/ours_eth0"));
    CHECK(read_file(h.dir() + "/" + other) == "other\r\neth0");

    // Our now stale index does not confuse later lookups.
    CHECK(ipam_test::failure([&] { h.find({"ours", "eth0"}); }) == "not reserved");
    auto again = h.allocate({"ours", "eth0"}, {}).ips.at(0).address.addr.str();
    CHECK(again != ours);   // round robin moved on; the old entry was not trusted
    CHECK(h.find({"ours", "eth0"}).size() == 1);
    h.release({"ours", "eth0"});
    CHECK(h.list().size() == 4);   // other + r1..r3
    REQUIRE(reference("DEL", "other", config).exit_code == 0);
    CHECK(h.list().size() == 3);
}

TEST_CASE("reference compatibility: both plugins allocating at once never share an address") {
    if (::access(kReference, X_OK) != 0) {
        MESSAGE("skipped: ", kReference, " is not installed");
        return;
    }
    ipam_test::TempDir tmp;
    auto config = ipam_test::net_config(json::parse(R"({"ranges": [[{"subnet": "10.0.0.0/24"}]]})"), tmp.path());
    config["cniVersion"] = "0.4.0";
    constexpr int kEach = 12;
    std::vector<pid_t> refs, ours;
    for (int i = 0; i < kEach; ++i) {
        refs.push_back(spawn_reference("ADD", "r" + std::to_string(i), config, tmp.path() + "/out" + std::to_string(i)));
        pid_t pid = ::fork();
        REQUIRE(pid >= 0);
        if (pid == 0) {
            int rc = 1;
            try {
                ipam::HostLocal(ipam::parse_config(config, "0.4.0"), "net1").allocate({"t" + std::to_string(i), "eth0"}, {});
                rc = 0;
            } catch (...) {
            }
            ::_exit(rc);
        }
        ours.push_back(pid);
    }
    std::set<std::string> seen;
    for (int i = 0; i < kEach; ++i) {
        CHECK(wait_exit(ours[static_cast<size_t>(i)]) == 0);
        CHECK(wait_exit(refs[static_cast<size_t>(i)]) == 0);
        seen.insert(address_of(read_file(tmp.path() + "/out" + std::to_string(i))));
    }
    auto all = ipam::HostLocal(ipam::parse_config(config, "0.4.0"), "net1").list();
    CHECK(all.size() == 2 * kEach);
    for (auto& r : all) seen.insert(r.ip.str());
    CHECK(seen.size() == 2 * kEach);
}
