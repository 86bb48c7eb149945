// The CNI_* environment, validated per verb as the spec and the reference skel do.
#pragma once
#include <functional>
#include <string>
#include <vector>

#include "base/text.h"
#include "cni/args.h"

namespace cni {

enum class Verb { Add, Del, Check, Gc, Status, Version };

struct Env {
    Verb verb = Verb::Version;
    std::string command;              ///< as given: "ADD"...
    std::string container_id;
    std::string netns;
    std::string ifname;
    Args args;
    std::vector<std::string> path;    ///< CNI_PATH split on ':', absolute entries only

    /// Reads and validates the environment. A missing or invalid variable is code 4
    /// and the message names it.
    static Env from_environment();
    /// The same from any source of variables (`get` returns nullptr for unset ones).
    static Env from(const std::function<const char*(const char*)>& get);
};

const char* verb_name(Verb v);

}  // namespace cni
