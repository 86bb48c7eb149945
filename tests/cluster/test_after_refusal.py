"""After a refusal, on the real thing. A ReplicaSet's pod on a node that stopped meeting its
network's nodeSelector (its label changed: the one race no scheduler-side check can close)
is refused by ADD on the node stand-in; the node's refusal agent puts the Event on it and, as
the NAD asks ("onRefusal": "evict"), evicts it through the real Eviction API; the
ReplicaSet's replacement lands on another node, where ADD accepts it.

What a PodDisruptionBudget does there is the API server's rule, and these tests pin it:
  - a new pod refused at its first ADD is Pending (its sandbox never ran): the API server
    evicts a Pending pod without consulting any budget (it serves nothing yet);
  - a running pod whose sandbox kubelet recreates (a node reboot) and ADD then refuses is
    Running and not Ready: its budget decides, with the default unhealthyPodEvictionPolicy
    (IfHealthyBudget) allowing it only while the budget's healthy pods meet it. Until then
    the server answers 429 and the agent asks again (--blocked-retry)."""
import json
import unittest

from cluster import ClusterTestCase
from test_scheduling import ensure_scheduling

NS = "default"
ZONE = "tc.example.com/zone"
RS = f"/apis/apps/v1/namespaces/{NS}/replicasets/tc-refuse"
PDB = f"/apis/policy/v1/namespaces/{NS}/poddisruptionbudgets/tc-refuse"
STEADY = f"/api/v1/namespaces/{NS}/pods/tc-refuse-steady"


