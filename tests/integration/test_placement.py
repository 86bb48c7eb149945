"""Placement validation and meta-plugin mode, on the real binary in real namespaces.

Each test node has a fake sysfs with two NUMA nodes (node0: CPUs 0-3, node1: CPUs 4-7),
two SR-IOV PFs with VFs (one per NUMA node), and two macvlan masters that are real veths
in the node netns whose sysfs entries place them on NUMA node 0 (25 Gb/s) and 1 (10 Gb/s).
A refused ADD must change nothing: no link in the pod or node netns, and every file and
directory under the test's temp dir (dataDir, stateDir and their parent) exactly as it was,
bar the node-label cache when labels come from the API; nor must the DEL after it. After
ADD and DEL, only named bookkeeping (cnitest.BOOKKEEPING) is left.
"""
import json
import os
import re
import shutil
import stat
import tempfile

from cnitest import NetnsTestCase, REF_DIR, main, sh
from fakenode import FakeApiServer, FakeSysfs, b64file, cpu_manager_state, make_pki, write_kubeconfig

POD0 = "a0d9c3f4-0000-4000-8000-00000000000a"      # exclusive CPUs 2-3: NUMA node 0
POD1 = "b1d9c3f4-0000-4000-8000-00000000000b"      # exclusive CPUs 4-5: NUMA node 1
WIDE = "c2d9c3f4-0000-4000-8000-00000000000c"      # CPUs 2-5: both nodes
SHARED = "d3d9c3f4-0000-4000-8000-00000000000d"    # no exclusive CPUs

VF0, VF0B, VF0C, PF0 = "0000:3b:02.0", "0000:3b:02.1", "0000:3b:02.2", "0000:3b:00.0"
VF1, PF1 = "0000:af:02.0", "0000:af:00.0"


# What a refused ADD may write when node labels come from the Kubernetes API: the node-label
# cache, which cnitest.BOOKKEEPING names (as paths under the config's stateDir, here "state").
LABEL_CACHE_PATTERNS = (r"state", r"state/node-labels", r"state/node-labels/[^/]+\.json")
LABEL_CACHE = [re.compile(p) for p in LABEL_CACHE_PATTERNS]


def pod_args(uid):
    return f"IgnoreUnknown=1;K8S_POD_NAMESPACE=default;K8S_POD_NAME=p;K8S_POD_INFRA_CONTAINER_ID=x;K8S_POD_UID={uid}"


