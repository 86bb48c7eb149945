// The store lock: bounded waits, and many processes allocating at once.
#include <chrono>
#include <fcntl.h>
#include <set>
#include <sys/file.h>
#include <sys/wait.h>
#include <unistd.h>

#include "helpers.h"

using json = nlohmann::json;
using Clock = std::chrono::steady_clock;

TEST_CASE("lock: a held lock makes every verb fail with code 11 after lockTimeout") {
    ipam_test::TempDir tmp;
    json cfg = json::parse(R"({"ranges": [[{"subnet": "10.0.0.0/24"}]], "lockTimeout": 0.2})");
    auto h = ipam_test::host_local(cfg, tmp.path());
    h.allocate({"x", "eth0"}, {});
    h.release({"x", "eth0"});
    // A separate open file description conflicts with ours even within one process.
    int fd = ::open((h.dir() + "/lock").c_str(), O_RDONLY | O_CLOEXEC);
    REQUIRE(fd >= 0);
    REQUIRE(::flock(fd, LOCK_EX) == 0);
    std::string msg;
    auto start = Clock::now();
    CHECK(ipam_test::failure([&] { h.allocate({"a", "eth0"}, {}); }, &msg) == "lock timeout");
    auto waited = Clock::now() - start;
    CHECK(waited >= std::chrono::milliseconds(200));
    CHECK(waited < std::chrono::milliseconds(1500));
    CHECK(msg == "timed out after 0.2s waiting for lock '" + h.dir() + "/lock'");
    CHECK(ipam_test::failure([&] { h.release({"a", "eth0"}); }) == "lock timeout");
    CHECK(ipam_test::failure([&] { h.status(); }) == "lock timeout");
    ::close(fd);
    CHECK(h.allocate({"a", "eth0"}, {}).ips.size() == 1);
}

TEST_CASE("lock: 32 processes allocating at once get 32 distinct addresses") {
    ipam_test::TempDir tmp;
    json cfg = json::parse(R"({"ranges": [[{"subnet": "10.0.0.0/24"}], [{"subnet": "fd00::/120"}]]})");
    constexpr int kProcs = 32;
    int out[2];
    REQUIRE(::pipe(out) == 0);
    std::vector<pid_t> kids;
    for (int i = 0; i < kProcs; ++i) {
        pid_t pid = ::fork();
        REQUIRE(pid >= 0);
        if (pid == 0) {
            int rc = 1;
            try {
                auto h = ipam_test::host_local(cfg, tmp.path());
                auto r = h.allocate({"c" + std::to_string(i), "eth0"}, {});
                std::string line = r.ips[0].address.addr.str() + " " + r.ips[1].address.addr.str() + "\n";
                rc = ::write(out[1], line.data(), line.size()) == static_cast<ssize_t>(line.size()) ? 0 : 2;
            } catch (...) {
            }
            ::_exit(rc);
        }
        kids.push_back(pid);
    }
    ::close(out[1]);
    for (pid_t pid : kids) {
        int status = 0;
        REQUIRE(::waitpid(pid, &status, 0) == pid);
        CHECK(WIFEXITED(status));
        CHECK(WEXITSTATUS(status) == 0);
    }
    std::string text;
    char buf[4096];
    for (ssize_t n; (n = ::read(out[0], buf, sizeof buf)) > 0;) text.append(buf, static_cast<size_t>(n));
    ::close(out[0]);
    std::set<std::string> v4, v6;
    std::istringstream in(text);
    for (std::string a, b; in >> a >> b;) {
        v4.insert(a);
        v6.insert(b);
    }
    CHECK(v4.size() == kProcs);
    CHECK(v6.size() == kProcs);
    auto all = ipam_test::host_local(cfg, tmp.path()).list();
    CHECK(all.size() == 2 * kProcs);
    CHECK(ipam_test::list_dir(tmp.path() + "/.topocni/net1/owners").size() == kProcs);
}
