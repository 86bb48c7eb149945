// Attachment records: written whole, and an ADD/DEL pair reuses the same file.
#include <doctest/doctest.h>

#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <sstream>

#include "cni/records.h"

namespace fs = std::filesystem;

namespace {

struct TempDir {
    std::string path = (fs::temp_directory_path() / ("topocni-rec-" + std::to_string(::getpid()))).string();
    TempDir() { fs::create_directories(path); }
    ~TempDir() { fs::remove_all(path); }
};

ino_t inode_of(const std::string& p) {
    struct stat st;
    REQUIRE(::stat(p.c_str(), &st) == 0);
    return st.st_ino;
}

std::string slurp(const std::string& p) {
    std::ifstream in(p);
    std::stringstream ss;
    ss << in.rdbuf();
    return ss.str();
}

}  // namespace

TEST_CASE("records: a removed record's file is reused by the next one, whole and with the new content") {
    TempDir tmp;
    const std::string dir = cni::records_dir(tmp.path, "net");
    cni::write_record(tmp.path, {"net", "first-container-id", "eth0", "/run/netns/a", nullptr});
    cni::write_record(tmp.path, {"net", "first-container-id", "eth0", "/run/netns/a", {{"cniVersion", "1.0.0"}}});
    const std::string first = dir + "/first-container-id_eth0.json";
    ino_t ino = inode_of(first);
    CHECK(cni::read_record(tmp.path, "net", "first-container-id", "eth0")->result["cniVersion"] == "1.0.0");

    cni::remove_record(tmp.path, "net", "first-container-id", "eth0");
    CHECK_FALSE(fs::exists(first));
    CHECK(cni::list_records(tmp.path, "net").empty());   // a spare is not a record

    cni::write_record(tmp.path, {"net", "b", "net1", "/run/netns/b", nullptr});   // shorter than the spare's text
    const std::string second = dir + "/b_net1.json";
    CHECK(inode_of(second) == ino);
    auto r = cni::read_record(tmp.path, "net", "b", "net1");
    REQUIRE(r);
    CHECK(r->netns == "/run/netns/b");
    CHECK(r->result.is_null());
    CHECK(nlohmann::json::parse(slurp(second))["containerID"] == "b");   // no tail of the old record
    CHECK(fs::is_empty(dir + "/.spares"));
}

TEST_CASE("records: an intent record over a stale one of the same name replaces it") {
    TempDir tmp;
    cni::write_record(tmp.path, {"net", "x", "eth0", "/run/netns/old", {{"cniVersion", "1.0.0"}, {"ips", {1, 2, 3}}}});
    cni::write_record(tmp.path, {"net", "y", "eth0", "/run/netns/y", nullptr});
    cni::remove_record(tmp.path, "net", "y", "eth0");   // a spare is available
    cni::write_record(tmp.path, {"net", "x", "eth0", "/run/netns/new", nullptr});
    auto r = cni::read_record(tmp.path, "net", "x", "eth0");
    REQUIRE(r);
    CHECK(r->netns == "/run/netns/new");
    CHECK(r->result.is_null());
    CHECK(r->completed_ns == 0);
}
