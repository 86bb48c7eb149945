// Attachment records: written whole, removed without a trace, and the network lock.
#include <doctest/doctest.h>

#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <memory>
#include <fstream>
#include <sstream>
#include <vector>

#include "cni/records.h"
#include "../support.h"

namespace fs = std::filesystem;

namespace {


std::string slurp(const std::string& p) {
    std::ifstream in(p);
    std::stringstream ss;
    ss << in.rdbuf();
    return ss.str();
}

}  // namespace

TEST_CASE("records: a completed record replaces the intent whole, and a removed one leaves no file") {
    support::TempDir tmp("rec");
    const std::string dir = cni::records_dir(tmp.path(), "net");
    cni::write_record(tmp.path(), {"net", "first-container-id", "eth0", "/run/netns/a", nullptr});
    cni::write_record(tmp.path(), {"net", "first-container-id", "eth0", "/run/netns/a", {{"cniVersion", "1.0.0"}}});
    const std::string first = dir + "/first-container-id_eth0.json";
    CHECK(cni::read_record(tmp.path(), "net", "first-container-id", "eth0")->result["cniVersion"] == "1.0.0");
    CHECK(nlohmann::json::parse(slurp(first))["containerID"] == "first-container-id");

    cni::remove_record(tmp.path(), "net", "first-container-id", "eth0");
    CHECK_FALSE(fs::exists(first));
    CHECK(cni::list_records(tmp.path(), "net").empty());
    CHECK(fs::is_empty(dir));
    cni::remove_record(tmp.path(), "net", "first-container-id", "eth0");   // again: nothing to do
}

TEST_CASE("records: the network lock is its directory, and a refused ADD takes back the directories it made") {
    support::TempDir tmp("rec");
    const std::string state = tmp.path() + "/state";
    {
        auto lock = cni::lock_network(state, "net", base::DirLock::Shared, 1000);
        CHECK(fs::is_empty(cni::records_dir(state, "net")));   // no lock file
        lock.release_created();
    }
    CHECK_FALSE(fs::exists(state));

    SUBCASE("not while another ADD of the network shares the lock") {
        auto first = cni::lock_network(state, "net", base::DirLock::Shared, 1000);
        auto second = cni::lock_network(state, "net", base::DirLock::Shared, 1000);
        first.release_created();
        CHECK(fs::exists(cni::records_dir(state, "net")));
    }
    SUBCASE("not when a record is in it") {
        auto lock = cni::lock_network(state, "net", base::DirLock::Shared, 1000);
        cni::write_record(state, {"net", "x", "eth0", "/run/netns/x", nullptr});
        lock.release_created();
        CHECK(cni::read_record(state, "net", "x", "eth0"));
    }
    SUBCASE("a waiter whose directory was taken away locks the new one") {
        int go[2];
        REQUIRE(::pipe(go) == 0);
        pid_t child = ::fork();   // before the lock exists, so the child shares no fd of it
        REQUIRE(child >= 0);
        if (child == 0) {
            char c;
            int rc = ::read(go[0], &c, 1) == 1 ? 1 : 3;
            try {
                auto mine = cni::lock_network(state, "net", base::DirLock::Exclusive, 5000);
                cni::write_record(state, {"net", "w", "eth0", "/run/netns/w", nullptr});
                rc = cni::read_record(state, "net", "w", "eth0") ? 0 : 2;
            } catch (const std::exception& e) {
                std::fprintf(stderr, "child: %s\n", e.what());
            }
            ::_exit(rc);
        }
        auto lock = std::make_unique<base::DirLock>(cni::lock_network(state, "net", base::DirLock::Exclusive, 1000));
        REQUIRE(::write(go[1], "x", 1) == 1);
        ::usleep(100000);   // the child is waiting for the lock now
        lock->release_created();
        CHECK_FALSE(fs::exists(state));
        lock.reset();
        int status = 0;
        REQUIRE(::waitpid(child, &status, 0) == child);
        CHECK(WEXITSTATUS(status) == 0);
        CHECK(cni::read_record(state, "net", "w", "eth0"));
        ::close(go[0]);
        ::close(go[1]);
    }
}

TEST_CASE("records: an intent record over a stale one of the same name replaces it") {
    support::TempDir tmp("rec");
    cni::write_record(tmp.path(), {"net", "x", "eth0", "/run/netns/old", {{"cniVersion", "1.0.0"}, {"ips", {1, 2, 3}}}});
    cni::write_record(tmp.path(), {"net", "x", "eth0", "/run/netns/new", nullptr});
    auto r = cni::read_record(tmp.path(), "net", "x", "eth0");
    REQUIRE(r);
    CHECK(r->netns == "/run/netns/new");
    CHECK(r->result.is_null());
    CHECK(r->completed_ns == 0);
}

TEST_CASE("records: concurrent ADDs and DELs of one network never swap contents") {
    // ADDs of a network run at once (the network lock is shared), as separate processes.
    support::TempDir tmp("rec");
    const int kProcs = 6, kRounds = 150;
    std::vector<pid_t> kids;
    for (int p = 0; p < kProcs; ++p) {
        pid_t pid = ::fork();
        REQUIRE(pid >= 0);
        if (pid == 0) {
            for (int i = 0; i < kRounds; ++i) {
                std::string cid = "c" + std::to_string(p) + "-" + std::to_string(i);
                cni::write_record(tmp.path(), {"net", cid, "eth0", "/run/netns/" + cid, nullptr});
                auto r = cni::read_record(tmp.path(), "net", cid, "eth0");
                if (!r || r->container_id != cid || r->netns != "/run/netns/" + cid) ::_exit(1);
                if (i % 2) cni::remove_record(tmp.path(), "net", cid, "eth0");   // keep half of them
            }
            ::_exit(0);
        }
        kids.push_back(pid);
    }
    for (pid_t k : kids) {
        int status = 0;
        REQUIRE(::waitpid(k, &status, 0) == k);
        CHECK(WIFEXITED(status));
        CHECK(WEXITSTATUS(status) == 0);
    }
    auto left = cni::list_records(tmp.path(), "net");
    CHECK(left.size() == size_t(kProcs * kRounds / 2));
    for (auto& r : left) {
        CHECK(r.netns == "/run/netns/" + r.container_id);
        CHECK(fs::exists(cni::records_dir(tmp.path(), "net") + "/" + r.container_id + "_eth0.json"));
    }
}

