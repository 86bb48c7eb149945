// kubelet's prepare and unprepare over plain structs (cluster/claim_prepare.cc) and the
// records they keep (placement/prepared_claims.cc): the claim reader, quantities, the
// per-claim outcomes, idempotence, and recovery of a claim caught half-way.
#include <doctest/doctest.h>

#include <filesystem>

#include "base/files.h"
#include "cluster/claim_prepare.h"
#include "cluster/dra_slices.h"
#include "placement/ledger.h"
#include "placement/prepared_claims.h"
#include "../support.h"

namespace fs = std::filesystem;
using nlohmann::json;
namespace claims = cluster::claims;
namespace pc = placement::prepared_claims;

namespace {

const std::string kUid = "6f1b2c3d-0000-4000-8000-000000000001";
const std::string kPod = "a0000000-0000-4000-8000-00000000000a";

json claim_json(const std::string& device, const std::string& pool = "w1", json extra_result = json::object()) {
    json result = {{"request", "vf"}, {"driver", "topocni.io"}, {"pool", pool}, {"device", device}};
    result.update(extra_result);
    return {{"metadata", {{"name", "c1"}, {"namespace", "default"}, {"uid", kUid}}},
            {"spec", {{"devices", {{"requests", json::array({{{"name", "vf"}}})}}}}},
            {"status",
             {{"allocation", {{"devices", {{"results", json::array({result})}}}}},
              {"reservedFor", json::array({{{"resource", "pods"}, {"name", "pod-a"}, {"uid", kPod}}})}}}};
}

struct Fixture {
    support::TempDir tmp{"claims"};
    Fixture() {
        tmp.fake_pf("0000:af:00.0", "ens1", 1, "25000");
        tmp.fake_vf("0000:af:02.0", "0000:af:00.0", 1);
        tmp.fake_vf("0000:af:02.1", "0000:af:00.0", 1);
    }
    json claim = claim_json(cluster::dra::device_name("vf", "0000:af:02.0"));
    int gets = 0;
    claims::Preparer prep() {
        claims::PrepareOptions o;
        o.node = "w1";
        o.state_dir = tmp.p("state");
        o.get = [this](const std::string& path) {
            ++gets;
            claims::ApiAnswer a;
            if (path.find("/resourceclaims/c1") == std::string::npos) return claims::ApiAnswer{404, json::object(), ""};
            a.status = 200;
            a.body = claim;
            return a;
        };
        o.sysfs_root = tmp.p("sys");
        return claims::Preparer(o);
    }
    claims::ClaimRef ref() const { return {"default", kUid, "c1"}; }
    std::vector<std::string> files() const {
        std::vector<std::string> out;
        if (!fs::exists(tmp.p("state"))) return out;
        for (auto& e : fs::recursive_directory_iterator(tmp.p("state")))
            if (e.is_regular_file() || e.is_symlink()) out.push_back(fs::relative(e.path(), tmp.p("state")).string());
        std::sort(out.begin(), out.end());
        return out;
    }
};

}  // namespace

TEST_CASE("a claim reads with the API's field names, and a member of the wrong type is named") {
    auto c = claims::read_claim(claim_json("vf-0000-af-02-0", "w1", {{"shareID", "ab"}, {"consumedCapacity", {{"egressMbps", "1k"}}}}));
    CHECK(c.uid == kUid);
    CHECK(c.allocated);
    REQUIRE(c.results.size() == 1);
    CHECK(c.results[0].share_id == std::optional<std::string>("ab"));
    CHECK(c.results[0].consumed_capacity.at("egressMbps") == "1k");
    REQUIRE(c.reserved_for.size() == 1);
    CHECK(c.reserved_for[0].api_group.empty());
    json bad = claim_json("vf-x");
    bad["status"]["allocation"]["devices"]["results"][0]["pool"] = 7;
    CHECK_THROWS_WITH_AS(claims::read_claim(bad), "status.allocation.devices.results[0].pool: expected a string", base::Error);
    CHECK_THROWS_AS(claims::read_claim(json::array()), base::Error);
}

TEST_CASE("capacity quantities are whole numbers with the API's suffixes") {
    CHECK(claims::quantity_value("100") == 100u);
    CHECK(claims::quantity_value("2k") == 2000u);
    CHECK(claims::quantity_value("1Gi") == (1u << 30));
    CHECK_FALSE(claims::quantity_value("1.5"));
    CHECK_FALSE(claims::quantity_value("-1"));
    CHECK_FALSE(claims::quantity_value("99999999999999999999"));
    CHECK_FALSE(claims::quantity_value("1x"));
}

TEST_CASE("a vf claim is prepared once, answered from its record after, and unprepared to nothing") {
    Fixture fx;
    auto p = fx.prep();
    auto a = p.prepare(fx.ref());
    REQUIRE(a.error == "");
    REQUIRE(a.devices.size() == 1);
    CHECK(a.devices[0].request_names == std::vector<std::string>{"vf"});
    CHECK(fx.files() == std::vector<std::string>{"dra/claims/" + kUid + ".json", "dra/devices/0000:af:02.0"});
    int gets = fx.gets;
    auto again = p.prepare(fx.ref());
    CHECK(again.devices.size() == 1);
    CHECK(fx.gets == gets);
    CHECK(p.unprepare(fx.ref()) == "");
    CHECK(fx.files().empty());
    CHECK(p.unprepare(fx.ref()) == "");   // unknown now: still a success
}

