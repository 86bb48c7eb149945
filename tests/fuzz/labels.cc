// Node label files (JSON or NFD features.d lines) and label selectors evaluated on them.
#include "placement/labels.h"
#include "cni/attach/attachment.h"
#include "conf/netconf.h"
#include "fuzz.h"

TOPOCNI_FUZZ_TARGET({
    auto labels = placement::parse_labels(input, "fuzz");
    // A selector built from the same bytes, through the config parser.
    std::string conf = R"({"cniVersion":"1.1.0","name":"n","type":"topocni","attachment":"macvlan","kubeconfig":"",)"
                       R"("nodeSelector":)" + input + "}";
    try {
        auto c = cni::parse_config(conf, {});
        if (c.placement && c.placement->node_selector) (void)placement::matches(*c.placement->node_selector, labels);
    } catch (const base::Error&) {
    }
})
