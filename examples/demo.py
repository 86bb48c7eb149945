#!/usr/bin/python3
"""make demo: what topocni is for, end to end, in throwaway namespaces.

A node netns with a NIC (a veth standing in for it, described by a fake sysfs tree:
1 Gb/s, NUMA node 0, four SR-IOV VFs) and pods, every step printed:
  1. a pod whose network's constraints hold is attached (macvlan, 400 Mb/s egress shaped);
  2. three pods are refused with code 100 before anything changes, each with its
     evidence: wrong node labels, wrong NUMA node, and a rate that would oversubscribe
     the NIC; and nothing changed;
  3. `topocni explain` says why for the oversubscribing network;
  4. `topocni node-report` as NFD labels and as Prometheus metrics;
  5. DEL, and nothing is left;
  6. the scheduler side: this node's facts document and two made from it, kube-scheduler's
     filter request to `topocni scheduler-extender` naming why two nodes fail, and ADD of an
     SR-IOV pod on the node it chose;
  7. the scheduler's own books: the node's extended resources as `node-report --publish`
     keeps them in its Node's status, and a pod spec before and after `topocni
     admission-webhook` (requests = limits of bandwidth and an address, the NAD's
     nodeSelector as required node affinity);
  8. Dynamic Resource Allocation: `topocni dra-driver` publishes the node's VFs as
     ResourceSlices and registers as kubelet's DRA plugin (a fake kubelet over the real
     gRPC protocol); a claim the scheduler allocated is prepared (re-checked on the node and
     recorded), a second claim for the same VF is refused with the event kubelet would show,
     ADD attaches the claimed VF for its pod (the deviceID Multus passes) and refuses it to
     another pod; DEL and unprepare leave nothing.
Writes only under a temp dir; removes every namespace it made.
"""
import json
import os
import shutil
import subprocess
import sys
import tempfile

binary = os.path.abspath(sys.argv[1] if len(sys.argv) > 1 else "build/topocni")
here = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(here, "..", "tests", "integration"))
from fakesysfs import FakeSysfs  # noqa: E402  (the fake sysfs tree the SR-IOV tests use)

tag = str(os.getpid())
node = f"demo-node-{tag}"
pods = {}
nic = f"dm{tag}a"[:15]
tmp = tempfile.mkdtemp(prefix="topocni-demo-")
state_dir, data_dir, sysfs = (os.path.join(tmp, d) for d in ("state", "networks", "sys"))


def step(text):
    print(f"\n== {text}")


def sh(*cmd, ns=None, show=True):
    full = (["nsenter", f"--net=/run/netns/{ns}"] if ns else []) + list(cmd)
    if show:
        print("$ " + " ".join(cmd) + (f"    # in {ns}" if ns else ""))
    out = subprocess.run(full, capture_output=True, text=True)
    if show and out.stdout.strip():
        print(out.stdout.rstrip())
    if out.returncode != 0:
        raise SystemExit(f"failed: {' '.join(full)}: {out.stderr.strip()}")
    return out.stdout


def make_pod(name):
    ns = f"demo-{name}-{tag}"
    subprocess.run(["ip", "netns", "add", ns], check=True)
    pods[name] = ns
    return ns


def cni(command, conf, pod, expect_ok=True):
    env = {"PATH": os.environ["PATH"], "CNI_COMMAND": command, "CNI_CONTAINERID": f"{pod}{tag}",
           "CNI_NETNS": f"/run/netns/{pods[pod]}", "CNI_IFNAME": "net1", "CNI_PATH": "/usr/lib/cni",
           "CNI_ARGS": f"K8S_POD_NAMESPACE=demo;K8S_POD_NAME={pod}"}
    print(f"$ CNI_COMMAND={command} CNI_IFNAME=net1 CNI_NETNS=/run/netns/{pods[pod]} topocni < {conf['name']}.conf")
    p = subprocess.run(["nsenter", f"--net=/run/netns/{node}", binary], input=json.dumps(conf),
                       capture_output=True, text=True, env=env)
    out = json.loads(p.stdout) if p.stdout.strip() else None
    if expect_ok and p.returncode != 0:
        raise SystemExit(f"{command} failed (exit {p.returncode}): {p.stdout.strip()} {p.stderr.strip()}")
    if not expect_ok and p.returncode == 0:
        raise SystemExit(f"{command} was expected to be refused: {p.stdout.strip()}")
    return out