class PlacementCase(NetnsTestCase):
    def setUp(self):
        super().setUp()
        try:
            self.make_node()
        except BaseException:
            self.tearDown()   # unittest skips tearDown when setUp fails; the namespaces must go
            raise

    def make_node(self):
        self.sys = FakeSysfs(os.path.join(self.tmp, "sys"))
        self.sys.numa_node(0, "0-3")
        self.sys.numa_node(1, "4-7")
        self.sys.pf(PF0, "ens1f0", 0, 25000)
        for i, vf in enumerate([VF0, VF0B, VF0C]):
            self.sys.vf(vf, PF0, 0, index=i)
        self.sys.pf(PF1, "ens2f0", 1, 10000)
        self.sys.vf(VF1, PF1, 1)
        # Masters: real veths in the node netns, with sysfs facts in the fake tree.
        self.master0 = f"pa{self.tag}"[:15]
        self.master1 = f"pb{self.tag}"[:15]
        for name, pci, numa, speed in [(self.master0, "0000:18:00.0", 0, 25000), (self.master1, "0000:86:00.0", 1, 10000)]:
            sh("ip", "link", "add", name, "type", "veth", "peer", "name", name[:13] + "px", ns=self.node)
            sh("ip", "link", "set", name, "up", ns=self.node)
            self.sys.pci(pci, numa)
            self.sys.netdev(name, pci=pci, speed=speed)
        self.kubelet = os.path.join(self.tmp, "kubelet")
        os.makedirs(self.kubelet)
        self.write_cpu_state()
        self.labels = os.path.join(self.tmp, "labels")
        self.write_labels("# NFD features.d style\nexample.com/zone=a\nexample.com/cores=16\nsriov-capable\n")

    def write_cpu_state(self, version=2):
        pods = {POD0: {"app": "2-3"}, POD1: {"app": "4", "sidecar": "5"}, WIDE: {"app": "2-5"}}
        with open(os.path.join(self.kubelet, "cpu_manager_state"), "w") as f:
            f.write(cpu_manager_state(pods, version))

    def write_labels(self, text):
        with open(self.labels, "w") as f:
            f.write(text)

    def pconf(self, master=None, **extra):
        """A macvlan config with the fake node's paths."""
        c = self.conf(attachment="macvlan", master=master or self.master0, sysfsRoot=self.sys.root,
                      kubeletRootDir=self.kubelet, nodeName="worker-1", nodeLabelsFile=self.labels)
        c.update(extra)
        return c

    def add(self, conf, uid=POD0, container_id="c1", **kw):
        pod, path = self.make_pod()
        out = self.run_plugin("ADD", conf, container_id=container_id, netns=path, args=pod_args(uid), **kw)
        return out, pod, path

    def node_links(self):
        return set(self.links(self.node))

    def snapshot(self):
        """What a refused ADD must leave as it was: the node's links and every file and
        directory under the test's temp dir (dataDir, stateDir and their parent), no exclusions."""
        return {"node links": self.node_links(), "files": self.files()}

    def add_refused(self, conf, code, *words, uid=POD0, container_id="c1", pod=None, label_cache=False):
        """ADD (CNI_ARGS of pod `uid`, none if None) fails with `code` naming `words`, and changes
        nothing: no link in the pod, the node's links and every file under the temp dir exactly
        as they were. With label_cache, labels come from the Kubernetes API and the ADD may write
        the node-label cache (<stateDir>/node-labels/<node>.json, named bookkeeping), and nothing
        else. Then the DEL a runtime sends anyway (same config and environment) succeeds and
        changes nothing at all. Returns the ADD's outcome."""
        pod, path = pod or self.make_pod()
        before = self.snapshot()
        call = dict(container_id=container_id, netns=path, args=pod_args(uid) if uid else None)
        out = self.run_plugin("ADD", conf, **call)
        self.assertError(out, code, *words)
        what = f"refused ADD ({out.json['msg']})"
        self.assertEqual(set(self.links(pod)), {"lo"}, f"{what}: links in the pod")
        self.assertEqual(self.node_links(), before["node links"], f"{what}: node links")
        if code == 100:
            self.assertOnlyRefusalCounted(before["files"], out, conf["name"], state_dir=conf.get("stateDir"),
                                          also=LABEL_CACHE_PATTERNS if label_cache else ())
        elif label_cache:
            self.assertOnlyBookkeepingLeft(before["files"], what, state_dir=conf.get("stateDir"), allowed=LABEL_CACHE)
        else:
            self.assertFilesUnchanged(before["files"], what)
        after = self.snapshot()
        self.assertOk(self.run_plugin("DEL", conf, **call))
        self.assertEqual(set(self.links(pod)), {"lo"}, "DEL after the refused ADD: links in the pod")
        self.assertEqual(self.node_links(), after["node links"], "DEL after the refused ADD: node links")
        self.assertFilesUnchanged(after["files"], "DEL after the refused ADD")
        return out

    def assertRefused(self, conf, constraints, *words, **kw):
        """ADD is refused with code 100 naming each constraint; it and the DEL after it change
        nothing (add_refused). Returns the ADD's outcome."""
        out = self.add_refused(conf, 100, *words, **kw)
        self.assertTrue(out.json["msg"].startswith("placement constraint not met: "), out)
        for c in constraints:
            self.assertIn(c, out.json["msg"])
        return out

    def add_check_del(self, conf, uid=POD0, container_id="c1"):
        """ADD, CHECK and DEL succeed; nothing is left in the pod, and of the files only named
        bookkeeping (stateDir as the config names it)."""
        before = self.files()
        out, pod, path = self.add(conf, uid, container_id)
        self.assertOk(out)
        self.assertOk(self.run_plugin("CHECK", dict(conf, prevResult=out.json), container_id=container_id, netns=path,
                                      args=pod_args(uid)))
        self.assertOk(self.run_plugin("DEL", conf, container_id=container_id, netns=path, args=pod_args(uid)))
        self.assertEqual(set(self.links(pod)), {"lo"})
        self.assertOnlyBookkeepingLeft(before, "ADD, CHECK and DEL", state_dir=conf.get("stateDir"))
        return out

    def outside_dir(self):
        """A directory outside the temp dir, for files that are not the node's (the plugin log
        a config asks for, the fake API server's own files); removed after the test."""
        if not hasattr(self, "outside"):
            self.outside = tempfile.mkdtemp(prefix="topocni-out-")
            self.addCleanup(shutil.rmtree, self.outside, True)
        return self.outside


