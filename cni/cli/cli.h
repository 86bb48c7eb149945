// The operator CLI: the same binary run with arguments instead of CNI_* variables.
// Each subcommand lives in its own file and registers itself on the app.
#pragma once

namespace CLI { class App; }

namespace cni::cli {

int main(int argc, char** argv);

// Registration functions, one per file (cli_exec.cc, cli_ipam.cc, cli_node_report.cc...).
// Each returns nothing; the subcommand's callback sets the exit status through `status`.
void add_version(CLI::App& app, int& status);
void add_exec(CLI::App& app, int& status);
void add_ipam(CLI::App& app, int& status);
void add_node_report(CLI::App& app, int& status);
void add_explain(CLI::App& app, int& status);
void add_collect(CLI::App& app, int& status);

}  // namespace cni::cli
