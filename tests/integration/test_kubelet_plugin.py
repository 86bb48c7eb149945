"""kubelet's DRA plugin (topocni-dra, run by `topocni dra-driver`): registration with
kubelet's plugin watcher, NodePrepareResources and NodeUnprepareResources over the real
gRPC protocol, and ADD attaching the VF a prepared claim holds.

The node is test_dra_driver.py's (a netns with a fake sysfs tree: one PF at 25 Gb/s on
NUMA node 1 with 4 VFs whose netdevs are veths). kubelet is fakekubelet.FakeKubelet, built
from the same vendored .proto files with Debian's python3-grpcio: it registers the plugin
as kubelet's plugin watcher does and calls it as kubelet's DRA manager does. The claims
are fakenode.allocated_claim objects in the stand-in API, as the scheduler leaves them.
"""
import http.client
import json
import os
import ssl
import subprocess
import time
import uuid

import grpc

from cnitest import BIN, main
from fakekubelet import FakeKubelet, RegistrationError
from fakenode import allocated_claim, nad_object, socket_in_netns
from multus_dra import delegates_for
from test_dra_driver import NODE, PF, VFS, DraDriverCase, vf_name

DRIVER = "topocni.io"
POD_A = ("pod-a", "a0000000-0000-4000-8000-00000000000a")
POD_B = ("pod-b", "b0000000-0000-4000-8000-00000000000b")
CLAIMS = "/apis/resource.k8s.io/v1/namespaces/default/resourceclaims/"


class KubeletPluginCase(DraDriverCase):
    def setUp(self):
        super().setUp()
        # kubelet's directories beside the test's temp dir, not in it: its file snapshots
        # (cnitest's files()) read files, and a socket is none.
        self.registry = os.path.join(self.fixture, "kubelet", "plugins_registry")
        self.plugin_dir = os.path.join(self.fixture, "kubelet", "plugins", DRIVER)
        self.kubelets = []

    def tearDown(self):
        for k in self.kubelets:
            k.close()
        super().tearDown()

    def plugin_flags(self):
        return ["--plugin-registration-dir", self.registry, "--plugin-dir", self.plugin_dir]

    def start_plugin(self):
        """The plugin and a registered fake kubelet (self.proc, self.k), from a setUp: a
        failure here runs tearDown, which unittest skips when setUp fails, so nothing leaks."""
        try:
            self.proc = self.driver()
            self.k = self.fake_kubelet()
        except BaseException:
            self.tearDown()
            raise

    def fake_kubelet(self, **kw):
        k = FakeKubelet(self.registry, **kw)
        self.kubelets.append(k)
        return k.wait_registered(timeout=10)

    def claim(self, name, device, pods=(POD_A,), pool=NODE, annotations=None, **extra):
        result = {"request": extra.pop("request", "vf"), "driver": DRIVER, "pool": pool, "device": device, **extra}
        obj = self.api.put_claim(allocated_claim("default", name, NODE, [result], list(pods), annotations=annotations))
        return {"namespace": "default", "uid": obj["metadata"]["uid"], "name": name}

    def dra_files(self):
        root = os.path.join(self.state_dir, "dra")
        return sorted(os.path.relpath(os.path.join(d, f), root) for d, _, fs in os.walk(root) for f in fs)

    def prepared(self, claim, vf, pod=POD_A):
        """The files a prepared VF claim leaves: its record and the VF's holder (no pod index:
        ADD finds a VF's claim by its deviceID)."""
        return [f"claims/{claim['uid']}.json", f"devices/{vf}"]

    def ledger_entries(self):
        root = os.path.join(self.state_dir, "bandwidth")
        return sorted(os.path.relpath(os.path.join(d, f), root) for d, _, fs in os.walk(root) for f in fs
                      if f.endswith(".json"))

    def claim_gets(self):
        return [r for r in self.api.logged() if r["method"] == "GET" and r["path"].startswith(CLAIMS)]


