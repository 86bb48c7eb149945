"""The extender's books for pods bound but not attached yet (README, scheduler extender, "Pods
bound but not attached yet"): a pod the API shows bound to a node (spec.nodeName, still
Pending) counts against that node, its link, its address and its rates, until the node's
published facts name it, or for --pending-seconds.

Each test sets two nodes whose facts are the same, and binds pods to one of them only: a
pod that fits the quiet node must be refused on the busy one exactly when the bound pods'
needs, added to what the facts count, pass the NAD's limit, and fit while they do not. The
limits are set so that one bound pod fewer (or the facts already counting it) makes the
difference: a count that is off by one, or a bound pod left out, fails a test.

No root needed: the stand-in API and the extender listen on the host's loopback.
"""
import copy
import json
import os
import shutil
import subprocess
import tempfile
import time
import unittest

from cnitest import BIN, main
from fakenode import NAD_PATH, ClusterApi, free_port, make_pki, write_kubeconfig
from test_extender import facts, macvlan_nad, node, pod

# Loopback only: no namespaces, so these run as any user (cnitest.main).
NEEDS_ROOT = False

MBIT = 1_000_000
NODES = ["busy", "quiet"]


def ledger(committed_egress, committed_ingress, pods=1, capacity=None):
    """The eth1 ledger of a facts document: what earlier attachments committed on the link."""
    cap = None if capacity is None else {"bps": capacity, "overcommit": 1.0, "source": "topology.linkCapacityMbps",
                                        "network": "mv"}
    return {"link": "eth1", "capacity": cap, "committedEgressBps": committed_egress,
            "committedIngressBps": committed_ingress, "entryCount": pods, "entries": []}


def pool(network, size, used):
    """A network's host-local pool in a facts document: one range set."""
    return {"name": network, "rangeSets": [{"rangeSet": "10.79.0.0/24", "size": size, "used": used,
                                            "free": size - used}]}


def doc(name, links=0, ledgers=(), networks=(), attached=()):
    """test_extender's facts for node `name`, eth1 holding `links` macvlans, with these
    ledgers, pools and attachments (pods the node counts already)."""
    d = facts(name, links=links)
    d["ledgers"], d["networks"] = list(ledgers), list(networks)
    d["attachments"] = [{"network": "mv", "kind": "macvlan", "link": "eth1", "pods": list(attached)}] if attached else []
    return d


def bound(name, networks="mv"):
    """A pod the scheduler bound to the busy node; kubelet has not run its ADD yet."""
    return pod(name, networks, uid=f"uid-{name}", node_name="busy")


