"""`topocni dra-driver`: this node's ResourceSlices (resource.k8s.io/v1) kept in the API,
made from the node's facts document.

Each test has a node netns (cnitest) with a fake sysfs tree: one SR-IOV PF (25 Gb/s, NUMA
node 1) with 4 VFs whose netdevs are real veths, and a macvlan master (10 Gb/s, NUMA node
0), also a veth. fakenode.ClusterApi listens on the node netns's loopback over HTTPS and
serves Node worker-1 and the ResourceSlice collection, validating every slice written as
resourceslices.py says (from k8s.io/api resource/v1: a slice the API server would refuse
is a 422 here). The agent and ADD/DEL run inside the node netns.
"""
import os
import shutil
import signal
import subprocess
import tempfile
import time

from cnitest import BIN, NetnsTestCase, main, sh
from fakenode import ClusterApi, FakeSysfs as NodeSysfs, make_pki, write_kubeconfig
from fakesysfs import FakeSysfs

NODE = "worker-1"
NODE_UID = "0e2f6c1a-1111-4222-8333-944455556666"
PF = "0000:af:00.0"
VFS = ["0000:af:02.0", "0000:af:02.1", "0000:af:02.2", "0000:af:02.3"]
MASTER_PCI = "0000:18:00.0"
SLICES = "/apis/resource.k8s.io/v1/resourceslices"
WRITES = ("POST", "PUT", "DELETE", "PATCH")


def vf_name(pci):
    return "vf-" + pci.replace(":", "-").replace(".", "-")


class DraDriverCase(NetnsTestCase):
    def setUp(self):
        super().setUp()
        self.procs = []
        self.api = None
        self.fixture = tempfile.mkdtemp(prefix="topocni-dra-")
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
            fake.add_vf(PF, i, vf, netdev, numa_node=1)
        fake.add_device(MASTER_PCI, self.master, driver="ice", numa_node=0)
        node = NodeSysfs(self.sysfs)
        node.numa_node(0, "0-3")
        node.numa_node(1, "4-7")
        node.write(f"class/net/{self.pf}/speed", "25000\n")
        node.write(f"class/net/{self.master}/speed", "10000\n")
        self.kubelet = os.path.join(self.tmp, "kubelet")
        os.makedirs(self.kubelet)
        self.pki = make_pki(os.path.join(self.fixture, "pki"))
        self.api = ClusterApi(self.pki, netns=self.node, token="dra-token")
        self.api.put_node({"kind": "Node", "apiVersion": "v1",
                           "metadata": {"name": NODE, "uid": NODE_UID, "labels": {"kubernetes.io/hostname": NODE}},
                           "status": {}})
        self.kubeconfig = write_kubeconfig(os.path.join(self.fixture, "kubeconfig"), self.api.url(),
                                           ca_file=os.path.join(self.pki, "ca.crt"), token="dra-token")

    def sriov_conf(self, vf):
        return self.conf(name=f"sr{self.tag}", attachment="sriov", deviceID=vf, sysfsRoot=self.sysfs,
                         subnet="10.77.0.0/28")

    def driver(self, *extra, interval=30, extra_env=None):
        log = os.path.join(self.fixture, f"driver{len(self.procs)}.log")
        with open(log, "w") as f:
            p = subprocess.Popen(["nsenter", f"--net=/run/netns/{self.node}", BIN, "dra-driver", "--node", NODE,
                                  "--kubeconfig", self.kubeconfig, "--sysfs-root", self.sysfs,
                                  "--state-dir", self.state_dir, "--kubelet-root-dir", self.kubelet,
                                  "--resource-name", f"{self.pf}=example.com/sriov_fast",
                                  "--interval", str(interval), *self.plugin_flags(), *extra],
                                 stdout=f, stderr=subprocess.STDOUT, env=dict(os.environ, **(extra_env or {})))
        p.log = log
        self.procs.append(p)
        return p

    def plugin_flags(self):
        """The slices alone: kubelet's plugin is test_kubelet_plugin.py's."""
        return ["--no-kubelet-plugin"]

    @staticmethod
    def log_of(p):
        with open(p.log) as f:
            return f.read()

    def stop(self, p):
        """SIGTERM by pid: exit 0 within 2 s."""
        self.assertIsNone(p.poll(), f"the agent exited on its own ({p.returncode}): {self.log_of(p)}")
        start = time.monotonic()
        p.send_signal(signal.SIGTERM)
        self.assertEqual(p.wait(timeout=5), 0, self.log_of(p))
        self.assertLess(time.monotonic() - start, 2.0)

    def devices(self):
        """name -> device, over every slice of the node's pool, and the slices."""
        slices = self.api.resource_slices(NODE)
        return {d["name"]: d for s in slices.values() for d in s["spec"]["devices"]}, slices

    def wait_for(self, what, condition, seconds, p=None):
        end = time.monotonic() + seconds
        while True:
            value = condition()
            if value:
                return value
            if time.monotonic() > end:
                self.fail(f"{what}: not within {seconds} s" + (f"; agent log:\n{self.log_of(p)}" if p else ""))
            time.sleep(0.05)

    def writes(self):
        return [r for r in self.api.logged() if r["method"] in WRITES and r["path"].startswith(SLICES)]