class Registration(KubeletPluginCase):
    def test_the_plugin_registers_as_kubelets_plugin_watcher_expects_and_goes_away_on_sigterm(self):
        p = self.driver()
        k = self.fake_kubelet()
        self.assertEqual((k.info.type, k.info.name), ("DRAPlugin", DRIVER))
        self.assertEqual(k.info.endpoint, os.path.join(self.plugin_dir, "dra.sock"))
        self.assertEqual(list(k.info.supported_versions), ["v1.DRAPlugin", "v1beta1.DRAPlugin"])
        self.assertEqual(k.version, "v1.DRAPlugin")
        self.assertEqual(k.notifications, [(True, "")])
        self.wait_for("the registration is logged", lambda: "kubelet registered DRA driver topocni.io" in self.log_of(p), 5, p)
        reg = os.path.join(self.registry, "topocni.io-reg.sock")
        self.assertTrue(os.path.exists(reg))
        self.stop(p)
        self.assertFalse(os.path.exists(reg), "the registration socket outlived the plugin")
        self.assertFalse(os.path.exists(k.info.endpoint), "dra.sock outlived the plugin")

    def test_a_kubelet_of_1_33_that_knows_only_v1beta1_prepares_through_it_without_a_share_id(self):
        self.driver()
        k = self.fake_kubelet(known_versions=("v1beta1.DRAPlugin",))
        self.assertEqual(k.version, "v1beta1.DRAPlugin")
        c = self.claim("c1", vf_name(VFS[0]))
        got = k.prepare([c])
        self.assertEqual(got, {c["uid"]: {"devices": [{"request_names": ["vf"], "pool_name": NODE,
                                                        "device_name": vf_name(VFS[0]), "cdi_device_ids": [],
                                                        "share_id": None}], "error": ""}})

    def test_a_refused_registration_is_logged_and_the_plugin_keeps_serving(self):
        p = self.driver()
        with self.assertRaises(RegistrationError):
            self.fake_kubelet(known_versions=("v1alpha4.Node",))
        self.wait_for("the refusal is logged", lambda: "kubelet refused to register DRA driver" in self.log_of(p), 5, p)
        self.assertIsNone(p.poll())
        k = self.fake_kubelet()   # kubelet tries again (a new watcher event): served as before
        self.assertEqual(k.version, "v1.DRAPlugin")

    def test_a_stale_socket_is_replaced_and_a_socket_path_too_long_is_refused_naming_the_flag(self):
        os.makedirs(self.plugin_dir)
        stale = os.path.join(self.plugin_dir, "dra.sock")
        with open(stale, "w") as f:
            f.write("stale")
        self.driver()
        self.fake_kubelet()
        long_dir = os.path.join(self.tmp, "x" * 100)
        r = subprocess.run(["nsenter", f"--net=/run/netns/{self.node}", BIN, "dra-driver", "--node", NODE,
                            "--kubeconfig", self.kubeconfig, "--state-dir", self.state_dir, "--sysfs-root", self.sysfs,
                            "--plugin-dir", long_dir, "--plugin-registration-dir", self.registry],
                           capture_output=True, text=True, timeout=30)
        self.assertEqual(r.returncode, 2, r.stderr)
        self.assertIn("--plugin-dir", r.stderr)
        self.assertIn("at most 107", r.stderr)


