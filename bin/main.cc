// topocni: a CNI plugin when run with CNI_COMMAND set, a command otherwise: the CNI
// operator commands (cni/cli/) and the cluster side's agents and servers (cluster/cmd/).
#include <CLI/CLI.hpp>

#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "base/error.h"
#include "base/text.h"
#include "cluster/cmd/commands.h"
#include "cni/cli/cli.h"
#include "cni/verbs/verbs.h"
#include "cni/version.h"

namespace {

/// The commands, in the order `--help` lists them.
int commands_main(int argc, char** argv) {
    CLI::App app{"topocni: CNI plugin for secondary networks (veth, macvlan, SR-IOV) with placement checks.\n"
                 "Run by a container runtime with CNI_* variables, or by hand with a subcommand."};
    app.require_subcommand(1);
    app.set_version_flag("--version", cni::cli::version_text(), "Print the plugin version and the CNI versions it speaks");
    int status = 0;
    cni::cli::add_version(app, status);
    cni::cli::add_exec(app, status);
    cni::cli::add_ipam(app, status);
    cluster::cmd::add_node_report(app, status);
    cni::cli::add_explain(app, status);
    cni::cli::add_collect(app, status);
    cluster::cmd::add_api(app, status);
    cluster::cmd::add_refusal_agent(app, status);
    cluster::cmd::add_scheduler_extender(app, status);
    cluster::cmd::add_admission_webhook(app, status);
    cluster::cmd::add_dra_driver(app, status);
    cluster::cmd::add_dra_template(app, status);
    cni::cli::add_validate(app, status);
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

}  // namespace

int main(int argc, char** argv) {
    // A delegated plugin that exits before reading its stdin must not kill us.
    std::signal(SIGPIPE, SIG_IGN);
    if (std::getenv("CNI_COMMAND") || argc < 2) {
        if (!std::getenv("CNI_COMMAND")) {
            std::fprintf(stderr, "CNI topocni plugin v%s\nCNI protocol versions supported:", TOPOCNI_VERSION);
            for (auto& v : cni::supported_versions()) std::fprintf(stderr, " %s", v.c_str());
            std::fprintf(stderr, "\n");
            return 0;
        }
        return cni::plugin_main();
    }
    return commands_main(argc, argv);
}
