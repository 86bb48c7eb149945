"""The documented fallback on a server without consumable capacity: kube-apiserver started
again with --feature-gates=DRAConsumableCapacity=false (Kubernetes 1.34 and 1.35 by default)
drops allowMultipleAllocations from a ResourceSlice it creates; the node's dra agent sees its
shared devices (links, address pools) come back without it, says so in its log, and offers
only the VFs. Slices the server stored before keep their fields (an update keeps a disabled
field the stored object already uses), so the test deletes one node's slices, as kubelet does
when it starts. Back on a server with the gate, a restarted agent offers every device again."""
import unittest

from cluster import ClusterTestCase
from simnode import daemonset_command
from test_node_agents import ensure_agents

SLICES = "/apis/resource.k8s.io/v1/resourceslices"


class ConsumableCapacity(ClusterTestCase):
    @classmethod
    def setUpClass(cls):
        super().setUpClass()
        ensure_agents(cls.cluster)

    def devices(self, node):
        return [d for s in self.api.get(SLICES)["items"] if s["spec"].get("nodeName") == node
                for d in s["spec"].get("devices", [])]

    def drop_slices(self, node):
        for s in self.api.get(SLICES)["items"]:
            if s["spec"].get("nodeName") == node:
                self.api.raw("DELETE", f"{SLICES}/{s['metadata']['name']}")

    def test_without_the_gate_the_agent_offers_only_vfs_and_with_it_again_every_device(self):
        c, cp = self.cluster, self.cluster.cp
        node = c.node("tc-a")
        shared = [d["name"] for d in self.devices(node.name) if d.get("allowMultipleAllocations")]
        self.assertTrue(shared, "a server with the gate keeps the shared devices")
        dra = daemonset_command("dra", node.bin, node.kubeconfig) + ["--no-kubelet-plugin", "--interval", "5"]
        try:
            cp.restart_apiserver(["--feature-gates=DRAConsumableCapacity=false"])
            self.drop_slices(node.name)
            self.wait("the agent saw the field dropped", lambda: "dropped allowMultipleAllocations" in
                      node.agent_log("dra"), 60, 0.3)
            got = self.wait("only VFs offered", lambda: (lambda ds: ds and not any(
                d.get("allowMultipleAllocations") for d in ds) and len(ds) == len(node.vfs) and ds)(
                self.devices(node.name)), 60, 0.3)
            self.assertEqual(len(got), len(node.vfs), [d["name"] for d in got])
            self.assertFalse(set(d["name"] for d in got) & set(shared), "no shared device without the gate")
        finally:
            cp.restart_apiserver()
            node.stop_agent("dra")
            node.start_agent("dra", dra)
        self.wait("every device offered again", lambda: set(shared) <= {
            d["name"] for d in self.devices(node.name) if d.get("allowMultipleAllocations")}, 60, 0.3)


if __name__ == "__main__":
    unittest.main(verbosity=2)