class Prepare(KubeletPluginCase):
    def setUp(self):
        super().setUp()
        self.start_plugin()

    def test_an_allocated_vf_claim_is_prepared_recorded_and_answered_the_same_way_again_without_an_api_call(self):
        c = self.claim("c1", vf_name(VFS[1]))
        first = self.k.prepare_raw([c])
        got = self.k.response_dict(self.k._call("NodePrepareResources", [c]))
        self.assertEqual(got[c["uid"]], {"devices": [{"request_names": ["vf"], "pool_name": NODE,
                                                       "device_name": vf_name(VFS[1]), "cdi_device_ids": [],
                                                       "share_id": None}], "error": ""})
        self.assertEqual(self.dra_files(), self.prepared(c, VFS[1]))
        # The VF's holder: a symlink naming the claim (created whole and exclusively, in one step).
        self.assertEqual(os.readlink(os.path.join(self.state_dir, "dra", "devices", VFS[1])), c["uid"])
        gets = len(self.claim_gets())
        self.assertEqual(self.k.prepare_raw([c]), first)
        self.assertEqual(len(self.claim_gets()), gets, "a prepared claim was read from the API again")

    def test_each_claim_that_cannot_be_prepared_gets_its_own_error_and_the_call_succeeds(self):
        good = self.claim("good", vf_name(VFS[0]))
        elsewhere = self.claim("elsewhere", vf_name(VFS[1]), pool="worker-9")
        unknown = self.claim("unknown", "vf-0000-99-99-9")
        replaced = self.claim("replaced", vf_name(VFS[2]))
        replaced_ref = dict(replaced, uid=str(uuid.uuid4()))
        missing = {"namespace": "default", "uid": str(uuid.uuid4()), "name": "missing"}
        unallocated = self.claim("unallocated", vf_name(VFS[3]))
        obj = self.api.claim("default", "unallocated")
        del obj["status"]
        self.api.put_claim(obj)
        nobody = self.claim("nobody", vf_name(VFS[3]), pods=())
        claims = [good, elsewhere, unknown, replaced_ref, missing, unallocated, nobody]
        got = self.k.prepare(claims)
        self.assertEqual(set(got), {c["uid"] for c in claims}, "every claim gets an answer")
        self.assertEqual(got[good["uid"]]["error"], "")
        want = {
            elsewhere["uid"]: f"is in pool worker-9, not this node's ({NODE})",
            unknown["uid"]: "is not on this node",
            replaced_ref["uid"]: f"is now UID {replaced['uid']} (replaced; kubelet asked for {replaced_ref['uid']})",
            missing["uid"]: "ResourceClaim default/missing not found",
            unallocated["uid"]: "ResourceClaim default/unallocated is not allocated",
            nobody["uid"]: "is reserved for no pod",
        }
        for uid, words in want.items():
            self.assertIn(words, got[uid]["error"])
            self.assertEqual(got[uid]["devices"], [])
        self.assertEqual(self.dra_files(), self.prepared(good, VFS[0]),
                         "a refused claim left a file")
        event = FakeKubelet.describe_event([elsewhere], got)
        self.assertEqual(event, "Failed to prepare dynamic resources: prepare dynamic resources: NodePrepareResources "
                                f"failed for ResourceClaim elsewhere: device worker-9/{vf_name(VFS[1])} is in pool "
                                f"worker-9, not this node's ({NODE})")

    def test_the_api_down_is_a_per_claim_error_that_kubelet_retries(self):
        c = self.claim("c1", vf_name(VFS[0]))
        self.api.fail(CLAIMS, 503)
        got = self.k.prepare([c])
        self.assertIn("API answered 503", got[c["uid"]]["error"])
        self.assertEqual(self.dra_files(), [])
        self.api.fail(CLAIMS, None)
        self.assertEqual(self.k.prepare([c])[c["uid"]]["error"], "")

    def test_a_vf_another_claim_holds_or_reserved_for_two_pods_is_refused_naming_why(self):
        first = self.claim("first", vf_name(VFS[0]))
        second = self.claim("second", vf_name(VFS[0]), pods=(POD_B,))
        shared = self.claim("shared", vf_name(VFS[1]), pods=(POD_A, POD_B))
        got = self.k.prepare([first, second, shared])
        self.assertEqual(got[first["uid"]]["error"], "")
        self.assertIn(f"VF {VFS[0]} is held by ResourceClaim default/first (uid {first['uid']})", got[second["uid"]]["error"])
        self.assertIn("reserved for 2 pods; a VF attaches to one pod", got[shared["uid"]]["error"])

    def test_a_claim_whose_network_no_longer_fits_the_live_node_is_refused_in_adds_words(self):
        nad_conf = {"cniVersion": "1.0.0", "name": "sriov-numa0", "type": "topocni", "attachment": "sriov",
                    "topology": {"numaNode": 0}}
        self.api.put_nad({"apiVersion": "k8s.cni.cncf.io/v1", "kind": "NetworkAttachmentDefinition",
                          "metadata": {"name": "sriov-numa0", "namespace": "default"},
                          "spec": {"config": json.dumps(nad_conf)}})
        c = self.claim("c1", vf_name(VFS[0]), annotations={"topocni.io/network": "default/sriov-numa0"})
        err = self.k.prepare([c])[c["uid"]]["error"]
        self.assertIn("placement constraint not met: topology.numaNode", err)
        self.assertIn(f"VF {VFS[0]}", err)
        self.assertEqual(self.dra_files(), [])

    def test_a_claims_network_is_read_from_the_publishers_watch_and_a_changed_nad_is_judged_as_it_is_now(self):
        nad_conf = {"cniVersion": "1.0.0", "name": "n", "type": "topocni", "attachment": "sriov"}
        self.api.put_nad(nad_object("n", nad_conf))
        nad_gets = lambda: [r for r in self.api.logged()
                            if r["method"] == "GET" and r["path"].endswith("/network-attachment-definitions/n")]
        serial = iter(range(1000))

        def prepare_one():
            """A fresh claim on VFS[0], prepared and unprepared: its error, and whether its NAD came
            from the API (a GET) or from the publisher's watch."""
            c = self.claim(f"c{next(serial)}", vf_name(VFS[0]), annotations={"topocni.io/network": "default/n"})
            before = len(nad_gets())
            err = self.k.prepare([c])[c["uid"]]["error"]
            self.assertEqual(self.k.unprepare([c]), {c["uid"]: {"error": ""}})
            return err, len(nad_gets()) > before
        # Once the watch has the NAD, a prepare reads it from there: no GET.
        self.wait_for("a prepare without a NAD GET", lambda: prepare_one() == ("", False), 10, self.proc)
        # The NAD changes: the watch brings it, and the next prepares judge the new one.
        self.api.put_nad(nad_object("n", dict(nad_conf, topology={"numaNode": 0})))
        err = self.wait_for("the changed NAD", lambda: prepare_one()[0], 10, self.proc)
        self.assertIn("placement constraint not met: topology.numaNode", err)
        self.assertEqual(self.dra_files(), [])

    def test_a_link_claims_bandwidth_is_booked_in_the_ledger_and_released_by_unprepare(self):
        c = self.claim("bw", "pf-0000-af-00-0", request="link", shareID="0f6c",
                       consumedCapacity={"egressMbps": "5000", "ingressMbps": "2000"})
        got = self.k.prepare([c])[c["uid"]]
        self.assertEqual(got["error"], "")
        self.assertEqual(got["devices"][0]["share_id"], "0f6c")
        self.assertEqual(self.ledger_entries(), [f"{PF}/dra:{c['uid']}:link.json"])
        with open(os.path.join(self.state_dir, "bandwidth", PF, f"dra:{c['uid']}:link.json")) as f:
            entry = json.load(f)
        self.assertEqual((entry["egressBps"], entry["ingressBps"], entry["pod"]), (5_000_000_000, 2_000_000_000, "default/bw"))
        # The slices still offer the PF's whole 25 Gb/s: the scheduler subtracts the claim's
        # consumedCapacity itself (a plain ADD's booking is subtracted: test_dra_driver.py).
        time.sleep(1.5)   # the publisher has seen the ledger change (inotify) by now
        pf = self.devices()[0]["pf-0000-af-00-0"]
        self.assertEqual(pf["capacity"]["egressMbps"]["value"], "25000")
        too_much = self.claim("bw2", "pf-0000-af-00-0", request="link", shareID="0f6d",
                              consumedCapacity={"egressMbps": "21000"})
        err = self.k.prepare([too_much])[too_much["uid"]]["error"]
        self.assertIn(f"bandwidth: link {PF} has 20 Gb/s egress", err)
        self.assertEqual(self.k.unprepare([c, too_much]), {c["uid"]: {"error": ""}, too_much["uid"]: {"error": ""}})
        self.assertEqual(self.ledger_entries(), [])
        self.assertEqual(self.dra_files(), [])

    def test_unprepare_releases_everything_and_an_unknown_claim_is_a_success(self):
        c = self.claim("c1", vf_name(VFS[0]))
        self.assertEqual(self.k.prepare([c])[c["uid"]]["error"], "")
        unknown = {"namespace": "default", "uid": str(uuid.uuid4()), "name": "never"}
        self.assertEqual(self.k.unprepare([c, unknown]), {c["uid"]: {"error": ""}, unknown["uid"]: {"error": ""}})
        self.assertEqual(self.dra_files(), [])
        # The VF is free again: another pod's claim gets it.
        again = self.claim("c2", vf_name(VFS[0]), pods=(POD_B,))
        self.assertEqual(self.k.prepare([again])[again["uid"]]["error"], "")