TEST_CASE("a claim allocated in another pool, replaced, or naming no device here gets an error and leaves nothing") {
    Fixture fx;
    auto p = fx.prep();
    fx.claim = claim_json("vf-0000-af-02-0", "w2");
    CHECK(p.prepare(fx.ref()).error.find("is in pool w2, not this node's (w1)") != std::string::npos);
    fx.claim = claim_json("vf-0000-ff-00-0");
    CHECK(p.prepare(fx.ref()).error.find("is not on this node") != std::string::npos);
    fx.claim = claim_json("vf-0000-af-02-0");
    fx.claim["metadata"]["uid"] = "other";
    CHECK(p.prepare(fx.ref()).error.find("is now UID other (replaced") != std::string::npos);
    CHECK(p.prepare({"default", kUid, "gone"}).error == "ResourceClaim default/gone not found");
    CHECK(fx.files().empty());
}

TEST_CASE("a claim caught preparing is rolled back and one caught unpreparing is finished") {
    Fixture fx;
    auto p = fx.prep();
    REQUIRE(p.prepare(fx.ref()).error == "");
    auto r = pc::read(fx.tmp.p("state"), kUid);
    REQUIRE(r);
    r->state = "preparing";
    pc::write(fx.tmp.p("state"), *r);
    auto did = p.recover();
    CHECK(did.size() == 1);
    CHECK(fx.files().empty());
    // An index file with no record (a crash between the two) goes too.
    CHECK_FALSE(pc::hold_vf(fx.tmp.p("state"), "0000:af:02.1", "orphan"));
    CHECK(p.recover().size() == 1);
    CHECK(fx.files().empty());
}

TEST_CASE("a record a power loss left empty is removed at start with the hold it named, and the claim prepares again") {
    Fixture fx;
    auto p = fx.prep();
    REQUIRE(p.prepare(fx.ref()).error == "");
    std::string record = fx.tmp.p("state/dra/claims/" + kUid + ".json");
    fs::resize_file(record, 0);   // created in place, never synced: kubelet saw no answer
    CHECK(p.recover().size() == 2);   // the record, then the VF's hold no record names
    CHECK(fx.files().empty());
    CHECK(p.prepare(fx.ref()).error == "");
    CHECK(pc::read(fx.tmp.p("state"), kUid)->state == "prepared");
}

TEST_CASE("holds and index entries a power loss took are rebuilt from the records at start") {
    Fixture fx;
    auto p = fx.prep();
    REQUIRE(p.prepare(fx.ref()).error == "");
    auto before = fx.files();
    fs::remove(fx.tmp.p("state/dra/devices/0000:af:02.0"));
    fs::remove_all(fx.tmp.p("state/dra/pods"));
    p.recover();
    CHECK(fx.files() == before);
}

TEST_CASE("a link claim is indexed by pod, and an earlier version's nested index and file holds are read and moved") {
    Fixture fx;
    auto p = fx.prep();
    REQUIRE(p.prepare(fx.ref()).error == "");
    std::string sd = fx.tmp.p("state");
    // What the earlier version wrote: the hold a regular file holding the UID, the index a
    // directory per pod.
    fs::remove(sd + "/dra/devices/0000:af:02.0");
    base::fs::write_file(sd + "/dra/devices/0000:af:02.0", kUid);
    base::fs::write_file(sd + "/dra/pods/" + kPod + "/" + kUid, "");
    CHECK(pc::vf_holder(sd, "0000:af:02.0") == std::optional<std::string>(kUid));
    CHECK(pc::hold_vf(sd, "0000:af:02.0", "other") == std::optional<std::string>(kUid));
    CHECK(p.recover().size() == 1);
    CHECK_FALSE(fs::exists(sd + "/dra/pods/" + kPod));
    CHECK(pc::pod_claims(sd, kPod).empty());   // a VF's claim: found by its deviceID, not indexed
    CHECK(p.unprepare(fx.ref()) == "");
    CHECK(fx.files().empty());   // the earlier version's hold goes with the claim too

    const std::string link_uid = "6f1b2c3d-0000-4000-8000-000000000002";
    fx.claim = claim_json(cluster::dra::device_name("pf", "0000:af:00.0"), "w1",
                          {{"shareID", "0a"}, {"consumedCapacity", {{"egressMbps", "100"}}}});
    fx.claim["metadata"]["uid"] = link_uid;
    REQUIRE(p.prepare({"default", link_uid, "c1"}).error == "");
    CHECK(pc::pod_claims(sd, kPod) == std::vector<std::string>{link_uid});
    fs::remove(sd + "/dra/pods/" + kPod + "." + link_uid);   // a power loss took it
    p.recover();
    CHECK(pc::pod_claims(sd, kPod) == std::vector<std::string>{link_uid});
    CHECK(p.unprepare({"default", link_uid, "c1"}) == "");
    CHECK(fx.files().empty());
}

TEST_CASE("two claims never hold one vf") {
    support::TempDir tmp{"claims"};
    CHECK_FALSE(pc::hold_vf(tmp.path(), "0000:af:02.0", "u1"));
    CHECK_FALSE(pc::hold_vf(tmp.path(), "0000:af:02.0", "u1"));   // again, by its holder: fine
    CHECK(pc::hold_vf(tmp.path(), "0000:af:02.0", "u2") == std::optional<std::string>("u1"));
    pc::release_vf(tmp.path(), "0000:af:02.0", "u2");              // not the holder: nothing happens
    CHECK(pc::vf_holder(tmp.path(), "0000:af:02.0") == std::optional<std::string>("u1"));
    CHECK_THROWS_AS(pc::hold_vf(tmp.path(), "../../etc", "u1"), base::Error);
}