class Refusals(ClusterTestCase):
    @classmethod
    def setUpClass(cls):
        super().setUpClass()
        ensure_scheduling(cls.cluster)
        c = cls.cluster
        cls.good = [c.node("tc-a"), c.node("tc-b")]
        conf = {"cniVersion": "1.0.0", "type": "topocni", "attachment": "macvlan", "master": c.nodes[0].master,
                "mode": "bridge", "nodeSelector": {ZONE: "good"}, "nodeLabelsTTL": 0,
                "onRefusal": "evict", "evictAfterRefusals": 1,
                "ipam": {"type": "host-local", "ranges": [[{"subnet": "10.231.0.0/24"}]]}}
        c.api.apply({"apiVersion": "k8s.cni.cncf.io/v1", "kind": "NetworkAttachmentDefinition",
                     "metadata": {"name": "tc-refuse", "namespace": NS}, "spec": {"config": json.dumps(conf)}})
        cls.template = {"metadata": {"labels": {"app": "tc-refuse", "budget": "tc-refuse"},
                                     "annotations": {"k8s.v1.cni.cncf.io/networks": "tc-refuse"}},
                        "spec": {"terminationGracePeriodSeconds": 0,
                                 "containers": [{"name": "app", "image": "registry.k8s.io/pause:3.10"}]}}

    def setUp(self):
        c = self.cluster
        for n in c.nodes:
            c.api.patch(f"/api/v1/nodes/{n.name}", {"metadata": {"labels": {ZONE: "good" if n in self.good else "bad"}}})
        # The network's addresses are on the good nodes' books before its pods come (a pod
        # created earlier waits as Unschedulable until kube-scheduler's next try).
        for n in self.good:
            self.wait(f"{n.name} offers addresses.topocni.io/tc-refuse", lambda: "addresses.topocni.io/tc-refuse" in
                      self.api.get(f"/api/v1/nodes/{n.name}")["status"]["allocatable"], 30)

    def tearDown(self):
        self.cluster.standin.paused.clear()
        for path in (RS, PDB, STEADY):
            self.api.raw("DELETE", path, {"gracePeriodSeconds": 0, "propagationPolicy": "Background"})
        self.wait("the test's pods gone", lambda: not self.pods(), 60)

    def pods(self):
        return self.api.get(f"/api/v1/namespaces/{NS}/pods?labelSelector=budget%3Dtc-refuse")["items"]

    def events(self, uid):
        return [e for e in self.api.get(f"/api/v1/namespaces/{NS}/events")["items"]
                if e["involvedObject"].get("uid") == uid]

    def evictions(self, name):
        """The response codes of every eviction of the pod, from the audit log."""
        return [e["responseStatus"]["code"] for e in self.cluster.cp.audit()
                if e.get("objectRef", {}).get("subresource") == "eviction" and e["objectRef"].get("name") == name]

    def budget(self, min_available):
        self.api.create({"apiVersion": "policy/v1", "kind": "PodDisruptionBudget",
                         "metadata": {"name": "tc-refuse", "namespace": NS},
                         "spec": {"minAvailable": min_available, "selector": {"matchLabels": {"budget": "tc-refuse"}}}})

    def replica_set(self):
        self.api.create({"apiVersion": "apps/v1", "kind": "ReplicaSet", "metadata": {"name": "tc-refuse", "namespace": NS},
                         "spec": {"replicas": 1, "selector": {"matchLabels": {"app": "tc-refuse"}},
                                  "template": self.template}})
        return self.wait("the ReplicaSet's pod bound", lambda: [p for p in self.pods() if p["spec"].get("nodeName")],
                         30)[0]

    def steady_pod(self, node):
        """A pod under the same budget (not the ReplicaSet's: it would adopt it) on the node."""
        steady = json.loads(json.dumps(self.template))
        steady["metadata"].update(name="tc-refuse-steady", namespace=NS)
        steady["metadata"]["labels"]["app"] = "tc-steady"
        steady["spec"]["nodeName"] = node.name
        self.api.create(dict(steady, apiVersion="v1", kind="Pod"))
        self.wait("the steady pod Running", lambda: self.api.get(STEADY)["status"].get("phase") == "Running", 30)

    def refused(self, pod, node):
        """ADD's refusal on the node and the agent's Event on the real pod (its uid)."""
        standin = self.cluster.standin
        try:
            adds = self.wait("ADD's refusal", lambda: [v for v in standin.verdicts_of(NS, pod["name"])
                                                       if v["command"] == "ADD" and v["rc"] != 0], 30)
        except AssertionError as e:
            self.fail(f"{e}; stand-in errors: {standin.errors[-2:]}; verdicts {standin.verdicts[-3:]}")
        self.assertEqual(json.loads(adds[0]["out"])["code"], 100, adds[0])
        self.assertIn(ZONE, adds[0]["out"])
        ev = self.wait("the TopocniPlacementRefused Event", lambda: [
            e for e in self.events(pod["uid"]) if e["reason"] == "TopocniPlacementRefused"], 30)[0]
        self.assertEqual(ev["type"], "Warning")
        self.assertIn(f"network 'tc-refuse' refused on node '{node}'", ev["message"])

    def evicted_and_replaced(self, pod, other):
        """The pod evicted (201, with the TopocniEvicted Event); the replacement on `other`, where ADD accepts it."""
        self.wait("the refused pod evicted", lambda: pod["uid"] not in [p["metadata"]["uid"] for p in self.pods()], 60)
        codes = self.evictions(pod["name"])
        self.assertEqual(codes[-1], 201, codes)
        self.assertTrue(self.wait("the TopocniEvicted Event", lambda: [
            e for e in self.events(pod["uid"]) if e["reason"] == "TopocniEvicted"], 30))
        repl = self.wait("the replacement Running", lambda: [
            p for p in self.pods() if p["metadata"]["name"] not in (pod["name"], "tc-refuse-steady")
            and p["status"].get("phase") == "Running"], 60)[0]
        self.assertEqual(repl["spec"]["nodeName"], other.name)
        adds = [v for v in self.cluster.standin.verdicts_of(NS, repl["metadata"]["name"]) if v["command"] == "ADD"]
        self.assertEqual([v["rc"] for v in adds], [0], adds)
        return codes

    def test_a_new_pod_refused_at_add_is_evicted_at_once_whatever_its_budget_and_replaced_on_another_node(self):
        c, standin = self.cluster, self.cluster.standin
        standin.paused.update(n.name for n in c.nodes)    # kubelet has not got to the pod yet
        self.budget(1)   # for one replica: no disruption allowed, were the pod running
        bound = self.replica_set()
        pod, node = bound["metadata"], bound["spec"]["nodeName"]
        self.assertIn(node, [n.name for n in self.good])
        other = next(n for n in self.good if n.name != node)
        # Between scheduling and ADD, the node stops meeting the network's selector.
        c.api.patch(f"/api/v1/nodes/{node}", {"metadata": {"labels": {ZONE: "bad"}}})
        standin.paused.clear()
        self.refused(pod, node)   # still Pending: ADD failed, so the stand-in, as kubelet, never started it
        codes = self.evicted_and_replaced(pod, other)
        self.assertEqual(codes, [201], "a Pending pod: the server consults no budget")

    def test_a_running_pod_refused_when_its_sandbox_is_recreated_waits_for_its_budget_then_moves(self):
        c, standin = self.cluster, self.cluster.standin
        bound = self.replica_set()
        pod, node = bound["metadata"], bound["spec"]["nodeName"]
        other = next(n for n in self.good if n.name != node)
        self.steady_pod(other)
        self.wait("the ReplicaSet's pod Running", lambda: self.api.get(
            f"/api/v1/namespaces/{NS}/pods/{pod['name']}")["status"].get("phase") == "Running", 30)
        self.budget(2)
        self.wait("the budget counts both pods healthy", lambda: self.api.get(PDB).get("status", {}).get(
            "currentHealthy") == 2, 30)
        # The node reboots with a label changed: the sandbox is gone, the pod not Ready; its
        # budget now counts one healthy pod of the two it wants.
        standin.paused.add(node)
        c.api.patch(f"/api/v1/nodes/{node}", {"metadata": {"labels": {ZONE: "bad"}}})
        standin.sandbox_lost(self.api.get(f"/api/v1/namespaces/{NS}/pods/{pod['name']}"))
        self.wait("the budget sees the pod unhealthy", lambda: self.api.get(PDB)["status"].get("currentHealthy") == 1, 30)
        standin.paused.discard(node)
        self.refused(pod, node)
        # The budget forbids it: 429, asked again every --blocked-retry (1 s here); the pod stays.
        self.wait("two evictions refused by the budget", lambda: self.evictions(pod["name"]).count(429) >= 2, 30)
        self.assertNotIn(201, self.evictions(pod["name"]))
        self.assertIn(pod["uid"], [p["metadata"]["uid"] for p in self.pods()], "evicted despite its budget")
        # Once the budget allows it, the agent's next try evicts it; the replacement goes elsewhere.
        c.api.patch(PDB, {"spec": {"minAvailable": 1}})
        codes = self.evicted_and_replaced(pod, other)
        self.assertEqual(set(codes[:-1]), {429}, codes)


if __name__ == "__main__":
    unittest.main(verbosity=2)