class NodeSelector(PlacementCase):
    def test_map_selector_passes_and_a_mismatch_changes_nothing(self):
        out = self.add_check_del(self.pconf(nodeSelector={"example.com/zone": "a",
                                                          "feature.node.kubernetes.io/sriov-capable": "true"}))
        self.assertEqual(out.json["interfaces"][0]["name"], "eth0")
        self.assertRefused(self.pconf(nodeSelector={"example.com/zone": "b"}), ["nodeSelector"], "node 'worker-1'",
                           "wants example.com/zone=b, has example.com/zone=a")

    def test_match_expressions_all_failures_listed(self):
        sel = {"matchLabels": {"example.com/zone": "a"},
               "matchExpressions": [{"key": "example.com/cores", "operator": "Gt", "values": ["8"]},
                                    {"key": "example.com/gpu", "operator": "NotIn", "values": ["none"]},
                                    {"key": "example.com/rack", "operator": "DoesNotExist"}]}
        self.add_check_del(self.pconf(nodeSelector=sel))
        sel["matchExpressions"] += [{"key": "example.com/cores", "operator": "Lt", "values": ["8"]},
                                    {"key": "example.com/gpu", "operator": "Exists"}]
        self.assertRefused(self.pconf(nodeSelector=sel), ["nodeSelector"],
                           "wants example.com/cores<8, has example.com/cores=16",
                           "wants example.com/gpu, has example.com/gpu absent")

    def test_invalid_selector_is_code_7_naming_the_part(self):
        sel = {"matchExpressions": [{"key": "a", "operator": "In", "values": ["x"]},
                                    {"key": "b", "operator": "Equals", "values": ["x"]}]}
        self.add_refused(self.pconf(nodeSelector=sel), 7, "nodeSelector.matchExpressions[1].operator")

    def test_json_labels_file_and_missing_file(self):
        self.write_labels(json.dumps({"example.com/zone": "a"}))
        self.add_check_del(self.pconf(nodeSelector={"example.com/zone": "a"}))
        self.add_refused(self.pconf(nodeSelector={"example.com/zone": "a"}, nodeLabelsFile=os.path.join(self.tmp, "absent")),
                         11, "nodeLabelsFile", "does not exist")

    def test_check_reports_a_violation_that_appeared_and_del_never_checks(self):
        conf = self.pconf(nodeSelector={"example.com/zone": "a"})
        before = self.files()
        out, pod, path = self.add(conf)
        self.assertOk(out)
        self.write_labels("example.com/zone=b\n")
        before[self.labels] = self.files()[self.labels]   # the test's own change, not the plugin's
        check = self.run_plugin("CHECK", dict(conf, prevResult=out.json), netns=path, args=pod_args(POD0))
        self.assertError(check, 100, "nodeSelector", "has example.com/zone=b")
        self.assertOk(self.run_plugin("DEL", conf, netns=path, args=pod_args(POD0)))
        self.assertEqual(set(self.links(pod)), {"lo"})
        self.assertEqual(self.ipam_files(conf["name"]), [])
        self.assertOnlyBookkeepingLeft(before, "ADD, CHECK and DEL")


