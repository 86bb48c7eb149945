"""The node's facts document and its publisher: `topocni node-report --format facts` and
`node-report --publish`, which keeps the document on the Node as annotation
topocni.io/facts.

Each test node has a fake sysfs tree with two NUMA nodes (node0: CPUs 0-3, node1: CPUs
4-7), one SR-IOV PF with 4 VFs on NUMA node 1 whose netdevs are real veths in the node
netns, and a macvlan master: a veth in the node netns whose sysfs entry puts it on NUMA
node 0 at 10000 Mb/s. Two networks use them: an SR-IOV one and a macvlan one with a
bandwidth admission on the master. The plugin runs for real (ADD and DEL with CNI_*
variables) in pod namespaces the test makes. The API server is fakenode.FakeApiServer in
the node netns, serving Node "worker-1"; its files live in a temp dir of their own.
"""
import datetime
import json
import os
import re
import shutil
import signal
import subprocess
import tempfile
import time

from cnitest import BIN, NetnsTestCase, main, sh
from fakenode import FakeApiServer, FakeSysfs as NodeSysfs, b64file, k8s_status, make_pki, write_kubeconfig
from fakesysfs import FakeSysfs

MBIT = 1_000_000
PF = "0000:af:00.0"
VFS = ["0000:af:02.0", "0000:af:02.1", "0000:af:02.2", "0000:af:02.3"]
MASTER_PCI = "0000:18:00.0"
RESOURCE = "example.com/sriov_fast"
ANNOTATION = "topocni.io/facts"
OTHER_ANNOTATION = ("example.com/owner", "someone else")   # on the Node before: must stay as it is
UID_SRIOV = "5e1d0c3f-0000-4000-8000-000000000001"
UID_MACVLAN = "5e1d0c3f-0000-4000-8000-000000000002"
UID_LATE = "5e1d0c3f-0000-4000-8000-000000000003"
NODES = "/api/v1/nodes/"


def pod_args(uid):
    return f"IgnoreUnknown=1;K8S_POD_NAMESPACE=default;K8S_POD_NAME=p;K8S_POD_INFRA_CONTAINER_ID=x;K8S_POD_UID={uid}"


# The document's schema, member by member, as placement/node_facts.cc to_json writes
# it. A type is a Python type (str, bool), INT, COUNT, a tuple of choices (None: null),
# [schema] for an array of them, Map(schema) for an object whose values (under any key)
# are of that schema, or a dict for an object that has exactly these members.
INT, COUNT = "int", "count"   # an integer (never a bool); a count: an integer >= 0 or a decimal string


class Map:
    def __init__(self, values):
        self.values = values


SCHEMA = {
    "version": INT, "node": str, "takenAt": str,
    "numaNodes": [{"id": INT, "cpus": str}],
    "pfs": [{"pci": str, "netdev": str, "numaNode": (INT, None), "speedMbps": (INT, None), "resourceName": str,
             "totalVFs": INT, "usageKnown": bool, "configuredVFs": INT, "inUseVFs": INT, "freeVFs": INT,
             "vfs": [str], "vfNumaNodes": Map((INT, None)), "vfsInUse": Map(str)}],
    "links": [{"name": str, "exists": bool, "pci": str, "pf": str, "hasDevice": bool, "numaNode": (INT, None),
               "speedMbps": (INT, None), "linksKind": str, "linkCount": (INT, None), "linkSample": [str]}],
    "ledgers": [{"link": str,
                 "capacity": ({"bps": INT, "overcommit": (INT, float), "source": str, "network": str}, None),
                 "committedEgressBps": INT, "committedIngressBps": INT, "entryCount": INT,
                 "entries": [{"network": str, "containerID": str, "ifname": str, "pod": str, "egressBps": INT,
                              "ingressBps": INT}]}],
    "networks": [{"name": str, "rangeSets": [{"rangeSet": str, "size": COUNT, "used": COUNT, "free": COUNT}]}],
    "attachments": [{"network": str, "kind": str, "link": str, "pods": [str]}],
}
SAMPLE = 4   # placement::kSample: how many entries a ledger and a link's sample list at most


