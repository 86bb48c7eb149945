"""topocni's node agents on five node stand-ins, against the real API server: each node's
DaemonSet containers (facts, dra, refusals) run with its pod-bound token under
examples/rbac.yaml's grants and policies; what they write is read back and compared with
what they sent (the audit log's request bodies)."""
import json
import os
import unittest

from cluster import ClusterTestCase, load_yaml
import readback
from fakenode import parse_quantity
from kubeapi import TEST_AGENT

SA = "system:serviceaccount:kube-system:topocni"
TOPOCNI_PREFIXES = ("bandwidth.topocni.io/", "addresses.topocni.io/", "topocni.io/networks")   # the last: the marker


def example_nads(cluster):
    """The NAD examples, as the harness substitutes them (cluster.py)."""
    docs = load_yaml("sriov-nad.yaml") + load_yaml("macvlan-nad.yaml") + load_yaml("veth-nad.yaml")
    master = cluster.nodes[0].master
    return [cluster.nad(d, node_master=master) for d in docs]


def ensure_agents(cluster):
    """Nodes, NADs and agents, once per test process (the tests after this share them)."""
    if not cluster.nodes:
        cluster.add_nodes()
    if not getattr(cluster, "agents_started", False):
        for nad in example_nads(cluster):
            cluster.api.apply(nad)
        for n in cluster.nodes:
            n.label_like_nfd()
            n.start_agents(facts=["--interval", "5"], dra=["--interval", "5"], refusals=["--resync", "1", "--blocked-retry", "1"])
        cluster.agents_started = True


