// cpusets, cpu_manager_state (v2, v3, v4) and CPU -> NUMA lookups through a fake sysfs.
#include <doctest/doctest.h>

#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "cni/error.h"
#include "placement/topology.h"
#include "../support.h"

namespace fs = std::filesystem;
using placement::topo::CpuSet;

namespace {


int code_of(auto&& fn) {
    try {
        fn();
    } catch (const base::Error& e) {
        return cni::code_of(e);
    }
    return 0;
}

}  // namespace

TEST_CASE("cpuset: the k8s cpuset and kernel cpulist syntax") {
    struct Row {
        const char* text;
        std::optional<CpuSet> want;
    };
    const Row rows[] = {
        {"", CpuSet{}},
        {"\n", CpuSet{}},
        {"3", CpuSet{3}},
        {"0-3", CpuSet{0, 1, 2, 3}},
        {"0-1,6-7\n", CpuSet{0, 1, 6, 7}},
        {"5,2,2-3", CpuSet{2, 3, 5}},
        {"4-4", CpuSet{4}},
        {"3-1", std::nullopt},
        {"1,,2", std::nullopt},
        {"1-", std::nullopt},
        {"-1", std::nullopt},
        {"a", std::nullopt},
        {"1 ,2", std::nullopt},
        {"0-99999999", std::nullopt},
        {"1,", std::nullopt},
    };
    for (auto& r : rows) {
        CAPTURE(r.text);
        CHECK(placement::topo::parse_cpuset(r.text) == r.want);
    }
    CHECK(placement::topo::format_cpuset({0, 1, 2, 3, 8, 10, 11}) == "0-3,8,10-11");
    CHECK(placement::topo::format_cpuset({}) == "");
    CHECK(placement::topo::format_cpuset({7}) == "7");
}

TEST_CASE("cpu_manager_state: the pod's CPUs in every checkpoint version") {
    const std::string uid = "6f1c2a3b-0000-4000-8000-000000000001";
    SUBCASE("v2: union of the containers' entries") {
        auto pc = placement::topo::parse_cpu_manager_state(
            R"({"policyName":"static","defaultCpuSet":"0-1,8-63","entries":{")" + uid +
                R"(":{"app":"2-3","sidecar":"5","init":"4"},"other":{"x":"6-7"}},"checksum":1352937015})",
            uid);
        CHECK(pc.policy == "static");
        CHECK(pc.cpus == CpuSet{2, 3, 4, 5});
    }
    SUBCASE("v2 with the none policy has no entries") {
        auto pc = placement::topo::parse_cpu_manager_state(R"({"policyName":"none","defaultCpuSet":"","checksum":1})", uid);
        CHECK(pc.policy == "none");
        CHECK(pc.cpus.empty());
    }
    SUBCASE("v1 (entries keyed by container ID, plain strings) says nothing about the pod") {
        auto pc = placement::topo::parse_cpu_manager_state(R"({"policyName":"static","defaultCpuSet":"0-7","entries":{")" + uid +
                                                         R"(":"2-3"},"checksum":1})",
                                                     uid);
        CHECK(pc.cpus.empty());
    }
    SUBCASE("v3: pod-level podEntries join the containers' entries") {
        auto pc = placement::topo::parse_cpu_manager_state(
            R"({"policyName":"static","defaultCpuSet":"0-1","entries":{")" + uid + R"(":{"app":"2"}},"podEntries":{")" +
                uid + R"(":{"cpuSet":"2-4"}},"checksum":7})",
            uid);
        CHECK(pc.cpus == CpuSet{2, 3, 4});
    }
    SUBCASE("v4: the data string is authoritative") {
        std::string data = R"({\"policyName\":\"static\",\"defaultCpuSet\":\"0-1\",\"entries\":{\")" + uid +
                           R"(\":{\"app\":\"6-7\"}},\"podEntries\":{\")" + uid + R"(\":{\"cpuSet\":\"5\"}}})";
        auto pc = placement::topo::parse_cpu_manager_state(R"({"policyName":"static","defaultCpuSet":"0-1","entries":{")" + uid +
                                                         R"(":{"app":"2-3"}},"data":")" + data +
                                                         R"(","dataChecksum":99,"checksum":0})",
                                                     uid);
        CHECK(pc.cpus == CpuSet{5, 6, 7});
    }
    SUBCASE("v4 with an empty data string falls back to the top level") {
        auto pc = placement::topo::parse_cpu_manager_state(R"({"policyName":"static","entries":{")" + uid +
                                                         R"(":{"app":"1"}},"data":"","dataChecksum":0})",
                                                     uid);
        CHECK(pc.cpus == CpuSet{1});
    }
    SUBCASE("an unknown pod has no CPUs; unknown keys are ignored") {
        auto pc = placement::topo::parse_cpu_manager_state(R"({"policyName":"static","entries":{"x":{"a":"1"}},"future":{"a":1}})", uid);
        CHECK(pc.cpus.empty());
    }
    SUBCASE("malformed files are code 6") {
        CHECK(code_of([&] { placement::topo::parse_cpu_manager_state("{", uid); }) == cni::kDecodingFailure);
        CHECK(code_of([&] { placement::topo::parse_cpu_manager_state("[]", uid); }) == cni::kDecodingFailure);
        CHECK(code_of([&] {
                  placement::topo::parse_cpu_manager_state(R"({"entries":{")" + uid + R"(":{"app":"3-1"}}})", uid);
              }) == cni::kDecodingFailure);
        CHECK(code_of([&] { placement::topo::parse_cpu_manager_state(R"({"data":"{oops"})", uid); }) == cni::kDecodingFailure);
    }
}

TEST_CASE("sysfs: NUMA nodes, numa_node files and link speed through sysfsRoot") {
    support::TempDir t("topo");
    t.write("devices/system/node/node0/cpulist", "0-3\n");
    t.write("devices/system/node/node1/cpulist", "4-7\n");
    t.write("devices/system/node/online", "0-1\n");
    t.write("devices/system/node/node2/cpumap", "00\n");   // a node without cpulist is skipped
    auto numa = placement::topo::numa_cpus(t.dir());
    CHECK(numa.size() == 2);
    CHECK(numa[1] == CpuSet{4, 5, 6, 7});
    CpuSet unplaced;
    CHECK(placement::topo::nodes_of({2, 3}, numa) == std::set<int>{0});
    CHECK(placement::topo::nodes_of({3, 4, 9}, numa, &unplaced) == std::set<int>{0, 1});
    CHECK(unplaced == CpuSet{9});
    CHECK(placement::topo::format_nodes({0, 1}) == "0,1");
    CHECK(placement::topo::numa_cpus(t.dir() / "nope").empty());

    t.write("a/numa_node", "1\n");
    t.write("b/numa_node", "-1\n");
    t.write("c/numa_node", "x\n");
    CHECK(placement::topo::read_numa_node(t.dir() / "a/numa_node") == 1);
    CHECK(placement::topo::read_numa_node(t.dir() / "b/numa_node") == -1);
    CHECK_FALSE(placement::topo::read_numa_node(t.dir() / "c/numa_node"));
    CHECK_FALSE(placement::topo::read_numa_node(t.dir() / "d/numa_node"));

    t.write("class/net/eth1/speed", "25000\n");
    t.write("class/net/eth2/speed", "-1\n");
    CHECK(placement::topo::read_speed(t.dir(), "eth1") == 25000);
    CHECK_FALSE(placement::topo::read_speed(t.dir(), "eth2"));
    CHECK_FALSE(placement::topo::read_speed(t.dir(), "eth3"));
}
