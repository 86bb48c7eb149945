#include "cni/cli/cli.h"

#include <CLI/CLI.hpp>

#include <cstdio>

#include "cni/version.h"

namespace cni::cli {

std::string version_text() {
    std::string out = std::string("topocni ") + TOPOCNI_VERSION + "\nCNI versions:";
    for (auto& v : supported_versions()) out += " " + v;
    return out;
}

void add_version(CLI::App& app, int& status) {
    auto* cmd = app.add_subcommand("version", "Print the plugin version and the CNI versions it speaks");
    // A subcommand inherits the top level's footer; its own examples are these.
    cmd->footer("Example:\n  topocni version     (or topocni --version)");
    cmd->callback([&status] {
        std::printf("%s\n", version_text().c_str());
        status = 0;
    });
}

}  // namespace cni::cli
