"""Nodes without kubelets, for the cluster tests: each a Node object on the real API server
and, on this machine, what a node of that shape would have, with topocni's real agents.

A node is
  - a network namespace (tcn<pid>n<i>) whose links are veths: an SR-IOV PF and its VFs'
    netdevs, and a macvlan master; the API server is reached from it at 127.0.0.1:<port>,
    the same address as on the host, through a relay in this process (kube-proxy's place);
  - a mount namespace, held by a sleeping process, in which the node's own directories are
    mounted where a real node has them: a fake sysfs tree on /sys, a directory on /var/lib
    (so /var/lib/cni/topocni, /var/lib/cni/networks and /var/lib/kubelet are the node's)
    and one on /etc/cni (so /etc/cni/net.d/topocni.d is the node's). The NADs, agents and
    ADD therefore run with topocni's defaults, as on a real node, and every node sees its
    own. The namespace is a slave of the host's, so the pod netns made later under
    /run/netns are visible in it; nothing it mounts reaches the host.
  - a Pod in kube-system bound to it (ServiceAccount topocni, hostNetwork): the agents
    authenticate with a TokenRequest token bound to that pod, so the API server adds the
    token's node name and examples/rbac.yaml's policies apply as on a real cluster. The
    token reaches /etc/cni/net.d/topocni.d through the DaemonSet's own write-kubeconfig.sh.

`KubeletStandIn` plays kubelet for every node: it sees the pods bound to them, makes each a
netns and runs topocni ADD with the pod's NADs and K8S_POD_* arguments in the node's
namespaces (then marks it Running and Ready), DEL when the pod goes, and records each verdict.
"""
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time

import yaml

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.append(os.path.join(HERE, "../integration"))   # after this dir: its test files have names of their own
from fakenode import FakeSysfs as NodeSysfs, socket_in_netns  # noqa: E402
from fakesysfs import FakeSysfs  # noqa: E402
from controlplane import _die_with_parent  # noqa: E402
from kubeapi import ApiError  # noqa: E402

REPO = os.path.normpath(os.path.join(HERE, "../.."))
PID = os.getpid()
AGENT_IMAGE = "registry.example.com/topocni:0.1.0"
NETWORKS = "k8s.v1.cni.cncf.io/networks"


def sh(*args, check=True, input=None):
    p = subprocess.run(args, capture_output=True, text=True, input=input)
    if check and p.returncode != 0:
        raise RuntimeError(f"{' '.join(args)}: {p.returncode}: {p.stderr.strip()}")
    return p


def _daemonset_doc(kind):
    with open(os.path.join(REPO, "examples/daemonset.yaml")) as f:
        for doc in yaml.safe_load_all(f):
            if doc and doc["kind"] == kind:
                return doc
    raise KeyError(kind)


def daemonset_script(name):
    """A script of examples/daemonset.yaml's ConfigMap, as shipped."""
    return _daemonset_doc("ConfigMap")["data"][name]


def daemonset_command(container, binary, kubeconfig):
    """The command of one of examples/daemonset.yaml's containers, with the harness's
    substitutions: the binary built here for /opt/cni/bin/topocni; the node's own paths for
    the container's /host/ mounts of them (here the node's mount namespace has them where
    the node does); and --kubeconfig with the DaemonSet's own kubeconfig, written by its
    write-kubeconfig.sh from the same pod-bound token, for the in-cluster service account
    (which would need /var/run/secrets mounted in the node's namespace)."""
    spec = _daemonset_doc("DaemonSet")["spec"]["template"]["spec"]
    (c,) = [c for c in spec["containers"] if c["name"] == container]
    argv = [binary if a == "/opt/cni/bin/topocni" else (a[len("/host"):] if a.startswith("/host/") else a)
            for a in c["command"]]
    return argv + ["--kubeconfig", kubeconfig]


