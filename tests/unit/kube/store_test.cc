// The LIST+WATCH store every cache of the cluster side shares, and the NAD informer on it.
#include <doctest/doctest.h>

#include <atomic>

#include "cluster/nad_informer.h"
#include "kube/store.h"

using nlohmann::json;

namespace {

json object(const std::string& ns, const std::string& name, const std::string& rv, json extra = json::object()) {
    json o = {{"metadata", {{"name", name}, {"resourceVersion", rv}}}};
    if (!ns.empty()) o["metadata"]["namespace"] = ns;
    o.update(extra);
    return o;
}

json nad(const std::string& name, const std::string& rv, const std::string& subnet) {
    json config = {{"cniVersion", "1.0.0"}, {"name", name}, {"type", "topocni"}, {"attachment", "veth"},
                   {"ipam", {{"type", "host-local"}, {"subnet", subnet}}}};
    return object("default", name, rv, {{"spec", {{"config", config.dump()}}}});
}

}  // namespace

TEST_CASE("store: it is synced after the first list, and every change counts") {
    kube::Store s;
    CHECK_FALSE(s.synced());
    s.replace({object("a", "x", "1"), object("", "node-1", "2")});
    CHECK(s.synced());
    CHECK(s.get("a/x"));
    CHECK(s.get("/node-1"));   // cluster-scoped
    uint64_t c = s.changes();
    s.event({"BOOKMARK", object("a", "x", "9")});
    CHECK(s.changes() == c);   // a bookmark moves no object
    s.event({"MODIFIED", object("a", "x", "3")});
    CHECK(s.get("a/x")->at("metadata").at("resourceVersion") == "3");
    s.event({"DELETED", object("a", "x", "4")});
    CHECK_FALSE(s.get("a/x"));
    CHECK(s.changes() == c + 2);
    CHECK(s.list().size() == 1);
}

TEST_CASE("store: what is derived from an object is made once per resourceVersion, a relist keeps it") {
    kube::Store s;
    std::atomic<int> made{0};
    std::function<int(const json&)> derive = [&](const json&) { return ++made; };
    s.replace({object("a", "x", "1")});
    CHECK(*s.derived<int>("a/x", derive) == 1);
    CHECK(*s.derived<int>("a/x", derive) == 1);
    s.replace({object("a", "x", "1")});            // the relist hands it back unchanged
    CHECK(*s.derived<int>("a/x", derive) == 1);
    s.event({"MODIFIED", object("a", "x", "2")});   // a new version is derived again
    CHECK(*s.derived<int>("a/x", derive) == 2);
    CHECK(made == 2);
    CHECK(s.derived<int>("a/nothing", derive) == nullptr);
}

TEST_CASE("nad informer: a NAD is parsed once per version, and a selection gets its own interface") {
    cluster::NadInformer nads;
    nads.store().replace({nad("n1", "1", "10.1.0.0/24")});
    cluster::NetworkSelection sel{"default", "n1", "net7"};
    auto a = nads.find(sel);
    REQUIRE(a);
    CHECK(a->error.empty());
    CHECK(a->selection.interface == "net7");
    auto b = nads.find({"default", "n1", ""});
    CHECK(a->parsed == b->parsed);   // the same parse, shared
    nads.store().event({"MODIFIED", nad("n1", "2", "10.2.0.0/24")});
    CHECK(nads.find(sel)->parsed != a->parsed);
    CHECK_FALSE(nads.find({"default", "other", ""}));
    CHECK(nads.all().size() == 1);
}
