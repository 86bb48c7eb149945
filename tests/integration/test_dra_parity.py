"""Parity, proved by the code kube-scheduler runs: what kube-scheduler's DRA allocator gives
a pod is what ADD accepts on that node, and what ADD refuses is not given.

The two sides are kept apart:
  - the allocator is kube-scheduler's own (tests/dra_allocator, spoken to by
    dra_scheduler.py): k8s.io/dynamic-resource-allocation v0.37.2's structured allocator
    and CEL cache with the features kube-scheduler v1.37.2 enables by default, taken from
    kube-scheduler's own mapping. It reads only what kube-scheduler reads: the
    ResourceSlices `topocni dra-driver` published, the DeviceClasses of examples/dra/, the
    claim of the ResourceClaimTemplate `topocni dra-template` printed for the NAD, and the
    claims allocated before (its allocated state);
  - ADD's verdict is `topocni explain --device-id`, the placement evaluation ADD runs (the
    same function, on the same node: its sysfs, state directory and IPAM store), plus
    host-local's own refusal of an exhausted range set.

Nodes and NADs are generated from a fixed seed: 1 to 3 PFs per node on NUMA node 0 or 1 at
10, 25 or 100 Gb/s, each of one of two device-plugin resources, 2 to 4 VFs each; SR-IOV NADs
with or without a resourceName, numaNode, minLinkSpeedMbps, bandwidth (some more than a
link has) and minFreeAddresses, each with a /29 pool that the node has filled to a random
degree (up to exhausted). Three proofs:
  - one VF at a time: for every node, NAD and free VF, the allocator restricted to that VF
    allocates the claim exactly when ADD accepts that VF (and it is of the NAD's
    device-plugin resource, which only the claim can see); with every VF on offer, the VF
    it picks ADD accepts;
  - one claim after another: on each node, claims of the NADs in a seeded order, each
    allocated on top of the ones before (kube-scheduler's allocated state), each one the
    allocator gives accepted by ADD with the earlier ones prepared by kubelet's plugin
    (their VFs held, their bandwidth booked: topocni-dra through the fake kubelet) and
    their addresses taken, and prepared in turn; each one it refuses refused by ADD on
    every VF still free. Links run to their bandwidth, pools to their last address;
  - every DeviceClass and template selector compiles in the scheduler's CEL environment
    and evaluates without an error on every published device.
The numbers of cases are printed.

No namespace or link is made: the VFs and PFs exist only in each node's fake sysfs tree, and
the stand-in API listens on loopback.
"""
import copy
import json
import os
import random
import shutil
import subprocess
import sys
import tempfile
import unittest
import uuid

import yaml

from cnitest import BIN
from dra_scheduler import INCUBATING, Scheduler, program
from fakekubelet import FakeKubelet
from fakenode import ClusterApi, FakeSysfs as NodeSysfs, make_pki, write_kubeconfig
from fakesysfs import FakeSysfs

SKIP = 77
SEED = int(os.environ.get("TOPOCNI_PARITY_SEED", "30"))
NODES = int(os.environ.get("TOPOCNI_PARITY_NODES", "8"))
NADS = int(os.environ.get("TOPOCNI_PARITY_NADS", "14"))
RESOURCES = ["example.com/sriov_a", "example.com/sriov_b"]
EXAMPLES = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "examples", "dra")
POOL_SIZE = 5   # a /29: .1 to .6, the gateway .1 left out
SEQUENCE_NODES = int(os.environ.get("TOPOCNI_PARITY_SEQUENCE_NODES", "4"))


def run(*args, check=True):
    r = subprocess.run([BIN, *args], capture_output=True, text=True, timeout=60)
    if check and r.returncode != 0:
        raise AssertionError(f"topocni {' '.join(args)}: {r.returncode}\n{r.stdout}\n{r.stderr}")
    return r


