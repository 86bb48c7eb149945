#!/usr/bin/python3
"""make demo: one pod attached end to end in throwaway namespaces, every step printed.

Creates a node netns and a pod netns, runs topocni ADD inside the node netns with
examples/veth-ptp.conf (dataDir redirected to a temp dir), shows what the pod got, pings
the gateway, runs CHECK and DEL, and removes everything it made.
"""
import json
import os
import shutil
import subprocess
import sys
import tempfile

binary = os.path.abspath(sys.argv[1] if len(sys.argv) > 1 else "build/topocni")
here = os.path.dirname(os.path.abspath(__file__))
tag = str(os.getpid())
node, pod = f"demo-node-{tag}", f"demo-pod-{tag}"
tmp = tempfile.mkdtemp(prefix="topocni-demo-")


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


def cni(command, conf):
    env = {"PATH": os.environ["PATH"], "CNI_COMMAND": command, "CNI_CONTAINERID": f"demo{tag}",
           "CNI_NETNS": f"/run/netns/{pod}", "CNI_IFNAME": "eth0", "CNI_PATH": "/usr/lib/cni"}
    print(f"$ CNI_COMMAND={command} CNI_IFNAME=eth0 CNI_NETNS=/run/netns/{pod} topocni < conf")
    p = subprocess.run(["nsenter", f"--net=/run/netns/{node}", binary], input=json.dumps(conf),
                       capture_output=True, text=True, env=env)
    if p.stdout.strip():
        print(p.stdout.rstrip())
    if p.returncode != 0:
        raise SystemExit(f"{command} failed (exit {p.returncode}): {p.stderr.strip()}")
    return json.loads(p.stdout) if p.stdout.strip() else None


try:
    conf = json.load(open(os.path.join(here, "veth-ptp.conf")))
    conf["ipam"]["dataDir"] = os.path.join(tmp, "networks")
    conf["stateDir"] = os.path.join(tmp, "state")
    step("create a node netns and a pod netns")
    sh("ip", "netns", "add", node)
    sh("ip", "netns", "add", pod)
    sh("ip", "link", "set", "lo", "up", ns=node)

    step("ADD: attach the pod (examples/veth-ptp.conf, dual stack)")
    result = cni("ADD", conf)

    step("what the pod sees")
    sh("ip", "-br", "addr", "show", "eth0", ns=pod)
    sh("ip", "route", ns=pod)
    sh("ip", "-6", "route", "show", "dev", "eth0", ns=pod)

    step("ping the gateways from the pod (no DAD wait for IPv6)")
    for ip in result["ips"]:
        gw = ip["gateway"]
        sh("ping", "-c", "1", "-W", "2", gw, ns=pod)

    step("IPAM reservations on disk (host-local format)")
    d = os.path.join(conf["ipam"]["dataDir"], conf["name"])
    for f in sorted(os.listdir(d)):
        if not f.startswith(".") and f != "lock":
            with open(os.path.join(d, f), newline="") as fh:   # keep host-local's \r\n visible
                print(f"  {f}: {fh.read()!r}")

    step("CHECK against the ADD result")
    cni("CHECK", dict(conf, prevResult=result))
    print("CHECK ok")

    step("DEL, twice (the second finds nothing and still succeeds)")
    cni("DEL", dict(conf, prevResult=result))
    cni("DEL", dict(conf, prevResult=result))
    left = [f for f in os.listdir(d) if not f.startswith(".") and f != "lock" and not f.startswith("last_")]
    links = [line.split()[0] for line in sh("ip", "-br", "link", ns=node, show=False).splitlines()]
    print(f"links in node netns: {links}")
    print(f"reservations left: {left}")
    print("\ndemo finished: attached, verified, detached, nothing left")
finally:
    for ns in (pod, node):
        subprocess.run(["ip", "netns", "del", ns], capture_output=True)
    shutil.rmtree(tmp, ignore_errors=True)