class Manifests(KubeletPluginCase):
    def test_the_daemonset_gives_the_plugin_kubelets_two_dirs_and_rbac_grants_the_reads_it_makes(self):
        import yaml
        examples = os.path.join(os.path.dirname(__file__), "..", "..", "examples")
        with open(os.path.join(examples, "rbac.yaml")) as f:
            role = next(d for d in yaml.safe_load_all(f) if d and d["kind"] == "ClusterRole")
        granted = {(g, r, v) for rule in role["rules"] for g in rule["apiGroups"] for r in rule["resources"]
                   for v in rule["verbs"]}
        with open(os.path.join(examples, "daemonset.yaml")) as f:
            ds = next(d for d in yaml.safe_load_all(f) if d and d["kind"] == "DaemonSet")
        spec = ds["spec"]["template"]["spec"]
        (dra,) = [c for c in spec["containers"] if "dra-driver" in c["command"]]
        cmd = dra["command"]
        host = {v["name"]: v.get("hostPath", {}).get("path") for v in spec["volumes"]}
        mounts = {m["mountPath"]: m for m in dra["volumeMounts"]}
        for flag, path in (("--plugin-registration-dir", "/var/lib/kubelet/plugins_registry"),
                           ("--plugin-dir", "/var/lib/kubelet/plugins/topocni.io")):
            self.assertEqual(cmd[cmd.index(flag) + 1], path)
            self.assertEqual(host[mounts[path]["name"]], path, "kubelet dials the socket at the host's path")
            self.assertFalse(mounts[path].get("readOnly"))
        state = cmd[cmd.index("--state-dir") + 1]
        self.assertFalse(mounts[state].get("readOnly"), "the plugin records prepared claims in the state dir")
        self.driver()
        k = self.fake_kubelet()
        nad_conf = {"cniVersion": "1.0.0", "name": "n", "type": "topocni", "attachment": "sriov"}
        self.api.put_nad(nad_object("n", nad_conf))
        c = self.claim("c1", vf_name(VFS[0]), annotations={"topocni.io/network": "default/n"})
        self.assertEqual(k.prepare([c])[c["uid"]]["error"], "")
        used = {("resource.k8s.io", "resourceclaims", "get") for r in self.claim_gets()}
        # The claim's NAD: from the publisher's LIST+WATCH, else a GET.
        for r in self.api.logged():
            if r["method"] == "GET" and "network-attachment-definitions" in r["path"]:
                path, _, query = r["path"].partition("?")
                verb = ("get" if not path.endswith("network-attachment-definitions") else
                        "watch" if "watch=" in query else "list")
                used.add(("k8s.cni.cncf.io", "network-attachment-definitions", verb))
        self.assertIn(("resource.k8s.io", "resourceclaims", "get"), used)
        self.assertTrue({u for u in used if u[1] == "network-attachment-definitions"}, "the claim's NAD was read")
        self.assertLessEqual(used, granted)
        self.assertEqual({g for g in granted if g[1] == "resourceclaims"}, used & {g for g in used if g[1] == "resourceclaims"},
                         "resourceclaims: read only")


