"""The cluster the real-cluster tests share: one control plane (controlplane.py) per test
process, with the NAD CRD and topocni's examples applied as shipped, and node stand-ins
(simnode.py) with topocni's agents.

The substitutions made to examples/ (the one list; the README repeats it):
  - NADs: a macvlan "master" of "eth1" becomes each node's macvlan master link (one name per
    node's netns, named after this process) and the label key naming it likewise;
    nodeLabelsFile and "kubeconfig": "" are dropped from macvlan-net1 (the labels come from
    the API, where NFD would have put them, so ADD reads the same labels the scheduler sees).
  - the webhook's and the extender's Service: clientConfig.url / urlPrefix on loopback,
    with the harness CA as caBundle / caFile; their Deployments and the DaemonSet are sent
    with dryRun=All (validated and admitted, not run: their image is a placeholder), and
    their commands run here as processes (simnode.daemonset_command says how).
Everything else is applied as the files say. The harness plays nfd-worker: each line of the
node's `node-report --format nfd` (the feature file the DaemonSet writes) becomes a label.
"""
import copy
import json
import os
import subprocess
import sys
import time
import unittest

import yaml

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from controlplane import ControlPlane  # noqa: E402
from kubeapi import ApiError  # noqa: E402
import simnode  # noqa: E402
from simnode import PID, REPO, KubeletStandIn, Shape, SimNode  # noqa: E402

BIN = os.environ.get("TOPOCNI_BIN") or os.path.join(os.environ.get("TOPOCNI_RELEASE_BUILD", os.path.join(REPO, "build-release")), "topocni")
EXAMPLES = os.path.join(REPO, "examples")
SRIOV_LABEL = "feature.node.kubernetes.io/network-sriov.capable"

# Five shapes (the placement experiment's): two nodes with a 25G PF on each NUMA node, one
# 100G, one 10G with more VFs, one without SR-IOV.
SHAPES = [
    ("tc-a", Shape(pfs=[(25000, 0, 4), (25000, 1, 4)], master_speed=25000, labels={SRIOV_LABEL: "true"})),
    ("tc-b", Shape(pfs=[(25000, 0, 4), (25000, 1, 4)], master_speed=25000, labels={SRIOV_LABEL: "true"})),
    ("tc-c", Shape(pfs=[(100000, 0, 4)], master_speed=100000, labels={SRIOV_LABEL: "true"})),
    ("tc-d", Shape(pfs=[(10000, 0, 6)], master_speed=10000, labels={SRIOV_LABEL: "true"})),
    ("tc-e", Shape(pfs=[], master_speed=25000)),
]


def load_yaml(name):
    with open(os.path.join(EXAMPLES, name)) as f:
        return [d for d in yaml.safe_load_all(f) if d]


def objects_of(*names):
    return [d for n in names for d in load_yaml(n)]


class Cluster:
    def __init__(self):
        self.cp = ControlPlane()
        self.nodes, self.standin = [], None

    @property
    def api(self):
        return self.cp.api

    def start(self):
        self.cp.start()
        with open(os.path.join(HERE, "nad-crd.yaml")) as f:
            self.api.apply(yaml.safe_load(f))
        self.wait("the NAD CRD is served", lambda: self.api.raw(
            "GET", "/apis/k8s.cni.cncf.io/v1/network-attachment-definitions")[0] == 200, 30)
        for obj in objects_of("rbac.yaml", "dra/deviceclasses.yaml"):
            self.api.apply(obj)
        return self

    def wait(self, what, fn, seconds=30, interval=0.1):
        end = time.monotonic() + seconds
        while True:
            v = fn()
            if v:
                return v
            if time.monotonic() > end:
                raise AssertionError(f"{what}: not within {seconds} s")
            time.sleep(interval)

    # --- nodes ---
    def add_nodes(self, shapes=SHAPES):
        for name, shape in shapes:
            n = SimNode(self.cp, len(self.nodes), name, shape, BIN)
            self.nodes.append(n)   # before make(): stop() removes what make() did, also halfway
            n.make().register().agent_token()
        return self.nodes

    def node(self, name):
        return next(n for n in self.nodes if n.name == name)

    def start_standin(self):
        self.standin = KubeletStandIn(self.cp, self.nodes)
        return self.standin

    def master_of(self, node):
        return node.master

    def nad(self, doc, node_master=None):
        """A NAD of examples/, with the substitutions above."""
        doc = copy.deepcopy(doc)
        conf = json.loads(doc["spec"]["config"])
        if conf.get("master") == "eth1":
            conf["master"] = node_master or "eth1"
            conf.pop("nodeLabelsFile", None)
            if conf.get("kubeconfig") == "":
                del conf["kubeconfig"]
            sel = conf.get("nodeSelector", {}).get("matchLabels", {})
            for k in list(sel):
                if ".eth1." in k:
                    sel[k.replace(".eth1.", f".{conf['master']}.")] = sel.pop(k)
        doc["spec"]["config"] = json.dumps(conf, indent=2)
        doc["metadata"].setdefault("namespace", "default")
        return doc

    def stop(self):
        if self.standin:
            self.standin.stop()
        for n in reversed(self.nodes):
            n.stop()
        self.cp.stop()


_session = None


def session():
    """The process's one cluster, started on first use and stopped at exit."""
    global _session
    if _session is None:
        import atexit
        c = Cluster()
        atexit.register(c.stop)
        _session = c.start()
    return _session


class ClusterTestCase(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.cluster = session()
        cls.api = cls.cluster.api

    def wait(self, what, fn, seconds=30, interval=0.1):
        return self.cluster.wait(what, fn, seconds, interval)

    def audit_forbidden(self, user_prefix="system:serviceaccount:"):
        """Audit events answered 403 for a service account: none may be topocni's."""
        return [(e["user"]["username"], e["verb"], e["requestURI"]) for e in self.cluster.cp.audit()
                if e.get("responseStatus", {}).get("code") == 403 and e["user"]["username"].startswith(user_prefix)]
