"""The scheduler's own books: what `node-report --publish` keeps in its Node's
status.capacity and status.allocatable (topocni's extended resources), and, over a
generated table, that the default scheduler's predicate on those books gives ADD's
verdict.

Each test has a node netns (cnitest) with macvlan masters that are real veths, a fake
sysfs tree saying which links exist (the publisher's and ADD's --sysfs-root/sysfsRoot),
and fakenode.ClusterApi listening on the node netns's loopback over HTTPS: it serves the
NADs and Node worker-1 by LIST and WATCH, and applies the publisher's JSON patches to
nodes/worker-1/status with a real RFC 6902 implementation (an operation that does not
apply is a 422, which the tests look for). The publisher and the admission webhook run
inside the node netns (nsenter), ADD too, with CNI_* variables. Virtual links have no
speed: every NAD gives topology.linkCapacityMbps.
"""
import base64
import http.client
import json
import os
import shutil
import signal
import ssl
import subprocess
import tempfile
import time

from cnitest import BIN, NetnsTestCase, main, sh
from fakenode import NAD_PATH, ClusterApi, FakeSysfs, make_pki, nad_object, socket_in_netns, write_kubeconfig
from jsonpatch_apply import apply_checked

M = 1_000_000
BW = "bandwidth.topocni.io/"
ADDR = "addresses.topocni.io/"
MARKER = "topocni.io/networks"   # advertised as many as the node takes pods (cluster/resources.h)
NODE = "worker-1"
STATUS_PATH = f"/api/v1/nodes/{NODE}/status"
BASE_CAPACITY = {"cpu": "8", "memory": "32780604Ki", "pods": "110", "ephemeral-storage": "101430960Ki",
                 "example.com/dongle": "2"}
LABELS = {"kubernetes.io/hostname": NODE, "kubernetes.io/os": "linux", "example.com/zone": "a",
          "example.com/cores": "16"}


def node_object(labels=None, capacity=None, allocatable=None):
    """Node worker-1 as kubelet registers it: no topocni resources unless given."""
    cap = dict(BASE_CAPACITY if capacity is None else capacity)
    alloc = dict(cap if allocatable is None else allocatable)
    return {"kind": "Node", "apiVersion": "v1",
            "metadata": {"name": NODE, "uid": "0e2f6c1a-1111-4222-8333-944455556666",
                         "labels": dict(LABELS if labels is None else labels),
                         "annotations": {"node.alpha.kubernetes.io/ttl": "0"}},
            "spec": {"podCIDR": "10.244.1.0/24"},
            "status": {"capacity": cap, "allocatable": alloc,
                       "conditions": [{"type": "Ready", "status": "True", "reason": "KubeletReady"}],
                       "nodeInfo": {"kubeletVersion": "v1.31.0", "architecture": "amd64"}}}


def pod_args(uid, name):
    return f"IgnoreUnknown=1;K8S_POD_NAMESPACE=default;K8S_POD_NAME={name};K8S_POD_INFRA_CONTAINER_ID=x;K8S_POD_UID={uid}"


class NetnsHTTPSConnection(http.client.HTTPSConnection):
    """HTTPS to an address of another netns: the socket is made in that netns."""

    def __init__(self, netns, *a, **kw):
        super().__init__(*a, **kw)
        self.netns = netns

    def connect(self):
        s = socket_in_netns(self.netns)
        s.settimeout(self.timeout)
        s.connect((self.host, self.port))
        self.sock = self._context.wrap_socket(s, server_hostname=self.host)