class Attach(KubeletPluginCase):
    """ADD with the deviceID Multus passes for a DRA-allocated VF."""

    def setUp(self):
        super().setUp()
        self.start_plugin()

    def add(self, vf, pod, cid, before=None):
        """ADD of `vf` for `pod` in a new pod netns; `before` (a dict) gets every file of the
        test's temp dir as it was just before the ADD."""
        ns, path = self.make_pod()
        conf = dict(self.sriov_conf(vf), pciBusID=vf)
        args = f"K8S_POD_NAMESPACE=default;K8S_POD_NAME={pod[0]};K8S_POD_UID={pod[1]}"
        if before is not None:
            before.update(self.files())
        return conf, path, self.run_plugin("ADD", conf, container_id=cid, netns=path, ifname="net1", args=args)

    def test_add_attaches_the_vf_of_its_pods_prepared_claim_and_refuses_it_to_another_pod(self):
        c = self.claim("c1", vf_name(VFS[2]))
        self.assertEqual(self.k.prepare([c])[c["uid"]]["error"], "")
        before = {}
        conf_b, _, out = self.add(VFS[2], POD_B, "cb", before)
        self.assertError(out, 100, "dra", f"deviceID {VFS[2]} is held by ResourceClaim default/c1 (uid {c['uid']})",
                         "prepared for pod default/pod-a")
        # Every file under dataDir and stateDir as it was, but the refusal's counter and record.
        self.assertOnlyRefusalCounted(before, out, conf_b["name"])
        # Counted and recorded like any refusal: the refusal agent tells pod-b why.
        with open(os.path.join(self.state_dir, "refused", "default_pod-b.json")) as f:
            self.assertEqual(json.load(f)["constraints"], ["dra"])
        conf, path, out = self.add(VFS[2], POD_A, "ca")
        self.assertOk(out)
        args = f"K8S_POD_NAMESPACE=default;K8S_POD_NAME=pod-a;K8S_POD_UID={POD_A[1]}"
        self.assertOk(self.run_plugin("DEL", conf, container_id="ca", netns=path, ifname="net1", args=args))
        self.assertOk(self.run_plugin("GC", dict(conf, **{"cni.dev/valid-attachments": []})))
        # DEL and GC leave the claim to NodeUnprepareResources.
        self.assertEqual(self.dra_files(), self.prepared(c, VFS[2]))
        self.assertEqual(self.k.unprepare([c]), {c["uid"]: {"error": ""}})
        self.assertEqual(self.dra_files(), [])