def files():
    out = {}
    for root in (state_dir, data_dir):
        for d, _, names in os.walk(root):
            out[d] = "dir"
            for n in names:
                with open(os.path.join(d, n), "rb") as f:
                    out[os.path.join(d, n)] = f.read()
    return out


def links(ns):
    return sorted(line.split()[0].split("@")[0] for line in sh("ip", "-br", "link", ns=ns, show=False).splitlines())


def network(name, **extra):
    """A NetworkAttachmentDefinition's config: macvlan on the NIC, host-local addresses."""
    c = {"cniVersion": "1.0.0", "name": name, "type": "topocni", "attachment": "macvlan", "master": nic,
         "ipam": {"type": "host-local", "subnet": "10.99.0.0/24", "dataDir": data_dir},
         "stateDir": state_dir, "sysfsRoot": sysfs, "nodeName": "demo-node",
         "nodeLabelsFile": os.path.join(tmp, "node-labels.json"), "kubeconfig": ""}
    c.update(extra)
    return c


def refuse(conf, pod, why):
    step(f"ADD pod '{pod}' on '{conf['name']}': {why}")
    before_files, before_links = files(), (links(node), links(pods[pod]))
    err = cni("ADD", conf, pod, expect_ok=False)
    print(f"refused, code {err['code']}: {err['msg']}")
    for evidence in err["details"].split(" | "):
        print(f"  evidence: {evidence}")
    changed = sorted(os.path.relpath(p, tmp) for p in set(files()) | set(before_files)
                     if files().get(p) != before_files.get(p))
    same_links = (links(node), links(pods[pod])) == before_links
    print(f"nothing changed: links {'as before' if same_links else 'CHANGED'}; "
          f"files changed: {changed or 'none'} (the refusal counter and the pod's refusal record only)")
    if not same_links or any(not c.startswith(("state/metrics", "state/refused")) for c in changed):
        raise SystemExit("a refused ADD changed something")
    cni("DEL", conf, pod)   # what a runtime sends after a failed ADD: succeeds, changes nothing


