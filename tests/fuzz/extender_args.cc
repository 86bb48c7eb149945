// What kube-scheduler sends the extender (ExtenderArgs, read case-insensitively) and the
// pod's networks annotation in it: parse, then judge the pod on every node the body names
// with no NAD known (each network fails as missing) and print the answer.
#include "cluster/extender.h"
#include "fuzz.h"

TOPOCNI_FUZZ_TARGET({
    static cluster::Extender ext({});
    (void)ext.handle("POST", "/filter", input);
    (void)ext.handle("POST", "/prioritize", input);
    try {
        (void)cluster::parse_networks(input, "default");
    } catch (const base::Error&) {
    }
})