class Sweep(KubeletPluginCase):
    def test_a_claim_deleted_while_kubelet_never_unprepared_it_is_released_by_the_sweep(self):
        p = self.driver(interval=0.5)
        k = self.fake_kubelet()
        c = self.claim("c1", vf_name(VFS[0]))
        kept = self.claim("c2", vf_name(VFS[1]))
        self.assertEqual(k.prepare([c, kept])[c["uid"]]["error"], "")
        self.api.delete_claim("default", "c1")
        self.wait_for("the sweep", lambda: self.dra_files() == self.prepared(kept, VFS[1]), 5, p)
        self.wait_for("the sweep's log line", lambda: "sweep: released default/c1" in self.log_of(p), 5, p)


class MultusPath(KubeletPluginCase):
    """One pod from its claim to an attached VF, the way Multus (from PR #1492 on) gets
    there: multus_dra.py re-implements its pkg/draclient and the delegate config it writes."""

    def setUp(self):
        super().setUp()
        self.start_plugin()

    def get(self, path):
        """Multus's GET, over the node netns's loopback (the stand-in API listens there)."""
        s = socket_in_netns(self.node)
        s.settimeout(10)
        s.connect(("127.0.0.1", self.api.port))
        ctx = ssl.create_default_context(cafile=os.path.join(self.pki, "ca.crt"))
        ctx.check_hostname = False
        c = http.client.HTTPSConnection("127.0.0.1", self.api.port, context=ctx, timeout=10)
        c.sock = ctx.wrap_socket(s)
        try:
            c.request("GET", path, headers={"Authorization": "Bearer dra-token", "Accept": "application/json"})
            r = c.getresponse()
            data = r.read()
        finally:
            c.close()
        return r.status, json.loads(data) if data else None

    def test_the_vf_the_scheduler_allocated_reaches_add_as_multus_passes_it_and_is_attached(self):
        self.wait_for("the VFs are published", lambda: vf_name(VFS[1]) in self.devices()[0], 10, self.proc)
        config = self.conf(name=f"sr{self.tag}", attachment="sriov", sysfsRoot=self.sysfs, subnet="10.77.0.0/28")
        nad = nad_object("sriov-fast", config, resource="example.com/sriov_fast")
        plain = nad_object("sriov-any", config)
        for n in (nad, plain):
            self.api.put_nad(n)
        c = self.claim("pod-a-net1", vf_name(VFS[1]), annotations={"topocni.io/network": "default/sriov-fast"})
        pod = {"apiVersion": "v1", "kind": "Pod",
               "metadata": {"name": POD_A[0], "namespace": "default", "uid": POD_A[1]},
               "spec": {"nodeName": NODE},
               "status": {"resourceClaimStatuses": [{"name": "net1", "resourceClaimName": "pod-a-net1"}]}}
        self.api.put_pod(pod)
        # kubelet prepares before the sandbox starts, so before Multus runs.
        self.assertEqual(self.k.prepare([c])[c["uid"]]["error"], "")
        (dev, delegate), (no_dev, _) = delegates_for(self.get, pod, [nad, plain])
        self.assertEqual(dev, VFS[1])
        self.assertEqual(no_dev, "", "a NAD without the resourceName annotation gets no deviceID, as in Multus")
        conf = json.loads(delegate)
        self.assertEqual((conf["deviceID"], conf["pciBusID"]), (VFS[1], VFS[1]))
        ns, path = self.make_pod()
        args = f"K8S_POD_NAMESPACE=default;K8S_POD_NAME={POD_A[0]};K8S_POD_UID={POD_A[1]}"
        self.assertOk(self.run_plugin("ADD", conf, container_id="ca", netns=path, ifname="net1", args=args))
        self.assertIn("net1", self.links(ns))
        self.assertOk(self.run_plugin("DEL", conf, container_id="ca", netns=path, ifname="net1", args=args))
        self.assertEqual(self.k.unprepare([c]), {c["uid"]: {"error": ""}})
        self.assertEqual(self.dra_files(), [])