class Relay:
    """127.0.0.1:<port> in a netns, relayed byte for byte to 127.0.0.1:<port> here (TLS
    passes through untouched: the API server's certificate names 127.0.0.1)."""

    def __init__(self, netns, port):
        self.sock = socket_in_netns(netns)
        self.sock.bind(("127.0.0.1", port))
        self.sock.listen(128)
        self.port, self.open = port, []
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self):
        while True:
            try:
                c, _ = self.sock.accept()
            except OSError:
                return
            try:
                u = socket.create_connection(("127.0.0.1", self.port), timeout=5)
                u.settimeout(None)
            except OSError:
                c.close()   # the API server is down: the client sees the connection refused-like reset
                continue
            self.open += [c, u]
            for a, b in ((c, u), (u, c)):
                threading.Thread(target=self._pump, args=(a, b), daemon=True).start()

    @staticmethod
    def _pump(a, b):
        try:
            while True:
                data = a.recv(65536)
                if not data:
                    break
                b.sendall(data)
        except OSError:
            pass
        for s in (a, b):
            try:
                s.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass

    def stop(self):
        self.sock.close()
        for s in self.open:
            try:
                s.close()
            except OSError:
                pass


class Shape:
    """What a node has: PFs as (speed Mb/s, NUMA node, VF count), a macvlan master's speed."""

    def __init__(self, pfs=(), master_speed=25000, labels=None):
        self.pfs, self.master_speed, self.labels = list(pfs), master_speed, dict(labels or {})


