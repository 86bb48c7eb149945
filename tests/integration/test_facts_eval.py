"""One evaluation, two callers: a network's constraints judged on this node's published
facts document (`explain --facts` on `node-report --format facts`, what the scheduler side
reads) give the verdicts ADD gives on the same node, in the same words.

The node is test_placement's fake node (two NUMA nodes, two SR-IOV PFs with VFs, two
macvlan masters that are real veths) with some of it already in use: a macvlan on the
first master, a VF of the first PF held by a state record, reservations in a small pool
and bandwidth committed on the first master. A table of configs covers every constraint
kind, each passing and failing, on each device kind, and each row states by itself which
constraints must fail on this node (none: it must pass), from the node's make-up and the
README's rules, not from any evaluation. For each: the document is taken, both explains run
(live and on the document) and must print the same lines, failing exactly the row's
constraints, then the ADD runs: refused (code 100) exactly when the row must fail, naming
those constraints, with explain's evidence as `details`, word for word; an admitted ADD is
deleted again, so every row sees the same node. The extender judges the same rows against
the same expectations.
"""
import http.client
import json
import os
import re
import subprocess
import time

from cnitest import BIN, main
from test_placement import PF0, PF1, POD0, POD1, VF0, VF0B, VF0C, VF1, PlacementCase, pod_args

UNPLACED = "e4d9c3f4-0000-4000-8000-00000000000e"   # a pod cpu_manager_state has no entry for