def schema_errors(value, schema, path="(top)"):
    """Every way `value` differs from `schema`: a missing or unknown member, a wrong type."""
    if isinstance(schema, tuple):
        for choice in schema:
            if not schema_errors(value, choice, path):
                return []
        return [f"{path}: {json.dumps(value)[:80]} is none of {schema}"]
    if schema is None:
        return [] if value is None else [f"{path}: expected null"]
    if schema == INT:
        return [] if isinstance(value, int) and not isinstance(value, bool) else [f"{path}: expected an integer"]
    if schema == COUNT:
        ok = (isinstance(value, int) and not isinstance(value, bool) and value >= 0) or \
             (isinstance(value, str) and re.fullmatch(r"[0-9]{1,39}", value))
        return [] if ok else [f"{path}: expected a count"]
    if schema is float:
        return [] if isinstance(value, float) else [f"{path}: expected a number"]
    if schema in (str, bool):
        return [] if isinstance(value, schema) else [f"{path}: expected {schema.__name__}"]
    if isinstance(schema, list):
        if not isinstance(value, list):
            return [f"{path}: expected an array"]
        return [e for i, v in enumerate(value) for e in schema_errors(v, schema[0], f"{path}[{i}]")]
    if not isinstance(value, dict):
        return [f"{path}: expected an object"]
    if isinstance(schema, Map):
        return [e for k, v in value.items() for e in schema_errors(v, schema.values, f"{path}[{k!r}]")]
    errors = [f"{path}.{k}: unknown member" for k in value if k not in schema]
    errors += [f"{path}.{k}: missing" for k in schema if k not in value]
    for k in schema:
        if k in value:
            errors += schema_errors(value[k], schema[k], f"{path}.{k}")
    return errors


def consistency_errors(doc):
    """What the schema cannot say: the counts agree with the lists they count."""
    errors = []
    for i, pf in enumerate(doc["pfs"]):
        listed = set(pf["vfs"])
        if len(listed) != len(pf["vfs"]):
            errors.append(f"pfs[{i}].vfs: a VF listed twice")
        if pf["configuredVFs"] != len(pf["vfs"]) or pf["inUseVFs"] != len(pf["vfsInUse"]) or \
                pf["freeVFs"] != pf["configuredVFs"] - pf["inUseVFs"]:
            errors.append(f"pfs[{i}]: counts do not match vfs and vfsInUse")
        if not set(pf["vfNumaNodes"]) <= listed or not set(pf["vfsInUse"]) <= listed:
            errors.append(f"pfs[{i}]: vfNumaNodes or vfsInUse name a VF not in vfs")
    for i, l in enumerate(doc["links"]):
        if len(l["linkSample"]) > SAMPLE or (l["linkCount"] is not None and len(l["linkSample"]) > l["linkCount"]):
            errors.append(f"links[{i}].linkSample: longer than linkCount or {SAMPLE}")
    for i, l in enumerate(doc["ledgers"]):
        if len(l["entries"]) != min(l["entryCount"], SAMPLE):
            errors.append(f"ledgers[{i}].entries: not the first min(entryCount, {SAMPLE})")
    for i, n in enumerate(doc["networks"]):
        for k, r in enumerate(n["rangeSets"]):
            if int(r["free"]) != max(int(r["size"]) - int(r["used"]), 0):
                errors.append(f"networks[{i}].rangeSets[{k}].free: not size - used")
    return errors


