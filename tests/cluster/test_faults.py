"""Faults on the real thing: the extender killed while pods schedule, a node agent killed
(its facts go stale and its node falls back to the NAD's unknownTopology), kube-apiserver
restarted (every agent and server recovers: a change made while it was down arrives once,
nothing is created twice), and every watch recovering after a 410 behind an API server with
no watch cache (etcd compacted behind its back). Each test leaves the cluster as it found it."""
import base64
import json
import os
import signal
import time
import unittest
import urllib.request

from cluster import ClusterTestCase
from simnode import PID, daemonset_command, sh
from test_scheduling import ensure_scheduling, pod

NS = "default"
EXTENDER = "topocni-extender"
# How long kube-scheduler may take to place a pod after kube-apiserver came back. Its
# informers are client-go reflectors: each failed list or watch while the server was down
# doubles their back-off (0.8 s, capped at 30 s with jitter 1.0, so up to 60 s), and it only
# resets after 2 minutes without a failure. Until its Node informer is back, kube-scheduler
# judges on the allocatable it had (the pod: "Insufficient addresses.topocni.io/..."), and
# requeues the pod when the Node update arrives. 60 s of back-off, 10 s of pod back-off, margin.
AFTER_RESTART = 120


def faulty(name, networks=None):
    p = pod(name, networks)
    p["metadata"]["labels"]["test"] = "faults"
    return p


def etcd(cp, call, body):
    req = urllib.request.Request(f"{cp.etcd_url}/v3/{call}", data=json.dumps(body).encode(),
                                 headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=10) as r:
        return json.loads(r.read())