class LinkClaims(KubeletPluginCase):
    def setUp(self):
        super().setUp()
        self.start_plugin()

    def test_a_pods_link_claim_is_its_macvlan_bandwidth_and_a_plain_add_past_the_link_is_refused(self):
        gbit = 1_000_000_000
        c = self.claim("bw", f"link-{self.master}", request="link", shareID="0a",
                       consumedCapacity={"egressMbps": "6000"})
        self.assertEqual(self.k.prepare([c])[c["uid"]]["error"], "")
        # A claim that books bandwidth is indexed by pod: ADD names no device to find it by.
        self.assertEqual(self.dra_files(), [f"claims/{c['uid']}.json", f"pods/{POD_A[1]}.{c['uid']}"])
        conf = self.conf(name=f"mv{self.tag}", attachment="macvlan", master=self.master, sysfsRoot=self.sysfs,
                         subnet="10.78.0.0/28", bandwidth={"egressRate": 6 * gbit, "egressBurst": 1_000_000})
        ns, path = self.make_pod()
        a = f"K8S_POD_NAMESPACE=default;K8S_POD_NAME={POD_A[0]};K8S_POD_UID={POD_A[1]}"
        self.assertOk(self.run_plugin("ADD", conf, container_id="ca", netns=path, ifname="net1", args=a))
        self.assertEqual(self.ledger_entries(), [f"{self.master}/dra:{c['uid']}:link.json"],
                         "the claim's booking is the attachment's: not one more")
        ns_b, path_b = self.make_pod()
        b = f"K8S_POD_NAMESPACE=default;K8S_POD_NAME={POD_B[0]};K8S_POD_UID={POD_B[1]}"
        out = self.run_plugin("ADD", conf, container_id="cb", netns=path_b, ifname="net1", args=b)
        self.assertError(out, 100, "bandwidth", "12 Gb/s > 10 Gb/s")
        self.assertOk(self.run_plugin("DEL", conf, container_id="ca", netns=path, ifname="net1", args=a))
        self.assertEqual(self.ledger_entries(), [f"{self.master}/dra:{c['uid']}:link.json"], "DEL leaves the claim's")
        self.assertEqual(self.k.unprepare([c]), {c["uid"]: {"error": ""}})
        self.assertEqual(self.ledger_entries(), [])
        self.assertEqual(self.dra_files(), [])


    def test_a_masters_claim_is_rechecked_with_its_networks_topology_on_the_live_node(self):
        nad_conf = {"cniVersion": "1.0.0", "name": "mv-fast", "type": "topocni", "attachment": "macvlan",
                    "master": self.master, "topology": {"minLinkSpeedMbps": 25000}}
        self.api.put_nad(nad_object("mv-fast", nad_conf))
        c = self.claim("mv", f"link-{self.master}", request="link", shareID="0b",
                       annotations={"topocni.io/network": "default/mv-fast"})
        err = self.k.prepare([c])[c["uid"]]["error"]
        self.assertIn(f"(master '{self.master}'): placement constraint not met: topology.minLinkSpeedMbps", err)
        self.assertEqual(self.dra_files(), [])


