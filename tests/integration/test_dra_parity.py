"""Parity, proved: what kube-scheduler's allocator would give a pod through DRA is what ADD
accepts on that node, and what ADD refuses is not offered.

The two sides are kept apart:
  - the allocator (dra_allocator.py) reads only what kube-scheduler reads: the ResourceSlices
    `topocni dra-driver` published, the DeviceClasses of examples/dra/ and the claim of the
    ResourceClaimTemplate `topocni dra-template` printed for the NAD; every CEL selector is
    evaluated by a real CEL implementation (dra_cel.py: npm's @bufbuild/cel, the `device`
    variable shaped as kube-scheduler shapes it);
  - ADD's verdict is `topocni explain --device-id`, the placement evaluation ADD runs (the
    same function, on the same node: its sysfs, state directory and IPAM store), plus
    host-local's own refusal of an exhausted range set.

Nodes and NADs are generated from a fixed seed: 1 to 3 PFs per node on NUMA node 0 or 1 at
10, 25 or 100 Gb/s, each of one of two device-plugin resources, 2 to 4 VFs each; SR-IOV NADs
with or without a resourceName, numaNode, minLinkSpeedMbps, bandwidth (some more than a
link has) and minFreeAddresses, each with a /29 pool that the node has filled to a random
degree (up to exhausted). For every node, NAD and free VF, the allocator restricted to that
VF must accept the claim exactly when ADD accepts that VF (and it is of the NAD's device-plugin
resource, which only the claim can see); and the allocation it makes with
every VF on offer must name a VF that ADD accepts. The number of cases is printed.

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
from dra_allocator import Allocator
from dra_cel import Cel
from fakenode import ClusterApi, FakeSysfs as NodeSysfs, make_pki, write_kubeconfig
from fakesysfs import FakeSysfs

SKIP = 77
SEED = int(os.environ.get("TOPOCNI_PARITY_SEED", "30"))
NODES = int(os.environ.get("TOPOCNI_PARITY_NODES", "8"))
NADS = int(os.environ.get("TOPOCNI_PARITY_NADS", "14"))
RESOURCES = ["example.com/sriov_a", "example.com/sriov_b"]
EXAMPLES = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "examples", "dra")
POOL_SIZE = 5   # a /29: .1 to .6, the gateway .1 left out


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
        cls.cel = Cel()
        with open(os.path.join(EXAMPLES, "deviceclasses.yaml")) as f:
            cls.classes = [d for d in yaml.safe_load_all(f) if d]
        cls.pki = make_pki(os.path.join(cls.tmp, "pki"))
        cls.api = ClusterApi(cls.pki, token="parity-token")
        cls.kubeconfig = write_kubeconfig(os.path.join(cls.tmp, "kubeconfig"), cls.api.url(),
                                          ca_file=os.path.join(cls.pki, "ca.crt"), token="parity-token")

    @classmethod
    def tearDownClass(cls):
        cls.cel.close()
        cls.api.stop()
        shutil.rmtree(cls.tmp, ignore_errors=True)

    # ---- the generated world ----

    def make_node(self, i, rng):
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
            count = rng.randint(2, 4)
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

    def test_on_generated_nodes_the_allocator_offers_exactly_what_add_accepts(self):
        rng = random.Random(SEED)
        nads = self.make_nads(rng)
        nodes = [self.make_node(i, rng) for i in range(NODES)]
        for node in nodes:
            self.fill_pools(node, nads, rng)
            self.publish(node, nads)
        slices = [s for s in self.api.slices.values()]
        templates = {n["metadata"]["name"]: self.template(n) for n in nads}
        cases, accepted, mismatches = 0, 0, []
        for node in nodes:
            mine = [s for s in slices if s["spec"]["nodeName"] == node["name"]]
            vfs = [d for s in mine for d in s["spec"]["devices"] if d["attributes"]["type"]["string"] == "vf"]
            self.assertEqual(len(vfs), sum(p["vfs"] for p in node["pfs"]))   # no attachment: every VF offered
            for nad in nads:
                network = nad["metadata"]["name"]
                claim = {"metadata": {"name": f"{network}-claim", "namespace": "default"},
                         "spec": templates[network]["spec"]["spec"]}
                # One VF at a time: the allocator restricted to it, against ADD given it.
                for vf in vfs:
                    only = copy.deepcopy(slices)
                    for s in only:
                        if s["spec"]["nodeName"] == node["name"]:
                            s["spec"]["devices"] = [d for d in s["spec"]["devices"]
                                                    if d["attributes"]["type"]["string"] != "vf" or d["name"] == vf["name"]]
                    alloc = Allocator(only, self.classes, self.cel)
                    claim["metadata"]["uid"] = str(uuid.uuid4())
                    allocated = alloc.allocate(claim, node["name"]) is not None
                    device_id = vf["attributes"]["k8s.cni.cncf.io/deviceID"]["string"]
                    add, verdict = self.add_accepts(node, nad, device_id)
                    cases += 1
                    accepted += allocated
                    # Safety: what the allocator gives, ADD accepts (so what ADD refuses is
                    # never given). Exactness: ADD's acceptance is all it takes, but for the
                    # device plugin's resource, which ADD never sees (Multus picks the VF
                    # from it) and the claim asks for by name.
                    wanted = nad["metadata"]["annotations"].get("k8s.v1.cni.cncf.io/resourceName")
                    own = vf["attributes"].get("k8s.cni.cncf.io/resourceName", {}).get("string")
                    if allocated != (add and (wanted is None or wanted == own)):
                        mismatches.append(f"{node['name']} {network} {device_id}: allocator "
                                          f"{'accepts' if allocated else 'refuses'} ({alloc.why}), ADD "
                                          f"{'accepts' if add else 'refuses'}: {verdict['constraints']}; "
                                          f"free addresses {node['free'][network]}")
                # Every VF on offer: the one the allocator picks, ADD accepts.
                alloc = Allocator(slices, self.classes, self.cel)
                claim["metadata"]["uid"] = str(uuid.uuid4())
                allocation = alloc.allocate(claim, node["name"])
                if allocation:
                    (vf_result,) = [r for r in allocation["devices"]["results"] if r["request"] == "vf"]
                    (vf,) = [d for d in vfs if d["name"] == vf_result["device"]]
                    device_id = vf["attributes"]["k8s.cni.cncf.io/deviceID"]["string"]
                    add, verdict = self.add_accepts(node, nad, device_id)
                    cases += 1
                    if not add:
                        mismatches.append(f"{node['name']} {network}: the allocator picks {device_id}, ADD refuses it: "
                                          f"{verdict['constraints']}")
        print(f"parity: {cases} cases over {NODES} nodes x {NADS} NADs (seed {SEED}); "
              f"{accepted} single-VF claims allocated, {cases - accepted} refused; {len(mismatches)} mismatches")
        self.assertEqual(mismatches, [])
        # The generator must reach both verdicts often, or the proof proves little.
        self.assertGreater(accepted, cases // 10)
        self.assertLess(accepted, cases - cases // 10)

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
        self.assertEqual(pools[here["metadata"]["name"]]["capacity"]["addresses"]["value"], str(POOL_SIZE))

    def test_every_template_asks_for_its_networks_pool_and_its_selectors_run_on_every_published_device(self):
        rng = random.Random(SEED + 2)
        node = self.make_node(10, rng)
        nads = self.make_nads(rng)
        self.fill_pools(node, nads, rng)
        self.publish(node, nads)
        devices = [dict(d, driver=s["spec"]["driver"]) for s in self.api.resource_slices(node["name"]).values()
                   for d in s["spec"]["devices"]]
        classes = {c["metadata"]["name"]: c for c in self.classes}
        for nad in nads:
            t = self.template(nad)
            self.assertEqual((t["apiVersion"], t["kind"]), ("resource.k8s.io/v1", "ResourceClaimTemplate"))
            self.assertEqual(t["metadata"]["namespace"], "default")
            requests = {r["name"]: r["exactly"] for r in t["spec"]["spec"]["devices"]["requests"]}
            self.assertEqual(requests["vf"]["deviceClassName"], "vf.topocni.io")
            self.assertEqual(requests["pool"]["capacity"]["requests"], {"addresses": "1"})
            for name, r in requests.items():
                cls = classes[r["deviceClassName"]]
                for d in devices:
                    # No selector may fail to evaluate on any device: in kube-scheduler an
                    # evaluation error aborts the pod's whole allocation.
                    if all(self.cel.evaluate(s["cel"]["expression"], d) for s in cls["spec"]["selectors"]):
                        for s in r.get("selectors", []):
                            self.cel.evaluate(s["cel"]["expression"], d)
            # The pool request picks the NAD's own network, and only it.
            pool_match = [d["name"] for d in devices if d["attributes"]["type"]["string"] == "pool"
                          and all(self.cel.evaluate(s["cel"]["expression"], d) for s in requests["pool"]["selectors"])]
            own = [d["name"] for d in devices if d["attributes"]["type"]["string"] == "pool"
                   and d["attributes"]["network"]["string"] == nad["metadata"]["name"]]
            self.assertLessEqual(set(pool_match), set(own))
            if "minFreeAddresses" not in nad["spec"]["config"]:
                self.assertEqual(pool_match, own)


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
    if not shutil.which("node"):
        print("SKIP: node is not installed (the DRA CEL evaluator runs on Node.js)")
        sys.exit(SKIP)
    unittest.main(verbosity=2)