class Numa(PlacementCase):
    def test_single_numa_node(self):
        topo = {"numaPolicy": "single-numa-node"}
        self.add_check_del(self.pconf(topology=topo), uid=POD0)
        self.add_check_del(self.pconf(master=self.master1, topology=topo), uid=POD1)
        self.assertRefused(self.pconf(master=self.master1, topology=topo), ["topology.numaPolicy"],
                           f"master '{self.master1}' is on NUMA node 1; pod {POD0} CPUs 2-3 are on NUMA node 0; "
                           "numaPolicy single-numa-node", uid=POD0)
        # A pod spanning both nodes fits no single node.
        self.assertRefused(self.pconf(topology=topo), ["topology.numaPolicy"], "CPUs 2-5 are on NUMA nodes 0,1", uid=WIDE)

    def test_restricted_and_best_effort(self):
        self.add_check_del(self.pconf(master=self.master1, topology={"numaPolicy": "restricted"}), uid=WIDE)
        self.assertRefused(self.pconf(master=self.master1, topology={"numaPolicy": "restricted"}),
                           ["topology.numaPolicy"], "numaPolicy restricted", uid=POD0)
        log = os.path.join(self.outside_dir(), "topocni.log")
        self.add_check_del(self.pconf(master=self.master1, topology={"numaPolicy": "best-effort"}, logFile=log,
                                      logLevel="warning"), uid=POD0)
        with open(log) as f:
            text = f.read()
        self.assertIn("warning", text)
        self.assertIn(f"topology.numaPolicy: master '{self.master1}' is on NUMA node 1", text)

    def test_cpu_manager_state_versions(self):
        for version in (2, 3, 4):
            with self.subTest(version=version):
                self.write_cpu_state(version)
                self.add_check_del(self.pconf(topology={"numaPolicy": "single-numa-node"}), uid=POD0)
                self.assertRefused(self.pconf(master=self.master1, topology={"numaPolicy": "single-numa-node"}),
                                   ["topology.numaPolicy"], "CPUs 2-3 are on NUMA node 0")

    def test_unknown_topology_allow_logs_and_deny_refuses(self):
        topo = {"numaPolicy": "single-numa-node"}
        log = os.path.join(self.outside_dir(), "topocni.log")
        self.add_check_del(self.pconf(topology=topo, logFile=log, logLevel="warning"), uid=SHARED)
        with open(log) as f:
            self.assertIn(f"pod {SHARED} has no exclusive CPUs", f.read())
        self.assertRefused(self.pconf(topology=dict(topo, unknownTopology="deny")), ["topology.numaPolicy"],
                           "no exclusive CPUs", "unknownTopology deny", uid=SHARED)
        # A master without a device link (virtual) has no NUMA node either.
        os.unlink(os.path.join(self.sys.root, "class/net", self.master0, "device"))
        self.assertRefused(self.pconf(topology={"numaNode": 0, "unknownTopology": "deny"}), ["topology.numaNode"],
                           "has no NUMA node in sysfs")
        os.remove(os.path.join(self.kubelet, "cpu_manager_state"))
        self.assertRefused(self.pconf(master=self.master1, topology=dict(topo, unknownTopology="deny")),
                           ["topology.numaPolicy"], "cpu_manager_state' does not exist")

    def test_numa_node(self):
        self.add_check_del(self.pconf(master=self.master1, topology={"numaNode": 1}))
        self.assertRefused(self.pconf(topology={"numaNode": 1}), ["topology.numaNode"],
                           f"master '{self.master0}' is on NUMA node 0; numaNode 1")


class Capacity(PlacementCase):
    def test_min_link_speed(self):
        self.add_check_del(self.pconf(topology={"minLinkSpeedMbps": 25000}))
        self.assertRefused(self.pconf(master=self.master1, topology={"minLinkSpeedMbps": 25000}),
                           ["topology.minLinkSpeedMbps"],
                           f"master '{self.master1}' runs at 10000 Mb/s; minLinkSpeedMbps 25000")

    def test_max_attachments_per_master_counts_macvlans_inside_pods(self):
        conf = self.pconf(topology={"maxAttachmentsPerMaster": 2})
        pods = []
        for i in range(2):
            out, pod, path = self.add(conf, container_id=f"m{i}")
            self.assertOk(out)
            pods.append((out, pod, path))
        pod3, path3 = self.make_pod()
        self.assertRefused(conf, ["topology.maxAttachmentsPerMaster"],
                           f"master '{self.master0}' already has 2 macvlan links", "maxAttachmentsPerMaster 2",
                           container_id="m2", pod=(pod3, path3))
        # CHECK does not count the attachment itself; the other master is free.
        first, _, path0 = pods[0]
        self.assertOk(self.run_plugin("CHECK", dict(conf, prevResult=first.json), container_id="m0", netns=path0,
                                      args=pod_args(POD0)))
        self.assertOk(self.run_plugin("ADD", self.pconf(master=self.master1, topology={"maxAttachmentsPerMaster": 2}),
                                      container_id="m2", netns=path3, args=pod_args(POD0)))
        self.assertOk(self.run_plugin("DEL", conf, container_id="m0", netns=path0, args=pod_args(POD0)))
        out = self.run_plugin("ADD", conf, container_id="m3", netns=path3, ifname="net2", args=pod_args(POD0))
        self.assertOk(out)

    def test_min_free_addresses(self):
        # 10.79.0.0/29: .1 is the gateway, .2-.6 can be handed out (5 addresses).
        conf = self.conf(subnet="10.79.0.0/29", topology={"minFreeAddresses": 3})
        added = []
        for i in range(2):
            pod, path = self.make_pod()
            out = self.run_plugin("ADD", conf, container_id=f"f{i}", netns=path)
            self.assertOk(out)
            added.append((out, path))
        pod, path = self.make_pod()
        self.add_refused(conf, 100, "topology.minFreeAddresses", "2 reserved, 2 free after this allocation",
                         "minFreeAddresses 3", uid=None, container_id="f2", pod=(pod, path))
        self.assertEqual(len(self.ipam_files(conf["name"])), 2)
        # CHECK counts the attachment's own address as taken already: 3 stay free.
        first, path0 = added[0]
        self.assertOk(self.run_plugin("CHECK", dict(conf, prevResult=first.json), container_id="f0", netns=path0))
        self.assertOk(self.run_plugin("DEL", conf, container_id="f1", netns=added[1][1]))
        self.assertOk(self.run_plugin("ADD", conf, container_id="f2", netns=path))

    def test_every_failure_is_reported_at_once(self):
        out = self.assertRefused(self.pconf(master=self.master1, nodeSelector={"example.com/zone": "b"},
                                            topology={"numaNode": 0, "minLinkSpeedMbps": 25000,
                                                      "numaPolicy": "single-numa-node"}),
                                 ["nodeSelector", "topology.numaPolicy", "topology.numaNode",
                                  "topology.minLinkSpeedMbps"], "10000 Mb/s")
        self.assertEqual(out.json["details"].count(" | "), 3)


