"""The scheduler side against the real thing: examples/admission-webhook.yaml's webhook
mutating real pods (the API server calls it over TLS at the configuration's URL), and
kube-scheduler calling examples/kube-scheduler-config.yaml's extender, whose verdicts ADD on
the node stand-ins confirms. The webhook runs as its Deployment says (`--dra-claims` off,
the command's default, with the configuration's `sideEffects: None`)."""
import json
import signal
import time
import unittest

from cluster import ClusterTestCase
from test_node_agents import ensure_agents

NS = "default"
MARKER = "topocni.io/networks"


def pod(name, networks=None, scheduler=None, labels=None):
    md = {"name": name, "namespace": NS, "labels": dict(labels or {}, test="scheduling")}
    if networks:
        md["annotations"] = {"k8s.v1.cni.cncf.io/networks": networks}
    spec = {"containers": [{"name": "app", "image": "registry.k8s.io/pause:3.10"}],
            "terminationGracePeriodSeconds": 0}
    if scheduler:
        spec["schedulerName"] = scheduler
    return {"apiVersion": "v1", "kind": "Pod", "metadata": md, "spec": spec}


def ensure_scheduling(cluster):
    """The webhook and the extender up, and kube-scheduler using the extender."""
    ensure_agents(cluster)
    if cluster.standin is None:
        cluster.start_standin()
    if "topocni-webhook" not in cluster.services:
        hook = cluster.start_service("admission-webhook.yaml")
        cluster.api.apply(cluster.webhook_configuration(hook.port))
    if "topocni-extender" not in cluster.services:
        ext = cluster.start_service("scheduler-extender.yaml")
        cluster.cp.restart_scheduler(cluster.scheduler_configuration(ext.port))


