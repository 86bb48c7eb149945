#include "cni/cli/cli.h"

#include <CLI/CLI.hpp>

#include <cstdio>
#include <cstdlib>

#include "cni/error.h"
#include "base/text.h"
#include "cni/version.h"
#include "placement/placement.h"

namespace cni::cli {

namespace {

std::string version_text() {
    std::string out = std::string("topocni ") + TOPOCNI_VERSION + "\nCNI versions:";
    for (auto& v : supported_versions()) out += " " + v;
    return out;
}

}  // namespace

void add_version(CLI::App& app, int& status) {
    auto* cmd = app.add_subcommand("version", "Print the plugin version and the CNI versions it speaks");
    // A subcommand inherits the top level's footer; its own examples are these.
    cmd->footer("Example:\n  topocni version     (or topocni --version)");
    cmd->callback([&status] {
        std::printf("%s\n", version_text().c_str());
        status = 0;
    });
}

std::string node_of(const std::string& flag) {
    if (!flag.empty()) return flag;
    if (const char* n = ::getenv("NODE_NAME"); n && *n) return n;
    return placement::node_name(conf::Placement{});
}

int main(int argc, char** argv) {
    CLI::App app{"topocni: CNI plugin for secondary networks (veth, macvlan, SR-IOV) with placement checks.\n"
                 "Run by a container runtime with CNI_* variables, or by hand with a subcommand."};
    app.require_subcommand(1);
    app.set_version_flag("--version", version_text(), "Print the plugin version and the CNI versions it speaks");
    int status = 0;
    add_version(app, status);
    add_exec(app, status);
    add_ipam(app, status);
    add_node_report(app, status);
    add_explain(app, status);
    add_collect(app, status);
    add_api(app, status);
    add_refusal_agent(app, status);
    add_scheduler_extender(app, status);
    add_admission_webhook(app, status);
    add_dra_driver(app, status);
    add_validate(app, status);
    // Registered after the subcommands, so that none of them inherits the top level's.
    app.footer("Examples:\n"
               "  topocni exec add --config /etc/cni/net.d/10-sriov.conf --netns /run/netns/test\n"
               "  topocni validate --config /etc/cni/net.d/10-sriov.conf\n"
               "  topocni explain --config nad.json --pod-uid 0b5f...\n"
               "  topocni ipam list --network sriov-net\n"
               "  topocni node-report --output /etc/kubernetes/node-feature-discovery/features.d/topocni\n"
               "  topocni collect --dry-run");
    // CLI11 reads an unknown first word as a stray positional and only says that a
    // subcommand is required; name the word and the subcommands instead.
    if (argc >= 2 && argv[1][0] != '-') {
        std::string names;
        bool known = false;
        for (auto* sub : app.get_subcommands([](CLI::App*) { return true; })) {
            names += (names.empty() ? "" : ", ") + sub->get_name();
            known = known || sub->get_name() == argv[1];
        }
        if (!known) {
            std::fprintf(stderr, "topocni: unknown subcommand '%s'; subcommands: %s (see topocni --help)\n",
                         base::utf8_escaped(argv[1]).c_str(), names.c_str());
            return 2;
        }
    }
    try {
        app.parse(argc, argv);
    } catch (const CLI::ParseError& e) {
        // --help is success; any usage error is 2 (CLI11's own codes would collide with
        // the plugin's error codes, e.g. 106).
        return app.exit(e) == 0 ? 0 : 2;
    } catch (const base::Error& e) {
        std::fprintf(stderr, "topocni: %s%s%s\n", e.what(), e.details.empty() ? "" : ": ", e.details.c_str());
        return 1;
    } catch (const std::exception& e) {
        std::fprintf(stderr, "topocni: %s\n", e.what());
        return 1;
    }
    return status;
}

}  // namespace cni::cli