def scheduler_side():
    """Three nodes' published facts (this node's, and two made from it: its PF on NUMA node 1,
    and every VF in use), a NAD asking for a VF on NUMA node 0, kube-scheduler's filter
    request to `topocni scheduler-extender` (fed by a stand-in API on loopback), and ADD on
    the node it chose."""
    import copy
    import http.client
    import signal
    import time

    step("the scheduler side: this node's facts as node-report --publish puts them on its Node")
    doc = json.loads(sh(binary, "node-report", "--format", "facts", "--sysfs-root", sysfs, "--state-dir", state_dir,
                        "--node", "demo-node", ns=node, show=False))
    pf = doc["pfs"][0]
    print(f"$ topocni node-report --format facts    # PF {pf['pci']} on NUMA node {pf['numaNode']}, "
          f"{pf['freeVFs']} of {pf['configuredVFs']} VFs free, {len(json.dumps(doc))} bytes")
    numa1 = copy.deepcopy(doc)
    numa1["node"] = "worker-b"
    numa1["pfs"][0]["numaNode"] = 1
    numa1["pfs"][0]["vfNumaNodes"] = {}
    full = copy.deepcopy(doc)
    full["node"] = "worker-c"
    full["pfs"][0]["vfsInUse"] = {vf: "another-pod" for vf in full["pfs"][0]["vfs"]}
    full["pfs"][0]["inUseVFs"], full["pfs"][0]["freeVFs"] = len(full["pfs"][0]["vfs"]), 0
    print("worker-b: the same, but its PF on NUMA node 1; worker-c: the same, every VF in use")
    nodes = [{"metadata": {"name": d["node"], "resourceVersion": "1", "labels": {},
                           "annotations": {"topocni.io/facts": json.dumps(d)}}} for d in (doc, numa1, full)]
    conf = {"cniVersion": "1.0.0", "name": "sriov-net", "type": "topocni", "attachment": "sriov",
            "topology": {"numaNode": 0}, "stateDir": state_dir, "sysfsRoot": sysfs}
    nad = {"metadata": {"name": "sriov-net", "namespace": "default"},
           "spec": {"config": json.dumps(conf)}}
    from fakenode import ClusterApi, free_port, write_kubeconfig
    api = ClusterApi(None, token="demo")   # a stand-in API on loopback, plain HTTP
    api.replace(nodes, [nad])
    kc = write_kubeconfig(os.path.join(tmp, "kubeconfig"), api.url(), token="demo")
    port = free_port()
    step("topocni scheduler-extender, asked as kube-scheduler asks (nodeCacheCapable: true)")
    print(f"$ topocni scheduler-extender --listen 127.0.0.1:{port} --url-prefix /scheduler")
    ext = subprocess.Popen([binary, "scheduler-extender", "--listen", f"127.0.0.1:{port}", "--kubeconfig", kc,
                            "--url-prefix", "/scheduler"], stderr=subprocess.DEVNULL)
    try:
        pod_obj = {"metadata": {"name": "dpdk-0", "namespace": "default", "uid": "d0",
                                "annotations": {"k8s.v1.cni.cncf.io/networks": "sriov-net"}}}
        request = {"Pod": pod_obj, "Nodes": None, "NodeNames": ["demo-node", "worker-b", "worker-c"]}
        answer = None
        for _ in range(200):
            try:
                c = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
                c.request("POST", "/scheduler/filter", json.dumps(request))
                answer = json.loads(c.getresponse().read())
                if answer.get("NodeNames") and answer.get("FailedNodes"):
                    break
            except OSError:
                pass
            time.sleep(0.05)
        print("$ POST /scheduler/filter  " + json.dumps(request)[:150] + " ...")
        print(json.dumps(answer, indent=1))
        if not answer or answer.get("NodeNames") != ["demo-node"]:
            raise SystemExit("the extender did not choose demo-node")
    finally:
        ext.send_signal(signal.SIGTERM)
        ext.wait(timeout=20)
        api.stop()
    step("ADD the pod on the node the extender chose: Multus passes the VF the device plugin gave it")
    make_pod("dpdk")
    vf = doc["pfs"][0]["vfs"][0]
    added = cni("ADD", dict(conf, deviceID=vf), "dpdk")
    print(f"attached: VF {vf} (bound to vfio-pci, so it stays on the node for DPDK); result: {json.dumps(added)}")
    cni("DEL", dict(conf, deviceID=vf), "dpdk")