class BooksCase(NetnsTestCase):
    def setUp(self):
        super().setUp()
        self.procs = []
        self.api = None
        self.fixture = tempfile.mkdtemp(prefix="topocni-cap-")
        try:
            self.make_node()
        except BaseException:
            self.tearDown()   # unittest skips tearDown when setUp fails; the namespaces must go
            raise

    def tearDown(self):
        try:
            for p in self.procs:
                if p.poll() is None:   # a failed test left it running: only this process, by its pid
                    p.kill()
                    p.wait()
            if self.api:
                self.api.stop()
        finally:
            super().tearDown()
            shutil.rmtree(self.fixture, ignore_errors=True)

    def make_node(self):
        self.sys = FakeSysfs(os.path.join(self.tmp, "sys"))
        self.masters = [f"tc{self.tag}{c}"[:15] for c in "abc"]
        for i, name in enumerate(self.masters):
            sh("ip", "link", "add", name, "type", "veth", "peer", "name", f"tq{self.tag}{i}"[:15], ns=self.node)
            sh("ip", "link", "set", name, "up", ns=self.node)
            self.sys.netdev(name)   # exists; no speed: topology.linkCapacityMbps says it
        self.ghost = f"tg{self.tag}"[:15]   # a master no node has
        self.kubelet = os.path.join(self.tmp, "kubelet")
        os.makedirs(self.kubelet)
        self.pki = make_pki(os.path.join(self.fixture, "pki"))
        self.api = ClusterApi(self.pki, netns=self.node, token="node-token")
        self.api.put_node(node_object())
        self.kubeconfig = write_kubeconfig(os.path.join(self.fixture, "kubeconfig"), self.api.url(),
                                           ca_file=os.path.join(self.pki, "ca.crt"), token="node-token")

    def mconf(self, name, master, capacity=None, overcommit=None, pool=None, **extra):
        """A macvlan NAD config on `master` of this node."""
        c = {"cniVersion": "1.0.0", "name": name, "type": "topocni", "attachment": "macvlan", "master": master,
             "sysfsRoot": self.sys.root, "stateDir": self.state_dir}
        topo = {}
        if capacity is not None:
            topo["linkCapacityMbps"] = capacity
        if overcommit is not None:
            topo["bandwidthOvercommit"] = overcommit
        if topo:
            c["topology"] = topo
        if pool is not None:
            c["ipam"] = dict(pool, type="host-local", dataDir=self.data_dir)
        c.update(extra)
        return c

    # --- the publisher ---
    def publisher(self, *extra, interval=60):
        log = os.path.join(self.fixture, f"publisher{len(self.procs)}.log")
        with open(log, "w") as f:
            p = subprocess.Popen(["nsenter", f"--net=/run/netns/{self.node}", BIN, "node-report", "--publish",
                                  "--kubeconfig", self.kubeconfig, "--node", NODE, "--sysfs-root", self.sys.root,
                                  "--state-dir", self.state_dir, "--kubelet-root-dir", self.kubelet,
                                  "--interval", str(interval), *extra], stdout=f, stderr=subprocess.STDOUT)
        p.log = log
        self.procs.append(p)
        return p

    def publish_once(self, *extra):
        p = self.publisher("--once", *extra)
        try:
            rc = p.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self.fail(f"node-report --publish --once did not end: {self.log_of(p)}")
        self.assertEqual(rc, 0, self.log_of(p))
        return p

    def stop(self, p):
        self.assertIsNone(p.poll(), f"the publisher exited on its own: {self.log_of(p)}")
        p.send_signal(signal.SIGTERM)
        try:
            self.assertEqual(p.wait(timeout=10), 0, self.log_of(p))
        except subprocess.TimeoutExpired:
            self.fail(f"the publisher did not stop on SIGTERM: {self.log_of(p)}")

    @staticmethod
    def log_of(p):
        with open(p.log) as f:
            return f.read()

    def status(self):
        return self.api.node(NODE)["status"]

    def wait_capacity(self, want, what, p=None, seconds=10):
        """Waits until the Node's capacity and allocatable both are `want`."""
        end = time.monotonic() + seconds
        while True:
            st = self.status()
            if st.get("capacity") == want and st.get("allocatable") == want:
                return
            if time.monotonic() > end:
                self.assertEqual(st.get("capacity"), want, f"{what}: capacity; publisher: {p and self.log_of(p)}")
                self.assertEqual(st.get("allocatable"), want, f"{what}: allocatable")
            time.sleep(0.05)

    def status_patches(self):
        return self.api.logged("PATCH", STATUS_PATH)

    def assertPatchesWellFormed(self):
        """Every nodes/status PATCH was a JSON patch that applied, its paths escaped."""
        patches = self.status_patches()
        self.assertTrue(patches, "the publisher sent no nodes/status patch")
        for r in patches:
            self.assertEqual(r["contentType"].split(";")[0], "application/json-patch+json")
            self.assertEqual(r["status"], 200, r)
            for op in r["body"]:
                if op["path"].count("/") > 3:
                    self.fail(f"a resource name's '/' is not escaped as ~1: {op['path']}")


