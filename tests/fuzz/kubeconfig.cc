// kubeconfig files (YAML or JSON) and NAD manifests in YAML.
#include "cni/placement/kube.h"
#include "cni/placement/yaml.h"
#include "fuzz.h"

TOPOCNI_FUZZ_TARGET({
    try { (void)cni::parse_yaml(input, "fuzz"); } catch (const base::Error&) {}
    (void)cni::kube::parse_kubeconfig(input, "fuzz");
})