class DraParity(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.mkdtemp(prefix="topocni-parity-")
        cls.tag = f"{os.getpid() % 100000}"
        cls.scheduler = Scheduler()
        with open(os.path.join(EXAMPLES, "deviceclasses.yaml")) as f:
            cls.classes = [d for d in yaml.safe_load_all(f) if d]
        cls.pki = make_pki(os.path.join(cls.tmp, "pki"))
        cls.api = ClusterApi(cls.pki, token="parity-token")
        cls.kubeconfig = write_kubeconfig(os.path.join(cls.tmp, "kubeconfig"), cls.api.url(),
                                          ca_file=os.path.join(cls.pki, "ca.crt"), token="parity-token")

    @classmethod
    def tearDownClass(cls):
        cls.scheduler.close()
        cls.api.stop()
        shutil.rmtree(cls.tmp, ignore_errors=True)

    # ---- the generated world ----

    def make_node(self, i, rng, vfs=(2, 4)):
        name = f"pn{self.tag}-{i}"
        root = os.path.join(self.tmp, name)
        sysfs = os.path.join(root, "sys")
        fake, node = FakeSysfs(sysfs), NodeSysfs(sysfs)
        node.numa_node(0, "0-3")
        node.numa_node(1, "4-7")
        pfs, resource_flags = [], []
        for j in range(rng.randint(1, 3)):
            bus = 0x20 + i * 4 + j
            pf = f"0000:{bus:02x}:00.0"
            netdev = f"zp{self.tag}{i}{j}"[-15:]
            numa, speed = rng.choice([0, 1]), rng.choice([10000, 25000, 100000])
            fake.add_pf(pf, netdev, totalvfs=8, numa_node=numa)
            count = rng.randint(*vfs)
            for k in range(count):
                fake.add_vf(pf, k, f"0000:{bus:02x}:02.{k}", None, driver="vfio-pci", numa_node=numa)
            node.write(f"class/net/{netdev}/speed", f"{speed}\n")
            resource = rng.choice(RESOURCES)
            resource_flags += ["--resource-name", f"{pf}={resource}"]
            pfs.append({"pci": pf, "numa": numa, "speed": speed, "resource": resource, "vfs": count})
        self.api.put_node({"kind": "Node", "apiVersion": "v1",
                           "metadata": {"name": name, "uid": str(uuid.uuid4()), "labels": {}}, "status": {}})
        return {"name": name, "root": root, "sysfs": sysfs, "state": os.path.join(root, "state"),
                "data": os.path.join(root, "data"), "pfs": pfs, "flags": resource_flags}

    def make_nads(self, rng):
        nads = []
        for k in range(NADS):
            topology = {}
            if rng.random() < 0.4:
                topology["numaNode"] = rng.choice([0, 1])
            if rng.random() < 0.4:
                topology["minLinkSpeedMbps"] = rng.choice([25000, 50000])
            if rng.random() < 0.4:
                topology["minFreeAddresses"] = rng.choice([1, 3])
            config = {"cniVersion": "1.0.0", "name": f"pnet{k}", "type": "topocni", "attachment": "sriov",
                      "ipam": {"type": "host-local", "ranges": [[{"subnet": f"10.{60 + k}.0.0/29"}]]}}
            if topology:
                config["topology"] = topology
            if rng.random() < 0.5:
                gbps = [1, 8, 20, 60]
                config["bandwidth"] = {"egressRate": rng.choice(gbps) * 10**9}
                if rng.random() < 0.5:
                    config["bandwidth"]["ingressRate"] = rng.choice([1, 8]) * 10**9   # tbf shapes ingress: < 17 Gb/s
            annotations = {}
            if rng.random() < 0.75:
                annotations["k8s.v1.cni.cncf.io/resourceName"] = rng.choice(RESOURCES)
            nads.append({"apiVersion": "k8s.cni.cncf.io/v1", "kind": "NetworkAttachmentDefinition",
                         "metadata": {"name": f"pnet{k}", "namespace": "default", "uid": str(uuid.uuid4()),
                                      "annotations": annotations},
                         "spec": {"config": json.dumps(config)}})
        return nads

    @staticmethod
    def on_node(nad, node):
        """The NAD as this node's files see it: its sysfs, state directory and IPAM store."""
        nad = copy.deepcopy(nad)
        config = json.loads(nad["spec"]["config"])
        config.update(sysfsRoot=node["sysfs"], stateDir=node["state"])
        config["ipam"]["dataDir"] = node["data"]
        nad["spec"]["config"] = json.dumps(config)
        return nad

    def fill_pools(self, node, nads, rng):
        """Reservations as host-local leaves them, by other pods: 0 to 5 of the 5 addresses."""
        node["free"] = {}
        for nad in nads:
            network = nad["metadata"]["name"]
            k = int(network[len("pnet"):])
            taken = rng.choice([0, 0, 1, 3, 4, 5])
            os.makedirs(os.path.join(node["data"], network), exist_ok=True)
            for host in range(2, 2 + taken):
                with open(os.path.join(node["data"], network, f"10.{60 + k}.0.{host}"), "w") as f:
                    f.write(f"other-{host}\r\neth0")
            node["free"][network] = POOL_SIZE - taken

    def publish(self, node, nads):
        """dra-driver --once for this node, with the NADs as this node reads them."""
        self.api.replace(nodes=list(self.api.nodes.values()), nads=[self.on_node(n, node) for n in nads])
        run("dra-driver", "--node", node["name"], "--kubeconfig", self.kubeconfig, "--sysfs-root", node["sysfs"],
            "--state-dir", node["state"], "--kubelet-root-dir", node["root"], *node["flags"], "--once")

    def template(self, nad):
        path = os.path.join(self.tmp, nad["metadata"]["name"] + ".json")
        with open(path, "w") as f:
            json.dump(nad, f)
        r = run("dra-template", "--nad", f"default/{nad['metadata']['name']}", "--file", path)
        return json.loads(r.stdout)

    def add_accepts(self, node, nad, vf):
        """ADD's verdict on this VF: the placement evaluation (explain runs ADD's), and
        host-local, which refuses when a range set has no free address."""
        path = os.path.join(node["root"], nad["metadata"]["name"] + ".json")
        with open(path, "w") as f:
            json.dump(self.on_node(nad, node), f)
        r = run("explain", "--config", path, "--device-id", vf, "--node-name", node["name"], "-o", "json", check=False)
        self.assertIn(r.returncode, (0, 1), r.stderr)
        verdict = json.loads(r.stdout)
        return verdict["met"] and node["free"][nad["metadata"]["name"]] > 0, verdict

    # ---- the proof ----

    def node_object(self, node):
        return self.api.node(node["name"])

    def claim_of(self, nad, templates, name=None):
        network = nad["metadata"]["name"]
        return {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim",
                "metadata": {"name": name or f"{network}-claim", "namespace": "default", "uid": str(uuid.uuid4())},
                "spec": templates[network]["spec"]["spec"]}

    def allocate_one(self, node, slices, claim, allocated=()):
        (r,) = self.scheduler.allocate(self.node_object(node), slices, self.classes, [claim], allocated)
        return r

    @staticmethod
    def vf_of(allocation, vfs):
        (vf_result,) = [r for r in allocation["devices"]["results"] if r["request"] == "vf"]
        (vf,) = [d for d in vfs if d["name"] == vf_result["device"]]
        return vf["attributes"]["k8s.cni.cncf.io/deviceID"]["string"]

    @staticmethod
    def wanted_resource(nad, vf):
        """Whether the VF is of the NAD's device-plugin resource: only the claim sees that
        (Multus picks the VF from it; ADD is handed one)."""
        wanted = nad["metadata"]["annotations"].get("k8s.v1.cni.cncf.io/resourceName")
        own = vf["attributes"].get("k8s.cni.cncf.io/resourceName", {}).get("string")
        return wanted is None or wanted == own

    def generated_world(self, seed, nodes, vfs=(2, 4)):
        rng = random.Random(seed)
        nads = self.make_nads(rng)
        made = [self.make_node(i, rng, vfs) for i in nodes]
        for node in made:
            self.fill_pools(node, nads, rng)
            self.publish(node, nads)
        return nads, made, {n["metadata"]["name"]: self.template(n) for n in nads}

    # ---- the proof ----

    def test_the_allocator_is_kube_schedulers_at_its_v1_37_2_defaults(self):
        about = self.scheduler.about()
        self.assertEqual(about["implementation"], INCUBATING, about)
        # The trap it avoids: structured.Features{} turns consumable capacity off and picks
        # another implementation, in which no shared link or pool could be allocated.
        self.assertNotEqual(about["zeroFeaturesImplementation"], about["implementation"])
        f = about["features"]
        self.assertTrue(f["ConsumableCapacity"] and f["DeviceTaints"] and f["PrioritizedList"], f)
        self.assertEqual(about["celFeatures"]["EnableConsumableCapacity"], True)

    def test_on_generated_nodes_the_allocator_offers_exactly_what_add_accepts(self):
        nads, nodes, templates = self.generated_world(SEED, range(NODES))
        slices = [s for s in self.api.slices.values()]
        cases, accepted, mismatches = 0, 0, []
        for node in nodes:
            mine = [s for s in slices if s["spec"]["nodeName"] == node["name"]]
            vfs = [d for s in mine for d in s["spec"]["devices"] if d["attributes"]["type"]["string"] == "vf"]
            self.assertEqual(len(vfs), sum(p["vfs"] for p in node["pfs"]))   # no attachment: every VF offered
            for nad in nads:
                network = nad["metadata"]["name"]
                # One VF at a time: the allocator restricted to it, against ADD given it.
                for vf in vfs:
                    only = copy.deepcopy(slices)
                    for s in only:
                        if s["spec"]["nodeName"] == node["name"]:
                            s["spec"]["devices"] = [d for d in s["spec"]["devices"]
                                                    if d["attributes"]["type"]["string"] != "vf" or d["name"] == vf["name"]]
                    r = self.allocate_one(node, only, self.claim_of(nad, templates))
                    if r["outcome"] == "error":
                        mismatches.append(f"{node['name']} {network} {vf['name']}: the allocator fails: {r['error']}")
                        continue
                    allocated = r["outcome"] == "allocated"
                    device_id = vf["attributes"]["k8s.cni.cncf.io/deviceID"]["string"]
                    add, verdict = self.add_accepts(node, nad, device_id)
                    cases += 1
                    accepted += allocated
                    # Safety: what the allocator gives, ADD accepts (so what ADD refuses is
                    # never given). Exactness: ADD's acceptance is all it takes, but for the
                    # device plugin's resource, which ADD never sees.
                    if allocated != (add and self.wanted_resource(nad, vf)):
                        mismatches.append(f"{node['name']} {network} {device_id}: allocator "
                                          f"{'accepts' if allocated else 'refuses'}, ADD "
                                          f"{'accepts' if add else 'refuses'}: {verdict['constraints']}; "
                                          f"free addresses {node['free'][network]}")
                # Every VF on offer: the one the allocator picks, ADD accepts.
                r = self.allocate_one(node, slices, self.claim_of(nad, templates))
                if r["outcome"] == "error":
                    mismatches.append(f"{node['name']} {network}: the allocator fails: {r['error']}")
                elif r["outcome"] == "allocated":
                    device_id = self.vf_of(r["allocation"], vfs)
                    add, verdict = self.add_accepts(node, nad, device_id)
                    cases += 1
                    if not add:
                        mismatches.append(f"{node['name']} {network}: the allocator picks {device_id}, ADD refuses it: "
                                          f"{verdict['constraints']}")
        print(f"parity (kube-scheduler's allocator, one VF at a time): {cases} cases over {NODES} nodes x {NADS} NADs "
              f"(seed {SEED}); {accepted} single-VF claims allocated, {cases - accepted} refused; "
              f"{len(mismatches)} disagreements")
        self.assertEqual(mismatches, [])
        # The generator must reach both verdicts often, or the proof proves little.
        self.assertGreater(accepted, cases // 10)
        self.assertLess(accepted, cases - cases // 10)

    # ---- one claim after another ----

    def kubelet_plugin(self, node):
        """`topocni dra-driver` for this node with kubelet's plugin, and a fake kubelet
        registered with it. Short socket paths: a unix socket path holds 107 bytes."""
        sock = tempfile.mkdtemp(prefix="tpk-", dir="/tmp")
        self.addCleanup(shutil.rmtree, sock, True)
        registry, plugins = os.path.join(sock, "reg"), os.path.join(sock, "p")
        log = open(os.path.join(node["root"], "driver.log"), "w")
        self.addCleanup(log.close)
        p = subprocess.Popen([BIN, "dra-driver", "--node", node["name"], "--kubeconfig", self.kubeconfig,
                              "--sysfs-root", node["sysfs"], "--state-dir", node["state"],
                              "--kubelet-root-dir", node["root"], *node["flags"], "--interval", "3600",
                              "--plugin-registration-dir", registry, "--plugin-dir", plugins],
                             stdout=log, stderr=subprocess.STDOUT)

        def stop():
            if p.poll() is None:
                p.terminate()
                p.wait(timeout=10)
        self.addCleanup(stop)
        k = FakeKubelet(registry)
        self.addCleanup(k.close)
        k.wait_registered(timeout=20)
        return k

    def take_address(self, node, network):
        """What the claim's pod's ADD does to the pool: host-local reserves its next free
        address (the reference's on-disk format)."""
        k = int(network[len("pnet"):])
        d = os.path.join(node["data"], network)
        os.makedirs(d, exist_ok=True)
        for host in range(2, 2 + POOL_SIZE):
            path = os.path.join(d, f"10.{60 + k}.0.{host}")
            if not os.path.exists(path):
                with open(path, "w") as f:
                    f.write(f"claimed-{host}\r\neth0")
                node["free"][network] -= 1
                return
        raise AssertionError(f"{node['name']} {network}: the allocator gave an address the pool does not have")

    def test_claims_one_after_another_on_each_node_consume_what_add_sees_consumed(self):
        # Up to 8 VFs a PF: links and pools, not VFs, run out first.
        nads, nodes, templates = self.generated_world(SEED + 3, range(20, 20 + SEQUENCE_NODES), vfs=(5, 8))
        # The slices as published before the burst: kube-scheduler allocates many pods
        # before their ADDs run; what they hold is its allocated state.
        slices = [s for s in self.api.slices.values()]
        rng = random.Random(SEED + 4)
        steps, allocated_n, refusals, mismatches = 0, 0, 0, []
        for node in nodes:
            # The NADs as this node's files see them (publish() left the last node's): the
            # plugin's re-check reads this node's pools.
            self.api.replace(nodes=list(self.api.nodes.values()), nads=[self.on_node(n, node) for n in nads])
            k = self.kubelet_plugin(node)
            mine = [s for s in slices if s["spec"]["nodeName"] == node["name"]]
            vfs = [d for s in mine for d in s["spec"]["devices"] if d["attributes"]["type"]["string"] == "vf"]
            held, allocated = set(), []
            order = [n for n in nads for _ in range(2)]
            rng.shuffle(order)
            for i, nad in enumerate(order):
                network = nad["metadata"]["name"]
                claim = self.claim_of(nad, templates, name=f"{network}-{i}")
                r = self.allocate_one(node, slices, claim, allocated)
                steps += 1
                where = f"{node['name']} step {i} {network}"
                if r["outcome"] == "error":
                    mismatches.append(f"{where}: the allocator fails: {r['error']}")
                    continue
                if r["outcome"] == "unfit":
                    refusals += 1
                    for vf in vfs:
                        device_id = vf["attributes"]["k8s.cni.cncf.io/deviceID"]["string"]
                        if device_id in held or not self.wanted_resource(nad, vf):
                            continue
                        add, verdict = self.add_accepts(node, nad, device_id)
                        if add:
                            mismatches.append(f"{where}: the allocator refuses, ADD accepts {device_id} "
                                              f"({len(allocated)} claims before; free addresses {node['free'][network]})")
                    continue
                allocated_n += 1
                device_id = self.vf_of(r["allocation"], vfs)
                add, verdict = self.add_accepts(node, nad, device_id)
                if not add:
                    mismatches.append(f"{where}: the allocator gives {device_id}, ADD refuses it: {verdict['constraints']} "
                                      f"({len(allocated)} claims before; free addresses {node['free'][network]})")
                    continue
                # kubelet prepares it before the pod starts: the VF held, the bandwidth booked.
                pod = (f"pod-{network}-{i}", str(uuid.uuid4()))
                stored = dict(claim, status={"allocation": r["allocation"],
                                             "reservedFor": [{"resource": "pods", "name": pod[0], "uid": pod[1]}]})
                obj = self.api.put_claim(stored)
                ref = {"namespace": "default", "uid": obj["metadata"]["uid"], "name": obj["metadata"]["name"]}
                got = k.prepare([ref])[ref["uid"]]
                if got["error"]:
                    mismatches.append(f"{where}: the allocator gives {device_id}, kubelet's prepare refuses it: {got['error']}")
                    continue
                held.add(device_id)
                allocated.append(obj)
                self.take_address(node, network)
        print(f"parity (kube-scheduler's allocator, one claim after another): {steps} claims on {len(nodes)} nodes "
              f"(seed {SEED + 3}); {allocated_n} allocated, {refusals} refused; {len(mismatches)} disagreements")
        self.assertEqual(mismatches, [])
        self.assertGreater(allocated_n, steps // 10)
        self.assertGreater(refusals, steps // 10)

    def test_a_nads_pool_is_offered_before_its_first_add_and_not_where_its_node_selector_fails(self):
        rng = random.Random(SEED + 1)
        node = self.make_node(9, rng)
        labels = {"example.com/rack": "r1"}
        self.api.put_node({"kind": "Node", "apiVersion": "v1",
                           "metadata": {"name": node["name"], "uid": str(uuid.uuid4()), "labels": labels}, "status": {}})
        here, elsewhere = self.make_nads(rng)[:2]
        config = json.loads(elsewhere["spec"]["config"])
        config["nodeSelector"] = {"example.com/rack": "r2"}
        elsewhere["spec"]["config"] = json.dumps(config)
        self.fill_pools(node, [], rng)
        self.publish(node, [here, elsewhere])
        pools = {d["attributes"]["network"]["string"]: d for s in self.api.resource_slices(node["name"]).values()
                 for d in s["spec"]["devices"] if d["attributes"]["type"]["string"] == "pool"}
        self.assertEqual(sorted(pools), [here["metadata"]["name"]])
        reserve = json.loads(here["spec"]["config"]).get("topology", {}).get("minFreeAddresses", 0)
        self.assertEqual(pools[here["metadata"]["name"]]["capacity"]["addresses"]["value"], str(POOL_SIZE - reserve))

    def matches(self, expressions, devices):
        """{expression: [True | False per device]}, failing on a compile or evaluation error
        (in kube-scheduler an evaluation error aborts the pod's whole allocation)."""
        out = {}
        for r in self.scheduler.cel(expressions, [(d["driver"], {k: v for k, v in d.items() if k != "driver"})
                                                  for d in devices]):
            self.assertNotIn("compileError", r, r["expression"])
            for d, e in zip(devices, r["errors"]):
                self.assertEqual(e, "", f"{r['expression']} on {d['name']}")
            out[r["expression"]] = r["matches"]
        return out

    def test_every_template_asks_for_its_networks_pool_and_its_selectors_run_on_every_published_device(self):
        rng = random.Random(SEED + 2)
        node = self.make_node(10, rng)
        nads = self.make_nads(rng)
        self.fill_pools(node, nads, rng)
        self.publish(node, nads)
        devices = [dict(d, driver=s["spec"]["driver"]) for s in self.api.resource_slices(node["name"]).values()
                   for d in s["spec"]["devices"]]
        classes = {c["metadata"]["name"]: c for c in self.classes}
        class_matches = self.matches([s["cel"]["expression"] for c in self.classes for s in c["spec"]["selectors"]], devices)
        # Each class matches exactly its type of device.
        for c in self.classes:
            kind = c["metadata"]["name"].split(".")[0]
            (sel,) = c["spec"]["selectors"]
            self.assertEqual(class_matches[sel["cel"]["expression"]],
                             [d["attributes"]["type"]["string"] == kind for d in devices], c["metadata"]["name"])
        expressions = 0
        for nad in nads:
            t = self.template(nad)
            self.assertEqual((t["apiVersion"], t["kind"]), ("resource.k8s.io/v1", "ResourceClaimTemplate"))
            self.assertEqual(t["metadata"]["namespace"], "default")
            requests = {r["name"]: r["exactly"] for r in t["spec"]["spec"]["devices"]["requests"]}
            self.assertEqual(requests["vf"]["deviceClassName"], "vf.topocni.io")
            self.assertEqual(requests["pool"]["capacity"]["requests"], {"addresses": "1"})
            for name, r in requests.items():
                (cls_sel,) = classes[r["deviceClassName"]]["spec"]["selectors"]
                # A request's selectors run on the devices its class lets through.
                of_class = [d for d, ok in zip(devices, class_matches[cls_sel["cel"]["expression"]]) if ok]
                got = self.matches([s["cel"]["expression"] for s in r.get("selectors", [])], of_class)
                expressions += len(got)
            # The pool request picks the NAD's own network, and only it.
            pools = [d for d in devices if d["attributes"]["type"]["string"] == "pool"]
            got = self.matches([s["cel"]["expression"] for s in requests["pool"]["selectors"]], pools)
            pool_match = [d["name"] for i, d in enumerate(pools) if all(m[i] for m in got.values())]
            own = [d["name"] for d in pools if d["attributes"]["network"]["string"] == nad["metadata"]["name"]]
            self.assertEqual(pool_match, own)
        print(f"CEL: {expressions} template selectors and {len(class_matches)} DeviceClass selectors on "
              f"{len(devices)} devices, compiled and evaluated by the scheduler's CEL cache")

    def test_the_examples_template_is_what_dra_template_prints_and_the_example_pod_claims_it(self):
        nad = os.path.join(EXAMPLES, "..", "sriov-nad.yaml")
        printed = json.loads(run("dra-template", "--nad", "default/sriov-net1", "--file", nad).stdout)
        with open(os.path.join(EXAMPLES, "sriov-net1-claim-template.yaml")) as f:
            self.assertEqual(yaml.safe_load(f), printed)
        with open(os.path.join(EXAMPLES, "pod.yaml")) as f:
            pod = yaml.safe_load(f)
        name = printed["metadata"]["name"]
        self.assertEqual(pod["spec"]["resourceClaims"], [{"name": name, "resourceClaimTemplateName": name}])
        self.assertEqual(pod["spec"]["containers"][0]["resources"]["claims"], [{"name": name}])
        self.assertEqual(pod["metadata"]["annotations"]["k8s.v1.cni.cncf.io/networks"], "sriov-net1")

    def test_a_file_holding_another_nad_than_the_one_named_is_refused(self):
        nad = os.path.join(EXAMPLES, "..", "sriov-nad.yaml")
        r = run("dra-template", "--nad", "default/other", "--file", nad, check=False)
        self.assertEqual(r.returncode, 1)
        self.assertIn("holds name 'sriov-net1'", r.stderr)
        self.assertEqual(r.stdout, "")
        r = run("dra-template", "--nad", "no-slash", "--file", nad, check=False)
        self.assertEqual(r.returncode, 1)
        self.assertIn("not NAMESPACE/NAME", r.stderr)

    def test_a_nad_that_needs_no_device_gets_no_template(self):
        path = os.path.join(self.tmp, "plain.json")
        with open(path, "w") as f:
            json.dump({"metadata": {"name": "plain"}, "spec": {"config": json.dumps(
                {"cniVersion": "1.0.0", "name": "plain", "type": "topocni", "bridge": "br0"})}}, f)
        r = run("dra-template", "--nad", "default/plain", "--file", path, check=False)
        self.assertEqual(r.returncode, 1)
        self.assertIn("asks for no device", r.stderr)
        self.assertEqual(r.stdout, "")


if __name__ == "__main__":
    path, why = program()
    if not path:
        print(f"SKIP: kube-scheduler's allocator program is not built: {why}")
        sys.exit(SKIP)
    unittest.main(verbosity=2)