class SimNode:
    def __init__(self, cp, index, name, shape, binary):
        self.cp, self.index, self.name, self.shape, self.bin = cp, index, name, shape, binary
        self.netns = f"tcn{PID}n{index}"
        self.dir = os.path.join(cp.dir, f"n{index}")
        self.sys_dir, self.var_lib, self.etc_cni = (os.path.join(self.dir, d) for d in ("sys", "varlib", "etccni"))
        for d in (self.sys_dir, self.var_lib, self.etc_cni, os.path.join(self.dir, "sa")):
            os.makedirs(d)
        for d in ("cni", "kubelet"):
            os.makedirs(os.path.join(self.var_lib, d))
        os.makedirs(os.path.join(self.etc_cni, "net.d"))
        self.procs, self.relay, self.holder = {}, None, None
        self.pf_names, self.vfs, self.master = [], [], f"tc{PID}m"[:15]   # one name on every node, as a NAD's master is
        self.state_dir = os.path.join(self.var_lib, "cni/topocni")   # the node's /var/lib/cni/topocni
        self.data_dir = os.path.join(self.var_lib, "cni/networks")

    # --- the machine side ---
    def make(self):
        sh("ip", "netns", "add", self.netns)
        self._ip("link", "set", "lo", "up")
        fake, node = FakeSysfs(self.sys_dir), NodeSysfs(self.sys_dir)
        node.numa_node(0, "0-3")
        node.numa_node(1, "4-7")
        for p, (speed, numa, nvfs) in enumerate(self.shape.pfs):
            pf, pci = f"tc{PID}{self.index}p{p}"[:15], f"0000:{0x18 + 0x40 * p:02x}:00.0"
            self._veth(pf)
            fake.add_pf(pci, pf, totalvfs=max(8, nvfs), numa_node=numa)
            node.write(f"class/net/{pf}/speed", f"{speed}\n")
            self.pf_names.append(pf)
            for v in range(nvfs):
                vf, vpci = f"tc{PID}{self.index}v{p}{v}"[:15], f"0000:{0x18 + 0x40 * p:02x}:{2 + v // 8:02x}.{v % 8}"
                self._veth(vf)
                fake.add_vf(pci, v, vpci, vf, numa_node=numa)
                self.vfs.append((vpci, vf, pf))
        self._veth(self.master)
        self._ip("link", "set", self.master, "up")
        fake.add_device(f"0000:{0x10 + self.index:02x}:00.0", self.master, driver="ice", numa_node=0)
        node.write(f"class/net/{self.master}/speed", f"{self.shape.master_speed}\n")
        self.relay = Relay(self.netns, self.cp.port)
        script = ('mount --bind "$1" /sys && mount --bind "$2" /var/lib && mount --bind "$3" /etc/cni '
                  '&& echo ready && exec sleep 2147483647')
        self.holder = subprocess.Popen(["unshare", "--mount", "--propagation", "slave", "sh", "-c", script, "sh",
                                        self.sys_dir, self.var_lib, self.etc_cni], stdout=subprocess.PIPE,
                                       stderr=subprocess.PIPE, text=True, preexec_fn=_die_with_parent)
        if self.holder.stdout.readline().strip() != "ready":
            raise RuntimeError(f"node {self.name}'s mount namespace: {self.holder.stderr.read()}")
        return self

    def _ip(self, *args):
        sh("ip", "-n", self.netns, *args)

    def _veth(self, name):
        self._ip("link", "add", name, "type", "veth", "peer", "name", "x" + name[1:])

    def enter(self):
        """The argv prefix that runs a command in this node's network and mount namespaces."""
        return ["nsenter", f"--mount=/proc/{self.holder.pid}/ns/mnt", f"--net=/run/netns/{self.netns}"]

    # --- the API side ---
    def node_object(self):
        labels = {"kubernetes.io/hostname": self.name, "kubernetes.io/os": "linux", "kubernetes.io/arch": "amd64"}
        labels.update(self.shape.labels)
        cap = {"cpu": "8", "memory": "32Gi", "pods": "110", "ephemeral-storage": "100Gi"}
        return {"apiVersion": "v1", "kind": "Node", "metadata": {"name": self.name, "labels": labels},
                "status": {"capacity": cap, "allocatable": dict(cap),
                           "conditions": [{"type": "Ready", "status": "True", "reason": "KubeletReady",
                                           "message": "a topocni cluster-test node stand-in"}],
                           "addresses": [{"type": "InternalIP", "address": f"10.255.0.{self.index + 1}"},
                                         {"type": "Hostname", "address": self.name}],
                           "nodeInfo": {"kubeletVersion": "v1.37.2", "architecture": "amd64",
                                        "operatingSystem": "linux"}}}

    def register(self):
        """The Node, Ready, without the not-ready taint admission gives every new Node (the
        node lifecycle controller, which would lift it, does not run: these nodes have no
        kubelet to renew their leases)."""
        api = self.cp.api
        obj = self.node_object()
        created = api.post("/api/v1/nodes", obj)
        api.patch(f"/api/v1/nodes/{self.name}/status", {"status": obj["status"]})
        api.patch(f"/api/v1/nodes/{self.name}", {"spec": {"taints": None}})
        self.uid = created["metadata"]["uid"]
        return self

    def agent_token(self):
        """A token of ServiceAccount kube-system/topocni bound to a Pod bound to this node
        (what kubelet projects into the DaemonSet's pod), written with the CA where the
        DaemonSet's write-kubeconfig.sh reads them."""
        api = self.cp.api
        pod = api.post("/api/v1/namespaces/kube-system/pods", {
            "apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": f"topocni-{self.name}", "labels": {"app": "topocni"}},
            "spec": {"nodeName": self.name, "serviceAccountName": "topocni", "hostNetwork": True,
                     "tolerations": [{"operator": "Exists"}],
                     "containers": [{"name": "agent", "image": AGENT_IMAGE}]}})
        tr = api.post("/api/v1/namespaces/kube-system/serviceaccounts/topocni/token", {
            "apiVersion": "authentication.k8s.io/v1", "kind": "TokenRequest",
            "spec": {"expirationSeconds": 7200,
                     "boundObjectRef": {"kind": "Pod", "apiVersion": "v1", "name": pod["metadata"]["name"],
                                        "uid": pod["metadata"]["uid"]}}})
        self.token = tr["status"]["token"]
        sa = os.path.join(self.dir, "sa")
        with open(os.path.join(sa, "token"), "w") as f:
            f.write(self.token)
        shutil.copy(self.cp.ca, os.path.join(sa, "ca.crt"))
        env = dict(os.environ, ONESHOT="1", SA_DIR=sa, KUBERNETES_SERVICE_HOST="127.0.0.1",
                   KUBERNETES_SERVICE_PORT=str(self.cp.port))
        p = subprocess.run(self.enter() + ["sh", "-c", daemonset_script("write-kubeconfig.sh")], env=env,
                           capture_output=True, text=True, timeout=30)
        if p.returncode != 0:
            raise RuntimeError(f"write-kubeconfig.sh on {self.name}: {p.stderr}")
        self.kubeconfig = "/etc/cni/net.d/topocni.d/topocni.kubeconfig"   # inside the node
        return self

    def label_like_nfd(self):
        """What nfd-worker's local source makes of the DaemonSet's feature file: each
        `node-report --format nfd` line (the file node-report.sh writes) a label of the Node."""
        p = subprocess.run(self.enter() + [self.bin, "node-report", "--format", "nfd"], capture_output=True,
                           text=True, timeout=30)
        if p.returncode != 0:
            raise RuntimeError(f"node-report on {self.name}: {p.stderr}")
        labels = dict(line.split("=", 1) for line in p.stdout.splitlines() if line and not line.startswith("#"))
        self.cp.api.patch(f"/api/v1/nodes/{self.name}", {"metadata": {"labels": labels}})
        return labels

    # --- topocni's agents, as the DaemonSet runs them ---
    def start_agent(self, name, argv):
        log = os.path.join(self.dir, f"{name}.log")
        f = open(log, "a")
        p = subprocess.Popen(self.enter() + argv, stdout=f, stderr=subprocess.STDOUT,
                             env=dict(os.environ, NODE_NAME=self.name), preexec_fn=_die_with_parent)
        f.close()
        p.log = log
        self.procs[name] = p
        return p

    def start_agents(self, facts=(), dra=(), refusals=()):
        """The DaemonSet's facts, dra and refusals containers (extra flags after its own;
        dra without kubelet's plugin: these nodes have no kubelet)."""
        self.start_agent("facts", daemonset_command("facts", self.bin, self.kubeconfig) + list(facts))
        self.start_agent("dra", daemonset_command("dra", self.bin, self.kubeconfig) + ["--no-kubelet-plugin", *dra])
        self.start_agent("refusals", daemonset_command("refusals", self.bin, self.kubeconfig) + list(refusals))
        return self

    def stop_agent(self, name, sig=signal.SIGTERM):
        p = self.procs.pop(name, None)
        if p and p.poll() is None:
            p.send_signal(sig)
            try:
                return p.wait(timeout=10)
            except subprocess.TimeoutExpired:
                p.kill()
                return p.wait()
        return p and p.returncode

    def agent_log(self, name):
        with open(os.path.join(self.dir, f"{name}.log")) as f:
            return f.read()

    def cni(self, command, conf, container_id, netns, ifname, args, timeout=60):
        env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "CNI_COMMAND": command,
               "CNI_CONTAINERID": container_id, "CNI_NETNS": netns, "CNI_IFNAME": ifname,
               "CNI_ARGS": args, "CNI_PATH": os.path.dirname(self.bin)}
        return subprocess.run(self.enter() + [self.bin], input=json.dumps(conf), env=env, capture_output=True,
                              text=True, timeout=timeout)

    def files(self):
        """Every file under the node's /var/lib/cni (stateDir and dataDir)."""
        out = []
        root = os.path.join(self.var_lib, "cni")
        for d, _, fs in os.walk(root):
            out += [os.path.relpath(os.path.join(d, f), root) for f in fs]
        return sorted(out)

    def stop(self):
        for name in list(self.procs):
            self.stop_agent(name)
        if self.relay:
            self.relay.stop()
        if self.holder and self.holder.poll() is None:
            self.holder.kill()
            self.holder.wait()
        sh("ip", "netns", "del", self.netns, check=False)


