"""Exclusive CPUs placed with the VF, on the scheduler side (README, scheduler extender:
"the pod's exclusive CPUs count as placed with that VF (the Topology Manager aligns them at
admission)"): the extender, judging a pod whose NAD has `numaPolicy` on the facts each node
publishes (`node-report --format facts` of a fake node), sends it only to the node whose free
VF has a NUMA node the pod's exclusive CPUs can be placed on, and ADD on each node agrees:
it admits the pod there once its CPUs sit with the VF (kubelet's cpu_manager_state), and
refuses it on the node the extender refused.

The nodes are test_placement's fake node at two moments: as made (PF1's VF on NUMA node 1),
and with the VF reporting no NUMA node (-1, as on a machine without affinity information).
"""
import http.client
import json
import os
import subprocess
import time
import unittest

from cnitest import BIN, main
from fakenode import NAD_PATH, ClusterApi, free_port, make_pki, write_kubeconfig
from test_extender import nad
from test_placement import PF0, PF1, POD0, POD1, VF0, VF0B, VF0C, VF1, PlacementCase, pod_args


class NumaWithTheVf(PlacementCase):
    def make_node(self):
        super().make_node()
        for pf, n in ((PF0, 3), (PF1, 1)):   # what node-report reads to list a PF's VFs
            self.sys.write(f"bus/pci/devices/{pf}/sriov_totalvfs", "8\n")
            self.sys.write(f"bus/pci/devices/{pf}/sriov_numvfs", f"{n}\n")
        os.makedirs(os.path.join(self.kubelet, "device-plugins"))
        with open(os.path.join(self.kubelet, "device-plugins", "kubelet_internal_checkpoint"), "w") as f:
            json.dump({"Data": {"PodDeviceEntries": [], "RegisteredDevices": {
                "intel.com/pf0": [VF0, VF0B, VF0C], "intel.com/pf1": [VF1]}}, "Checksum": 1}, f)

    def facts(self, name):
        """The fake node's facts document as node-report publishes it, as node `name`."""
        p = subprocess.run(["nsenter", f"--net=/run/netns/{self.node}", BIN, "node-report", "--format", "facts",
                            "--sysfs-root", self.sys.root, "--state-dir", self.state_dir,
                            "--kubelet-root-dir", self.kubelet, "--node", name],
                           capture_output=True, text=True, timeout=60)
        self.assertEqual(p.returncode, 0, p.stderr)
        return p.stdout

    def vf_numa(self, vf, numa):
        self.sys.write(f"bus/pci/devices/{vf}/numa_node", f"{numa}\n")

    def vconf(self, name, device, **topology):
        return {"cniVersion": "1.0.0", "name": name, "type": "topocni", "stateDir": self.state_dir,
                "sysfsRoot": self.sys.root, "kubeletRootDir": self.kubelet, "deviceID": device,
                "nodeName": "worker-1", "nodeLabelsFile": self.labels, "topology": topology,
                "delegate": {"type": "ptp", "ipam": {"type": "host-local", "subnet": "10.81.0.0/24",
                                                     "dataDir": self.data_dir}}}

    def extender(self, nodes, nads):
        """An extender on a stand-in API holding these Nodes ({name: facts text}) and NADs."""
        pki = make_pki(os.path.join(self.outside_dir(), "pki"))
        api = ClusterApi(pki, token="numa")
        self.addCleanup(api.stop)
        api.replace([{"apiVersion": "v1", "kind": "Node",
                      "metadata": {"name": n, "labels": {"example.com/zone": "a"},
                                   "annotations": {"topocni.io/facts": text}}} for n, text in nodes.items()], nads)
        kc = write_kubeconfig(os.path.join(self.outside_dir(), "ext.kubeconfig"), api.url(),
                              ca_file=os.path.join(pki, "ca.crt"), token="numa")
        self.port = free_port()
        with open(os.path.join(self.outside_dir(), "extender.log"), "w") as err:
            ext = subprocess.Popen([BIN, "scheduler-extender", "--listen", f"127.0.0.1:{self.port}",
                                    "--kubeconfig", kc], stderr=err)
        self.addCleanup(lambda: (ext.poll() is None and ext.terminate(), ext.wait()))
        deadline = time.time() + 20
        while not all(api.watching(p) for p in ("/api/v1/nodes", NAD_PATH, "/api/v1/pods")):
            self.assertLess(time.time(), deadline, "the extender did not list and watch")
            time.sleep(0.05)
        while True:
            try:
                return self.ask("filter", "probe", "", list(nodes))
            except OSError:
                self.assertLess(time.time(), deadline, "the extender does not listen")
                time.sleep(0.05)

    def ask(self, verb, name, networks, nodes):
        p = {"metadata": {"name": name, "namespace": "default", "uid": f"uid-{name}",
                          "annotations": {"k8s.v1.cni.cncf.io/networks": networks}}}
        c = http.client.HTTPConnection("127.0.0.1", self.port, timeout=30)
        c.request("POST", f"/{verb}", json.dumps({"Pod": p, "Nodes": None, "NodeNames": nodes}))
        r = c.getresponse()
        data = r.read()
        c.close()
        self.assertEqual(r.status, 200, data)
        return json.loads(data)

    def add(self, conf, uid, cid):
        pod, path = self.make_pod()
        return self.run_plugin("ADD", conf, container_id=cid, netns=path, args=pod_args(uid)), path

    def test_a_numa_policy_pod_goes_to_the_node_whose_free_vf_its_cpus_can_join_and_add_agrees(self):
        conf = self.vconf("near", VF1, numaPolicy="single-numa-node", unknownTopology="deny")
        aligned = self.facts("aligned")
        self.vf_numa(VF1, -1)
        adrift = self.facts("adrift")
        netconf = {k: v for k, v in conf.items() if k != "deviceID"}   # Multus adds it at ADD
        self.extender({"aligned": aligned, "adrift": adrift}, [nad("near", netconf, "intel.com/pf1")])
        r = self.ask("filter", "p", "near", ["adrift", "aligned"])
        self.assertEqual(r["NodeNames"], ["aligned"], r)
        reasons = {**r["FailedNodes"], **r["FailedAndUnresolvableNodes"]}
        self.assertEqual(reasons, {"adrift": "topocni: default/near: topology.numaPolicy not met"})
        scores = {h["Host"]: h["Score"] for h in self.ask("prioritize", "p", "near", ["adrift", "aligned"])}
        self.assertEqual(scores["adrift"], 0)
        # ADD on the refused node refuses it too: no NUMA node for the pod's CPUs to share.
        out, _ = self.add(conf, POD1, "adrift")
        self.assertError(out, 100)
        self.assertEqual(out.json["msg"], "placement constraint not met: topology.numaPolicy")
        # On the chosen node the Topology Manager places the pod's exclusive CPUs with the VF
        # (POD1's are 4-5, NUMA node 1, VF1's): ADD admits it.
        self.vf_numa(VF1, 1)
        out, path = self.add(conf, POD1, "aligned")
        self.assertOk(out)
        self.assertOk(self.run_plugin("DEL", conf, container_id="aligned", netns=path, args=pod_args(POD1)))
        # The extender's verdict rests on that placement: CPUs elsewhere (POD0's, NUMA node 0)
        # are refused by ADD, as kubelet's Topology Manager would refuse the pod.
        out, _ = self.add(conf, POD0, "elsewhere")
        self.assertError(out, 100)
        self.assertIn("topology.numaPolicy", out.json["msg"])

    # The extender places the pod's CPUs once, on one NUMA node with all its single-numa-node
    # VFs (scheduling.cc pod_numa_node), as kubelet's Topology Manager does and ADD then sees.
    def test_two_vfs_under_single_numa_node_go_where_one_numa_node_has_both(self):
        """A pod with a VF of each PF, both NADs single-numa-node: its exclusive CPUs can sit
        with both VFs only where both are on one NUMA node. The node as made has PF0's VFs on
        NUMA node 0 and PF1's on 1 ("split"); with PF0's VFs on NUMA node 1 too ("together")
        both fit POD1's CPUs. ADD on each node: both admitted on "together", one refused on
        "split" (whichever NUMA node the CPUs get, one VF is on the other)."""
        east = self.vconf("east", VF0, numaPolicy="single-numa-node")
        west = self.vconf("west", VF1, numaPolicy="single-numa-node")
        split = self.facts("split")
        for vf in (PF0, VF0, VF0B, VF0C):
            self.vf_numa(vf, 1)
        together = self.facts("together")
        nads = [nad(c["name"], {k: v for k, v in c.items() if k != "deviceID"}, res)
                for c, res in ((east, "intel.com/pf0"), (west, "intel.com/pf1"))]
        self.extender({"split": split, "together": together}, nads)
        r = self.ask("filter", "p", "east, west", ["split", "together"])
        for conf, cid in ((east, "te"), (west, "tw")):   # "together": both VFs with POD1's CPUs
            out, path = self.add(conf, POD1, cid)
            self.assertOk(out)
            self.assertOk(self.run_plugin("DEL", conf, container_id=cid, netns=path, args=pod_args(POD1)))
        for vf in (PF0, VF0, VF0B, VF0C):
            self.vf_numa(vf, 0)
        refused = []
        for uid in (POD0, POD1):
            for conf in (east, west):
                out, path = self.add(conf, uid, f"s-{conf['name']}")
                refused.append(out.rc != 0 and out.json.get("code") == 100 and "topology.numaPolicy" in out.json["msg"])
                if out.rc == 0:
                    self.assertOk(self.run_plugin("DEL", conf, container_id=f"s-{conf['name']}", netns=path,
                                                  args=pod_args(uid)))
        self.assertEqual(refused, [False, True, True, False], "on split, ADD refuses the VF away from the CPUs")
        self.assertEqual(r["NodeNames"], ["together"], f"the extender: {r}")


if __name__ == "__main__":
    main()
