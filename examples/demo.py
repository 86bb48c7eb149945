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
  5. DEL, and nothing is left.
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
    print("\ndemo finished: one pod attached and shaped, three refused with their reasons, nothing left")
finally:
    for ns in list(pods.values()) + [node]:
        subprocess.run(["ip", "netns", "del", ns], capture_output=True)
    shutil.rmtree(tmp, ignore_errors=True)