def own_books():
    """The node's capacities as the publisher keeps them in its Node's status, and a pod
    before and after the admission webhook, against a stand-in API (HTTPS) on the node
    netns's loopback."""
    import http.client
    import signal
    import ssl
    import time

    from fakenode import ClusterApi, make_pki, nad_object, socket_in_netns, write_kubeconfig
    from jsonpatch_apply import apply_patch

    pki = make_pki(os.path.join(tmp, "pki"))
    api = ClusterApi(pki, netns=node, token="demo")
    procs = []
    try:
        api.put_node({"apiVersion": "v1", "kind": "Node",
                      "metadata": {"name": "demo-node", "labels": {"example.com/rack": "r1"}},
                      "status": {"capacity": {"cpu": "8", "memory": "16Gi", "pods": "110"},
                                 "allocatable": {"cpu": "8", "memory": "16Gi", "pods": "110"}}})
        conf = {"cniVersion": "1.0.0", "name": "market-data", "type": "topocni", "attachment": "macvlan",
                "master": nic, "nodeSelector": {"example.com/rack": "r1"},
                "bandwidth": {"egressRate": 400_000_000, "ingressRate": 100_000_000},
                "ipam": {"type": "host-local", "subnet": "10.77.0.0/28", "dataDir": data_dir}}
        api.put_nad(nad_object("market-data", conf))
        kc = write_kubeconfig(os.path.join(tmp, "books-kubeconfig"), api.url(), ca_file=os.path.join(pki, "ca.crt"),
                              token="demo")
        step("the scheduler's own books: node-report --publish keeps this node's extended resources in its Node")
        print(f"NAD market-data: macvlan on {nic} (1 Gb/s), 400 Mb/s egress, 100 Mb/s ingress, a /28 pool, rack r1")
        print("$ topocni node-report --publish --once --node demo-node")
        p = subprocess.run(["nsenter", f"--net=/run/netns/{node}", binary, "node-report", "--publish", "--once",
                            "--node", "demo-node", "--kubeconfig", kc, "--sysfs-root", sysfs, "--state-dir", state_dir],
                           capture_output=True, text=True)
        if p.returncode != 0:
            raise SystemExit(f"node-report --publish failed: {p.stderr}")
        capacity = api.node("demo-node")["status"]["capacity"]
        print("status.capacity: " + json.dumps(capacity, indent=1))
        if capacity.get(f"bandwidth.topocni.io/macvlan.{nic}.egress") != "1000":
            raise SystemExit("the publisher did not advertise the master's 1000 Mb/s")

        step("topocni admission-webhook: a pod on market-data, before and after (what the API server stores)")
        probe = socket_in_netns(node)
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
        probe.close()
        print(f"$ topocni admission-webhook --listen 127.0.0.1:{port} --tls-cert server.crt --tls-key server.key")
        hook = subprocess.Popen(["nsenter", f"--net=/run/netns/{node}", binary, "admission-webhook", "--listen",
                                 f"127.0.0.1:{port}", "--tls-cert", os.path.join(pki, "server.crt"),
                                 "--tls-key", os.path.join(pki, "server.key"), "--kubeconfig", kc],
                                stderr=subprocess.DEVNULL)
        procs.append(hook)
        pod_obj = {"apiVersion": "v1", "kind": "Pod",
                   "metadata": {"name": "ticker-0", "namespace": "default",
                                "annotations": {"k8s.v1.cni.cncf.io/networks": "market-data"}},
                   "spec": {"containers": [{"name": "ticker", "image": "registry.example.com/ticker:1",
                                            "resources": {"requests": {"cpu": "2"}, "limits": {"cpu": "2"}}}]}}
        review = {"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview",
                  "request": {"uid": "4b9d7d53-0c2e-4a8e-9a4e-6c1b7a0e0d01",
                              "kind": {"group": "", "version": "v1", "kind": "Pod"},
                              "resource": {"group": "", "version": "v1", "resource": "pods"},
                              "namespace": "default", "operation": "CREATE", "userInfo": {"username": "demo"},
                              "object": pod_obj, "oldObject": None, "dryRun": False}}
        ctx = ssl.create_default_context(cafile=os.path.join(pki, "ca.crt"))
        answer = None
        for _ in range(200):
            try:
                raw = socket_in_netns(node)
                raw.settimeout(10)
                raw.connect(("127.0.0.1", port))
                c = http.client.HTTPSConnection("127.0.0.1", port, context=ctx, timeout=10)
                c.sock = ctx.wrap_socket(raw, server_hostname="127.0.0.1")
                c.request("POST", "/mutate", json.dumps(review), {"Content-Type": "application/json"})
                answer = json.loads(c.getresponse().read())["response"]
                break
            except OSError:
                time.sleep(0.05)
        if not answer or not answer.get("allowed") or "patch" not in answer:
            raise SystemExit(f"the webhook did not mutate the pod: {answer}")
        import base64
        patched = apply_patch(pod_obj, json.loads(base64.b64decode(answer["patch"])))
        print("before: containers[0].resources " + json.dumps(pod_obj["spec"]["containers"][0]["resources"]))
        print("        affinity " + json.dumps(pod_obj["spec"].get("affinity")))
        after = patched["spec"]["containers"][0]["resources"]
        print("after:  containers[0].resources")
        for key in ("requests", "limits"):
            print(f"          {key}: " + json.dumps(after[key]))
        print("        affinity " + json.dumps(patched["spec"]["affinity"]))
        print("        annotation topocni.io/admitted: " + patched["metadata"]["annotations"]["topocni.io/admitted"])
        asks = patched["spec"]["containers"][0]["resources"]["requests"]
        name = f"bandwidth.topocni.io/macvlan.{nic}.egress"
        print(f"kube-scheduler now counts it: {name} {asks[name]} of {capacity[name]} on demo-node; "
              f"a node without rack r1 fails the pod's node affinity; ADD's ledger still checks the same on the node")
    finally:
        for proc in procs:
            proc.send_signal(signal.SIGTERM)
            proc.wait(timeout=20)
        api.stop()