class Scheduling(ClusterTestCase):
    @classmethod
    def setUpClass(cls):
        super().setUpClass()
        ensure_scheduling(cls.cluster)
        cls.webhook = cls.cluster.services["topocni-webhook"]
        cls.extender = cls.cluster.services["topocni-extender"]

    def tearDown(self):
        for p in self.api.get(f"/api/v1/namespaces/{NS}/pods?labelSelector=test%3Dscheduling")["items"]:
            self.api.raw("DELETE", f"/api/v1/namespaces/{NS}/pods/{p['metadata']['name']}", {"gracePeriodSeconds": 0})
        self.wait("the test's pods gone", lambda: not self.api.get(
            f"/api/v1/namespaces/{NS}/pods?labelSelector=test%3Dscheduling")["items"], 30)
        self.wait("their networks detached", lambda: not self.cluster.standin.attached, 30)

    def create(self, obj):
        """Creates the pod; the webhook configuration may take a moment to be loaded by the
        API server after it was applied: until a marked pod comes back mutated, its dry runs
        are repeated."""
        if obj["metadata"].get("annotations"):
            self.wait("the webhook is called", lambda: "topocni.io/admitted" in self.api.create(
                json.loads(json.dumps(obj)), dry_run=True)["metadata"].get("annotations", {}), 30, 0.3)
        return self.api.create(obj)

    def get(self, name):
        return self.api.get(f"/api/v1/namespaces/{NS}/pods/{name}")

    def running(self, name, seconds=30):
        return super().running(NS, name, seconds, lambda: f"extender log: {self.extender_log()[-1500:]}")

    def extender_log(self):
        with open(self.extender.log) as f:
            return f.read()

    def test_the_webhook_mutates_a_real_pod_into_requests_affinity_and_the_marker(self):
        master = self.cluster.nodes[0].master
        created = self.create(pod("web-mutated", "macvlan-net1"))
        c = created["spec"]["containers"][0]
        req, lim = c["resources"]["requests"], c["resources"]["limits"]
        self.assertEqual(req, lim, "extended resources: requests = limits")
        self.assertEqual(req[MARKER], "1")
        self.assertEqual(req["addresses.topocni.io/macvlan-net1"], "1")
        self.assertEqual(req[f"bandwidth.topocni.io/macvlan.{master}.egress"], "1k")   # 1e9 b/s: 1,000 Mb/s
        terms = created["spec"]["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"][
            "nodeSelectorTerms"]
        self.assertIn({"key": f"topocni.io/link.{master}.speed-mbps", "operator": "In", "values": ["25000"]},
                      terms[0]["matchExpressions"])
        self.assertEqual(created["metadata"]["annotations"]["topocni.io/admitted"], f"{NS}/macvlan-net1")
        got = self.running("web-mutated")
        self.assertIn(got["spec"]["nodeName"], ("tc-a", "tc-b", "tc-e"), "the nodes whose master is 25 Gb/s")
        (v,) = [v for v in self.cluster.standin.verdicts_of(NS, "web-mutated") if v["command"] == "ADD"]
        self.assertEqual(v["rc"], 0, v["out"])

    def test_a_pod_without_topocni_networks_never_reaches_the_extender_and_a_marked_one_does(self):
        plain = self.create(pod("plain-pod"))
        self.assertNotIn(MARKER, plain["spec"]["containers"][0].get("resources", {}).get("requests", {}))
        self.running("plain-pod")
        self.create(pod("marked-pod", "macvlan-net1"))
        got = self.running("marked-pod")
        log = self.extender_log()
        self.assertIn(f"filter {NS}/marked-pod", log)
        self.assertIn(f"{NS}/marked-pod", log)
        self.assertRegex(log, rf"prioritize {NS}/marked-pod: tc-[abe]=\d+, tc-[abe]=\d+",
                         "more than one node fits: kube-scheduler asks the extender to score them")
        self.assertNotIn("plain-pod", log, "managedResources: kube-scheduler never sends it")
        self.assertIn(got["spec"]["nodeName"], ("tc-a", "tc-b", "tc-e"))

    def test_the_extenders_placements_are_what_add_accepts_on_every_node(self):
        # SR-IOV (25 Gb/s at least, NFD's SR-IOV label) and macvlan on one pod, and more
        # such pods than the 25 Gb/s nodes hold VFs for when mixed with sriov-only pods.
        names = []
        for i in range(6):
            nets = "sriov-net1, macvlan-net1" if i % 2 == 0 else "sriov-net1"
            names.append(f"mixed-{i}")
            self.create(pod(names[-1], nets))
        for name in names:
            self.running(name, 60)
        placed = {}
        for name in names:
            node = self.get(name)["spec"]["nodeName"]
            placed[name] = node
            adds = [v for v in self.cluster.standin.verdicts_of(NS, name) if v["command"] == "ADD"]
            self.assertTrue(adds and all(v["rc"] == 0 for v in adds), (name, node, adds))
            self.assertIn(node, ("tc-a", "tc-b", "tc-c") if "macvlan" not in str(adds) else ("tc-a", "tc-b"),
                          (name, adds))
        print(f"\n  placed: {placed}")

    def test_a_pod_made_with_its_nad_schedules_as_soon_as_the_nodes_offer_the_nads_addresses(self):
        # kube-scheduler refuses the pod first (no node offers the new pool: every facts agent
        # is held with SIGSTOP), then must requeue it on the Node updates that offer it. Its
        # queueing hint counts the marker as well (README, the scheduler extender): without
        # the nodes advertising it, the pod would wait for the 5-minute flush.
        c = self.cluster
        for n in c.nodes:
            st = self.api.get(f"/api/v1/nodes/{n.name}")["status"]
            self.assertEqual(st["allocatable"].get(MARKER), st["capacity"]["pods"], n.name)
        path = f"/apis/k8s.cni.cncf.io/v1/namespaces/{NS}/network-attachment-definitions"
        agents = [n.procs["facts"] for n in c.nodes]
        for p in agents:
            p.send_signal(signal.SIGSTOP)
        try:
            self.macvlan_nad("sched-late", "10.238.0.0/24", NS)
            self.addCleanup(self.api.raw, "DELETE", f"{path}/sched-late")
            self.create(pod("late-pod", "sched-late"))
            self.wait("kube-scheduler refuses the pod for the pool", lambda: any(
                "Insufficient addresses.topocni.io/sched-late" in x.get("message", "")
                for x in self.get("late-pod")["status"].get("conditions", []) if x["type"] == "PodScheduled"), 30, 0.2)
        finally:
            for p in agents:
                p.send_signal(signal.SIGCONT)
        t0 = time.monotonic()
        self.running("late-pod", 60)
        (v,) = [v for v in c.standin.verdicts_of(NS, "late-pod") if v["command"] == "ADD"]
        self.assertEqual(v["rc"], 0, v["out"])
        print(f"\n  scheduled {time.monotonic() - t0:.1f} s after the agents went on")


if __name__ == "__main__":
    unittest.main(verbosity=2)