class SriovDevice(PlacementCase):
    """VF facts through meta-plugin mode: Multus passes deviceID, the delegate is ptp."""

    def vconf(self, device, **extra):
        c = {"cniVersion": "1.0.0", "name": f"sv{self.tag}", "type": "topocni", "stateDir": self.state_dir,
             "sysfsRoot": self.sys.root, "kubeletRootDir": self.kubelet, "deviceID": device,
             "delegate": {"type": "ptp", "ipam": {"type": "host-local", "subnet": "10.81.0.0/24",
                                                  "dataDir": self.data_dir}}}
        c.update(extra)
        return c

    def test_vf_numa_speed_and_vfs_in_use(self):
        topo = {"numaPolicy": "single-numa-node", "minLinkSpeedMbps": 25000, "maxAttachmentsPerMaster": 3}
        self.add_check_del(self.vconf(VF0, topology=topo))
        self.assertRefused(self.vconf(VF1, topology=topo), ["topology.numaPolicy", "topology.minLinkSpeedMbps"],
                           f"VF {VF1} is on NUMA node 1; pod {POD0} CPUs 2-3 are on NUMA node 0; numaPolicy single-numa-node",
                           f"PF 'ens2f0' of VF {VF1} runs at 10000 Mb/s")
        # Two other VFs of the same PF are in use (SR-IOV state records), so a limit of 2 is reached.
        os.makedirs(os.path.join(self.state_dir, "sriov"))
        for vf in (VF0B, VF0C):
            with open(os.path.join(self.state_dir, "sriov", f"{vf}.json"), "w") as f:
                json.dump({"pciAddress": vf, "pfPciAddress": PF0, "pf": "ens1f0", "owner": {"containerID": "x"}}, f)
        self.add_check_del(self.vconf(VF0, topology=topo))
        self.add_refused(self.vconf(VF0, topology={"maxAttachmentsPerMaster": 2}), 100,
                         "topology.maxAttachmentsPerMaster", f"PF {PF0} of VF {VF0} has 2 VFs in use")


