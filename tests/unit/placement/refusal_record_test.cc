// After a refusal: the NAD keys (conf/on_refusal.cc), the pod's refusal record ADD leaves
// (placement/refusal_record.cc), the Event and Eviction bodies the refusal agent sends
// (kube/events.cc, kube/eviction.cc) and the Pod it reads, and the eviction counter.
#include <doctest/doctest.h>

#include <unistd.h>

#include <filesystem>
#include <functional>
#include <fstream>

#include "cni/attach/attachment.h"
#include "cni/error.h"
#include "placement/evictions.h"
#include "placement/refusal_record.h"
#include "conf/netconf.h"
#include "kube/error.h"
#include "kube/events.h"
#include "kube/eviction.h"
#include "../support.h"

namespace fs = std::filesystem;
using nlohmann::json;
namespace rr = placement::refusal_record;

namespace {

json base_conf(const json& extra) {
    json c = {{"cniVersion", "1.0.0"}, {"name", "net1"}, {"type", "topocni"},
              {"ipam", {{"type", "host-local"}, {"subnet", "10.1.0.0/24"}, {"dataDir", "/nonexistent/topocni-test"}}}};
    if (extra.is_object()) c.update(extra);   // {} is null in nlohmann's brace syntax
    return c;
}

std::string error_of(const json& c) {
    try {
        cni::parse_config(c.dump(), {});
    } catch (const base::Error& e) {
        CHECK(cni::code_of(e) == cni::kInvalidConfig);
        return e.what();
    }
    return "";
}


rr::Refusal refusal(const std::string& uid = "u-1", bool evict = true) {
    return {"shop", "web-1", uid, "sriov-net", "w1", {"topology.numaNode"}, "topology.numaNode: VF on NUMA node 1, want 0",
            evict, 3, 300};
}

}  // namespace

TEST_CASE("onRefusal defaults to wait, 3 refusals within 300 s") {
    auto c = cni::parse_config(base_conf({}).dump(), {});
    CHECK_FALSE(c.on_refusal.evict);
    CHECK(c.on_refusal.after == 3);
    CHECK(c.on_refusal.window_seconds == 300);
    auto e = cni::parse_config(
        base_conf({{"onRefusal", "evict"}, {"evictAfterRefusals", 5}, {"evictWindowSeconds", 600}}).dump(), {});
    CHECK(e.on_refusal.evict);
    CHECK(e.on_refusal.after == 5);
    CHECK(e.on_refusal.window_seconds == 600);
}

TEST_CASE("bad onRefusal keys are code 7 naming the key") {
    struct Row { json extra; const char* want; };
    for (auto& row : std::vector<Row>{
             {{{"onRefusal", "move"}}, "onRefusal: 'move' is not one of wait, evict"},
             {{{"onRefusal", true}}, "onRefusal"},
             {{{"evictAfterRefusals", 0}}, "evictAfterRefusals"},
             {{{"evictAfterRefusals", 101}}, "evictAfterRefusals"},
             {{{"evictAfterRefusals", 2.5}}, "evictAfterRefusals"},
             {{{"evictWindowSeconds", 9}}, "evictWindowSeconds"},
             {{{"evictWindowSeconds", "300"}}, "evictWindowSeconds"},
         }) {
        CAPTURE(row.extra.dump());
        std::string e = error_of(base_conf(row.extra));
        CHECK(e.rfind(row.want, 0) == 0);
    }
}

TEST_CASE("a record counts the refusals of one pod uid and starts again for a new pod of the same name") {
    auto r = rr::counted(std::nullopt, refusal(), 1000);
    CHECK(r.count == 1);
    CHECK(r.first == 1000);
    r = rr::counted(r, refusal(), 1010);
    r = rr::counted(r, refusal(), 1030);
    CHECK(r.count == 3);
    CHECK(r.first == 1000);
    CHECK(r.last == 1030);
    CHECK(r.recent == std::vector<int64_t>{1000, 1010, 1030});
    r = rr::counted(r, refusal(), 1070);
    CHECK(r.recent == std::vector<int64_t>{1010, 1030, 1070});   // only the last evictAfterRefusals
    auto other = rr::counted(r, refusal("u-2"), 2000);
    CHECK(other.count == 1);
    CHECK(other.first == 2000);
    CHECK(other.recent == std::vector<int64_t>{2000});
}

TEST_CASE("an eviction is due after evictAfterRefusals refusals within evictWindowSeconds, and only with evict") {
    auto r = rr::counted(std::nullopt, refusal(), 1000);
    r = rr::counted(r, refusal(), 1100);
    CHECK_FALSE(rr::eviction_due(r, 1100));
    r = rr::counted(r, refusal(), 1200);
    CHECK(rr::eviction_due(r, 1200));
    CHECK(rr::eviction_due(r, 1299));
    CHECK_FALSE(rr::eviction_due(r, 1300));   // the first has left the window
    auto w = rr::counted(std::nullopt, refusal("u-1", false), 1000);
    w = rr::counted(w, refusal("u-1", false), 1001);
    w = rr::counted(w, refusal("u-1", false), 1002);
    CHECK_FALSE(rr::eviction_due(w, 1002));
}