class Capacities(BooksCase):
    def nads(self):
        m1, m2, m3 = self.masters
        over = self.mconf("over-net", m2, capacity=400, overcommit=2.5, capabilities={"bandwidth": True},
                          nodeSelector={"matchExpressions": [
                              {"key": "example.com/zone", "operator": "In", "values": ["a"]}]},
                          pool={"ranges": [[{"subnet": "10.92.0.0/28"}], [{"subnet": "10.93.0.0/29"}]]})
        del over["cniVersion"], over["name"]   # the list's
        return {
            # Two NADs on master 1 that disagree on its capacity: the least counts.
            "fast": nad_object("fast", self.mconf("fast", m1, capacity=1000, pool={"subnet": "10.91.0.0/28"},
                                                  bandwidth={"egressRate": 10 * M, "ingressRate": 10 * M})),
            "slow": nad_object("slow", self.mconf("slow", m1, capacity=600, bandwidth={"egressRate": M})),
            # The bandwidth capability, an overcommit, two range sets (the smaller one counts),
            # a selector the node meets; in another namespace, inside a conflist.
            "over": nad_object("over", {"cniVersion": "1.0.0", "name": "over-net",
                                        "plugins": [over, {"type": "tuning"}]}, namespace="net"),
            # A selector the node does not meet: nothing of it here.
            "elsewhere": nad_object("elsewhere", self.mconf("elsewhere", m3, capacity=100, pool={"subnet": "10.94.0.0/24"},
                                                            bandwidth={"egressRate": M},
                                                            nodeSelector={"example.com/zone": "b"})),
            # A master this node lacks: no bandwidth, but its pool is local all the same.
            "ghost": nad_object("ghost", self.mconf("ghost", self.ghost, capacity=100, bandwidth={"egressRate": M},
                                                    pool={"subnet": "10.95.0.0/24", "rangeStart": "10.95.0.10",
                                                          "rangeEnd": "10.95.0.19"})),
            "bridge": nad_object("bridge", {"cniVersion": "1.0.0", "name": "bridge", "type": "bridge"}),
        }

    def expected(self, capacity=None, **changes):
        m1, m2, m3 = self.masters
        want = dict(BASE_CAPACITY if capacity is None else capacity)
        want.update({BW + f"macvlan.{m1}.egress": "600", BW + f"macvlan.{m1}.ingress": "600",
                     BW + f"macvlan.{m2}.egress": "1000", BW + f"macvlan.{m2}.ingress": "1000",
                     ADDR + "fast": "13",      # 10.91.0.0/28: 16 less network, gateway and broadcast
                     ADDR + "over-net": "5",   # the /29 of the two range sets
                     ADDR + "ghost": "10",     # .10 to .19
                     MARKER: want.get("pods", "110")})
        for name, v in changes.items():   # resource name -> value, None: absent
            if v is None:
                want.pop(name, None)
            else:
                want[name] = v
        return want

    def put_all(self):
        for n in self.nads().values():
            self.api.put_nad(n)

    def test_two_nads_on_one_master_give_one_resource_per_direction_at_the_least_capacity(self):
        stale = dict(BASE_CAPACITY, **{BW + "macvlan.old0.egress": "77", ADDR + "old-net": "3"})
        self.api.put_node(node_object(capacity=stale))
        self.put_all()
        p = self.publisher()
        self.wait_capacity(self.expected(), "first publication", p)
        self.assertPatchesWellFormed()
        removed = [op["path"] for r in self.status_patches() for op in r["body"] if op["op"] == "remove"]
        for kind in ("capacity", "allocatable"):
            self.assertIn(f"/status/{kind}/bandwidth.topocni.io~1macvlan.old0.egress", removed)
            self.assertIn(f"/status/{kind}/addresses.topocni.io~1old-net", removed)
        # Nothing changed: nothing more is sent, even when the Node comes back by the watch.
        n = len(self.status_patches())
        time.sleep(1.5)
        self.assertEqual(len(self.status_patches()), n, "an unchanged Node is patched again")
        self.stop(p)
        self.assertEqual([r for r in self.api.requests if r["status"] >= 400 and r["method"] != "GET"], [])

    def test_a_forbidden_status_patch_does_not_stop_the_facts_and_the_resources_follow_once_allowed(self):
        # A cluster whose RBAC predates nodes/status: the facts annotation is published all
        # the same, and the failure is said in the log.
        self.put_all()
        self.api.fail(STATUS_PATH, 403)
        p = self.publisher(interval=1)
        end = time.monotonic() + 10
        while "topocni.io/facts" not in self.api.node(NODE)["metadata"].get("annotations", {}):
            self.assertLess(time.monotonic(), end, f"no facts published: {self.log_of(p)}")
            time.sleep(0.05)
        while "keeping the extended resources of node" not in self.log_of(p):
            self.assertLess(time.monotonic(), end, f"the refusal is not logged: {self.log_of(p)}")
            time.sleep(0.05)
        self.assertEqual(self.status().get("capacity"), BASE_CAPACITY)
        self.api.fail(STATUS_PATH, None)
        self.wait_capacity(self.expected(), "once nodes/status may be patched", p)
        self.stop(p)

    def test_a_node_reset_to_zero_or_relabelled_is_published_again_by_the_watch(self):
        self.put_all()
        p = self.publisher(interval=60)   # nothing but the watch can bring a change within seconds
        self.wait_capacity(self.expected(), "first publication", p)
        # kubelet recreated the Node: extended resources are gone from its status.
        self.api.put_node(node_object())
        start = time.monotonic()
        self.wait_capacity(self.expected(), "after the reset", p, seconds=8)
        self.assertLess(time.monotonic() - start, 8)
        # Only the status lost them: capacity zeroed to "0" as well.
        zeroed = self.api.node(NODE)
        for kind in ("capacity", "allocatable"):
            for k in list(zeroed["status"][kind]):
                if k.startswith((BW, ADDR)) or k == MARKER:
                    zeroed["status"][kind][k] = "0"
        self.api.put_node(zeroed)
        self.wait_capacity(self.expected(), "after zeroing", p, seconds=8)
        # New labels: "elsewhere" (zone b) can land here now, "over" (zone In a) no more.
        m2, m3 = self.masters[1], self.masters[2]
        self.api.put_node(node_object(labels=dict(LABELS, **{"example.com/zone": "b"}),
                                      capacity=self.status()["capacity"]))
        self.wait_capacity(self.expected(**{
            BW + f"macvlan.{m2}.egress": None, BW + f"macvlan.{m2}.ingress": None, ADDR + "over-net": None,
            BW + f"macvlan.{m3}.egress": "100", BW + f"macvlan.{m3}.ingress": "100", ADDR + "elsewhere": "253"}),
            "after relabelling", p, seconds=8)
        self.assertPatchesWellFormed()
        self.stop(p)

    def test_a_relabel_the_watch_brings_before_the_publishers_own_patch_is_answered_is_published(self):
        # The interleaving behind a flaky run (issue 38): the publisher's status PATCH takes
        # effect, its watch brings that version and then a relabel, and only then does the
        # PATCH's answer arrive. Laying that answer over the view put the old labels back,
        # and no later event corrected them.
        self.put_all()
        p = self.publisher(interval=60)
        self.wait_capacity(self.expected(), "first publication", p)
        self.api.hold_answers(STATUS_PATH)
        patches = len(self.status_patches())
        self.api.put_node(node_object())   # kubelet recreated the Node: the publisher patches
        end = time.monotonic() + 8
        while not self.api.held(STATUS_PATH):
            self.assertLess(time.monotonic(), end, f"no status PATCH; publisher: {self.log_of(p)}")
            time.sleep(0.02)
        self.assertEqual(self.status()["capacity"], self.expected(), "the PATCH took effect")
        m2, m3 = self.masters[1], self.masters[2]
        self.api.put_node(node_object(labels=dict(LABELS, **{"example.com/zone": "b"}),
                                      capacity=self.status()["capacity"]))
        relabelled = self.api.node(NODE)["metadata"]["resourceVersion"]
        # Both versions out to the publisher's watch before the answer goes.
        end = time.monotonic() + 8
        while self.api.delivered_to_watches("nodes") < int(relabelled):
            self.assertLess(time.monotonic(), end, "the relabel never reached the publisher's watch")
            time.sleep(0.02)
        # And read by it: it only parses the line. Were it read after the answer, the test
        # would pass without the interleaving (it fails without the fix when it happens).
        time.sleep(1.0)
        self.api.release(STATUS_PATH)
        self.wait_capacity(self.expected(**{
            BW + f"macvlan.{m2}.egress": None, BW + f"macvlan.{m2}.ingress": None, ADDR + "over-net": None,
            BW + f"macvlan.{m3}.egress": "100", BW + f"macvlan.{m3}.ingress": "100", ADDR + "elsewhere": "253"}),
            f"after relabelling to version {relabelled} while the PATCH was unanswered", p, seconds=8)
        self.assertGreater(len(self.status_patches()), patches + 1)
        self.assertPatchesWellFormed()
        self.stop(p)

    def test_the_marker_is_as_many_as_the_node_takes_pods_with_or_without_nads(self):
        # No NAD: only the marker, at the Node's pods.
        p = self.publisher(interval=60)
        self.wait_capacity(dict(BASE_CAPACITY, **{MARKER: "110"}), "no NAD", p)
        # kubelet's --max-pods raised: the watch brings it, the marker follows.
        self.api.put_node(node_object(capacity=dict(self.status()["capacity"], pods="250"),
                                      allocatable=dict(self.status()["allocatable"], pods="250")))
        self.wait_capacity(dict(BASE_CAPACITY, pods="250", **{MARKER: "250"}), "pods 250", p, seconds=8)
        self.assertPatchesWellFormed()
        self.stop(p)

    def test_a_removed_nad_takes_its_resources_along_and_a_new_one_brings_them(self):
        self.put_all()
        p = self.publisher(interval=60)
        self.wait_capacity(self.expected(), "first publication", p)
        m1, m2 = self.masters[0], self.masters[1]
        # The NAD that held master 1 down to 600 goes: the other's 1000 counts.
        self.api.delete_nad("default", "slow")
        self.wait_capacity(self.expected(**{BW + f"macvlan.{m1}.egress": "1000", BW + f"macvlan.{m1}.ingress": "1000"}),
                           "after deleting slow", p, seconds=8)
        # The only NAD on master 2 and of its pool goes: its three resources go.
        self.api.delete_nad("net", "over")
        gone = {BW + f"macvlan.{m2}.egress": None, BW + f"macvlan.{m2}.ingress": None, ADDR + "over-net": None}
        self.wait_capacity(self.expected(**{BW + f"macvlan.{m1}.egress": "1000", BW + f"macvlan.{m1}.ingress": "1000"},
                                         **gone), "after deleting over", p, seconds=8)
        removes = [op["path"] for op in self.status_patches()[-1]["body"] if op["op"] == "remove"]
        self.assertEqual(sorted(removes), sorted(f"/status/{k}/{n.replace('/', '~1')}"
                                                 for k in ("capacity", "allocatable") for n in gone))
        # Changed in place: a bigger capacity for master 1.
        fast = self.nads()["fast"]
        conf = json.loads(fast["spec"]["config"])
        conf["topology"]["linkCapacityMbps"] = 2500
        fast["spec"]["config"] = json.dumps(conf)
        self.api.put_nad(fast)
        self.wait_capacity(self.expected(**{BW + f"macvlan.{m1}.egress": "2500", BW + f"macvlan.{m1}.ingress": "2500"},
                                         **gone), "after changing fast", p, seconds=8)
        # Every topocni NAD gone: every topocni resource goes, the rest stays.
        for ns, name in (("default", "fast"), ("default", "elsewhere"), ("default", "ghost")):
            self.api.delete_nad(ns, name)
        self.wait_capacity(dict(BASE_CAPACITY, **{MARKER: "110"}), "after deleting every NAD (the marker stays)", p, seconds=8)
        self.assertPatchesWellFormed()
        self.stop(p)

    def test_once_publishes_the_capacities_and_no_capacities_leaves_them_alone(self):
        self.put_all()
        self.publish_once("--no-capacities")
        self.assertEqual(self.status_patches(), [])
        self.assertFalse(self.api.logged("GET", NAD_PATH), "--no-capacities lists no NADs")
        self.assertIn("topocni.io/facts", self.api.node(NODE)["metadata"]["annotations"], "the facts are published")
        self.publish_once()
        self.wait_capacity(self.expected(), "--once", seconds=1)
        self.api.put_node(node_object())
        self.publish_once()
        self.wait_capacity(self.expected(), "--once after a reset", seconds=1)
        self.assertPatchesWellFormed()