class OneEvaluation(PlacementCase):
    def make_node(self):
        super().make_node()
        # What a real PF has in sysfs: the VF counts node-report reads.
        for pf, n in ((PF0, 3), (PF1, 1)):
            self.sys.write(f"bus/pci/devices/{pf}/sriov_totalvfs", "8\n")
            self.sys.write(f"bus/pci/devices/{pf}/sriov_numvfs", f"{n}\n")
        os.makedirs(os.path.join(self.state_dir, "sriov"))
        with open(os.path.join(self.state_dir, "sriov", f"{VF0C}.json"), "w") as f:
            json.dump({"pciAddress": VF0C, "pfPciAddress": PF0, "pf": "ens1f0", "owner": {"containerID": "held"}}, f)

    def cli(self, *args):
        return subprocess.run(["nsenter", f"--net=/run/netns/{self.node}", BIN, *args], capture_output=True, text=True,
                              timeout=60)

    def facts(self):
        p = self.cli("node-report", "--format", "facts", "--sysfs-root", self.sys.root, "--state-dir", self.state_dir,
                     "--kubelet-root-dir", self.kubelet, "--node", "worker-1")
        self.assertEqual(p.returncode, 0, p.stderr)
        path = os.path.join(self.outside_dir(), "facts.json")
        with open(path, "w") as f:
            f.write(p.stdout)
        return path

    def explain(self, conf, uid, facts=None):
        path = os.path.join(self.outside_dir(), "conf.json")
        with open(path, "w") as f:
            json.dump(conf, f)
        args = ["explain", "--config", path, "--pod-uid", uid] + (["--facts", facts] if facts else [])
        p = self.cli(*args)
        self.assertIn(p.returncode, (0, 1), p.stdout + p.stderr)
        return p.stdout.splitlines()[1:-1]   # the verdicts, without the header and the tally

    def vconf(self, device, **extra):
        c = {"cniVersion": "1.0.0", "name": f"sv{self.tag}", "type": "topocni", "stateDir": self.state_dir,
             "sysfsRoot": self.sys.root, "kubeletRootDir": self.kubelet, "deviceID": device,
             "nodeName": "worker-1", "nodeLabelsFile": self.labels,
             "delegate": {"type": "ptp", "ipam": {"type": "host-local", "subnet": "10.81.0.0/24",
                                                  "dataDir": self.data_dir}}}
        c.update(extra)
        return c

    def small(self, **extra):
        """A macvlan config drawing from 10.79.0.0/29: 5 addresses (occupy reserves 2)."""
        c = self.pconf(**extra)
        c["ipam"]["ranges"] = [[{"subnet": "10.79.0.0/29"}]]
        return c

    # The constraint names a row must fail, by the node's facts and the README's rules; () passes.
    NUMA = ("topology.numaPolicy",)
    SPEED = ("topology.minLinkSpeedMbps",)

    def rows(self):
        """(what, config, pod UID, the constraints that must fail). What the node holds once
        occupy() ran: master0 (NUMA 0, 25 Gb/s) with one macvlan and 4 of its 5 Gb/s committed,
        master1 (NUMA 1, 10 Gb/s) with two macvlans drawing 2 of the small pool's 5 addresses,
        PF0 (NUMA 0, 25 Gb/s) with VF0C held, PF1 (NUMA 1, 10 Gb/s); POD0's CPUs on NUMA 0,
        POD1's on NUMA 1, UNPLACED has none; labels zone=a, cores=16."""
        m0, m1 = self.master0, self.master1
        yield "selector matches", self.pconf(nodeSelector={"example.com/zone": "a"}), POD0, ()
        yield "selector fails", self.pconf(nodeSelector={"matchExpressions": [
            {"key": "example.com/cores", "operator": "Lt", "values": ["8"]},
            {"key": "example.com/zone", "operator": "NotIn", "values": ["a"]}]}), POD0, ("nodeSelector",)
        for policy in ("single-numa-node", "restricted", "best-effort"):
            # POD0's CPUs are on NUMA 0: a device on NUMA 1 breaks every policy but best-effort
            # (a warning); a pod without exclusive CPUs is unknown, and unknownTopology allows it.
            across = () if policy == "best-effort" else self.NUMA
            for master, uid, fails in ((m0, POD0, ()), (m1, POD0, across), (m0, UNPLACED, ())):
                yield f"macvlan numaPolicy {policy} on {master}", self.pconf(
                    master=master, topology={"numaPolicy": policy}), uid, fails
            for vf, fails in ((VF0, ()), (VF1, across)):
                yield f"VF numaPolicy {policy} on {vf}", self.vconf(vf, topology={"numaPolicy": policy}), POD0, fails
        for n in (0, 1):   # master1 and VF1 are on NUMA node 1
            fails = ("topology.numaNode",) if n == 0 else ()
            yield f"macvlan numaNode {n}", self.pconf(master=m1, topology={"numaNode": n}), POD1, fails
            yield f"VF numaNode {n}", self.vconf(VF1, topology={"numaNode": n}), POD1, fails
        for speed in (10000, 25000):   # master1 and PF1 run at 10 Gb/s
            fails = self.SPEED if speed > 10000 else ()
            yield f"macvlan speed {speed}", self.pconf(master=m1, topology={"minLinkSpeedMbps": speed}), POD0, fails
            yield f"VF speed {speed}", self.vconf(VF1, topology={"minLinkSpeedMbps": speed}), POD0, fails
        for n in (1, 2):   # fewer than n already: master0 has one macvlan, PF0 one VF in use
            fails = ("topology.maxAttachmentsPerMaster",) if n == 1 else ()
            yield f"macvlan attachments {n}", self.pconf(topology={"maxAttachmentsPerMaster": n}), POD0, fails
            yield f"VF attachments {n}", self.vconf(VF0, topology={"maxAttachmentsPerMaster": n}), POD0, fails
        for n in (1, 3):   # 3 of 5 free, 2 after this pod's
            fails = ("topology.minFreeAddresses",) if n == 3 else ()
            yield f"free addresses {n}", self.small(topology={"minFreeAddresses": n}), POD0, fails
        for rate in (1_000_000_000, 5_000_000_000):   # 4 of 5 Gb/s committed on master0
            fails = ("bandwidth",) if rate > 1_000_000_000 else ()
            yield f"bandwidth {rate}", self.pconf(bandwidth={"egressRate": rate, "ingressRate": rate // 10},
                                                  topology={"linkCapacityMbps": 5000}), POD0, fails
        for unknown in ("allow", "deny"):   # a veth has no device: its NUMA node and speed are unknown
            fails = ("topology.numaNode",) + self.SPEED if unknown == "deny" else ()
            yield f"veth unknown topology {unknown}", self.conf(
                sysfsRoot=self.sys.root, kubeletRootDir=self.kubelet,
                topology={"numaNode": 0, "minLinkSpeedMbps": 1, "unknownTopology": unknown}), POD0, fails
        # master1 (NUMA 1, 10 Gb/s, two macvlans) for POD0 (NUMA 0) on a zone=a node: the rates
        # and the attachments fit, nothing else does.
        yield "everything at once", self.pconf(master=m1, nodeSelector={"example.com/zone": "b"},
                                               bandwidth={"egressRate": 1_000_000},
                                               topology={"numaPolicy": "single-numa-node", "numaNode": 0,
                                                         "minLinkSpeedMbps": 25000, "maxAttachmentsPerMaster": 5}), \
            POD0, ("nodeSelector", "topology.numaPolicy", "topology.numaNode", "topology.minLinkSpeedMbps")

    def occupy(self):
        """What is in use before the table: a macvlan on master0 with 4 Gb/s committed, and
        two reservations in the small pool."""
        pod, path = self.make_pod()
        busy = self.pconf(bandwidth={"egressRate": 4_000_000_000, "ingressRate": 100_000_000},
                          topology={"linkCapacityMbps": 5000})
        self.assertOk(self.run_plugin("ADD", busy, container_id="busy", netns=path, args=pod_args(POD0)))
        small = self.small(master=self.master1)
        for i in range(2):
            pod, path = self.make_pod()
            self.assertOk(self.run_plugin("ADD", small, container_id=f"small{i}", netns=path, args=pod_args(POD0)))

    def test_the_published_facts_give_adds_verdict_in_adds_words_for_every_constraint_kind(self):
        self.occupy()
        failing, passing = set(), set()
        for what, conf, uid, expected in self.rows():
            with self.subTest(row=what):
                facts = self.facts()
                live = self.explain(conf, uid)
                published = self.explain(conf, uid, facts)
                self.assertTrue(live, f"{what}: explain printed no verdict")
                self.assertEqual(published, live, f"{what}: the document and the live node disagree")
                failed = [l[len("FAIL  "):] for l in published if l.startswith("FAIL  ")]
                self.assertEqual(sorted(l.split(":", 1)[0] for l in failed), sorted(expected),
                                 f"{what}: explain's failing constraints")
                pod, path = self.make_pod()
                out = self.run_plugin("ADD", conf, container_id="row", netns=path, args=pod_args(uid))
                if expected:
                    self.assertError(out, 100)
                    self.assertEqual(sorted(out.json["msg"].split(": ", 1)[1].split(", ")), sorted(expected),
                                     f"{what}: the constraints ADD names")
                    self.assertEqual(out.json["details"], " | ".join(failed), f"{what}: ADD's evidence")
                    failing.update(expected)
                else:
                    self.assertOk(out)
                    self.assertOk(self.run_plugin("DEL", conf, container_id="row", netns=path, args=pod_args(uid)))
                passing.update(l.split(":", 1)[0][6:] for l in published if not l.startswith("FAIL"))
        # Every constraint kind was compared failing and passing.
        for kind in ("nodeSelector", "topology.numaPolicy", "topology.numaNode", "topology.minLinkSpeedMbps",
                     "topology.maxAttachmentsPerMaster", "topology.minFreeAddresses", "bandwidth"):
            self.assertIn(kind, failing)
            self.assertIn(kind, passing)

    def test_the_scheduler_extender_on_the_published_facts_gives_adds_verdict_in_adds_words(self):
        """The other caller: every row's NAD judged by `topocni scheduler-extender` on the
        node's published facts (a Node object carrying them) refuses the node exactly when ADD
        refuses the pod, naming the same constraints with the same evidence. The device is
        the one ADD gets: the NAD's resource is its VF's PF (kubelet's checkpoint says so),
        whose first free VF is the row's. Two things differ by design and are left out: the
        labels' source in nodeSelector's evidence (the Node object, not the file), and
        numaPolicy, which the scheduler side judges as the Topology Manager will make it
        hold (the pod's CPUs are placed with the device at admission, after scheduling)."""
        from fakenode import NAD_PATH, ClusterApi, free_port, write_kubeconfig
        from test_extender import nad
        self.occupy()
        os.makedirs(os.path.join(self.kubelet, "device-plugins"))
        with open(os.path.join(self.kubelet, "device-plugins", "kubelet_internal_checkpoint"), "w") as f:
            json.dump({"Data": {"PodDeviceEntries": [], "RegisteredDevices": {
                "intel.com/pf0": [VF0, VF0B, VF0C], "intel.com/pf1": [VF1]}}, "Checksum": 1}, f)
        labels = {"example.com/zone": "a", "example.com/cores": "16", "feature.node.kubernetes.io/sriov-capable": "true"}
        rows = [r for r in self.rows() if "numaPolicy" not in json.dumps(r[1])]
        nads = []
        for i, (what, conf, uid, _) in enumerate(rows):
            resource = {VF0: "intel.com/pf0", VF1: "intel.com/pf1"}.get(conf.get("deviceID"))
            c = {k: v for k, v in conf.items() if k != "deviceID"}   # Multus adds it at ADD
            nads.append(nad(f"row-{i}", c, resource))
        api = ClusterApi(self.pki(), token="t")
        self.addCleanup(api.stop)
        api.replace(nads=nads)
        kc = os.path.join(self.outside_dir(), "ext.kubeconfig")
        write_kubeconfig(kc, api.url(), ca_file=os.path.join(self.pki(), "ca.crt"), token="t")
        port = free_port()
        log = os.path.join(self.outside_dir(), "extender.log")
        with open(log, "w") as err:
            ext = subprocess.Popen([BIN, "scheduler-extender", "--listen", f"127.0.0.1:{port}", "--kubeconfig", kc],
                                   stderr=err)
        self.addCleanup(lambda: (ext.poll() is None and ext.terminate(), ext.wait()))
        deadline = time.time() + 20
        while not api.watching(NAD_PATH) or not self.listening(port):
            self.assertLess(time.time(), deadline, "the extender did not start")
            time.sleep(0.05)
        compared = set()
        for i, (what, conf, uid, expected) in enumerate(rows):
            with self.subTest(row=what):
                with open(self.facts()) as f:
                    doc = f.read()
                node = {"metadata": {"name": "worker-1", "resourceVersion": str(i), "labels": labels,
                                     "annotations": {"topocni.io/facts": doc}}}
                podname = f"pod-{i}"
                args = {"Pod": {"metadata": {"name": podname, "namespace": "default", "uid": f"u{i}",
                                             "annotations": {"k8s.v1.cni.cncf.io/networks": f"row-{i}"}}},
                        "Nodes": {"items": [node]}, "NodeNames": None}
                c = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
                c.request("POST", "/filter", json.dumps(args))
                r = json.loads(c.getresponse().read())
                fits = len(r["Nodes"]["items"]) == 1
                self.assertEqual(fits, not expected, f"{what}: the extender's verdict {r}")
                pod, path = self.make_pod()
                out = self.run_plugin("ADD", conf, container_id="row", netns=path, args=pod_args(uid))
                self.assertEqual(fits, out.rc == 0, f"{what}: extender {r}, ADD {out}")
                if fits:
                    self.assertOk(self.run_plugin("DEL", conf, container_id="row", netns=path, args=pod_args(uid)))
                    continue
                self.assertError(out, 100)
                names = out.json["msg"].split(": ", 1)[1]
                reasons = {**r["FailedNodes"], **r["FailedAndUnresolvableNodes"]}
                self.assertEqual(reasons["worker-1"], f"topocni: default/row-{i}: {names} not met")
                self.assertEqual(sorted(names.split(", ")), sorted(expected), f"{what}: the constraints named")
                details = re.sub(r"\(labels from [^)]*\)", "(labels)", out.json["details"])
                line = self.wait_log(log, f"filter default/{podname}: ")
                evidence = re.sub(r"\(labels from [^)]*\)", "(labels)", line.split("worker-1: default/row-%d: " % i, 1)[1])
                self.assertEqual(evidence, details, f"{what}: the extender's evidence")
                compared.update(n.strip() for n in names.split(","))
        for kind in ("nodeSelector", "topology.numaNode", "topology.minLinkSpeedMbps", "topology.maxAttachmentsPerMaster",
                     "topology.minFreeAddresses", "bandwidth"):
            self.assertIn(kind, compared)

    def pki(self):
        from fakenode import make_pki
        d = os.path.join(self.outside_dir(), "pki")
        if not os.path.exists(os.path.join(d, "ca.crt")):
            make_pki(d)
        return d

    @staticmethod
    def listening(port):
        import socket
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            return True
        except OSError:
            return False

    def wait_log(self, path, start):
        deadline = time.time() + 5
        while True:
            with open(path) as f:
                lines = [l for l in f.read().splitlines() if start in l]
            if lines or time.time() > deadline:
                self.assertTrue(lines, f"no log line with {start!r}")
                return lines[-1]
            time.sleep(0.05)

    def test_a_document_of_another_version_or_with_unknown_members_is_refused(self):
        path = self.facts()
        with open(path) as f:
            doc = json.load(f)
        for change, words in (({"version": 2}, "version 2 is not 1"), ({"extra": 1}, "extra: unknown member")):
            with open(path, "w") as f:
                json.dump(dict(doc, **change), f)
            p = self.cli("explain", "--config", self.write_conf(self.pconf()), "--facts", path)
            self.assertEqual(p.returncode, 2, p.stdout)
            self.assertIn(words, p.stderr)

    def write_conf(self, conf):
        path = os.path.join(self.outside_dir(), "c.json")
        with open(path, "w") as f:
            json.dump(conf, f)
        return path


if __name__ == "__main__":
    main()
