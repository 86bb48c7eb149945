#!/usr/bin/env python3
"""The build enforces the layering (CMakeLists.txt, topocni_part): each part compiles
against <build>/layers/<part>, which holds only the part and the parts below it. Here a
one-line source is preprocessed against each tree (what an include sees is decided there,
and preprocessing is a tenth of a compile): every include that points up the stack must
fail, and includes of the part itself and of parts below it must work.

usage: check.py <c++ compiler> <build>/layers
"""
import os
import subprocess
import sys
import tempfile
import unittest

CXX, LAYERS = sys.argv[1], os.path.abspath(sys.argv[2])

# (part, header it must not see): each lower part against each part above it.
FORBIDDEN = [
    ("base", "netns/error.h"), ("base", "ipam/error.h"), ("base", "cni/error.h"),
    ("netns", "ipam/error.h"), ("netns", "conf/error.h"), ("netns", "cni/error.h"),
    ("ipam", "netns/error.h"), ("ipam", "conf/error.h"), ("ipam", "cni/error.h"),
    ("conf", "cni/error.h"), ("conf", "cni/result.h"), ("conf", "kube/error.h"),
    ("kube", "netns/error.h"), ("kube", "ipam/error.h"), ("kube", "conf/error.h"), ("kube", "cni/error.h"),
    ("kube", "placement/placement.h"),
    ("netns", "kube/error.h"), ("ipam", "kube/client.h"), ("base", "kube/error.h"),
    ("proto", "cni/attach/attachment.h"), ("proto", "cni/verbs/verbs.h"), ("proto", "cluster/scheduling.h"),
    # placement, the one evaluation, knows no CNI protocol, no kind, no verb, no cluster side
    ("placement", "cni/error.h"), ("placement", "cni/context.h"), ("placement", "cni/result.h"),
    ("placement", "cni/attach/attachment.h"), ("placement", "cni/attach/sriov_state.h"), ("placement", "cni/verbs/verbs.h"), ("placement", "cni/cli/cli.h"),
    ("attach", "cni/verbs/verbs.h"), ("attach", "cni/cli/cli.h"),
    ("verbs", "cni/cli/cli.h"), ("verbs", "cluster/scheduling.h"),
    ("cluster", "cni/verbs/verbs.h"), ("cluster", "cni/cli/cli.h"), ("attach", "cluster/scheduling.h"),
    ("placement", "cluster/networks.h"), ("verbs", "cluster/networks.h"),
    ("proto", "cni/verbs/placement_step.h"), ("cluster", "cni/verbs/placement_step.h"),
    ("proto", "cni/verbs/ipam_step.h"), ("attach", "cni/verbs/ipam_step.h"), ("cluster", "cni/verbs/ipam_step.h"),
    # the cluster side's commands sit on cluster/, beside the CNI commands, not on them
    ("cluster", "cluster/cmd/commands.h"), ("placement", "cluster/cmd/publish.h"), ("verbs", "cluster/cmd/commands.h"),
    ("cli", "cluster/cmd/commands.h"), ("cli", "cluster/scheduling.h"), ("cli", "cluster/dra_slices.h"),
    ("cmd", "cni/cli/cli.h"), ("cmd", "cni/verbs/verbs.h"),
    # kubelet's gRPC plugin sits above the cluster side's commands; nothing below sees it
    ("cmd", "kubelet/plugin.h"), ("cluster", "kubelet/plugin.h"), ("placement", "kubelet/plugin.h"),
    ("cli", "kubelet/plugin.h"),
]
# (part, header it must see): itself and what is below.
ALLOWED = [
    ("base", "base/error.h"),
    ("netns", "netns/error.h"), ("netns", "base/error.h"),
    ("ipam", "ipam/error.h"),
    ("conf", "conf/error.h"), ("conf", "ipam/error.h"), ("conf", "netns/error.h"),
    ("kube", "kube/client.h"), ("kube", "base/error.h"),
    ("placement", "placement/error.h"), ("placement", "placement/evaluate.h"), ("placement", "kube/client.h"),
    ("placement", "conf/netconf.h"),
    ("proto", "cni/error.h"), ("proto", "conf/error.h"), ("proto", "kube/error.h"), ("proto", "placement/error.h"),
    ("attach", "placement/placement.h"), ("attach", "cni/attach/attachment.h"),
    ("verbs", "cni/verbs/verbs.h"), ("verbs", "cni/verbs/ipam_step.h"), ("verbs", "cni/verbs/placement_step.h"),
    ("verbs", "cni/attach/attachment.h"),
    ("cluster", "cluster/scheduling.h"), ("cluster", "cni/attach/attachment.h"), ("cluster", "kube/client.h"),
    ("cluster", "placement/placement.h"),
    ("cli", "cni/cli/cli.h"), ("cli", "cni/verbs/verbs.h"), ("cli", "placement/placement.h"),
    ("cmd", "cluster/cmd/commands.h"), ("cmd", "cluster/scheduling.h"), ("cmd", "cni/attach/attachment.h"),
    ("cmd", "kube/reflector.h"),
    ("kubelet", "kubelet/plugin.h"), ("kubelet", "cluster/cmd/commands.h"), ("kubelet", "cluster/claim_prepare.h"),
]


def compiles(part, header):
    with tempfile.NamedTemporaryFile("w", suffix=".cc", delete=False) as f:
        f.write(f'#include "{header}"\n')
        src = f.name
    try:
        p = subprocess.run([CXX, "-std=c++20", "-E", "-o", os.devnull, "-I", os.path.join(LAYERS, part), src],
                           capture_output=True, text=True, timeout=120, cwd=tempfile.gettempdir())
        return p.returncode == 0, p.stderr
    finally:
        os.unlink(src)


class Layering(unittest.TestCase):
    def test_an_include_that_points_up_the_stack_does_not_compile(self):
        for part, header in FORBIDDEN:
            with self.subTest(part=part, header=header):
                ok, err = compiles(part, header)
                self.assertFalse(ok, f"{part} can include {header}")
                # gcc's words, or clang's (the sanitizer build is clang's)
                self.assertTrue("No such file or directory" in err or "file not found" in err, err)

    def test_a_part_sees_itself_and_every_part_below_it(self):
        for part, header in ALLOWED:
            with self.subTest(part=part, header=header):
                ok, err = compiles(part, header)
                self.assertTrue(ok, err)


if __name__ == "__main__":
    unittest.main(argv=sys.argv[:1], verbosity=2)