class DraDriver(DraDriverCase):
    def test_the_slices_offer_every_free_vf_the_shared_links_and_the_api_accepts_them(self):
        p = self.driver()
        want = {*(vf_name(v) for v in VFS), "pf-0000-af-00-0", f"link-{self.master}"}
        devs, slices = self.wait_for("slices", lambda: set(self.devices()[0]) == want and self.devices(), 10, p)
        self.assertEqual(list(slices), [f"{NODE}-topocni.io-0"])
        s = slices[f"{NODE}-topocni.io-0"]
        self.assertEqual(s["spec"]["pool"], {"name": NODE, "generation": 1, "resourceSliceCount": 1})
        self.assertEqual(s["spec"]["driver"], "topocni.io")
        self.assertEqual(s["spec"]["nodeName"], NODE)
        self.assertEqual(s["metadata"]["ownerReferences"],
                         [{"apiVersion": "v1", "kind": "Node", "name": NODE, "uid": NODE_UID, "controller": True}])
        vf = devs[vf_name(VFS[2])]["attributes"]
        self.assertEqual(vf["k8s.cni.cncf.io/deviceID"], {"string": VFS[2]})
        self.assertEqual(vf["k8s.cni.cncf.io/resourceName"], {"string": "example.com/sriov_fast"})
        self.assertEqual(vf["resource.kubernetes.io/numaNode"], {"int": 1})
        self.assertEqual(vf["linkSpeedMbps"], {"int": 25000})
        self.assertEqual(vf["driver"], {"string": "iavf"})
        self.assertEqual(vf["vfIndex"], {"int": 2})
        master = devs[f"link-{self.master}"]
        self.assertTrue(master["allowMultipleAllocations"])
        self.assertEqual(master["capacity"]["egressMbps"]["value"], "10000")
        self.assertEqual(master["attributes"]["resource.kubernetes.io/numaNode"], {"int": 0})
        self.assertEqual(devs["pf-0000-af-00-0"]["capacity"]["ingressMbps"]["value"], "25000")
        self.assertEqual([r["status"] for r in self.writes()], [201])
        self.stop(p)

    def test_a_vf_an_add_takes_leaves_the_slices_within_2_s_and_comes_back_after_its_del(self):
        p = self.driver()
        self.wait_for("slices", lambda: vf_name(VFS[1]) in self.devices()[0], 10, p)
        pod, path = self.make_pod()
        conf = self.sriov_conf(VFS[1])
        start = time.monotonic()
        self.assertOk(self.run_plugin("ADD", conf, container_id="c1", netns=path, ifname="net1"))
        self.wait_for("the VF gone from the slices", lambda: vf_name(VFS[1]) not in self.devices()[0], 5, p)
        self.assertLess(time.monotonic() - start, 2.0 + 1.0, "ADD's change reached the slices late")
        devs, slices = self.devices()
        self.assertIn(vf_name(VFS[0]), devs)
        gen = slices[f"{NODE}-topocni.io-0"]["spec"]["pool"]["generation"]
        self.assertGreaterEqual(gen, 2)
        self.assertOk(self.run_plugin("DEL", conf, container_id="c1", netns=path, ifname="net1"))
        self.wait_for("the VF back in the slices", lambda: vf_name(VFS[1]) in self.devices()[0], 5, p)
        _, slices = self.devices()
        self.assertGreater(slices[f"{NODE}-topocni.io-0"]["spec"]["pool"]["generation"], gen)
        self.stop(p)

    def test_slices_deleted_behind_its_back_as_kubelet_does_at_its_start_come_back_within_an_interval(self):
        p = self.driver(interval=1)
        want = {*(vf_name(v) for v in VFS), "pf-0000-af-00-0", f"link-{self.master}"}
        self.wait_for("slices", lambda: set(self.devices()[0]) == want, 10, p)
        with self.api.cond:
            for name in list(self.api.slices):
                s = self.api.slices.pop(name)
                self.api._changed("slices", "DELETED", s)
        self.assertEqual(self.devices()[0], {})
        self.wait_for("the slices back", lambda: set(self.devices()[0]) == want, 5, p)
        self.stop(p)

    def test_an_idle_node_sends_no_writes_and_a_restarted_agent_sends_none_either(self):
        p = self.driver(interval=0.5)
        self.wait_for("slices", lambda: self.devices()[0], 10, p)
        time.sleep(0.5)
        self.api.forget_requests()
        time.sleep(3)   # six reads of the node
        self.assertEqual(self.writes(), [])
        self.stop(p)
        q = self.driver(interval=0.5)
        self.wait_for("the restarted agent's LIST", lambda: self.api.logged("GET", SLICES), 10, q)
        time.sleep(2)
        self.assertEqual(self.writes(), [], self.log_of(q))
        self.stop(q)

    def test_an_api_server_that_drops_shared_devices_fields_gets_only_vfs_and_then_no_writes(self):
        # Kubernetes before 1.36 with default gates: DRAConsumableCapacity off, and the API
        # server silently strips allowMultipleAllocations and requestPolicy on write.
        self.api.consumable_capacity = False
        p = self.driver(interval=0.5)
        self.wait_for("the warning", lambda: "DRAConsumableCapacity" in self.log_of(p), 10, p)
        self.wait_for("only VFs", lambda: self.devices()[0] and all(
            d["attributes"]["type"]["string"] == "vf" for d in self.devices()[0].values()), 5, p)
        self.assertEqual(sorted(self.devices()[0]), sorted(vf_name(v) for v in VFS))
        time.sleep(0.5)
        self.api.forget_requests()
        time.sleep(2)   # four reads of the node: what the server holds is what is wanted
        self.assertEqual(self.writes(), [], self.log_of(p))
        self.stop(p)

    def test_slices_of_another_driver_or_node_are_left_alone_and_a_stray_of_ours_is_deleted(self):
        other = {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceSlice", "metadata": {"name": "w1-other"},
                 "spec": {"driver": "sriovnetwork.k8snetworkplumbingwg.io", "nodeName": NODE,
                          "pool": {"name": NODE, "generation": 3, "resourceSliceCount": 1}, "devices": []}}
        stray = {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceSlice", "metadata": {"name": "old-name-x"},
                 "spec": {"driver": "topocni.io", "nodeName": NODE,
                          "pool": {"name": NODE, "generation": 9, "resourceSliceCount": 1},
                          "devices": [{"name": "vf-gone"}]}}
        with self.api.cond:
            for s in (other, stray):
                s["metadata"]["uid"], s["metadata"]["generation"] = "u-" + s["metadata"]["name"], 1
                self.api.slices[s["metadata"]["name"]] = s
                self.api._changed("slices", "ADDED", s)
        p = self.driver()
        self.wait_for("our slice", lambda: f"{NODE}-topocni.io-0" in self.api.resource_slices(), 10, p)
        self.wait_for("the stray deleted", lambda: "old-name-x" not in self.api.resource_slices(), 5, p)
        slices = self.api.resource_slices()
        self.assertIn("w1-other", slices)
        # The pool's generation goes past the stray's, so that no consumer prefers it.
        self.assertEqual(slices[f"{NODE}-topocni.io-0"]["spec"]["pool"]["generation"], 10)
        self.stop(p)

    def test_the_api_down_is_retried_and_what_changed_meanwhile_is_written_after(self):
        p = self.driver(interval=0.5)
        self.wait_for("slices", lambda: vf_name(VFS[3]) in self.devices()[0], 10, p)
        self.api.outage(True)
        pod, path = self.make_pod()
        conf = self.sriov_conf(VFS[3])
        self.assertOk(self.run_plugin("ADD", conf, container_id="c9", netns=path, ifname="net1"))
        time.sleep(2)
        self.assertIsNone(p.poll(), "the agent ended while the API was down")
        self.api.outage(False)
        self.wait_for("the VF gone after the outage", lambda: vf_name(VFS[3]) not in self.devices()[0], 40, p)
        self.assertIn("failed", self.log_of(p))
        self.assertOk(self.run_plugin("DEL", conf, container_id="c9", netns=path, ifname="net1"))
        self.stop(p)

    def test_the_daemonset_runs_it_and_its_rbac_grants_what_it_uses_and_of_resourceslices_exactly_that(self):
        import yaml
        examples = os.path.join(os.path.dirname(__file__), "..", "..", "examples")
        with open(os.path.join(examples, "rbac.yaml")) as f:
            docs = [d for d in yaml.safe_load_all(f) if d]
        role = next(d for d in docs if d["kind"] == "ClusterRole")
        granted = {(g, r, v) for rule in role["rules"] for g in rule["apiGroups"] for r in rule["resources"]
                   for v in rule["verbs"]}
        with open(os.path.join(examples, "daemonset.yaml")) as f:
            ds = next(d for d in yaml.safe_load_all(f) if d and d["kind"] == "DaemonSet")
        binding = next(d for d in docs if d["kind"] == "ClusterRoleBinding")
        self.assertEqual(ds["spec"]["template"]["spec"]["serviceAccountName"], binding["subjects"][0]["name"])
        (dra,) = [c for c in ds["spec"]["template"]["spec"]["containers"] if "dra-driver" in c["command"]]
        self.assertEqual(dra["env"][0]["name"], "NODE_NAME")
        stray = {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceSlice",
                 "metadata": {"name": "stray", "uid": "u-stray", "generation": 1},
                 "spec": {"driver": "topocni.io", "nodeName": NODE,
                          "pool": {"name": NODE, "generation": 1, "resourceSliceCount": 1}, "devices": []}}
        with self.api.cond:
            self.api.slices["stray"] = stray
            self.api._changed("slices", "ADDED", stray)
        p = self.driver()
        self.wait_for("slices", lambda: vf_name(VFS[0]) in self.devices()[0], 10, p)
        pod, path = self.make_pod()
        conf = self.sriov_conf(VFS[0])
        self.assertOk(self.run_plugin("ADD", conf, container_id="c1", netns=path, ifname="net1"))
        self.wait_for("the update", lambda: vf_name(VFS[0]) not in self.devices()[0], 5, p)
        verb = {"POST": "create", "PUT": "update", "DELETE": "delete", "PATCH": "patch"}
        used = set()
        for r in self.api.logged():
            if r["path"].startswith(SLICES):
                v = verb.get(r["method"]) or ("get" if r["path"] != SLICES else "list")
                used.add(("resource.k8s.io", "resourceslices", v))
            elif r["path"].startswith("/api/v1/nodes/"):
                used.add(("", "nodes", verb.get(r["method"], "get")))
            else:
                # a collection: LIST, or WATCH (the agent's view of its Node and the NADs)
                collection = r["path"]
                v = "watch" if r["query"].get("watch") in ("1", "true") else "list"
                if collection == "/api/v1/nodes":
                    used.add(("", "nodes", v))
                elif collection == "/apis/k8s.cni.cncf.io/v1/network-attachment-definitions":
                    used.add(("k8s.cni.cncf.io", "network-attachment-definitions", v))
        # The service account serves the DaemonSet's other containers too: everything the agent
        # uses is granted, and of resourceslices exactly that.
        self.assertLessEqual(used, granted, "examples/rbac.yaml grants less than the agent uses")
        self.assertEqual({g for g in granted if g[1] == "resourceslices"}, {u for u in used if u[1] == "resourceslices"})
        self.assertOk(self.run_plugin("DEL", conf, container_id="c1", netns=path, ifname="net1"))
        self.stop(p)

    def test_a_bad_resource_name_flag_is_a_usage_error_and_nothing_is_written(self):
        r = subprocess.run(["nsenter", f"--net=/run/netns/{self.node}", BIN, "dra-driver", "--node", NODE,
                            "--kubeconfig", self.kubeconfig, "--resource-name", "no-equals-sign", "--once"],
                           capture_output=True, text=True, timeout=30)
        self.assertEqual(r.returncode, 2, r)
        self.assertIn("PF=NAME", r.stderr)
        self.assertEqual(self.writes(), [])


if __name__ == "__main__":
    main()
