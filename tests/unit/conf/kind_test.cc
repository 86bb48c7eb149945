// The attachment kind of a config, as parse and node-report (records) read it.
#include <doctest/doctest.h>

#include <nlohmann/json.hpp>

#include "conf/netconf.h"

using nlohmann::json;

TEST_CASE("a config is a delegate when it has a delegate key, else the attachment it names, else veth") {
    CHECK(conf::kind_of(json{{"delegate", {{"type", "macvlan"}}}}) == "delegate");
    CHECK(conf::kind_of(json{{"attachment", "sriov"}}) == "sriov");
    CHECK(conf::kind_of(json{{"name", "n"}}) == "veth");
    CHECK(conf::kind_of(json{{"attachment", 5}}) == "veth");
    CHECK(conf::kind_of(json{{"delegate", nullptr}, {"attachment", "macvlan"}}) == "macvlan");
}