TEST_CASE("a record's evidence is cut to 1 KiB and the record stays small") {
    auto x = refusal();
    x.evidence = std::string(5000, 'e');
    x.constraints.assign(40, std::string(200, 'c'));
    auto r = rr::counted(std::nullopt, x, 1000);
    CHECK(r.evidence.size() == rr::kMaxEvidence);
    CHECK(r.constraints.size() == 16);
    CHECK(rr::to_json(r).dump().size() < 4096);
}

TEST_CASE("a record prints and parses back, and the parser refuses what is no record, naming the member") {
    auto r = rr::counted(std::nullopt, refusal(), 1000);
    auto back = rr::parse(rr::to_json(r).dump());
    CHECK(rr::to_json(back) == rr::to_json(r));
    struct Row { std::function<void(json&)> change; const char* want; };
    for (auto& row : std::vector<Row>{
             {[](json& j) { j["extra"] = 1; }, "extra: unknown member"},
             {[](json& j) { j.erase("uid"); }, "uid: missing"},
             {[](json& j) { j["count"] = 0; }, "count"},
             {[](json& j) { j["count"] = "1"; }, "count"},
             {[](json& j) { j["namespace"] = "a/b"; }, "name"},
             {[](json& j) { j["name"] = "../x"; }, "name"},
             {[](json& j) { j["onRefusal"] = "drop"; }, "onRefusal"},
             {[](json& j) { j["recent"] = json::array(); }, "recent"},
             {[](json& j) { j["recent"] = {5}; }, "recent"},
             {[](json& j) { j["evidence"] = std::string(1025, 'x'); }, "evidence"},
             {[](json& j) { j["version"] = 2; }, "version"},
         }) {
        json j = rr::to_json(r);
        row.change(j);
        CAPTURE(j.dump());
        try {
            rr::parse(j.dump());
            FAIL("parsed");
        } catch (const base::Error& e) {
            CHECK(cni::code_of(e) == cni::kInvalidConfig);
            CHECK(std::string(e.what()).find(row.want) != std::string::npos);
        }
    }
    CHECK_THROWS_AS(rr::parse("[]"), base::Error);
    CHECK_THROWS_AS(rr::parse("{"), base::Error);
}

TEST_CASE("a record's file is named by namespace and pod name, and never leaves its directory") {
    CHECK(rr::file_name("shop", "web-1") == "shop_web-1.json");
    CHECK_FALSE(rr::file_name("", "web-1"));
    CHECK_FALSE(rr::file_name("shop", ""));
    CHECK_FALSE(rr::file_name("shop", "../etc"));
    CHECK_FALSE(rr::file_name("sh/op", "x"));
    CHECK_FALSE(rr::file_name("Shop", "x"));
    auto long_name = rr::file_name(std::string(63, 'n'), std::string(253, 'p'));
    REQUIRE(long_name);
    CHECK(long_name->size() <= 255);
    CHECK(long_name != rr::file_name(std::string(63, 'n'), std::string(252, 'p') + "q"));
}

TEST_CASE("note writes one file per pod, rewritten on every refusal, and nothing for a pod without a name") {
    support::TempDir t("rr");
    rr::note(t.path(), refusal(), 1000);
    rr::note(t.path(), refusal(), 1005);
    auto x = refusal();
    x.pod_name = "";
    rr::note(t.path(), x, 1006);
    CHECK(rr::list(t.path()) == std::vector<std::string>{"shop_web-1.json"});
    auto r = rr::read(t.path(), "shop_web-1.json");
    REQUIRE(r);
    CHECK(r->count == 2);
    auto text = rr::read_text(t.path(), "shop_web-1.json");
    rr::remove_if_same(t.path(), "shop_web-1.json", "{}");
    CHECK(rr::list(t.path()).size() == 1);   // rewritten since: stays
    rr::remove_if_same(t.path(), "shop_web-1.json", *text);
    CHECK(rr::list(t.path()).empty());
}

TEST_CASE("the eviction counter adds per network and outcome and survives a re-read") {
    support::TempDir t("rr");
    placement::evictions::count(t.path(), "net1", "evicted");
    placement::evictions::count(t.path(), "net1", "evicted");
    placement::evictions::count(t.path(), "net1", "blocked");
    auto c = placement::evictions::read(t.path());
    CHECK(c["net1"]["evicted"] == 2);
    CHECK(c["net1"]["blocked"] == 1);
}

