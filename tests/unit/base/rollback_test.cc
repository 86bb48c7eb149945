// The undo stack: newest first, every step runs, and a step that fails is logged by name.
#include <doctest/doctest.h>

#include <unistd.h>

#include <cstdio>
#include <fstream>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

#include "base/rollback.h"
#include "base/log.h"

TEST_CASE("a rollback runs its steps newest first and skips them once dismissed") {
    std::vector<int> ran;
    {
        base::Rollback undo;
        undo.add("first", [&] { ran.push_back(1); });
        undo.add("second", [&] { ran.push_back(2); });
    }
    CHECK(ran == std::vector<int>{2, 1});
    ran.clear();
    {
        base::Rollback undo;
        undo.add("first", [&] { ran.push_back(1); });
        undo.dismiss();
    }
    CHECK(ran.empty());
}

TEST_CASE("an undo step that fails is logged at warning with what it undid and the others still run") {
    std::string path = "/tmp/topocni-rollback-" + std::to_string(::getpid()) + ".log";
    std::remove(path.c_str());
    base::log::configure("warning", path);
    bool older_ran = false;
    {
        base::Rollback undo;
        undo.add("link tc0", [&] { older_ran = true; });
        undo.add("qdisc on tc1", [] { throw std::runtime_error("Device or resource busy"); });
    }
    base::log::configure("error", "");
    std::ifstream in(path);
    std::stringstream text;
    text << in.rdbuf();
    std::remove(path.c_str());
    CHECK(older_ran);
    CHECK(text.str().find(" warning ") != std::string::npos);
    CHECK(text.str().find("rollback: undoing qdisc on tc1 failed: Device or resource busy") != std::string::npos);
}