class ApiLabels(PlacementCase):
    def make_node(self):
        super().make_node()
        self.api = None
        self.pki = make_pki(os.path.join(self.tmp, "pki"))

    def tearDown(self):
        if self.api:
            self.api.stop()
        super().tearDown()

    def start_api(self, token=None):
        # The server's own files (its request log) are the cluster's, not the node's: outside the temp dir.
        self.api = FakeApiServer(self.node, self.pki, {"worker-1": {"example.com/zone": "a", "example.com/api": "yes"}},
                                 self.outside_dir(), token=token)
        return self.api

    def aconf(self, kubeconfig, **extra):
        c = self.pconf(kubeconfig=kubeconfig, nodeSelector={"example.com/api": "yes"})
        del c["nodeLabelsFile"]
        c.update(extra)
        return c

    def test_client_certificate_and_the_cache_prevents_a_second_request(self):
        api = self.start_api()
        # Multus writes the server with brackets even around an IPv4 address.
        kc = write_kubeconfig(os.path.join(self.tmp, "kubeconfig"), f"https://[127.0.0.1]:{api.port}",
                              ca_data=b64file(f"{self.pki}/ca.crt"), cert_data=b64file(f"{self.pki}/client.crt"),
                              key_data=b64file(f"{self.pki}/client.key"))
        self.add_check_del(self.aconf(kc), container_id="a1")
        reqs = api.requests()
        self.assertEqual(len(reqs), 1, reqs)
        self.assertEqual(reqs[0]["path"], "/api/v1/nodes/worker-1")
        self.assertEqual(reqs[0]["auth"], "cert")
        self.assertEqual(reqs[0]["accept"], "application/json")
        self.add_check_del(self.aconf(kc), container_id="a2")   # ADD and CHECK again: all from the cache
        self.assertEqual(len(api.requests()), 1)
        cache = json.load(open(os.path.join(self.state_dir, "node-labels", "worker-1.json")))
        self.assertEqual(cache["labels"]["example.com/api"], "yes")
        # A refusal from API labels (from the cache) changes nothing either.
        self.assertRefused(self.aconf(kc, nodeSelector={"example.com/zone": "b"}), ["nodeSelector"],
                           "labels from the API at https://127.0.0.1:", "has example.com/zone=a")
        # TTL 0: every ADD asks the API.
        self.add_check_del(self.aconf(kc, nodeLabelsTTL=0), container_id="a3")
        self.assertEqual(len(api.requests()), 3)

    def test_token_file_ca_file_and_refused_credentials(self):
        api = self.start_api(token="s3cret")
        with open(os.path.join(self.tmp, "token"), "w") as f:
            f.write("s3cret\n")
        kc = write_kubeconfig(os.path.join(self.tmp, "kubeconfig"), f"https://127.0.0.1:{api.port}",
                              ca_file="pki/ca.crt", token_file="token")
        self.add_check_del(self.aconf(kc))
        self.assertEqual([r["auth"] for r in api.requests()], ["token"])
        bad = write_kubeconfig(os.path.join(self.tmp, "bad.kubeconfig"), f"https://127.0.0.1:{api.port}",
                               ca_file="pki/ca.crt", token="wrong")
        # Each refusal is remembered in the label cache of its own stateDir.
        self.add_refused(self.aconf(bad, stateDir=os.path.join(self.tmp, "s1")), 7,
                         "refused the credentials (HTTP 401)", "Unauthorized", container_id="b1", label_cache=True)
        # A server certificate that does not verify against the configured CA is a config error.
        other = make_pki(os.path.join(self.tmp, "other-pki"))
        wrong_ca = write_kubeconfig(os.path.join(self.tmp, "ca.kubeconfig"), f"https://127.0.0.1:{api.port}",
                                    ca_data=b64file(f"{other}/ca.crt"), token="s3cret")
        self.add_refused(self.aconf(wrong_ca, stateDir=os.path.join(self.tmp, "s2")), 7, "kubeconfig", container_id="b2",
                         label_cache=True)
        unknown = self.aconf(kc, nodeName="worker-9", stateDir=os.path.join(self.tmp, "s3"))
        self.add_refused(unknown, 7, "nodeName: node 'worker-9' not found", container_id="b3", label_cache=True)

    def test_unreachable_api_is_code_11_unless_a_labels_file_is_given(self):
        # Nothing listens on port 1 of the node netns' loopback.
        kc = write_kubeconfig(os.path.join(self.tmp, "kubeconfig"), "https://127.0.0.1:1",
                              ca_data=b64file(f"{self.pki}/ca.crt"), token="t")
        # The failure is remembered in the label cache: all the refused ADD may write.
        self.add_refused(self.aconf(kc), 11, "Kubernetes API unreachable", "127.0.0.1:1", label_cache=True)
        self.assertEqual(self.ipam_files(self.conf()["name"]), [])
        # A storm of ADDs right after fails fast on the remembered failure, and writes nothing.
        self.add_refused(self.aconf(kc), 11, "not retried yet", container_id="c2")
        # With a labels file the file decides.
        conf = self.aconf(kc, nodeLabelsFile=self.labels, nodeSelector={"example.com/zone": "a"},
                          stateDir=os.path.join(self.tmp, "s2"))
        self.add_check_del(conf, container_id="c3")

    def test_api_and_file_labels_are_merged(self):
        api = self.start_api()
        kc = write_kubeconfig(os.path.join(self.tmp, "kubeconfig"), f"https://127.0.0.1:{api.port}",
                              ca_data=b64file(f"{self.pki}/ca.crt"), cert_data=b64file(f"{self.pki}/client.crt"),
                              key_data=b64file(f"{self.pki}/client.key"))
        sel = {"example.com/api": "yes", "feature.node.kubernetes.io/sriov-capable": "true"}
        self.add_check_del(self.aconf(kc, nodeLabelsFile=self.labels, nodeSelector=sel))
        self.assertRefused(self.aconf(kc, nodeSelector=sel), ["nodeSelector"],   # API only: no file label
                           "feature.node.kubernetes.io/sriov-capable absent", container_id="m2")


