// topocni: a CNI plugin when run with CNI_COMMAND set, an operator CLI otherwise.
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "cni/cli/cli.h"
#include "cni/verbs/verbs.h"
#include "cni/version.h"

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
    return cni::cli::main(argc, argv);
}
