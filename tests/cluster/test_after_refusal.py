"""After a refusal, on the real thing: a ReplicaSet's pod bound to a node that stopped
meeting its network's nodeSelector between scheduling and ADD (its label changed: the one
race no scheduler-side check can close) is refused by ADD on the node stand-in; the node's
refusal agent puts the Event on it and, as the NAD asks ("onRefusal": "evict"), evicts it
through the real Eviction API: a PodDisruptionBudget that forbids it holds it (429) until
the budget allows it; the ReplicaSet's replacement lands on another node, where ADD accepts it."""
import json
import time
import unittest

from cluster import ClusterTestCase
from test_scheduling import ensure_scheduling

NS = "default"
ZONE = "tc.example.com/zone"


class Refusals(ClusterTestCase):
    @classmethod
    def setUpClass(cls):
        super().setUpClass()
        ensure_scheduling(cls.cluster)
        c = cls.cluster
        cls.good = [c.node("tc-a"), c.node("tc-b")]
        for n in c.nodes:
            c.api.patch(f"/api/v1/nodes/{n.name}", {"metadata": {"labels": {ZONE: "good" if n in cls.good else "bad"}}})
        conf = {"cniVersion": "1.0.0", "type": "topocni", "attachment": "macvlan", "master": c.nodes[0].master,
                "mode": "bridge", "nodeSelector": {ZONE: "good"}, "nodeLabelsTTL": 0,
                "onRefusal": "evict", "evictAfterRefusals": 1,
                "ipam": {"type": "host-local", "ranges": [[{"subnet": "10.231.0.0/24"}]]}}
        c.api.apply({"apiVersion": "k8s.cni.cncf.io/v1", "kind": "NetworkAttachmentDefinition",
                     "metadata": {"name": "tc-refuse", "namespace": NS}, "spec": {"config": json.dumps(conf)}})

    def tearDown(self):
        self.cluster.standin.paused.clear()
        for path in (f"/apis/apps/v1/namespaces/{NS}/replicasets/tc-refuse",
                     f"/apis/policy/v1/namespaces/{NS}/poddisruptionbudgets/tc-refuse",
                     f"/api/v1/namespaces/{NS}/pods/tc-refuse-steady"):
            self.api.raw("DELETE", path, {"gracePeriodSeconds": 0, "propagationPolicy": "Background"})
        self.wait("the test's pods gone", lambda: not self.pods(), 60)

    def pods(self):
        return self.api.get(f"/api/v1/namespaces/{NS}/pods?labelSelector=budget%3Dtc-refuse")["items"]

    def events(self, uid):
        return [e for e in self.api.get(f"/api/v1/namespaces/{NS}/events")["items"]
                if e["involvedObject"].get("uid") == uid]

    def test_a_pod_refused_at_add_gets_its_event_and_is_evicted_through_its_budget_to_another_node(self):
        c, standin = self.cluster, self.cluster.standin
        template = {"metadata": {"labels": {"app": "tc-refuse", "budget": "tc-refuse"},
                                 "annotations": {"k8s.v1.cni.cncf.io/networks": "tc-refuse"}},
                    "spec": {"terminationGracePeriodSeconds": 0,
                             "containers": [{"name": "app", "image": "registry.k8s.io/pause:3.10"}]}}
        # The network's addresses are on the good nodes' books before its pods come (a pod
        # created earlier waits as Unschedulable until kube-scheduler's next try).
        for n in self.good:
            self.wait(f"{n.name} offers addresses.topocni.io/tc-refuse", lambda: "addresses.topocni.io/tc-refuse" in
                      self.api.get(f"/api/v1/nodes/{n.name}")["status"]["allocatable"], 30)
        # A steady pod under the same budget on the other good node keeps the budget's count.
        standin.paused.update(n.name for n in c.nodes)
        c.api.create({"apiVersion": "policy/v1", "kind": "PodDisruptionBudget",
                      "metadata": {"name": "tc-refuse", "namespace": NS},
                      "spec": {"minAvailable": 2, "selector": {"matchLabels": {"budget": "tc-refuse"}}}})
        c.api.create({"apiVersion": "apps/v1", "kind": "ReplicaSet", "metadata": {"name": "tc-refuse", "namespace": NS},
                      "spec": {"replicas": 1, "selector": {"matchLabels": {"app": "tc-refuse"}}, "template": template}})
        try:
            bound = self.wait("the ReplicaSet's pod bound", lambda: [p for p in self.pods() if p["spec"].get("nodeName")],
                              30)[0]
        except AssertionError as e:
            self.fail(f"{e}: {json.dumps([(p['metadata']['name'], p['status'], p['spec'].get('affinity'), p['spec']['containers'][0].get('resources')) for p in self.pods()])[:3000]}"
                      f"\nnodes: {[(n['metadata']['name'], {k: v for k, v in n['status']['allocatable'].items() if 'topocni' in k}) for n in self.api.get('/api/v1/nodes')['items']]}")
        first, node = bound["metadata"], bound["spec"]["nodeName"]
        self.assertIn(node, [n.name for n in self.good])
        other = next(n for n in self.good if n.name != node)
        steady = json.loads(json.dumps(template))
        steady["metadata"]["name"], steady["metadata"]["namespace"] = "tc-refuse-steady", NS
        steady["metadata"]["labels"]["app"] = "tc-steady"   # not the ReplicaSet's (it would adopt it), but the budget's
        steady["spec"]["nodeName"] = other.name
        c.api.create(dict(steady, apiVersion="v1", kind="Pod"))
        standin.paused.discard(other.name)
        self.wait("the steady pod Running and Ready", lambda: self.api.get(
            f"/api/v1/namespaces/{NS}/pods/tc-refuse-steady")["status"].get("phase") == "Running", 30)
        # Between scheduling and ADD, the node stops meeting the network's selector.
        c.api.patch(f"/api/v1/nodes/{node}", {"metadata": {"labels": {ZONE: "bad"}}})
        standin.paused.discard(node)
        try:
            try:
                verdict = self.wait("ADD's refusal", lambda: [v for v in standin.verdicts_of(NS, first["name"])
                                                              if v["command"] == "ADD"], 30)[0]
            except AssertionError as e:
                self.fail(f"{e}; stand-in errors: {standin.errors[-2:]}; verdicts {standin.verdicts[-3:]}")
            self.assertEqual(json.loads(verdict["out"])["code"], 100, verdict)
            self.assertIn(f"{ZONE}", verdict["out"])
            # The Event, from the node's agent, on the real pod (its uid).
            ev = self.wait("the TopocniPlacementRefused Event", lambda: [
                e for e in self.events(first["uid"]) if e["reason"] == "TopocniPlacementRefused"], 30)[0]
            self.assertEqual(ev["type"], "Warning")
            self.assertIn(f"network 'tc-refuse' refused on node '{node}'", ev["message"])
            # The budget forbids the eviction (1 healthy of 2): the pod stays, the API says 429.
            time.sleep(3)
            self.assertIn(first["uid"], [p["metadata"]["uid"] for p in self.pods()], "evicted despite its budget")
            refusals = [e for e in c.cp.audit() if e.get("objectRef", {}).get("subresource") == "eviction"
                        and e["objectRef"].get("name") == first["name"]]
            self.assertTrue(refusals and all(e["responseStatus"]["code"] == 429 for e in refusals), refusals)
            # Once the budget allows it, the agent's next try evicts it; the replacement goes elsewhere.
            c.api.patch(f"/apis/policy/v1/namespaces/{NS}/poddisruptionbudgets/tc-refuse", {"spec": {"minAvailable": 1}})
            self.wait("the refused pod evicted", lambda: first["uid"] not in [p["metadata"]["uid"] for p in self.pods()],
                      60)
            codes = [e["responseStatus"]["code"] for e in c.cp.audit()
                     if e.get("objectRef", {}).get("subresource") == "eviction" and e["objectRef"].get("name") == first["name"]]
            self.assertEqual(codes[-1], 201, codes)
            self.assertTrue(self.wait("the TopocniEvicted Event", lambda: [
                e for e in self.events(first["uid"]) if e["reason"] == "TopocniEvicted"], 30))
            repl = self.wait("the replacement Running", lambda: [
                p for p in self.pods() if p["metadata"]["name"] not in (first["name"], "tc-refuse-steady")
                and p["status"].get("phase") == "Running"], 60)[0]
            self.assertEqual(repl["spec"]["nodeName"], other.name)
            adds = [v for v in standin.verdicts_of(NS, repl["metadata"]["name"]) if v["command"] == "ADD"]
            self.assertEqual([v["rc"] for v in adds], [0], adds)
        finally:
            c.api.patch(f"/api/v1/nodes/{node}", {"metadata": {"labels": {ZONE: "good"}}})


if __name__ == "__main__":
    unittest.main(verbosity=2)