def dra():
    """topocni dra-driver (topocni-dra beside the binary) against a stand-in API on loopback
    and a fake kubelet; ADD in the node netns as Multus would call it."""
    import signal
    import time

    from fakekubelet import FakeKubelet
    from fakenode import ClusterApi, allocated_claim, write_kubeconfig

    api = ClusterApi(None, token="demo")
    api.put_node({"apiVersion": "v1", "kind": "Node", "metadata": {"name": "demo-node", "labels": {}}, "status": {}})
    kc = write_kubeconfig(os.path.join(tmp, "dra-kubeconfig"), api.url(), token="demo")
    registry, plugin_dir = os.path.join(tmp, "kubelet", "plugins_registry"), os.path.join(tmp, "kubelet", "plugins", "topocni.io")
    step("Dynamic Resource Allocation: topocni dra-driver publishes this node's devices and is kubelet's DRA plugin")
    print(f"$ topocni dra-driver --node demo-node --plugin-registration-dir {registry} --plugin-dir {plugin_dir}")
    log = open(os.path.join(tmp, "dra-driver.log"), "w")
    proc = subprocess.Popen([binary, "dra-driver", "--node", "demo-node", "--kubeconfig", kc, "--sysfs-root", sysfs,
                             "--state-dir", state_dir, "--kubelet-root-dir", tmp, "--plugin-registration-dir", registry,
                             "--plugin-dir", plugin_dir], stdout=log, stderr=subprocess.STDOUT)
    k = None
    try:
        k = FakeKubelet(registry).wait_registered(timeout=20)
        print(f"kubelet's plugin watcher: GetInfo -> type {k.info.type}, name {k.info.name}, endpoint "
              f"{os.path.relpath(k.info.endpoint, tmp)}, versions {list(k.info.supported_versions)}; "
              f"kubelet speaks {k.version}")
        deadline = time.monotonic() + 10
        while not api.resource_slices("demo-node") and time.monotonic() < deadline:
            time.sleep(0.05)
        names = [d["name"] for s_ in api.resource_slices("demo-node").values() for d in s_["spec"]["devices"]]
        print(f"ResourceSlice devices: {', '.join(names)}")
        vf = "0000:3b:02.1"
        device = "vf-" + vf.replace(":", "-").replace(".", "-")
        mine = ("dra-pod", "d0000000-0000-4000-8000-00000000000d")
        other = ("other-pod", "e0000000-0000-4000-8000-00000000000e")
        claims = []
        for name, pod in (("dra-pod-net1", mine), ("other-pod-net1", other)):
            obj = api.put_claim(allocated_claim("demo", name, "demo-node", [
                {"request": "vf", "driver": "topocni.io", "pool": "demo-node", "device": device}], [pod]))
            claims.append({"namespace": "demo", "uid": obj["metadata"]["uid"], "name": name})
        step(f"kubelet prepares claim dra-pod-net1: the scheduler allocated {device} to pod dra-pod")
        got = k.prepare([claims[0]])[claims[0]["uid"]]
        if got["error"]:
            raise SystemExit(f"prepare failed: {got['error']}")
        print(f"NodePrepareResources -> {got['devices']}")
        print("recorded under the state dir:", sorted(os.path.relpath(os.path.join(d, f), state_dir)
                                                      for d, _, fs in os.walk(os.path.join(state_dir, "dra")) for f in fs))
        step(f"kubelet prepares claim other-pod-net1, allocated the same VF (a stale allocation)")
        got = k.prepare([claims[1]])
        event = FakeKubelet.describe_event([claims[1]], got)
        if not event:
            raise SystemExit("the second claim for one VF was prepared")
        print(f"kubectl describe pod other-pod:  Warning  FailedPrepareDynamicResources  kubelet  {event}")
        step(f"ADD as Multus calls it for each pod, with the allocated device's deviceID {vf}")
        conf = {"cniVersion": "1.0.0", "name": "sriov-dra", "type": "topocni", "attachment": "sriov",
                "stateDir": state_dir, "sysfsRoot": sysfs, "deviceID": vf, "pciBusID": vf}
        for name, pod in (("dra-pod", mine), ("other-pod", other)):
            make_pod(name)
        def add(command, name, pod, expect_ok):
            env = {"PATH": os.environ["PATH"], "CNI_COMMAND": command, "CNI_CONTAINERID": f"{name}{tag}",
                   "CNI_NETNS": f"/run/netns/{pods[name]}", "CNI_IFNAME": "net1", "CNI_PATH": "/usr/lib/cni",
                   "CNI_ARGS": f"K8S_POD_NAMESPACE=demo;K8S_POD_NAME={name};K8S_POD_UID={pod[1]}"}
            p = subprocess.run(["nsenter", f"--net=/run/netns/{node}", binary], input=json.dumps(conf),
                               capture_output=True, text=True, env=env)
            if (p.returncode == 0) != expect_ok:
                raise SystemExit(f"{command} {name}: exit {p.returncode}: {p.stdout} {p.stderr}")
            return json.loads(p.stdout) if p.stdout.strip() else None
        out = add("ADD", "other-pod", other, False)
        print(f"ADD pod other-pod: refused, code {out['code']}: {out['msg']}\n  evidence: {out['details']}")
        add("ADD", "dra-pod", mine, True)
        print(f"ADD pod dra-pod: attached VF {vf} (its claim's)")
        step("DEL pod dra-pod, then kubelet unprepares its claim; the other claim's unprepare finds nothing")
        add("DEL", "dra-pod", mine, True)
        print(f"NodeUnprepareResources -> {k.unprepare(claims)}")
        left = [os.path.relpath(os.path.join(d, f), state_dir) for d, _, fs in os.walk(os.path.join(state_dir, "dra"))
                for f in fs]
        print(f"files left under the state dir's dra/: {left or 'none'}")
        if left:
            raise SystemExit("unprepare left something")
    finally:
        if k:
            k.close()
        proc.send_signal(signal.SIGTERM)
        proc.wait(timeout=20)
        log.close()
        api.stop()