def epoch(taken_at):
    """Seconds since the epoch of a takenAt ("2026-12-07T02:51:00Z")."""
    return datetime.datetime.strptime(taken_at, "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=datetime.timezone.utc).timestamp()


def without_taken_at(doc):
    return {k: v for k, v in doc.items() if k != "takenAt"}


class FactsCase(NetnsTestCase):
    def setUp(self):
        super().setUp()
        self.servers, self.publishers = [], []
        self.fixture = tempfile.mkdtemp(prefix="topocni-pub-")
        try:
            self.make_node()
        except BaseException:
            self.tearDown()   # unittest skips tearDown when setUp fails; the namespaces must go
            raise

    def tearDown(self):
        try:
            for p in self.publishers:
                if p.poll() is None:   # a failed test left it running: only this process, by its pid
                    p.kill()
                    p.wait()
            for api in self.servers:
                api.stop()
        finally:
            super().tearDown()
            shutil.rmtree(self.fixture, ignore_errors=True)

    def make_node(self):
        self.pf = f"tf{self.tag}"[:15]
        self.vf_netdevs = [f"tv{self.tag}{i}"[:15] for i in range(len(VFS))]
        self.master = f"tm{self.tag}"[:15]
        for name in (self.pf, *self.vf_netdevs, self.master):
            sh("ip", "link", "add", name, "type", "veth", "peer", "name", "p" + name[1:], ns=self.node)
        sh("ip", "link", "set", self.master, "up", ns=self.node)
        self.sysfs = os.path.join(self.tmp, "sys")
        fake = FakeSysfs(self.sysfs)
        fake.add_pf(PF, self.pf, totalvfs=8, numa_node=1)
        for i, (vf, netdev) in enumerate(zip(VFS, self.vf_netdevs)):
            fake.add_vf(PF, i, vf, netdev, numa_node=0 if i == 3 else 1)
        fake.add_device(MASTER_PCI, self.master, driver="ice", numa_node=0)
        node = NodeSysfs(self.sysfs)
        node.numa_node(0, "0-3")
        node.numa_node(1, "4-7")
        node.write(f"class/net/{self.pf}/speed", "25000\n")
        node.write(f"class/net/{self.master}/speed", "10000\n")
        # kubelet's device manager checkpoint: the SR-IOV device plugin's pool of the VFs.
        self.kubelet = os.path.join(self.tmp, "kubelet")
        os.makedirs(os.path.join(self.kubelet, "device-plugins"))
        with open(os.path.join(self.kubelet, "device-plugins", "kubelet_internal_checkpoint"), "w") as f:
            json.dump({"Data": {"PodDeviceEntries": None, "RegisteredDevices": {RESOURCE: VFS}}, "Checksum": 1}, f)
        self.pki = make_pki(os.path.join(self.fixture, "pki"))

    # --- the two networks ---
    def sriov_conf(self, vf):
        return self.conf(name=f"sr{self.tag}", attachment="sriov", deviceID=vf, sysfsRoot=self.sysfs,
                         subnet="10.77.0.0/28")

    def macvlan_conf(self):
        return self.conf(name=f"mv{self.tag}", attachment="macvlan", master=self.master, sysfsRoot=self.sysfs,
                         subnet="10.78.0.0/29", bandwidth={"egressRate": 30 * MBIT, "egressBurst": MBIT},
                         topology={"linkCapacityMbps": 100})

    def add(self, conf, uid, cid, ifname="net1"):
        pod, path = self.make_pod()
        out = self.run_plugin("ADD", conf, container_id=cid, netns=path, ifname=ifname, args=pod_args(uid))
        self.assertOk(out)
        return pod, path

    def delete(self, conf, uid, cid, path, ifname="net1"):
        self.assertOk(self.run_plugin("DEL", conf, container_id=cid, netns=path, ifname=ifname, args=pod_args(uid)))

    def add_both(self):
        """A VF attachment (VFS[1]) and a macvlan attachment with 30 Mb/s egress admitted."""
        self.sriov_pod = self.add(self.sriov_conf(VFS[1]), UID_SRIOV, "s1")
        self.macvlan_pod = self.add(self.macvlan_conf(), UID_MACVLAN, "m1", ifname="eth1")

    # --- node-report ---
    def report_args(self):
        return ["--sysfs-root", self.sysfs, "--state-dir", self.state_dir, "--kubelet-root-dir", self.kubelet,
                "--node", "worker-1"]

    def facts(self):
        p = subprocess.run(["nsenter", f"--net=/run/netns/{self.node}", BIN, "node-report", "--format", "facts",
                            *self.report_args()], capture_output=True, text=True, timeout=60)
        self.assertEqual(p.returncode, 0, p)
        return json.loads(p.stdout)

    # --- the API and the publisher ---
    def start_api(self, annotations=None, **kw):
        """The API server with Node worker-1 carrying `annotations` (default: another
        component's); self.kubeconfig reaches it."""
        d = os.path.join(self.fixture, f"api{len(self.servers)}")
        os.makedirs(d)
        annotations = dict([OTHER_ANNOTATION]) if annotations is None else annotations
        api = FakeApiServer(self.node, self.pki, {"worker-1": {"kubernetes.io/hostname": "worker-1"}}, d,
                            annotations={"worker-1": annotations}, **kw)
        self.servers.append(api)
        self.api = api
        self.kubeconfig = write_kubeconfig(os.path.join(self.fixture, "kubeconfig"), api.url(),
                                           ca_data=b64file(f"{self.pki}/ca.crt"),
                                           cert_data=b64file(f"{self.pki}/client.crt"),
                                           key_data=b64file(f"{self.pki}/client.key"), user="topocni-node")
        return api

    def start_publisher(self, *extra, interval=1):
        """`node-report --publish` in the background inside the node netns (nsenter execs it:
        the pid is topocni's); its log (stderr) goes to a file of the fixture."""
        log = os.path.join(self.fixture, f"publisher{len(self.publishers)}.log")
        with open(log, "w") as f:
            p = subprocess.Popen(["nsenter", f"--net=/run/netns/{self.node}", BIN, "node-report", "--publish",
                                  "--kubeconfig", self.kubeconfig, "--interval", str(interval), *self.report_args(),
                                  *extra],
                                 stdout=f, stderr=subprocess.STDOUT)
        p.log = log
        self.publishers.append(p)
        return p

    def stop_publisher(self, p):
        """SIGTERM by pid; it must exit 0 within 2 s."""
        self.assertIsNone(p.poll(), f"the publisher exited on its own ({p.returncode}): {self.log_of(p)}")
        start = time.monotonic()
        p.send_signal(signal.SIGTERM)
        try:
            rc = p.wait(timeout=5)
        except subprocess.TimeoutExpired:
            self.fail(f"the publisher did not stop within 5 s of SIGTERM: {self.log_of(p)}")
        self.assertEqual(rc, 0, self.log_of(p))
        self.assertLess(time.monotonic() - start, 2.0, "the publisher took over 2 s to stop")

    @staticmethod
    def log_of(p):
        with open(p.log) as f:
            return f.read()

    def published(self):
        """The annotation's document as the Node carries it now, or None."""
        text = self.api.annotations("worker-1").get(ANNOTATION)
        return json.loads(text) if text is not None else None

    def assertValidDocument(self, doc):
        self.assertEqual(schema_errors(doc, SCHEMA), [])
        self.assertEqual(consistency_errors(doc), [])

    def wait_for(self, what, condition, seconds):
        end = time.monotonic() + seconds
        while True:
            value = condition()
            if value:
                return value
            if time.monotonic() > end:
                self.fail(f"{what}: not within {seconds} s")
            time.sleep(0.05)

    def wait_published_change(self, before, seconds, what, until=None):
        """Waits until the annotation's content (takenAt aside) is not `before` (and, with
        `until`, is what it says); returns it. An ADD writes its SR-IOV record and then its
        attachment record: on a busy machine the publisher may read between the two and
        publish the VF in use before the pod holding it, then the whole a moment later."""
        def changed():
            doc = self.published()
            return doc if doc and without_taken_at(doc) != before and (until is None or until(doc)) else None

        start = time.monotonic()
        doc = self.wait_for(what, changed, seconds)
        return doc, time.monotonic() - start


class FactsDocument(FactsCase):
    def test_format_facts_passes_a_strict_schema_check_and_every_number_matches_the_node(self):
        self.add_both()
        doc = self.facts()
        self.assertValidDocument(doc)
        self.assertEqual((doc["version"], doc["node"]), (1, "worker-1"))
        taken = datetime.datetime.strptime(doc["takenAt"], "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=datetime.timezone.utc)
        self.assertLess(abs((datetime.datetime.now(datetime.timezone.utc) - taken).total_seconds()), 60)
        self.assertEqual(doc["numaNodes"], [{"id": 0, "cpus": "0-3"}, {"id": 1, "cpus": "4-7"}])

        # The PF: 8 VFs possible, 4 configured, VFS[1] in use by the SR-IOV pod, 3 free. The
        # VFs are on the PF's NUMA node but VFS[3] (node 0): only that one is listed apart.
        self.assertEqual([p["pci"] for p in doc["pfs"]], [PF])
        self.assertEqual(doc["pfs"][0], {
            "pci": PF, "netdev": self.pf, "numaNode": 1, "speedMbps": 25000, "resourceName": RESOURCE,
            "totalVFs": 8, "usageKnown": True, "configuredVFs": 4, "inUseVFs": 1, "freeVFs": 3, "vfs": VFS,
            "vfNumaNodes": {VFS[3]: 0}, "vfsInUse": {VFS[1]: UID_SRIOV}})

        # Links: the PF's netdev and the master, each physical; the master carries one
        # macvlan, inside the macvlan pod.
        links = {l["name"]: l for l in doc["links"]}
        self.assertEqual(set(links), {self.pf, self.master})
        self.assertEqual(links[self.master], {
            "name": self.master, "exists": True, "pci": MASTER_PCI, "pf": "", "hasDevice": True, "numaNode": 0,
            "speedMbps": 10000, "linksKind": "macvlan", "linkCount": 1,
            "linkSample": [f"{self.macvlan_pod[1]}:eth1"]})
        self.assertEqual((links[self.pf]["pci"], links[self.pf]["pf"], links[self.pf]["numaNode"],
                          links[self.pf]["speedMbps"], links[self.pf]["linkCount"], links[self.pf]["linkSample"]),
                         (PF, PF, 1, 25000, 0, []))

        # The ledger of the master: 30 Mb/s egress committed against 100 Mb/s.
        mv, sr = self.macvlan_conf()["name"], self.sriov_conf(VFS[1])["name"]
        self.assertEqual(doc["ledgers"], [{
            "link": self.master, "capacity": {"bps": 100 * MBIT, "overcommit": 1, "source": "topology.linkCapacityMbps",
                                              "network": mv},
            "committedEgressBps": 30 * MBIT, "committedIngressBps": 0, "entryCount": 1,
            "entries": [{"network": mv, "containerID": "m1", "ifname": "eth1", "pod": "default/p", "egressBps": 30 * MBIT,
                         "ingressBps": 0}]}])

        # The pools: one address used of each (the gateway .1 is never handed out).
        self.assertEqual(sorted(doc["networks"], key=lambda n: n["name"]), sorted([
            {"name": sr, "rangeSets": [{"rangeSet": "10.77.0.1-10.77.0.14", "size": 13, "used": 1, "free": 12}]},
            {"name": mv, "rangeSets": [{"rangeSet": "10.78.0.1-10.78.0.6", "size": 5, "used": 1, "free": 4}]}],
            key=lambda n: n["name"]))
        # An SR-IOV attachment's link is its PF.
        self.assertEqual(sorted(doc["attachments"], key=lambda a: a["network"]), sorted([
            {"network": sr, "kind": "sriov", "link": PF, "pods": [UID_SRIOV]},
            {"network": mv, "kind": "macvlan", "link": self.master, "pods": [UID_MACVLAN]}],
            key=lambda a: a["network"]))

        # After both DELs: nothing in use, nothing committed, no attachment.
        self.delete(self.sriov_conf(VFS[1]), UID_SRIOV, "s1", self.sriov_pod[1])
        self.delete(self.macvlan_conf(), UID_MACVLAN, "m1", self.macvlan_pod[1], ifname="eth1")
        doc = self.facts()
        self.assertValidDocument(doc)
        self.assertEqual((doc["pfs"][0]["inUseVFs"], doc["pfs"][0]["freeVFs"], doc["pfs"][0]["vfsInUse"]), (0, 4, {}))
        self.assertEqual([(l["linkCount"], l["linkSample"]) for l in doc["links"] if l["name"] == self.master],
                         [(0, [])])
        self.assertEqual([(l["committedEgressBps"], l["entryCount"], l["entries"]) for l in doc["ledgers"]],
                         [(0, 0, [])])
        self.assertEqual(doc["attachments"], [])


class Publish(FactsCase):
    def test_the_publisher_writes_the_annotation_with_a_merge_patch_that_touches_nothing_else(self):
        self.add_both()
        api = self.start_api()
        p = self.start_publisher()
        doc = self.wait_for("the annotation", self.published, 10)
        patches = api.patches()
        self.assertEqual(len(patches), 1, patches)
        self.assertEqual(patches[0]["path"], NODES + "worker-1")
        self.assertEqual(patches[0]["contentType"], "application/merge-patch+json")
        self.assertEqual((patches[0]["status"], patches[0]["auth"]), (200, "cert"))
        body = json.loads(patches[0]["body"])
        self.assertEqual(list(body), ["metadata"])
        self.assertEqual(list(body["metadata"]), ["annotations"])
        self.assertEqual(list(body["metadata"]["annotations"]), [ANNOTATION])
        self.assertIsInstance(body["metadata"]["annotations"][ANNOTATION], str)
        # Another component's annotation and the labels are as they were.
        node = api.node("worker-1")
        self.assertEqual(node["metadata"]["annotations"][OTHER_ANNOTATION[0]], OTHER_ANNOTATION[1])
        self.assertEqual(node["metadata"]["labels"], {"kubernetes.io/hostname": "worker-1"})
        # The annotation is the document --format facts prints, but for when it was taken.
        self.assertValidDocument(doc)
        self.assertEqual(without_taken_at(doc), without_taken_at(self.facts()))
        self.assertEqual(doc["pfs"][0]["inUseVFs"], 1)
        self.stop_publisher(p)
        self.assertIn("published facts of node 'worker-1'", self.log_of(p))

    def test_an_add_and_then_a_del_each_change_the_published_annotation_within_2_seconds(self):
        # The state directory exists, as the DaemonSet's hostPath (DirectoryOrCreate) makes it;
        # an interval of a minute: only the publisher's inotify can be this quick.
        os.makedirs(self.state_dir)
        api = self.start_api()
        p = self.start_publisher(interval=60)
        first = without_taken_at(self.wait_for("the first annotation", self.published, 10))
        self.assertEqual(first["attachments"], [])
        pod, path = self.add(self.sriov_conf(VFS[2]), UID_LATE, "late")
        doc, _ = self.wait_published_change(first, 2, "the annotation after ADD",
                                            until=lambda d: d["pfs"][0]["vfsInUse"] == {VFS[2]: UID_LATE} and d["attachments"])
        self.assertEqual(doc["pfs"][0]["vfsInUse"], {VFS[2]: UID_LATE})
        self.assertEqual([(a["kind"], a["pods"]) for a in doc["attachments"]], [("sriov", [UID_LATE])])
        after_add = without_taken_at(doc)
        self.delete(self.sriov_conf(VFS[2]), UID_LATE, "late", path)
        doc, _ = self.wait_published_change(after_add, 2, "the annotation after DEL",
                                            until=lambda d: not d["attachments"] and not d["pfs"][0]["vfsInUse"])
        self.assertEqual(doc["attachments"], [])
        self.assertEqual(doc["pfs"][0]["inUseVFs"], 0)
        # Every PATCH carried facts that differ from the ones before it.
        sent = [without_taken_at(json.loads(json.loads(r["body"])["metadata"]["annotations"][ANNOTATION]))
                for r in api.patches()]
        self.assertGreaterEqual(len(sent), 3)
        self.assertTrue(all(a != b for a, b in zip(sent, sent[1:])), "a PATCH repeated the facts before it")
        self.stop_publisher(p)

    def test_a_publisher_started_before_the_state_directory_exists_publishes_the_first_add_within_2_seconds(self):
        self.assertFalse(os.path.exists(self.state_dir))
        self.start_api()
        p = self.start_publisher(interval=60)
        first = without_taken_at(self.wait_for("the first annotation", self.published, 10))
        self.add(self.sriov_conf(VFS[2]), UID_LATE, "late")
        doc, _ = self.wait_published_change(first, 2, "the annotation after the first ADD on this node",
                                            until=lambda d: d["pfs"][0]["vfsInUse"] == {VFS[2]: UID_LATE})
        self.assertEqual(doc["pfs"][0]["vfsInUse"], {VFS[2]: UID_LATE})
        self.stop_publisher(p)

    def test_unchanged_facts_are_sent_again_after_the_heartbeat(self):
        api = self.start_api()
        p = self.start_publisher("--heartbeat", "10")
        first = self.wait_for("the annotation", self.published, 10)
        second = self.wait_for("the heartbeat PATCH", lambda: len(api.patches()) >= 2 and self.published(), 15)
        patches = api.patches()
        self.assertEqual(len(patches), 2)
        # The heartbeat is counted from the takenAt on the Node (the README): due 10 s after
        # it, not after the first PATCH, which a slow first read and connection (2 s under
        # the sanitizers) puts later.
        since = patches[1]["at"] - epoch(first["takenAt"])
        self.assertGreater(since, 9.95)
        self.assertLess(since, 13)
        self.assertEqual(without_taken_at(second), without_taken_at(first))
        self.assertGreater(second["takenAt"], first["takenAt"])
        self.stop_publisher(p)
        self.assertIn("unchanged, heartbeat", self.log_of(p))

    def test_a_heartbeat_shorter_than_the_interval_is_sent_on_time_not_at_the_next_interval(self):
        api = self.start_api()
        p = self.start_publisher("--heartbeat", "10", interval=60)
        first = self.wait_for("the annotation", self.published, 10)
        self.wait_for("the heartbeat PATCH", lambda: len(api.patches()) >= 2, 15)
        patches = api.patches()
        # Due 10 s after the takenAt on the Node, not after --interval's 60.
        since = patches[1]["at"] - epoch(first["takenAt"])
        self.assertGreater(since, 9.95)
        self.assertLess(since, 13)
        self.stop_publisher(p)
        self.assertIn("unchanged, heartbeat", self.log_of(p))

    def test_with_nothing_changed_no_patch_is_sent_and_a_restarted_publisher_sends_none(self):
        self.add_both()
        api = self.start_api()
        p = self.start_publisher()
        self.wait_for("the annotation", self.published, 10)
        time.sleep(5)   # --interval 1: five reads of unchanged facts
        self.assertEqual(len(api.patches()), 1, [json.loads(r["body"]) for r in api.patches()])
        self.stop_publisher(p)
        requests_before = len(api.requests())
        p = self.start_publisher()
        self.wait_for("the restarted publisher's GET of its Node",
                      lambda: any(r["method"] == "GET" and r["path"] == NODES + "worker-1"
                                  for r in api.requests()[requests_before:]), 5)
        time.sleep(2.5)
        self.assertEqual(len(api.patches()), 1, "the restarted publisher sent a PATCH with nothing changed")
        self.stop_publisher(p)

    def test_an_annotation_that_is_no_facts_document_is_replaced(self):
        for broken in ("not JSON", json.dumps({"version": 2}), ""):
            with self.subTest(annotation=broken):
                api = self.start_api(annotations={ANNOTATION: broken})
                p = self.start_publisher()
                doc = self.wait_for("the annotation replaced", lambda: api.annotations("worker-1").get(
                    ANNOTATION) != broken and self.published(), 5)
                self.assertValidDocument(doc)
                self.assertEqual(len(api.patches()), 1)
                self.stop_publisher(p)

    def test_once_exits_0_when_the_node_carries_the_facts_and_1_when_it_cannot(self):
        api = self.start_api(overrides=[{"path": NODES + "worker-1", "method": "PATCH", "status": 403,
                                         "body": k8s_status(403, "forbidden", "Forbidden")}])
        p = self.start_publisher("--once")
        self.assertEqual(p.wait(timeout=10), 1, self.log_of(p))
        self.assertIn("HTTP 403", self.log_of(p))
        self.assertIsNone(self.published())
        api.set_overrides([])
        for run in ("publishes", "finds the facts there"):
            with self.subTest(run):
                p = self.start_publisher("--once")
                self.assertEqual(p.wait(timeout=10), 0, self.log_of(p))
                self.assertValidDocument(self.published())
        self.assertEqual([r["status"] for r in api.patches()], [403, 200])

    def test_a_403_on_patch_is_logged_and_retried_until_the_annotation_arrives(self):
        api = self.start_api(overrides=[{"path": NODES + "worker-1", "method": "PATCH", "status": 403,
                                         "body": k8s_status(403, 'nodes "worker-1" is forbidden: User '
                                                                 '"system:node:worker-1" cannot patch resource '
                                                                 '"nodes"', "Forbidden")}])
        p = self.start_publisher()
        self.wait_for("two refused PATCHes", lambda: len(api.patches()) >= 2, 8)
        self.assertIsNone(self.published())
        self.assertIsNone(p.poll(), "the publisher exited on a 403")
        api.set_overrides([])
        doc = self.wait_for("the annotation once PATCH is allowed", self.published, 8)
        self.assertValidDocument(doc)
        log = self.log_of(p)
        self.assertIn("publishing facts of node 'worker-1' failed (attempt 1, HTTP 403)", log)
        self.assertIn("not allowed to patch node 'worker-1'", log)
        self.assertIn("examples/rbac.yaml", log)
        # Each attempt asks again what the Node carries (GET, then PATCH), on a new connection.
        reqs = [r for r in api.requests() if r["path"] == NODES + "worker-1"]
        self.assertEqual([r["method"] for r in reqs], ["GET", "PATCH"] * (len(reqs) // 2))
        self.assertEqual([r["status"] for r in reqs if r["method"] == "PATCH"][-1], 200)
        self.assertEqual(len(api.peers(reqs)), len(reqs) // 2)
        self.assertEqual([api.peers([reqs[i]]) for i in range(0, len(reqs), 2)],
                         [api.peers([reqs[i + 1]]) for i in range(0, len(reqs), 2)])
        self.stop_publisher(p)

    def test_a_node_not_registered_yet_gets_its_annotation_once_it_is(self):
        api = self.start_api()
        api.set_nodes({})
        p = self.start_publisher()
        self.wait_for("a 404 on the Node", lambda: any(r["status"] == 404 for r in api.requests()), 5)
        time.sleep(1)
        self.assertIsNone(p.poll(), "the publisher exited on a 404")
        self.assertIn("not found", self.log_of(p))
        api.set_nodes({"worker-1": {"kubernetes.io/hostname": "worker-1"}})
        doc = self.wait_for("the annotation once the Node exists", self.published, 8)
        self.assertValidDocument(doc)
        self.stop_publisher(p)

    def test_sigterm_during_a_patch_that_gets_no_answer_ends_the_publisher_within_the_api_timeout(self):
        api = self.start_api(overrides=[{"path": NODES + "worker-1", "method": "PATCH", "hang": 30}])
        p = self.start_publisher("--api-timeout", "1")
        self.wait_for("the PATCH", api.patches, 5)
        self.stop_publisher(p)   # exits 0 within 2 s

    def test_a_dropped_connection_is_logged_and_survived(self):
        # Two PATCHes in a row lose their connection: the one on the kept connection, and the
        # one the client sends again at once on a new connection. Then one gets through.
        api = self.start_api(overrides=[{"path": NODES + "worker-1", "method": "PATCH", "drop": 2}])
        p = self.start_publisher()
        doc = self.wait_for("the annotation after two dropped connections", self.published, 10)
        self.assertValidDocument(doc)
        patches = api.patches()
        self.assertEqual([r["status"] for r in patches], [None, None, 200])
        self.assertEqual(len(api.peers(patches)), 3, "each PATCH after a drop goes on a new connection")
        self.assertIn("closed the connection", self.log_of(p))
        self.assertIsNone(p.poll(), "the publisher exited on a dropped connection")
        self.stop_publisher(p)


if __name__ == "__main__":
    main()