TEST_CASE("an Event is built as client-go's recorder builds it") {
    CHECK(kube::event_name("web-1", 0x17c3f0a1b2c3d4e5) == "web-1.17c3f0a1b2c3d4e5");
    CHECK(kube::event_name(std::string(252, 'p'), 1).size() == 36);   // a UUID when too long
    kube::EventSpec e;
    e.object = {"Pod", "shop", "web-1", "u-1", "v1"};
    e.reason = "TopocniPlacementRefused";
    e.message = std::string(2000, 'm');
    e.component = "topocni";
    e.host = "w1";
    e.first = 1714564800;
    e.last = 1714564810;
    e.count = 2;
    json j = kube::event_body("web-1.1", e);
    CHECK(j["metadata"] == json{{"name", "web-1.1"}, {"namespace", "shop"}});
    CHECK(j["involvedObject"] == json{{"kind", "Pod"}, {"namespace", "shop"}, {"name", "web-1"}, {"uid", "u-1"}, {"apiVersion", "v1"}});
    CHECK(j["source"] == json{{"component", "topocni"}, {"host", "w1"}});
    CHECK(j["firstTimestamp"] == "2024-05-01T12:00:00Z");
    CHECK(j["lastTimestamp"] == "2024-05-01T12:00:10Z");
    CHECK(j["count"] == 2);
    CHECK(j["type"] == "Warning");
    CHECK(j["eventTime"].is_null());
    CHECK(j["reportingComponent"] == "topocni");
    CHECK(j["reportingInstance"] == "w1");
    CHECK(j["message"].get<std::string>().size() == 1024);
    CHECK(kube::event_patch(3, 1714564820, "m").dump() ==
          R"({"count":3,"lastTimestamp":"2024-05-01T12:00:20Z","message":"m"})");
    CHECK(kube::events_path("shop", "web-1.1") == "/api/v1/namespaces/shop/events/web-1.1");
}

TEST_CASE("a Pod's controller is the ownerReference with controller true; a bare pod has none") {
    json pod = {{"kind", "Pod"},
                {"metadata",
                 {{"name", "web-1"},
                  {"namespace", "shop"},
                  {"uid", "u-1"},
                  {"ownerReferences",
                   {{{"apiVersion", "v1"}, {"kind", "Service"}, {"name", "x"}, {"uid", "o-0"}},
                    {{"apiVersion", "apps/v1"}, {"kind", "ReplicaSet"}, {"name", "web-abc"}, {"uid", "o-1"}, {"controller", true}}}}}}};
    auto v = kube::pod_view(pod);
    CHECK(v.uid == "u-1");
    REQUIRE(v.controller);
    CHECK(v.controller->kind == "ReplicaSet");
    CHECK(v.controller->uid == "o-1");
    CHECK_FALSE(v.terminating);
    pod["metadata"].erase("ownerReferences");
    pod["metadata"]["deletionTimestamp"] = "2024-05-01T12:00:00Z";
    v = kube::pod_view(pod);
    CHECK_FALSE(v.controller);
    CHECK(v.terminating);
    for (json bad : {json::array(), json{{"metadata", 1}}, json{{"kind", "Node"}, {"metadata", {{"name", "a"}, {"uid", "b"}}}},
                     json{{"metadata", {{"name", "a"}}}},
                     json{{"metadata", {{"name", "a"}, {"uid", "b"}, {"ownerReferences", {{{"controller", true}}}}}}},
                     json{{"metadata", {{"name", "a"}, {"uid", "b"}, {"ownerReferences", "x"}}}}}) {
        CAPTURE(bad.dump());
        CHECK_THROWS_AS(kube::pod_view(bad), kube::Error);
    }
}

TEST_CASE("an Eviction is a policy/v1 body, and its answers are evicted, blocked, gone or failed") {
    CHECK(kube::eviction_body("shop", "web-1").dump() ==
          R"({"apiVersion":"policy/v1","kind":"Eviction","metadata":{"name":"web-1","namespace":"shop"}})");
    CHECK(kube::eviction_path("shop", "web-1") == "/api/v1/namespaces/shop/pods/web-1/eviction");
    using O = kube::EvictionAnswer::Outcome;
    CHECK(kube::eviction_answer({201, R"({"kind":"Status","status":"Success","code":201})"}).outcome == O::Evicted);
    auto blocked = kube::eviction_answer(
        {429, R"({"kind":"Status","status":"Failure","message":"Cannot evict pod as it would violate the pod's disruption budget.","reason":"TooManyRequests","details":{"causes":[{"reason":"DisruptionBudget","message":"The disruption budget web-pdb needs 2 healthy pods and has 2 currently"}],"retryAfterSeconds":10},"code":429})"});
    CHECK(blocked.outcome == O::Blocked);
    CHECK(blocked.retry_after_seconds == 10);
    CHECK(blocked.message.find("web-pdb needs 2 healthy pods") != std::string::npos);
    CHECK(kube::eviction_answer({404, R"({"status":"Failure","reason":"NotFound","code":404})"}).outcome == O::Gone);
    CHECK(kube::eviction_answer({500, "This pod has more than one PodDisruptionBudget"}).outcome == O::Failed);
}
