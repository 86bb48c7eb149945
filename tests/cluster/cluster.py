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
from controlplane import ControlPlane, _die_with_parent  # noqa: E402
from kubeapi import ApiError, Client  # noqa: E402
from fakenode import b64file, free_port, write_kubeconfig  # noqa: E402
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


def _ok(client, path):
    try:
        return client.raw("GET", path, timeout=2)[0] == 200
    except OSError:
        return False


def load_yaml(name):
    with open(os.path.join(EXAMPLES, name)) as f:
        return [d for d in yaml.safe_load_all(f) if d]


def objects_of(*names):
    return [d for n in names for d in load_yaml(n)]


class Cluster:
    def __init__(self):
        self.cp = ControlPlane()
        self.nodes, self.standin, self.services = [], None, {}

    @property
    def api(self):
        return self.cp.api

    def start(self):
        self.cp.start()
        with open(os.path.join(HERE, "nad-crd.yaml")) as f:
            self.api.apply(yaml.safe_load(f))
        self.wait("the NAD CRD is served", lambda: self.api.raw(
            "GET", "/apis/k8s.cni.cncf.io/v1/network-attachment-definitions")[0] == 200, 30)
        for obj in objects_of("rbac.yaml", "dra/deviceclasses.yaml", "admission-webhook.yaml", "scheduler-extender.yaml"):
            if obj["kind"] not in ("Deployment", "MutatingWebhookConfiguration"):   # started by start_service
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
        if conf.get("attachment") == "sriov":
            for k in ("vlan", "spoofchk", "trust"):   # VF settings made on the PF: a veth PF has no VFs to set
                conf.pop(k, None)
        doc["spec"]["config"] = json.dumps(conf, indent=2)
        doc["metadata"].setdefault("namespace", "default")
        return doc

    # --- the cluster's services, as their Deployments run them ---
    def sa_kubeconfig(self, namespace, name):
        """A kubeconfig with a token of ServiceAccount namespace/name (what the Deployment's
        pod would have mounted)."""
        tr = self.api.post(f"/api/v1/namespaces/{namespace}/serviceaccounts/{name}/token",
                           {"apiVersion": "authentication.k8s.io/v1", "kind": "TokenRequest",
                            "spec": {"expirationSeconds": 7200}})
        token = os.path.join(self.cp.dir, f"{name}.token")
        with open(token, "w") as f:
            f.write(tr["status"]["token"])
        return write_kubeconfig(os.path.join(self.cp.dir, f"{name}.kubeconfig"), self.cp.server, ca_file=self.cp.ca,
                                token_file=token, user=name)

    def start_service(self, example, extra=(), port=None):
        """The container command of the Deployment in `example`, with the substitutions:
        --listen on a free loopback port (or `port`: the one kube-scheduler or the API server
        calls, for a service started again), --tls-cert/--tls-key a harness certificate for
        127.0.0.1, the binary built here, --kubeconfig its ServiceAccount's token. `extra`:
        flag and value pairs, each replacing the command's own value of the flag or added."""
        docs = load_yaml(example)
        (dep,) = [d for d in docs if d["kind"] == "Deployment"]
        spec = dep["spec"]["template"]["spec"]
        (c,) = spec["containers"]
        port = port or free_port()
        crt, key = self.cp.pki.cert(dep["metadata"]["name"], dep["metadata"]["name"], server_ips=["127.0.0.1"])
        subst = {"/opt/cni/bin/topocni": BIN, "0.0.0.0:8443": f"127.0.0.1:{port}", "/tls/tls.crt": crt,
                 "/tls/tls.key": key}
        argv = [subst.get(a, a) for a in c["command"]] + ["--kubeconfig", self.sa_kubeconfig(
            dep["metadata"]["namespace"], spec["serviceAccountName"])]
        extra = list(extra)
        while extra:   # "--flag value": the command's own value replaced, else the flag added
            flag, value = extra.pop(0), extra.pop(0)
            if flag in argv:
                argv[argv.index(flag) + 1] = value
            else:
                argv += [flag, value]
        name = dep["metadata"]["name"]
        log = os.path.join(self.cp.dir, f"{name}.log")
        with open(log, "a") as f:
            p = subprocess.Popen(argv, stdout=f, stderr=subprocess.STDOUT, preexec_fn=_die_with_parent)
        p.log, p.port, p.argv = log, port, argv
        self.services[name] = p
        ready = Client("127.0.0.1", port, self.cp.ca)
        self.wait(f"{name} ready", lambda: _ok(ready, "/readyz") or p.poll() is not None, 30)
        if p.poll() is not None:
            raise AssertionError(f"{name} exited: {open(log).read()[-2000:]}")
        return p

    def stop_service(self, name):
        p = self.services.pop(name, None)
        if p and p.poll() is None:
            p.terminate()
            p.wait(timeout=10)
        return p

    def webhook_configuration(self, port):
        """examples/admission-webhook.yaml's MutatingWebhookConfiguration, its clientConfig
        a URL on loopback with the harness CA."""
        (cfg,) = [d for d in load_yaml("admission-webhook.yaml") if d["kind"] == "MutatingWebhookConfiguration"]
        for hook in cfg["webhooks"]:
            path = hook["clientConfig"]["service"].get("path", "/")
            hook["clientConfig"] = {"url": f"https://127.0.0.1:{port}{path}", "caBundle": b64file(self.cp.ca)}
        return cfg

    def scheduler_configuration(self, port):
        """examples/kube-scheduler-config.yaml, its extender's urlPrefix on loopback and its
        caFile the harness CA."""
        (conf,) = load_yaml("kube-scheduler-config.yaml")
        for ext in conf["extenders"]:
            path = "/" + ext["urlPrefix"].split("://", 1)[1].split("/", 1)[1]
            ext["urlPrefix"] = f"https://127.0.0.1:{port}{path}"
            ext["tlsConfig"]["caFile"] = self.cp.ca
        return conf

    def stop(self):
        for name in list(self.services):
            self.stop_service(name)
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

    def macvlan_nad(self, name, subnet, namespace="default", **keys):
        """A NAD of a topocni macvlan on the nodes' master with a host-local pool (applied)."""
        conf = {"cniVersion": "1.0.0", "name": name, "type": "topocni", "attachment": "macvlan",
                "master": self.cluster.nodes[0].master, "mode": "bridge",
                "ipam": {"type": "host-local", "ranges": [[{"subnet": subnet}]]}, **keys}
        self.api.apply({"apiVersion": "k8s.cni.cncf.io/v1", "kind": "NetworkAttachmentDefinition",
                        "metadata": {"name": name, "namespace": namespace}, "spec": {"config": json.dumps(conf)}})
        return conf

    def running(self, namespace, name, seconds=30, more=lambda: ""):
        """The pod once Running; else a failure naming its status, its verdicts on the node
        stand-ins, what it requests against what the nodes offer, and `more()`."""
        path = f"/api/v1/namespaces/{namespace}/pods/{name}"
        try:
            return self.wait(f"pod {name} Running", lambda: (lambda p: p["status"].get("phase") == "Running" and p)(
                self.api.get(path)), seconds)
        except AssertionError as e:
            p = self.api.get(path)
            wants = p["spec"]["containers"][0].get("resources", {}).get("requests", {})
            have = {n["metadata"]["name"]: {k: n["status"]["allocatable"].get(k) for k in wants}
                    for n in self.api.get("/api/v1/nodes")["items"]}
            self.fail(f"{e}: node {p['spec'].get('nodeName')}, status {json.dumps(p['status'])[:1500]}; verdicts "
                      f"{self.cluster.standin.verdicts_of(namespace, name)}; requests {wants}; nodes' allocatable "
                      f"{have}; {more()}")