class Faults(ClusterTestCase):
    @classmethod
    def setUpClass(cls):
        super().setUpClass()
        ensure_scheduling(cls.cluster)
        cls.extender_port = cls.cluster.services[EXTENDER].port   # the one kube-scheduler calls

    def tearDown(self):
        for p in self.pods():
            self.api.raw("DELETE", f"/api/v1/namespaces/{NS}/pods/{p['metadata']['name']}", {"gracePeriodSeconds": 0})
        self.wait("the test's pods gone", lambda: not self.pods(), 60)

    def pods(self):
        return self.api.get(f"/api/v1/namespaces/{NS}/pods?labelSelector=test%3Dfaults")["items"]

    def get(self, name):
        return self.api.get(f"/api/v1/namespaces/{NS}/pods/{name}")

    def running(self, name, seconds=60):
        return super().running(NS, name, seconds,
                               lambda: f"kube-scheduler: {self.cluster.cp.log('kube-scheduler')[-2500:]}")

    def extender(self, extra=()):
        """The extender started again on the port kube-scheduler calls."""
        self.cluster.stop_service(EXTENDER)
        return self.cluster.start_service("scheduler-extender.yaml", extra, port=self.extender_port)

    def offered(self, network, nodes=("tc-a", "tc-b", "tc-e"), seconds=60):
        """The nodes' facts agents saw the NAD (through their watch) and offer its addresses."""
        for n in nodes:
            self.wait(f"{n} offers addresses.topocni.io/{network}", lambda: f"addresses.topocni.io/{network}" in
                      self.api.get(f"/api/v1/nodes/{n}")["status"]["allocatable"], seconds, 0.3)

    def test_the_extender_killed_holds_only_pods_with_topocni_networks_which_schedule_when_it_returns(self):
        c = self.cluster
        ext = c.services[EXTENDER]
        ext.kill()   # SIGKILL: no goodbye
        ext.wait()
        try:
            self.api.create(faulty("fault-plain"))
            self.api.create(faulty("fault-marked", "macvlan-net1"))
            self.running("fault-plain", 30)
            time.sleep(3)   # kube-scheduler has tried the marked pod meanwhile (and again after its back-off)
            marked = self.get("fault-marked")
            self.assertFalse(marked["spec"].get("nodeName"), "scheduled without the extender (ignorable: false)")
            (cond,) = [x for x in marked["status"].get("conditions", []) if x["type"] == "PodScheduled"]
            self.assertEqual(cond["status"], "False", cond)
        finally:
            self.extender()
        got = self.running("fault-marked", 60)
        self.assertIn(got["spec"]["nodeName"], ("tc-a", "tc-b", "tc-e"))
        self.assertIn(f"filter {NS}/fault-marked", open(c.services[EXTENDER].log).read())

    def test_a_node_agent_killed_leaves_its_node_on_stale_facts_which_unknown_topology_deny_refuses(self):
        c = self.cluster
        node = c.node("tc-c")   # the one node with a 100 Gb/s PF
        sriov = json.loads(self.api.get(f"/apis/k8s.cni.cncf.io/v1/namespaces/{NS}/network-attachment-definitions/"
                                        "sriov-net1")["spec"]["config"])
        sriov.update(name="fault-stale", topology={"unknownTopology": "deny", "minLinkSpeedMbps": 100000},
                     ipam={"type": "host-local", "ranges": [[{"subnet": "10.233.0.0/24"}]]})
        self.api.apply({"apiVersion": "k8s.cni.cncf.io/v1", "kind": "NetworkAttachmentDefinition",
                        "metadata": {"name": "fault-stale", "namespace": NS,
                                     "annotations": {"k8s.v1.cni.cncf.io/resourceName": "intel.com/intel_sriov_netdevice"}},
                        "spec": {"config": json.dumps(sriov)}})
        self.offered("fault-stale", ("tc-c",))
        # A short --max-facts-age, and a heartbeat below it for the node's publisher (the
        # documented pairing: the defaults are 900 and 300). A restarted publisher sends
        # facts that are unchanged only once they are older than its heartbeat.
        ext = self.extender(["--max-facts-age", "15"])
        facts = daemonset_command("facts", node.bin, node.kubeconfig) + ["--interval", "5", "--heartbeat", "10"]
        try:
            node.stop_agent("facts", signal.SIGKILL)
            time.sleep(17)   # older than --max-facts-age
            self.api.create(faulty("fault-stale-1", "fault-stale"))
            ev = self.wait("FailedScheduling naming the stale facts", lambda: [
                e for e in self.api.get(f"/api/v1/namespaces/{NS}/events")["items"]
                if e["involvedObject"].get("name") == "fault-stale-1" and e["reason"] == "FailedScheduling"
                and "no fresh facts from the node (unknownTopology deny)" in e["message"]], 30, 0.3)[0]
            self.assertIn("topocni", ev["message"])
            self.assertRegex(open(ext.log).read(), r"tc-c.*facts are \d+ s old \(more than 15 s\)")
            self.assertFalse(self.get("fault-stale-1")["spec"].get("nodeName"))
            # The agent back: fresh facts, and the node is judged on them again.
            node.start_agent("facts", facts)
            self.api.create(faulty("fault-stale-2", "fault-stale"))
            got = self.running("fault-stale-2", 60)
            self.assertEqual(got["spec"]["nodeName"], "tc-c")
        finally:
            if "facts" not in node.procs:
                node.start_agent("facts", facts)
            self.extender()

    def test_a_kube_apiserver_restart_loses_nothing_and_writes_nothing_twice(self):
        c, cp = self.cluster, self.cluster.cp
        node = c.node("tc-e")
        self.api.create(dict(faulty("fault-lost"), spec=dict(faulty("fault-lost")["spec"], nodeName="tc-e")))
        lost = self.running("fault-lost", 30)["metadata"]
        slices = {s["metadata"]["name"]: s["spec"] for s in self.api.get("/apis/resource.k8s.io/v1/resourceslices")["items"]}
        before = len(cp.audit())
        netns = f"tcf{PID}"
        sh("ip", "netns", "add", netns)
        try:
            cp.stop_one("kube-apiserver")
            # While it is down, ADD refuses a pod on the node (the link is too slow: a check
            # that needs no API): the refusal is recorded on the node, to be reported later.
            conf = {"cniVersion": "1.0.0", "name": "fault-lost", "type": "topocni", "attachment": "macvlan",
                    "master": node.master, "mode": "bridge", "topology": {"minLinkSpeedMbps": 400000},
                    "ipam": {"type": "host-local", "ranges": [[{"subnet": "10.234.0.0/24"}]]}}
            args = (f"IgnoreUnknown=1;K8S_POD_NAMESPACE={NS};K8S_POD_NAME=fault-lost;"
                    f"K8S_POD_INFRA_CONTAINER_ID={lost['uid']};K8S_POD_UID={lost['uid']}")
            p = node.cni("ADD", conf, "fault-lost", f"/run/netns/{netns}", "net1", args)
            self.assertEqual(json.loads(p.stdout)["code"], 100, p.stdout)
            time.sleep(3)   # every agent has failed a call or two by now
        finally:
            cp.restart_apiserver()
            sh("ip", "netns", "del", netns, check=False)
        # Every watch is back: a NAD made now reaches the facts agents (its addresses offered),
        # the webhook (the pod's requests) and the extender (it places the pod).
        self.macvlan_nad("fault-after", "10.235.0.0/24")
        self.offered("fault-after")
        self.api.create(faulty("fault-after", "fault-after"))
        self.assertEqual(self.running("fault-after", AFTER_RESTART)["spec"]["containers"][0]["resources"]["requests"][
            "addresses.topocni.io/fault-after"], "1")
        # The refusal made while the server was down: reported once.
        ev = self.wait("the refusal's Event", lambda: [
            e for e in self.api.get(f"/api/v1/namespaces/{NS}/events")["items"]
            if e["involvedObject"].get("uid") == lost["uid"] and e["reason"] == "TopocniPlacementRefused"], 60, 0.3)
        self.assertEqual(len(ev), 1, ev)
        self.assertEqual(ev[0]["count"], 1, ev)
        for a in ("facts", "dra", "refusals"):
            for n in c.nodes:
                self.assertIsNone(n.procs[a].poll(), f"{n.name}'s {a} agent exited:\n{n.agent_log(a)[-2000:]}")
        after = cp.audit()[before:]
        posts = [e for e in after if e.get("objectRef", {}).get("resource") == "events" and e["verb"] == "create"
                 and lost["uid"] in json.dumps(e.get("requestObject", {}))]
        self.assertEqual(len(posts), 1, "the Event created once")
        created = [(e["verb"], e["objectRef"].get("name")) for e in after
                   if e.get("objectRef", {}).get("resource") == "resourceslices" and e["verb"] in ("create", "delete")
                   and e.get("userAgent") != "topocni-cluster-tests"]
        self.assertEqual(created, [], "no slice made or removed again")
        now = {s["metadata"]["name"]: s["spec"] for s in self.api.get("/apis/resource.k8s.io/v1/resourceslices")["items"]}
        self.assertEqual(set(now), set(slices))

    def test_every_watch_lists_again_after_a_410_behind_an_api_server_without_watch_cache(self):
        c, cp = self.cluster, self.cluster.cp
        agents = [c.services[EXTENDER].log, c.services["topocni-webhook"].log, c.node("tc-a").procs["facts"].log]
        try:
            cp.restart_apiserver(["--watch-cache=false"])
            self.macvlan_nad("fault-410a", "10.236.0.0/24")
            self.offered("fault-410a")   # the watches run against etcd directly now
            offsets = [os.path.getsize(f) for f in agents]
            cp.stop_one("kube-apiserver")
            # Behind the server's back: etcd moves on and compacts away every version the
            # watches had seen, so each WATCH from its last version gets 410 Gone.
            for i in range(20):
                rev = int(etcd(cp, "kv/put", {"key": base64.b64encode(f"/tc-fault/{i}".encode()).decode(),
                                             "value": base64.b64encode(b"x").decode()})["header"]["revision"])
            etcd(cp, "kv/compaction", {"revision": str(rev), "physical": True})
            cp.restart_apiserver(["--watch-cache=false"])
            self.macvlan_nad("fault-410b", "10.237.0.0/24")
            self.offered("fault-410b")
            self.api.create(faulty("fault-410", "fault-410b"))
            self.running("fault-410", AFTER_RESTART)
            # A watch whose back-off grew while the server was down (base/backoff.h: 30 s
            # at most, jitter on top) may try again only after the pod ran: the webhook
            # reads a NAD it has not cached from the API, it needs no watch to admit.
            def expired(f, off):
                with open(f) as fh:
                    fh.seek(off)
                    return "resource version expired, listing again" in fh.read()
            for f, off in zip(agents, offsets):
                self.wait(f"{f} lists again after the 410", lambda: expired(f, off), 60, 0.5)
        finally:
            cp.restart_apiserver()


if __name__ == "__main__":
    unittest.main(verbosity=2)
