// The whole path a runtime drives, as one process: the CNI_* environment and stdin
// through environment checks, config parsing and validation (setup and teardown), the
// verb table, result conversion to the config's version, and the printing of the result
// or the error JSON. The verbs are stand-ins that change nothing on the node: ADD prints
// the config's prevResult (or an empty result) converted to its version.
//
// Input: "KEY=VALUE" lines (the environment), an empty line, then stdin.
// A crash is: an exception escaping dispatch(), a signal or sanitizer report, output
// that is not a JSON object, or an error exit without an error object.
#include <cstdlib>
#include <map>

#include <nlohmann/json.hpp>

#include "cni/result.h"
#include "cni/verbs/verbs.h"
#include "fuzz.h"

namespace {

cni::Output dry_add(const cni::Env&, const conf::NetConf& c, cni::Attachment&) {
    return cni::result_to_json(c.prev_result.value_or(base::Result{}), c.cni_version);
}
cni::Output dry_other(const cni::Env&, const conf::NetConf&, cni::Attachment&) { return std::nullopt; }

const cni::VerbEntry kDryVerbs[] = {
    {cni::Verb::Add, dry_add, "0.1.0"},     {cni::Verb::Del, dry_other, "0.1.0"},
    {cni::Verb::Check, dry_other, "0.4.0"}, {cni::Verb::Gc, dry_other, "1.1.0"},
    {cni::Verb::Status, dry_other, "1.1.0"},
};

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    std::string input(reinterpret_cast<const char*>(data), size);
    size_t split = input.find("\n\n");
    std::string env_text = input.substr(0, split);
    std::string stdin_text = split == std::string::npos ? std::string() : input.substr(split + 2);
    std::map<std::string, std::string> env;
    for (size_t pos = 0; pos <= env_text.size();) {
        size_t nl = env_text.find('\n', pos);
        std::string line = env_text.substr(pos, nl == std::string::npos ? std::string::npos : nl - pos);
        if (auto eq = line.find('='); eq != std::string::npos) env[line.substr(0, eq)] = line.substr(eq + 1);
        if (nl == std::string::npos) break;
        pos = nl + 1;
    }
    std::string out;
    cni::PluginIo io;
    io.getenv = [&](const char* name) -> const char* {
        auto it = env.find(name);
        return it == env.end() ? nullptr : it->second.c_str();
    };
    io.read_stdin = [&] { return stdin_text; };
    io.write = [&](const std::string& s) { out += s; };
    io.configure_logging = false;   // a logFile key must not write files here
    int rc = cni::dispatch(io, kDryVerbs);

    auto j = nlohmann::json::parse(out, nullptr, false);
    if (rc != 0 && (!j.is_object() || !j.contains("code") || !j.contains("msg"))) std::abort();
    if (rc == 0 && !out.empty() && !j.is_object()) std::abort();
    return 0;
}