def pairwise(dimensions):
    """A subset of the product of `dimensions` (lists of values) in which every pair of
    values of two dimensions still occurs: greedy, deterministic."""
    import itertools
    rows = list(itertools.product(*[range(len(d)) for d in dimensions]))
    pairs = lambda r: {(a, r[a], b, r[b]) for a in range(len(r)) for b in range(a + 1, len(r))}
    uncovered = set().union(*(pairs(r) for r in rows))
    chosen = []
    while uncovered:
        best = max(rows, key=lambda r: len(pairs(r) & uncovered))
        chosen.append(best)
        uncovered -= pairs(best)
    return [tuple(d[k] for d, k in zip(dimensions, r)) for r in chosen]


class SchedulerPredicateEqualsAdd(BooksCase):
    """For a generated table of (NAD, node labels, link capacity, pods already on the node),
    the default scheduler's predicate computed from the webhook-patched pod on the published
    books equals ADD's verdict on that node.

    The predicate is what kube-scheduler's NodeAffinity and NodeResourcesFit plugins decide:
    one of the pod's required nodeSelectorTerms matches the Node's labels, and for every
    extended resource the pod requests, request <= allocatable - the sum of what the pods
    already on the node request. The pods already on the node are a pod of another network
    on the same master (in some rows) and the row's earlier pods that ADD admitted (really
    attached, by the binary); a row places pods until the first refusal. Rates are whole
    Mb/s: the resource side rounds a pod's rate up and a capacity down, so with fractions it
    could only be stricter than ADD's ledger, which counts bits; here the two must agree
    exactly, also where a pod takes the last Mb/s of a link.
    """

    MAX_PODS = 6

    def start_webhook(self):
        self.webhook_port = 18443 + os.getpid() % 1000   # on the node netns's loopback
        log = os.path.join(self.fixture, "webhook.log")
        with open(log, "w") as f:
            p = subprocess.Popen(["nsenter", f"--net=/run/netns/{self.node}", BIN, "admission-webhook", "--listen",
                                  f"127.0.0.1:{self.webhook_port}", "--tls-cert", os.path.join(self.pki, "server.crt"),
                                  "--tls-key", os.path.join(self.pki, "server.key"), "--kubeconfig", self.kubeconfig],
                                 stdout=f, stderr=subprocess.STDOUT)
        p.log = log
        self.procs.append(p)
        deadline = time.monotonic() + 20
        while True:
            self.assertIsNone(p.poll(), f"the webhook exited: {self.log_of(p)}")
            try:
                if self.api.watching(NAD_PATH) and self.webhook("GET", "/healthz")[0] == 200:
                    return p
            except OSError:
                pass
            self.assertLess(time.monotonic(), deadline, "the webhook did not start")
            time.sleep(0.05)

    def webhook(self, method, path, body=None):
        ctx = ssl.create_default_context(cafile=os.path.join(self.pki, "ca.crt"))
        c = NetnsHTTPSConnection(self.node, "127.0.0.1", self.webhook_port, context=ctx, timeout=30)
        try:
            c.request(method, path, body)
            r = c.getresponse()
            return r.status, r.read()
        finally:
            c.close()

    def admitted_pod(self, network, uid):
        """The pod as the webhook leaves it (an AdmissionReview of its CREATE, the patch applied)."""
        pod = {"kind": "Pod", "apiVersion": "v1",
               "metadata": {"generateName": "p-", "namespace": "default",
                            "annotations": {"k8s.v1.cni.cncf.io/networks": network}},
               "spec": {"containers": [{"name": "app", "image": "x", "resources": {}}]}}
        gvk, gvr = {"group": "", "version": "v1", "kind": "Pod"}, {"group": "", "version": "v1", "resource": "pods"}
        review = {"kind": "AdmissionReview", "apiVersion": "admission.k8s.io/v1",
                  "request": {"uid": uid, "kind": gvk, "resource": gvr, "requestKind": gvk, "requestResource": gvr,
                              "namespace": "default", "operation": "CREATE",
                              "userInfo": {"username": "admin", "uid": "u", "groups": ["system:masters"]},
                              "object": pod, "oldObject": None, "dryRun": False,
                              "options": {"kind": "CreateOptions", "apiVersion": "meta.k8s.io/v1"}}}
        status, data = self.webhook("POST", "/mutate", json.dumps(review).encode())
        self.assertEqual(status, 200, data)
        resp = json.loads(data)["response"]
        self.assertTrue(resp["allowed"], resp)
        if "patch" not in resp:
            return pod
        return apply_checked(pod, json.loads(base64.b64decode(resp["patch"])))

    # --- the scheduler's side ---
    @staticmethod
    def requirement_holds(r, labels):
        """apimachinery's labels.Requirement.Matches for a node selector requirement."""
        key, op, values = r["key"], r["operator"], r.get("values", [])
        if op == "In":
            return key in labels and labels[key] in values
        if op == "NotIn":
            return key not in labels or labels[key] not in values
        if op == "Exists":
            return key in labels
        if op == "DoesNotExist":
            return key not in labels
        if op in ("Gt", "Lt"):
            try:
                have, want = int(labels[key]), int(values[0])
            except (KeyError, ValueError):
                return False
            return have > want if op == "Gt" else have < want
        raise AssertionError(f"unknown operator {op}")

    def affinity_holds(self, pod, labels):
        terms = (((pod["spec"].get("affinity") or {}).get("nodeAffinity") or {})
                 .get("requiredDuringSchedulingIgnoredDuringExecution") or {}).get("nodeSelectorTerms")
        if not terms:
            return True
        return any(all(self.requirement_holds(r, labels) for r in t.get("matchExpressions", [])) for t in terms)

    @staticmethod
    def requests(pod):
        """The pod's extended resource requests (the sum over its containers)."""
        out = {}
        for c in pod["spec"]["containers"]:
            for k, v in ((c.get("resources") or {}).get("requests") or {}).items():
                if k.startswith((BW, ADDR)):
                    out[k] = out.get(k, 0) + int(v)
        return out

    def predicate(self, pod, labels, allocatable, on_node):
        """(fits, why, at the limit): NodeAffinity, then NodeResourcesFit, which names
        every resource that is short."""
        if not self.affinity_holds(pod, labels):
            return False, "node affinity", False
        short, edge = [], False
        for name, want in sorted(self.requests(pod).items()):
            used = sum(self.requests(p).get(name, 0) for p in on_node)
            have = int(allocatable.get(name, "0"))
            if want > have - used:
                short.append(f"Insufficient {name} ({want} > {have} - {used})")
            edge = edge or want == have - used
        short.sort(key=lambda w: not w.startswith("Insufficient " + BW))   # bandwidth first
        return (False, "; ".join(short), False) if short else (True, "fits", edge)

    # --- the table ---
    def rows(self):
        master = self.masters[0]
        labels_a = dict(LABELS)
        labels_b = dict(LABELS, **{"example.com/zone": "b", "example.com/cores": "4"})
        bandwidths = [("no bandwidth", None), ("egress 400", {"egressRate": 400 * M}),
                      ("egress 250 ingress 200", {"egressRate": 250 * M, "ingressRate": 200 * M}),
                      ("egress 100 ingress 300", {"egressRate": 100 * M, "ingressRate": 300 * M})]
        links = [("1000 Mb/s", (1000, None)), ("500 Mb/s x 1.5", (500, 1.5))]
        selectors = [("no selector", (None, labels_a)),
                     ("selector met", ({"matchExpressions": [
                         {"key": "example.com/cores", "operator": "Gt", "values": ["8"]},
                         {"key": "example.com/gpu", "operator": "DoesNotExist"}]}, labels_a)),
                     ("selector not met", ({"example.com/zone": "a"}, labels_b))]
        pools = [("no pool", None), ("1 address", {"subnet": "10.97.0.0/30"}),
                 ("3 addresses", {"subnet": "10.98.0.0/24", "rangeStart": "10.98.0.10", "rangeEnd": "10.98.0.12"})]
        others = [("alone", False), ("after another network's pod", True)]
        for i, ((bw_what, bw), (link_what, (cap, over)), (sel_what, (sel, labels)), (pool_what, pool),
                (bg_what, bg)) in enumerate(pairwise([bandwidths, links, selectors, pools, others])):
            name = f"row{i}"
            extra = {"nodeName": NODE, "nodeLabelsFile": self.labels_file, "kubeconfig": ""}
            if bw:
                extra["bandwidth"] = bw
            if sel:
                extra["nodeSelector"] = sel
            conf = self.mconf(name, master, capacity=cap, overcommit=over, pool=pool, **extra)
            # Another network on the same master, whose pod is there first: the same link's
            # books (one resource per link), a pool of its own.
            other = self.mconf(f"{name}-bg", master, capacity=cap, overcommit=over, pool={"subnet": "10.99.0.0/24"},
                               bandwidth={"egressRate": 200 * M, "ingressRate": 100 * M},
                               nodeName=NODE, nodeLabelsFile=self.labels_file, kubeconfig="") if bg else None
            yield f"{name}: {bw_what}, {link_what}, {sel_what}, {pool_what}, {bg_what}", conf, other, labels

    def attach(self, conf, network, i, labels, allocatable, on_node, attached):
        """One pod of `network`: the scheduler's predicate and ADD's verdict, compared.
        Returns (fits, why, at the limit)."""
        uid = f"{network}-{i}-0000-4000-8000-000000000000"
        pod = self.admitted_pod(network, uid)
        fits, why, edge = self.predicate(pod, labels, allocatable, on_node)
        ns, path = self.make_pod()
        cid = f"{network}c{i}"
        out = self.run_plugin("ADD", conf, container_id=cid, netns=path, args=pod_args(uid, f"{network}-{i}"))
        self.assertEqual(out.rc == 0, fits, f"pod {i} of {network}: the scheduler says {why} "
                                           f"(allocatable {allocatable}); ADD says {out}")
        if out.rc == 0:
            on_node.append(pod)
            attached.append((conf, cid, path, uid, f"{network}-{i}"))
        else:
            # The ledger refuses (placement, 100) before host-local is asked; an exhausted
            # pool alone is host-local's refusal (101).
            self.assertEqual(out.json["code"], 101 if why.startswith("Insufficient " + ADDR) else 100, out)
        return fits, why, edge

    def test_the_schedulers_predicate_on_the_published_books_equals_adds_verdict(self):
        self.labels_file = os.path.join(self.tmp, "node-labels.json")
        self.start_webhook()
        seen = {"fit": 0, "fit at the limit": 0, "node affinity": 0, "egress": 0, "ingress": 0, "addresses": 0}
        rows = list(self.rows())
        self.assertGreaterEqual(len(rows), 12)
        for what, conf, other, labels in rows:
            with self.subTest(row=what):
                name = conf["name"]
                with open(self.labels_file, "w") as f:
                    json.dump(labels, f)
                st = self.status()
                self.api.put_node(node_object(labels=labels, capacity=st["capacity"], allocatable=st["allocatable"]))
                for key in list(self.api.nads):   # the row's NADs only
                    self.api.delete_nad(*key.split("/"))
                self.api.put_nad(nad_object(name, conf))
                if other:
                    self.api.put_nad(nad_object(other["name"], other))
                self.publish_once()
                allocatable = self.status()["allocatable"]
                on_node, attached = [], []
                try:
                    if other:
                        fits, why, _ = self.attach(other, other["name"], 0, labels, allocatable, on_node, attached)
                        self.assertTrue(fits, f"the other network's pod: {why}")
                    for i in range(self.MAX_PODS):
                        fits, why, edge = self.attach(conf, name, i, labels, allocatable, on_node, attached)
                        if not fits:
                            for kind, words in (("node affinity", "node affinity"), ("egress", ".egress ("),
                                                ("ingress", ".ingress ("), ("addresses", "Insufficient " + ADDR)):
                                seen[kind] += words in why
                            break
                        seen["fit"] += 1
                        seen["fit at the limit"] += edge
                    else:   # nothing counted: only a row without bandwidth and pool has no end
                        self.assertFalse(conf.get("bandwidth") or conf.get("ipam"),
                                         f"{what}: {self.MAX_PODS} pods fit, more than the books hold")
                finally:
                    for c, cid, path, uid, pname in reversed(attached):
                        out = self.run_plugin("DEL", c, container_id=cid, netns=path, args=pod_args(uid, pname))
                        self.assertEqual(out.rc, 0, out)
        # Every way of fitting or not was compared.
        for k, n in seen.items():
            self.assertGreater(n, 0, f"no attempt ended in {k}: {seen}")
        self.assertEqual([r for r in self.api.requests if r["method"] == "PATCH" and r["status"] != 200], [])

if __name__ == "__main__":
    main()
