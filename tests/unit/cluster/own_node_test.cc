// The Node publisher's view of its Node around its own status PATCH: the overlay that keeps
// older events from undoing what was sent, and the interleavings in which the watch is
// ahead of the PATCH's answer (the lost relabel of issue 38).
#include <doctest/doctest.h>

#include "cluster/own_node.h"

using nlohmann::json;
using cluster::OwnNode;

namespace {

json node(const std::string& rv, const std::string& zone, const json& capacity = json::object()) {
    return {{"metadata", {{"name", "worker-1"}, {"resourceVersion", rv}, {"labels", {{"zone", zone}}}}},
            {"status", {{"capacity", capacity}, {"allocatable", capacity}}}};
}

kube::Event modified(const json& o) { return {"MODIFIED", o}; }

std::string zone(const OwnNode& v) { return v.node()["metadata"]["labels"]["zone"]; }
json capacity(const OwnNode& v) { return v.node()["status"]["capacity"]; }

const json kSent = {{"bandwidth.topocni.io/x", "100"}};

}  // namespace

TEST_CASE("an event older than the publisher's patch keeps the capacity the patch sent") {
    OwnNode v;
    v.replace({node("10", "a")});
    v.sending();
    v.sent(node("12", "a", kSent), kSent, kSent);
    v.event(modified(node("11", "a")));   // our facts annotation PATCH, before the status one
    CHECK(capacity(v) == kSent);
    v.event(modified(node("12", "a", kSent)));   // the watch brings our version: the overlay ends
    v.event(modified(node("13", "a")));   // kubelet reset the status after it: that is news
    CHECK(capacity(v) == json::object());
}

TEST_CASE("a relabel the watch brought after the patch's version, before its answer, is not undone") {
    OwnNode v;
    v.replace({node("10", "a")});
    v.sending();
    v.event(modified(node("12", "a", kSent)));   // the patch's own version
    v.event(modified(node("13", "b", kSent)));   // relabelled at once
    v.sent(node("12", "a", kSent), kSent, kSent);   // the answer arrives last
    CHECK(zone(v) == "b");
    CHECK(OwnNode::resource_version(v.node()) == "13");
    v.event(modified(node("14", "c", kSent)));
    CHECK(zone(v) == "c");
}

TEST_CASE("the patch's answer is the view when the watch has not brought its version yet") {
    OwnNode v;
    v.replace({node("10", "a")});
    v.sending();
    v.event(modified(node("11", "a")));   // an older change, delivered while the patch was in flight
    v.sent(node("12", "a", kSent), kSent, kSent);
    CHECK(OwnNode::resource_version(v.node()) == "12");
    CHECK(capacity(v) == kSent);
}

TEST_CASE("a list while the patch was in flight is trusted over the patch's answer") {
    OwnNode v;
    v.replace({node("10", "a")});
    v.sending();
    v.replace({node("13", "b", kSent)});   // the watch expired and listed again: maybe past the patch
    v.sent(node("12", "a", kSent), kSent, kSent);
    CHECK(zone(v) == "b");
}

TEST_CASE("an overlay whose version never comes ends after its time") {
    OwnNode v;
    v.replace({node("10", "a")});
    v.sending();
    v.sent(node("12", "a", kSent), kSent, kSent, OwnNode::Clock::now() - OwnNode::kOverlayFor - std::chrono::seconds(1));
    v.event(modified(node("15", "b")));
    CHECK(zone(v) == "b");
    CHECK(capacity(v) == json::object());
}

TEST_CASE("a deleted node is no node, and a patch without a version changes nothing") {
    OwnNode v;
    v.replace({node("10", "a")});
    v.event({"DELETED", node("11", "a")});
    CHECK(v.node().is_null());
    v.sending();
    v.sent(json::object(), kSent, kSent);
    CHECK(v.node().is_null());
    CHECK(v.listed());
}
