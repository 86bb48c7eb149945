// `topocni validate`: reads a config, conflist or NAD as the plugin would for ADD and
// refuses what the plugin only warns about: keys topocni does not read (a typo such as
// "attachement" otherwise gives a working veth). Looks at no node: placement facts,
// masters and devices are `explain`'s and ADD's business.
#include <CLI/CLI.hpp>

#include <cstdio>

#include "cni/attach/attachment.h"
#include "cni/cli/cli.h"
#include "cni/cli/config_file.h"
#include "cni/error.h"

namespace cni::cli {

namespace {

int validate(const std::string& path) {
    ConfigFile file = read_config_file(path);
    int problems = 0;
    auto report = [&](const std::string& where, const std::string& what) {
        std::printf("%s: %s\n", where.c_str(), what.c_str());
        ++problems;
    };
    if (file.plugins.empty()) {
        try {
            read_network(file.text, {});
        } catch (const base::Error& e) {
            report(path, "code " + std::to_string(code_of(e)) + ": " + e.what());
        }
        return 1;
    }
    size_t checked = 0;
    for (size_t i = 0; i < file.plugins.size(); ++i) {
        if (file.is_list && file.plugins[i].value("type", "") != "topocni") continue;   // another plugin's keys
        std::string where = file.is_list ? path + ": plugins[" + std::to_string(i) + "]" : path;
        ++checked;
        try {
            auto net = read_network(file.plugins[i].dump(), {});
            for (auto& k : net.conf.unknown_keys) report(where, k);
        } catch (const base::Error& e) {
            report(where, "code " + std::to_string(code_of(e)) + ": " + e.what());
        }
    }
    if (!checked) report(path, "no plugin of type topocni");
    if (!problems) std::printf("%s: valid\n", path.c_str());
    return problems ? 1 : 0;
}

}  // namespace

void add_validate(CLI::App& app, int& status) {
    auto config = std::make_shared<std::string>();
    auto* cmd = app.add_subcommand("validate", "Check a config as ADD would, refusing keys topocni does not read");
    cmd->add_option("--config", *config, "CNI config, conflist (its topocni entries), or NAD (JSON or YAML)")
        ->required();
    cmd->footer("Unknown keys inside topocni's objects (ipam with host-local, its ranges and routes, dns) and\n"
                "top-level keys one typo away from one topocni reads are errors here; the plugin logs them\n"
                "as warnings. Nothing on the node is looked at (see topocni explain).\n"
                "Examples:\n"
                "  topocni validate --config /etc/cni/net.d/10-macvlan.conf\n"
                "  topocni validate --config sriov-nad.yaml\n"
                "Exit status: 0 valid, 1 a problem (each printed), 2 usage.");
    cmd->callback([config, &status] { status = validate(*config); });
}

}  // namespace cni::cli
