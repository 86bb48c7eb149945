// kubeconfig files (YAML or JSON) and NAD manifests in YAML.
#include "kube/kubeconfig.h"
#include "kube/yaml.h"
#include "fuzz.h"

TOPOCNI_FUZZ_TARGET({
    try { (void)kube::parse_yaml(input, "fuzz"); } catch (const base::Error&) {}
    (void)kube::parse_kubeconfig(input, "fuzz");
})