class NodeAgents(ClusterTestCase):
    @classmethod
    def setUpClass(cls):
        super().setUpClass()
        ensure_agents(cls.cluster)
        cls.nodes = cls.cluster.nodes

    def node(self, name):
        return self.api.get(f"/api/v1/nodes/{name}")

    def facts(self, name):
        ann = self.node(name)["metadata"].get("annotations", {}).get("topocni.io/facts")
        return json.loads(ann) if ann else None

    def slices(self, name):
        return [s for s in self.api.get("/apis/resource.k8s.io/v1/resourceslices")["items"]
                if s["spec"].get("nodeName") == name]

    def agent_logs(self, n):
        return "\n".join(f"--- {a}:\n{n.agent_log(a)[-3000:]}" for a in ("facts", "dra", "refusals"))

    def wait_published(self):
        for n in self.nodes:
            try:
                self.wait(f"{n.name}'s facts", lambda: self.facts(n.name), 30)
                self.wait(f"{n.name}'s ResourceSlices", lambda: self.slices(n.name), 30)
            except AssertionError as e:
                self.fail(f"{e}\n{self.agent_logs(n)}")

    def test_every_nodes_agents_publish_under_the_example_rbac_and_policies_without_one_refusal(self):
        self.wait_published()
        for n in self.nodes:
            with self.subTest(node=n.name):
                facts = self.facts(n.name)
                self.assertEqual(facts.get("node", n.name), n.name)
                for a in ("facts", "dra", "refusals"):
                    p = n.procs[a]
                    self.assertIsNone(p.poll(), f"{a} exited on {n.name}:\n{self.agent_logs(n)}")
                    log = n.agent_log(a)
                    self.assertNotIn("403", log, f"{a} on {n.name}")
                    self.assertNotIn("forbidden", log.lower(), f"{a} on {n.name}")
        # The API server's own word: no request of topocni's account was refused.
        refused = [(e["user"].get("extra", {}).get("authentication.kubernetes.io/node-name"), e["verb"],
                    e["requestURI"], e["responseStatus"]["code"]) for e in self.cluster.cp.audit()
                   if e["user"]["username"] == SA and e.get("userAgent") != TEST_AGENT
                   and e["responseStatus"]["code"] in (401, 403, 422)]
        self.assertEqual(refused, [])
        # ... and every write it made came with the token of the node it wrote about.
        for e in self.cluster.cp.audit():
            if e["user"]["username"] == SA and e.get("userAgent") != TEST_AGENT and e["verb"] in ("create", "update", "patch", "delete") \
                    and e.get("objectRef", {}).get("resource") in ("nodes", "resourceslices"):
                node = e["user"]["extra"]["authentication.kubernetes.io/node-name"][0]
                ref = e["objectRef"]
                target = ref.get("name") if ref["resource"] == "nodes" else (
                    (e.get("requestObject") or e.get("responseObject") or {}).get("spec", {}).get("nodeName"))
                if target:
                    self.assertEqual(target, node, e["requestURI"])

    def test_the_facts_annotation_and_extended_resources_read_back_as_sent(self):
        self.wait_published()
        audit = self.cluster.cp.audit()
        for n in self.nodes:
            with self.subTest(node=n.name):
                node = self.node(n.name)
                patches = readback.writes(audit, SA, "nodes", n.name, verbs=("patch",))
                self.assertTrue(patches, f"no PATCH of {n.name} by topocni")
                last = [e for e in patches if e["responseStatus"]["code"] == 200][-1]["requestObject"]
                sent = last["metadata"]["annotations"]["topocni.io/facts"]
                self.assertEqual(node["metadata"]["annotations"]["topocni.io/facts"], sent)
                # Status: every JSON patch of topocni's resources, replayed on what it
                # patched, is what the server keeps (by value: the server writes canonical).
                st = readback.writes(audit, SA, "nodes/status", n.name, verbs=("patch",))
                mine = {k: v for k, v in node["status"]["capacity"].items() if k.startswith(TOPOCNI_PREFIXES)}
                if not st:
                    self.assertEqual(mine, {}, "resources no patch sent")
                    continue
                want = {"capacity": {}, "allocatable": {}}
                for e in st:
                    if e["responseStatus"]["code"] != 200:
                        continue
                    for op in e["requestObject"]:
                        parts = op["path"].split("/")
                        if len(parts) == 4 and parts[1] == "status" and parts[3].replace("~1", "/").startswith(TOPOCNI_PREFIXES):
                            key = parts[3].replace("~1", "/").replace("~0", "~")
                            if op["op"] in ("add", "replace"):
                                want[parts[2]][key] = op["value"]
                            elif op["op"] == "remove":
                                want[parts[2]].pop(key, None)
                for field in ("capacity", "allocatable"):
                    got = {k: v for k, v in node["status"][field].items() if k.startswith(TOPOCNI_PREFIXES)}
                    self.assertEqual(sorted(got), sorted(want[field]), field)
                    for k in got:
                        self.assertEqual(parse_quantity(got[k]), parse_quantity(want[field][k]), (field, k))

    def test_the_resourceslices_read_back_exactly_as_the_agent_sent_them(self):
        self.wait_published()
        audit = self.cluster.cp.audit()
        canonical = []
        for n in self.nodes:
            for listed in self.slices(n.name):
                name = listed["metadata"]["name"]
                s = self.api.get(f"/apis/resource.k8s.io/v1/resourceslices/{name}")   # with kind and apiVersion
                with self.subTest(slice=name):
                    sent = [e for e in readback.writes(audit, SA, "resourceslices", name, verbs=("create", "update"))
                            if e["responseStatus"]["code"] in (200, 201)]
                    self.assertTrue(sent, f"no write of {name} by topocni in the audit log")
                    body = sent[-1]["requestObject"]
                    self.assertEqual(readback.differences(body, s, adds=readback.SERVER_ADDS), [],
                                     json.dumps(body)[:2000])
                    canonical += readback.canonicalized(body, s, name)
        print(f"\n  quantities the server rewrote canonically (same value): {canonical[:6]}"
              f"{' ...' if len(canonical) > 6 else ''}")


if __name__ == "__main__":
    unittest.main(verbosity=2)