def pod_networks(pod):
    """The pod's networks annotation as (namespace, name, interface) in order (Multus's
    two forms: "a, ns/b@if" or a JSON list of selection elements)."""
    text = pod["metadata"].get("annotations", {}).get(NETWORKS, "").strip()
    ns = pod["metadata"]["namespace"]
    if not text:
        return []
    if text.startswith("["):
        return [(e.get("namespace", ns), e["name"], e.get("interface")) for e in json.loads(text)]
    out = []
    for item in text.split(","):
        item = item.strip()
        iface = None
        if "@" in item:
            item, iface = item.split("@", 1)
        n, _, name = item.rpartition("/")
        out.append((n or ns, name, iface))
    return out


class KubeletStandIn:
    """kubelet's part in attaching pods, for the SimNodes: polls the pods bound to them."""

    def __init__(self, cp, nodes, interval=0.2):
        self.cp, self.nodes, self.interval = cp, {n.name: n for n in nodes}, interval
        self.attached = {}    # pod uid -> (node, pod netns, [(conf, ifname)], pod key)
        self.verdicts = []    # {"pod", "node", "network", "command", "rc", "out"}
        self.refused = set()  # pod uids whose ADD failed (kubelet would retry; the stand-in does not)
        self.vf_of = {}       # pod uid -> VFs handed to it
        self.errors = []      # what went wrong in the stand-in itself
        self.paused = set()   # node names whose new pods wait (a kubelet that has not got to them yet)
        self.lock = threading.Lock()
        self.stopping = False
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def _run(self):
        while not self.stopping:
            try:
                self.sync()
            except (ApiError, OSError):
                pass   # the API server is restarting: next round
            except Exception as e:   # a harness bug: kept for the test to show, and go on
                import traceback
                self.errors.append(traceback.format_exc())
            time.sleep(self.interval)

    def sync(self):
        pods = self.cp.api.get("/api/v1/pods")["items"]
        seen = set()
        for pod in pods:
            node = self.nodes.get(pod["spec"].get("nodeName"))
            if not node or pod["spec"].get("hostNetwork"):
                continue
            uid = pod["metadata"]["uid"]
            seen.add(uid)
            if pod["metadata"].get("deletionTimestamp"):
                self.teardown(uid)
                self.cp.api.raw("DELETE", f"/api/v1/namespaces/{pod['metadata']['namespace']}/pods/"
                                f"{pod['metadata']['name']}", {"gracePeriodSeconds": 0,
                                                                "preconditions": {"uid": uid}})
            elif uid not in self.attached and uid not in self.refused and node.name not in self.paused:
                self.setup(node, pod)
        for uid in list(self.attached):
            if uid not in seen:
                self.teardown(uid)

    def setup(self, node, pod):
        md = pod["metadata"]
        uid, ns, name = md["uid"], md["namespace"], md["name"]
        netns = f"tcp{PID}{uid[:8]}"
        sh("ip", "netns", "add", netns)
        args = (f"IgnoreUnknown=1;K8S_POD_NAMESPACE={ns};K8S_POD_NAME={name};"
                f"K8S_POD_INFRA_CONTAINER_ID={uid};K8S_POD_UID={uid}")
        done = []
        with self.lock:
            self.attached[uid] = (node, netns, done, args)
        for i, (nad_ns, nad_name, iface) in enumerate(pod_networks(pod)):
            try:
                nad = self.cp.api.get(f"/apis/k8s.cni.cncf.io/v1/namespaces/{nad_ns}/"
                                      f"network-attachment-definitions/{nad_name}")
                conf = json.loads(nad["spec"]["config"])
            except (ApiError, ValueError) as e:
                self._verdict(pod, node, nad_name, "ADD", -1, str(e))
                break
            conf.setdefault("name", nad_name)   # as Multus names a NAD's network
            if conf.get("attachment") == "sriov" and "deviceID" not in conf:
                vf = self.free_vf(node, uid)   # the device plugin's part: Multus passes its VF
                if vf:
                    conf["deviceID"] = vf
            conf.setdefault("cniVersion", "")    # a NAD without one reaches the delegate as ""
            ifname = iface or f"net{i + 1}"
            p = node.cni("ADD", conf, uid, f"/run/netns/{netns}", ifname, args)
            self._verdict(pod, node, nad_name, "ADD", p.returncode, p.stdout or p.stderr)
            if p.returncode != 0:
                with self.lock:
                    self.refused.add(uid)
                self.teardown(uid)   # kubelet tears the sandbox down: DEL for every network added
                return
            done.append((conf, ifname))
        if uid in self.attached:
            self.cp.api.raw("PATCH", f"/api/v1/namespaces/{ns}/pods/{name}/status", json.dumps(
                {"status": {"phase": "Running", "conditions": [
                    {"type": "Ready", "status": "True"}, {"type": "ContainersReady", "status": "True"},
                    {"type": "PodScheduled", "status": "True"}],
                    "podIP": f"10.244.{node.index}.{len(self.attached) % 250 + 2}"}}),
                content_type="application/strategic-merge-patch+json")

    def free_vf(self, node, uid):
        """A VF of the node no attached pod holds, as sriov-network-device-plugin would
        allocate one of its pool (it knows nothing of NUMA or speed: the pool is every VF)."""
        with self.lock:
            held = {c.get("deviceID") for (n, _, done, _) in self.attached.values() if n is node for c, _ in done}
            held |= self.vf_of.get(uid, set())
            for pci, _, _ in node.vfs:
                if pci not in held:
                    self.vf_of.setdefault(uid, set()).add(pci)
                    return pci
        return None

    def sandbox_lost(self, pod):
        """What kubelet does when a running pod's sandbox dies (a node reboot, say): DEL for
        each network, the pod not Ready (its phase stays Running: restartPolicy Always), and
        a new sandbox, so ADD again, once the node is not paused."""
        md = pod["metadata"]
        self.teardown(md["uid"])
        self.cp.api.raw("PATCH", f"/api/v1/namespaces/{md['namespace']}/pods/{md['name']}/status", json.dumps(
            {"status": {"conditions": [{"type": "Ready", "status": "False", "reason": "SandboxChanged"},
                                       {"type": "ContainersReady", "status": "False"}]}}),
            content_type="application/strategic-merge-patch+json")

    def teardown(self, uid):
        with self.lock:
            entry = self.attached.pop(uid, None)
        if not entry:
            return
        node, netns, done, args = entry
        with self.lock:
            self.vf_of.pop(uid, None)
        for conf, ifname in reversed(done):
            p = node.cni("DEL", conf, uid, f"/run/netns/{netns}", ifname, args)
            with self.lock:
                self.verdicts.append({"pod": uid, "node": node.name, "network": conf.get("name"),
                                      "command": "DEL", "rc": p.returncode, "out": p.stdout or p.stderr})
        sh("ip", "netns", "del", netns, check=False)

    def _verdict(self, pod, node, network, command, rc, out):
        with self.lock:
            self.verdicts.append({"pod": pod["metadata"]["uid"], "name": pod["metadata"]["name"],
                                  "namespace": pod["metadata"]["namespace"], "node": node.name,
                                  "network": network, "command": command, "rc": rc, "out": out})

    def verdicts_of(self, namespace, name):
        with self.lock:
            return [v for v in self.verdicts if v.get("namespace") == namespace and v.get("name") == name]

    def stop(self):
        self.stopping = True
        self.thread.join(timeout=10)
        for uid in list(self.attached):
            self.teardown(uid)