try:
    step("a node netns with a 1 Gb/s NIC on NUMA node 0 (a veth, described by a fake sysfs tree with 4 VFs)")
    sh("ip", "netns", "add", node)
    sh("ip", "link", "set", "lo", "up", ns=node)
    sh("ip", "link", "add", nic, "type", "veth", "peer", "name", f"dm{tag}b"[:15], ns=node)
    sh("ip", "link", "set", nic, "up", ns=node)
    fake = FakeSysfs(sysfs)
    fake.add_pf("0000:3b:00.0", nic, numa_node=0)
    for i in range(4):
        fake.add_vf("0000:3b:00.0", i, f"0000:3b:02.{i}", None, driver="vfio-pci", numa_node=0)
    with open(os.path.join(sysfs, "class/net", nic, "speed"), "w") as f:
        f.write("1000\n")
    for n in (0, 1):
        os.makedirs(os.path.join(sysfs, f"devices/system/node/node{n}"))
    with open(os.path.join(tmp, "node-labels.json"), "w") as f:
        json.dump({"topology.kubernetes.io/zone": "zone-a", "example.com/rack": "r1"}, f)
    print("node labels: topology.kubernetes.io/zone=zone-a, example.com/rack=r1")

    good = network("fast-net", nodeSelector={"example.com/rack": "r1"}, topology={"numaNode": 0},
                   bandwidth={"egressRate": 400_000_000, "egressBurst": 4_000_000})
    step("ADD pod 'trader' on 'fast-net': rack r1, NIC on NUMA node 0, 400 Mb/s egress on a 1 Gb/s NIC")
    make_pod("trader")
    result = cni("ADD", good, "trader")
    print(json.dumps(result, indent=1))
    sh("ip", "-br", "addr", "show", "net1", ns=pods["trader"])
    sh("tc", "qdisc", "show", "dev", "net1", ns=pods["trader"])
    # The NIC is a PF: its macvlans and its VFs share one wire, so one ledger, named by the PF's PCI address.
    print("bandwidth ledger of PF 0000:3b:00.0:", sorted(os.listdir(os.path.join(state_dir, "bandwidth", "0000:3b:00.0"))))

    make_pod("batch")
    refuse(network("rack2-net", nodeSelector={"example.com/rack": "r2"}), "batch",
           "its network wants rack r2")
    make_pod("numa")
    refuse(network("numa1-net", topology={"numaNode": 1}), "numa", "its network wants the NIC on NUMA node 1")
    greedy = network("bulk-net", bandwidth={"egressRate": 700_000_000})
    make_pod("bulk")
    refuse(greedy, "bulk", "700 Mb/s more would oversubscribe the 1 Gb/s NIC")

    step("topocni explain: why 'bulk-net' does not fit this node now")
    path = os.path.join(tmp, "bulk-net.json")
    with open(path, "w") as f:
        json.dump(greedy, f)
    print(f"$ topocni explain --config {path}")
    p = subprocess.run(["nsenter", f"--net=/run/netns/{node}", binary, "explain", "--config", path],
                       capture_output=True, text=True)
    print(p.stdout.rstrip())
    if p.returncode != 1:   # 1: a constraint is not met
        raise SystemExit(f"explain: exit {p.returncode}: {p.stderr.strip()}")

    for fmt in ("nfd", "prometheus"):
        step(f"topocni node-report --format {fmt}")
        p = subprocess.run(["nsenter", f"--net=/run/netns/{node}", binary, "node-report", "--format", fmt,
                            "--sysfs-root", sysfs, "--state-dir", state_dir], capture_output=True, text=True)
        if p.returncode != 0:
            raise SystemExit(f"node-report failed: {p.stderr}")
        print(p.stdout.rstrip())

    step("DEL pod 'trader', twice (the second finds nothing and still succeeds)")
    cni("DEL", good, "trader")
    cni("DEL", good, "trader")
    # Bookkeeping (README, Files on the node): refusal counters, the refused pods' records (the refusal
    # agent drops them when the pods are gone), store locks, round-robin cursors, and the capacity the link's
    # last admission counted against.
    left = [p for p in files() if os.path.isfile(p) and "/metrics/" not in p and "/refused/" not in p
            and os.path.basename(p) != "lock"
            and not os.path.basename(p).startswith("last_reserved_ip")
            and not (os.path.basename(p) == "capacity" and "/bandwidth/" in p)]
    print(f"links in the node: {links(node)}; in the pod: {links(pods['trader'])}")
    print(f"files left besides bookkeeping: {left or 'none'}")
    if left or links(pods["trader"]) != ["lo"]:
        raise SystemExit("DEL left something behind")
    scheduler_side()
    own_books()
    dra()
    print("\ndemo finished: one pod attached and shaped, three refused with their reasons, nothing left; "
          "the scheduler extender chose the node where an SR-IOV pod fits, and ADD attached it there; "
          "the node advertised its network capacities and the webhook wrote the pod's needs into the pod; "
          "kubelet's DRA plugin prepared the VF the scheduler allocated, ADD attached exactly it, and nothing was left")
finally:
    for ns in list(pods.values()) + [node]:
        subprocess.run(["ip", "netns", "del", ns], capture_output=True)
    shutil.rmtree(tmp, ignore_errors=True)