class MetaPlugin(PlacementCase):
    """"delegate": any plugin gains placement checks; Debian's reference plugins as delegates."""

    def mconf(self, delegate, version="1.0.0", **extra):
        c = {"cniVersion": version, "name": f"mp{self.tag}", "type": "topocni", "stateDir": self.state_dir,
             "sysfsRoot": self.sys.root, "kubeletRootDir": self.kubelet, "nodeName": "worker-1",
             "nodeLabelsFile": self.labels, "delegate": delegate}
        c.update(extra)
        return c

    def ipam(self, subnet="10.82.0.0/24"):
        return {"type": "host-local", "subnet": subnet, "dataDir": self.data_dir}

    def test_ptp_add_check_del_and_a_refused_add(self):
        conf = self.mconf({"type": "ptp", "ipam": self.ipam()}, nodeSelector={"example.com/zone": "a"})
        pod, path = self.make_pod()
        before = self.files()
        out = self.run_plugin("ADD", conf, netns=path, args=pod_args(POD0))
        self.assertOk(out)
        self.assertEqual(out.json["cniVersion"], "1.0.0")
        self.assertEqual(self.links(pod)["eth0"]["linkinfo"]["info_kind"], "veth")
        self.assertEqual(len(self.ipam_files(conf["name"])), 1)
        self.assertOk(self.run_plugin("CHECK", dict(conf, prevResult=out.json), netns=path, args=pod_args(POD0)))
        self.assertOk(self.run_plugin("DEL", dict(conf, prevResult=out.json), netns=path))
        self.assertOk(self.run_plugin("DEL", conf, netns=path))
        self.assertEqual(set(self.links(pod)), {"lo"})
        self.assertEqual(self.ipam_files(conf["name"]), [])
        self.assertOnlyBookkeepingLeft(before, "ptp ADD, CHECK, DEL, DEL")

        # DEL is forwarded even though ADD was refused (kubelet always sends it); it changes nothing.
        refused = self.mconf({"type": "ptp", "ipam": self.ipam()}, nodeSelector={"example.com/zone": "b"})
        self.assertRefused(refused, ["nodeSelector"], uid=None, container_id="r1")

    def test_macvlan_delegate_gains_numa_checks(self):
        good = self.mconf({"type": "macvlan", "master": self.master0, "ipam": self.ipam()},
                          topology={"numaNode": 0, "maxAttachmentsPerMaster": 1})
        pod, path = self.make_pod()
        out = self.run_plugin("ADD", good, netns=path, args=pod_args(POD0))
        self.assertOk(out)
        self.assertEqual(self.links(pod)["eth0"]["linkinfo"]["info_kind"], "macvlan")
        self.assertOk(self.run_plugin("CHECK", dict(good, prevResult=out.json), netns=path))
        # The master now carries one macvlan (inside the first pod): the limit of 1 is reached.
        self.add_refused(good, 100, "topology.maxAttachmentsPerMaster", "already has 1 macvlan link", uid=None,
                         container_id="c2")
        self.assertOk(self.run_plugin("DEL", good, netns=path))

        bad = self.mconf({"type": "macvlan", "master": self.master1, "ipam": self.ipam()}, topology={"numaNode": 0})
        self.assertRefused(bad, ["topology.numaNode"], f"master '{self.master1}' is on NUMA node 1", uid=None)

    def test_result_is_converted_to_the_config_version(self):
        conf = self.mconf({"type": "ptp", "ipam": self.ipam("10.83.0.0/24")}, version="0.3.1")
        pod, path = self.make_pod()
        out = self.run_plugin("ADD", conf, netns=path)
        self.assertOk(out)
        self.assertEqual(out.json["cniVersion"], "0.3.1")
        self.assertEqual(out.json["ips"][0]["version"], "4")
        self.assertOk(self.run_plugin("DEL", conf, netns=path))

    def fake_plugin(self, result=None, error=None):
        """A delegate that records its stdin and CNI_COMMAND and prints `result` (or an error)."""
        d = os.path.join(self.tmp, "fakebin")
        os.makedirs(d, exist_ok=True)
        record = os.path.join(self.tmp, "fake-calls.jsonl")
        script = os.path.join(d, "fakeplug")
        with open(script, "w") as f:
            f.write(f"""#!/usr/bin/python3
import json, os, sys
data = json.load(sys.stdin)
with open({record!r}, "a") as f:
    f.write(json.dumps({{"command": os.environ.get("CNI_COMMAND"), "ifname": os.environ.get("CNI_IFNAME"),
                         "stdin": data}}) + "\\n")
error = {json.dumps(error)!r}
if json.loads(error):
    print(error)
    sys.exit(1)
if os.environ.get("CNI_COMMAND") == "ADD":
    print({json.dumps(result)!r})
""")
        os.chmod(script, os.stat(script).st_mode | stat.S_IEXEC)
        return d, record

    def calls(self, record):
        with open(record) as f:
            return [json.loads(l) for l in f]

    def test_delegate_stdin_carries_the_runtime_keys(self):
        result = {"cniVersion": "1.1.0", "interfaces": [{"name": "net1", "sandbox": "/x"}],
                  "ips": [{"address": "10.9.0.5/24", "gateway": "10.9.0.1", "interface": 0}]}
        bindir, record = self.fake_plugin(result)
        conf = self.mconf({"type": "fakeplug", "vlan": 7, "runtimeConfig": {"mine": 1}}, version="1.1.0",
                          deviceID=VF0, runtimeConfig={"mac": "02:00:00:00:00:09"}, args={"cni": {"labels": ["x"]}},
                          topology={"numaNode": 0})
        pod, path = self.make_pod()
        out = self.run_plugin("ADD", conf, netns=path, ifname="net1", path=bindir)
        self.assertOk(out)
        self.assertEqual(out.json["ips"][0]["address"], "10.9.0.5/24")
        self.assertOk(self.run_plugin("CHECK", dict(conf, prevResult=out.json), netns=path, ifname="net1", path=bindir))
        self.assertOk(self.run_plugin("DEL", dict(conf, prevResult=out.json), netns=path, ifname="net1", path=bindir))
        gc = dict(conf, **{"cni.dev/valid-attachments": [{"containerID": "c1", "ifname": "net1"}]})
        self.assertOk(self.run_plugin("GC", gc, path=bindir))
        self.assertOk(self.run_plugin("STATUS", conf, path=bindir))
        calls = self.calls(record)
        self.assertEqual([c["command"] for c in calls], ["ADD", "CHECK", "DEL", "GC", "STATUS"])
        add = calls[0]["stdin"]
        self.assertEqual(add["cniVersion"], "1.1.0")
        self.assertEqual(add["name"], conf["name"])
        self.assertEqual(add["type"], "fakeplug")
        self.assertEqual(add["vlan"], 7)
        self.assertEqual(add["deviceID"], VF0)
        self.assertEqual(add["runtimeConfig"], {"mine": 1, "mac": "02:00:00:00:00:09"})
        self.assertEqual(add["args"], {"cni": {"labels": ["x"]}})
        self.assertNotIn("delegate", add)
        self.assertNotIn("topology", add)
        self.assertNotIn("prevResult", add)
        self.assertEqual(calls[0]["ifname"], "net1")
        self.assertEqual(calls[1]["stdin"]["prevResult"]["ips"][0]["address"], "10.9.0.5/24")
        self.assertIn("prevResult", calls[2]["stdin"])
        self.assertEqual(calls[3]["stdin"]["cni.dev/valid-attachments"], [{"containerID": "c1", "ifname": "net1"}])

    def test_delegate_errors_keep_their_code_and_name_the_plugin(self):
        bindir, _ = self.fake_plugin(error={"cniVersion": "1.0.0", "code": 7, "msg": "bad vlan", "details": "vlan 5000"})
        pod, path = self.make_pod()
        out = self.run_plugin("ADD", self.mconf({"type": "fakeplug"}), netns=path, path=bindir)
        self.assertError(out, 7, "delegate plugin 'fakeplug' ADD: bad vlan", "vlan 5000")
        out = self.run_plugin("ADD", self.mconf({"type": "nosuchplugin"}), netns=path, path=bindir)
        self.assertError(out, 7, "delegate.type: plugin 'nosuchplugin' not found in CNI_PATH")
        out = self.run_plugin("ADD", self.mconf({"type": "../../bin/true"}), netns=path)
        self.assertError(out, 7, "delegate.type: '../../bin/true' must be a plugin name")
        # A plugin that is not there holds nothing of an attachment it never got an ADD for:
        # that DEL must not block the pod.
        out = self.run_plugin("DEL", self.mconf({"type": "nosuchplugin"}), container_id="never", netns=path, path=REF_DIR)
        self.assertOk(out)
        # The delegate that got (and failed) an ADD keeps a record: its DEL is forwarded, and
        # with the plugin gone that DEL fails, to be retried.
        out = self.run_plugin("DEL", self.mconf({"type": "nosuchplugin"}), netns=path, path=REF_DIR)
        self.assertError(out, 7, "not found in CNI_PATH")
        # Its own DEL fails too (this fake fails every verb): the runtime sees it, as it would
        # without topocni in between.
        self.assertError(self.run_plugin("DEL", self.mconf({"type": "fakeplug"}), netns=path, path=bindir), 7,
                         "delegate plugin 'fakeplug' DEL: bad vlan")


if __name__ == "__main__":
    main()