class Books(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.mkdtemp(prefix="topocni-bks-")
        self.addCleanup(shutil.rmtree, self.tmp, True)
        self.pki = make_pki(os.path.join(self.tmp, "pki"))
        self.api = ClusterApi(self.pki, token="books")
        self.addCleanup(self.api.stop)
        self.kubeconfig = write_kubeconfig(os.path.join(self.tmp, "kubeconfig"), self.api.url(),
                                           ca_file=os.path.join(self.pki, "ca.crt"), token="books")
        self.proc = None
        self.addCleanup(self.stop)

    def start(self, nads, docs, pods=(), pending_seconds=300):
        """The cluster (both nodes with `docs`'s facts, named each) and an extender on it."""
        self.stop()
        self.api.forget_requests()   # the new extender's LIST+WATCHes are the ones waited for
        nodes = []
        for name in NODES:
            d = copy.deepcopy(docs)
            d["node"] = name
            nodes.append(node(name, doc=d))
        self.api.replace(nodes, nads, list(pods))
        self.port = free_port()
        self.log = os.path.join(self.tmp, f"extender-{time.time()}.log")
        with open(self.log, "w") as err:
            self.proc = subprocess.Popen([BIN, "scheduler-extender", "--listen", f"127.0.0.1:{self.port}",
                                          "--kubeconfig", self.kubeconfig, "--max-facts-age", "600",
                                          "--pending-seconds", str(pending_seconds)], stderr=err)
        deadline = time.time() + 20
        while not all(self.api.watching(p) for p in ("/api/v1/nodes", NAD_PATH, "/api/v1/pods")):
            self.assertLess(time.time(), deadline, f"the extender did not list and watch: {self.api.logged()}")
            time.sleep(0.05)
        while True:
            try:
                return self.filter(pod("probe", ""))
            except OSError:
                self.assertLess(time.time(), deadline, "the extender does not listen")
                time.sleep(0.05)

    def stop(self):
        if self.proc and self.proc.poll() is None:
            self.proc.terminate()
            self.assertEqual(self.proc.wait(timeout=20), 0)
        self.proc = None

    def filter(self, p):
        import http.client
        c = http.client.HTTPConnection("127.0.0.1", self.port, timeout=30)
        c.request("POST", "/filter", json.dumps({"Pod": p, "Nodes": None, "NodeNames": NODES}),
                  {"Content-Type": "application/json"})
        r = c.getresponse()
        data = r.read()
        c.close()
        self.assertEqual(r.status, 200, data)
        return json.loads(data)

    def verdict(self, name="next"):
        """The busy node's reason for refusing a new pod on network mv, or None when it fits;
        the quiet node fits it in every test."""
        r = self.filter(pod(name, "mv"))
        self.assertIn("quiet", r["NodeNames"], f"the quiet node fits: {r}")
        if "busy" in r["NodeNames"]:
            return None
        return {**r["FailedNodes"], **r["FailedAndUnresolvableNodes"]}["busy"]

    # --- attachments per master ---

    def test_a_bound_pod_counts_as_a_macvlan_on_its_master(self):
        nads = [macvlan_nad(topology={"maxAttachmentsPerMaster": 3})]   # fewer than 3 already
        refused = "topocni: default/mv: topology.maxAttachmentsPerMaster not met"
        self.start(nads, doc("n", links=1), [bound("b1")])
        self.assertIsNone(self.verdict(), "1 on eth1 and 1 bound: a third fits")
        self.start(nads, doc("n", links=1), [bound("b1"), bound("b2")])
        self.assertEqual(self.verdict(), refused, "1 on eth1 and 2 bound: no fourth")
        # Once the facts count b1 (its macvlan is on eth1, its pod named), it is not counted twice.
        self.start(nads, doc("n", links=2, attached=["uid-b1"]), [bound("b1")])
        self.assertIsNone(self.verdict(), "2 on eth1, b1 among them: a third fits")
        # A pod bound elsewhere, or no longer Pending, counts nowhere here.
        running = bound("b2")
        running["status"]["phase"] = "Running"
        self.start(nads, doc("n", links=1), [bound("b1"), running])
        self.assertIsNone(self.verdict())

    # --- bandwidth ---

    def test_a_bound_pods_rates_count_against_its_links_egress_and_ingress(self):
        """eth1 (1000 Mb/s by the NAD) carries 400 Mb/s each way already; each pod of mv asks
        300 Mb/s one way and 1 Mb/s the other: one bound pod leaves room for a next, two do not."""
        for way, other in (("egressRate", "ingressRate"), ("ingressRate", "egressRate")):
            with self.subTest(direction=way):
                nads = [macvlan_nad(bandwidth={way: 300 * MBIT, other: MBIT}, topology={"linkCapacityMbps": 1000})]
                facts_now = doc("n", links=1, ledgers=[ledger(400 * MBIT, 400 * MBIT)], attached=["uid-old"])
                self.start(nads, facts_now, [bound("b1")])
                self.assertIsNone(self.verdict(), "400 + 300 bound + 300: fits")
                self.start(nads, facts_now, [bound("b1"), bound("b2")])
                self.assertEqual(self.verdict(), "topocni: default/mv: bandwidth not met", "400 + 600 bound + 300")
                # The ledger counting b1 already (its rates in the 700 committed, its pod named):
                # not counted twice.
                counted = doc("n", links=2, ledgers=[ledger(700 * MBIT, 700 * MBIT, pods=2)],
                              attached=["uid-old", "uid-b1"])
                self.start(nads, counted, [bound("b1")])
                self.assertIsNone(self.verdict(), "700 with b1 + 300: fits")

    def test_a_bound_pods_rates_count_on_a_link_that_has_no_ledger_yet(self):
        """The first pods with rates on a link: the node's facts have no ledger for eth1 yet
        (node-report publishes the ledgers the state dir has). 600 Mb/s bound of 1000: a next
        600 does not fit."""
        nads = [macvlan_nad(bandwidth={"egressRate": 600 * MBIT, "ingressRate": MBIT},
                            topology={"linkCapacityMbps": 1000})]
        self.start(nads, doc("n"), [])
        self.assertIsNone(self.verdict(), "an idle link: fits")
        self.start(nads, doc("n"), [bound("b1")])
        self.assertEqual(self.verdict(), "topocni: default/mv: bandwidth not met", "600 bound + 600")

    # --- addresses ---

    def test_a_bound_pod_takes_an_address_of_its_pool(self):
        """A pool of 8 with 5 held; mv asks that 1 stays free after the pod's own: one bound
        pod leaves that, two do not."""
        nads = [macvlan_nad(ipam={"type": "host-local", "subnet": "10.79.0.0/24"}, topology={"minFreeAddresses": 1})]
        self.start(nads, doc("n", links=1, networks=[pool("mv", 8, 5)], attached=["uid-old"]), [bound("b1")])
        self.assertIsNone(self.verdict(), "5 held, 1 bound, 1 for the pod: 1 stays free")
        self.start(nads, doc("n", links=1, networks=[pool("mv", 8, 5)], attached=["uid-old"]),
                   [bound("b1"), bound("b2")])
        self.assertEqual(self.verdict(), "topocni: default/mv: topology.minFreeAddresses not met")
        # The pool counting b1's address already: not counted twice.
        self.start(nads, doc("n", links=2, networks=[pool("mv", 8, 6)], attached=["uid-old", "uid-b1"]),
                   [bound("b1")])
        self.assertIsNone(self.verdict(), "6 held with b1's, 1 for the pod: 1 stays free")

    def test_a_bound_pod_takes_an_address_of_a_pool_the_node_has_not_used_yet(self):
        """The first pods of a network on a node: its facts have no pool for it yet
        (node-report publishes the pools of networks with attachments). A /29 gives 5; mv
        asks that 3 stay free: one bound pod leaves that, two do not."""
        nads = [macvlan_nad(ipam={"type": "host-local", "subnet": "10.79.0.0/29"}, topology={"minFreeAddresses": 3})]
        self.start(nads, doc("n"), [bound("b1")])
        self.assertIsNone(self.verdict(), "5, 1 bound, 1 for the pod: 3 stay free")
        self.start(nads, doc("n"), [bound("b1"), bound("b2")])
        self.assertEqual(self.verdict(), "topocni: default/mv: topology.minFreeAddresses not met")

    # --- --pending-seconds ---

    def test_a_bound_pod_counts_for_pending_seconds_and_no_longer(self):
        """Bound, Pending, and never in the facts (its ADD did not come): it counts while it is
        within --pending-seconds of the extender seeing it bound, then no more."""
        window = 12
        nads = [macvlan_nad(topology={"maxAttachmentsPerMaster": 2})]
        started = time.time()   # the extender sees the binding no earlier than this
        self.start(nads, doc("n", links=1), [bound("b1")], pending_seconds=window)
        self.assertEqual(self.verdict(), "topocni: default/mv: topology.maxAttachmentsPerMaster not met",
                         "within the window: 1 on eth1 and 1 bound")
        deadline = started + window + 30
        while self.verdict() is not None:
            self.assertLess(time.time(), deadline, "the bound pod still counts long after --pending-seconds")
            time.sleep(0.25)
        self.assertGreater(time.time() - started, window, "it stopped counting before --pending-seconds")
        # The API still shows it bound and Pending, and the facts still do not name it.
        self.assertEqual(self.api.pods["default/b1"]["spec"]["nodeName"], "busy")
        self.assertEqual(self.api.pods["default/b1"]["status"]["phase"], "Pending")


if __name__ == "__main__":
    main()