class CrashSafety(KubeletPluginCase):
    def test_a_plugin_killed_at_each_step_of_prepare_and_unprepare_leaves_a_prepared_claim_or_nothing(self):
        for point in ("prepare-after-hold", "prepare-before-record", "unprepare-after-mark", "unprepare-after-release"):
            with self.subTest(point=point):
                p = self.driver(extra_env={"TOPOCNI_FAILPOINT": point})
                k = self.fake_kubelet()
                c = self.claim(f"c-{point}", vf_name(VFS[0]))
                got = None
                try:
                    got = k.prepare([c])
                    if point.startswith("unprepare"):
                        self.assertEqual(got[c["uid"]]["error"], "")
                        got = k.unprepare([c])
                except grpc.RpcError:
                    pass   # the plugin died mid-call, as planned
                if p.poll() is None:
                    time.sleep(0.5)
                self.assertEqual(p.poll(), -9, f"the plugin lived on past {point}: {got}\n{self.log_of(p)}")
                k.close()
                # kubelet's retry reaches a new plugin, which recovered first.
                p2 = self.driver()
                k2 = self.fake_kubelet()
                files = self.dra_files()
                self.assertIn(files, ([], self.prepared(c, VFS[0])), point)
                self.assertEqual(k2.prepare([c])[c["uid"]]["error"], "")
                self.assertEqual(k2.unprepare([c])[c["uid"]]["error"], "")
                self.assertEqual(self.dra_files(), [])
                self.stop(p2)
                k2.close()


if __name__ == "__main__":
    main()
