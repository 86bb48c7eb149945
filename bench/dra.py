#!/usr/bin/python3
"""`topocni dra-driver` at the scale issue 30 names: a node with 8 PFs x 64 VFs (512 VFs) and 4
networks with host-local pools. Measured against the stand-in ResourceSlice API on loopback
(the tests' fakenode.ClusterApi, plain HTTP, validating every slice as the API server would):

  - the first publish: from the agent's start to the node's complete pool in the API;
  - a change: a VF taken or given back (its SR-IOV state record written or removed, as ADD and
    DEL do), to the last API write that carries it: p50, p99 and max over the changes, with the
    writes and bytes sent per change (every slice of the pool is rewritten: its generation);
  - an idle node: writes in a quiet spell (0 expected);
  - the agent's memory (VmHWM, VmRSS, threads).

    bench/dra.py --topocni build-release/topocni [--changes 40] [--out bench/results]
    bench/dra.py --quick ...      5 changes (the ctest smoke test)

Only figures are reported; the run counts an error when a change never reaches the API, or an
idle spell writes.
"""
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time

from standin import bench_main, memory, percentile, start_api, stop

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "integration"))
from fakenode import FakeSysfs as NodeSysfs  # noqa: E402
from fakesysfs import FakeSysfs  # noqa: E402

NODE = "bench-node"
SLICES = "/apis/resource.k8s.io/v1/resourceslices"
PFS, VFS_PER_PF, POOLS = 8, 64, 4


def make_node(tmp):
    sysfs = os.path.join(tmp, "sys")
    fake, node = FakeSysfs(sysfs), NodeSysfs(sysfs)
    node.numa_node(0, "0-15")
    node.numa_node(1, "16-31")
    vfs = []
    for i in range(PFS):
        bus = 0x30 + i
        pf, netdev = f"0000:{bus:02x}:00.0", f"bpf{i}"
        fake.add_pf(pf, netdev, totalvfs=VFS_PER_PF, numa_node=i % 2)
        node.write(f"class/net/{netdev}/speed", "100000\n" if i % 2 else "25000\n")
        for k in range(VFS_PER_PF):
            vf = f"0000:{bus:02x}:{2 + k // 8:02x}.{k % 8}"
            fake.add_vf(pf, k, vf, None, driver="vfio-pci", numa_node=i % 2)
            vfs.append((pf, netdev, k, vf))
    return sysfs, vfs


def nads(data_dir):
    out = []
    for k in range(POOLS):
        config = {"cniVersion": "1.0.0", "name": f"bnet{k}", "type": "topocni", "attachment": "sriov",
                  "ipam": {"type": "host-local", "dataDir": data_dir, "ranges": [[{"subnet": f"10.{90 + k}.0.0/22"}]]}}
        out.append({"apiVersion": "k8s.cni.cncf.io/v1", "kind": "NetworkAttachmentDefinition",
                    "metadata": {"name": f"bnet{k}", "namespace": "default", "uid": f"nad-{k}", "resourceVersion": "1"},
                    "spec": {"config": json.dumps(config)}})
    return out


def take(state_dir, pf, netdev, index, vf):
    """A VF's state record, as ADD writes it before it touches the VF (temp file, rename)."""
    d = os.path.join(state_dir, "sriov")
    os.makedirs(d, exist_ok=True)
    record = {"version": 1, "pciAddress": vf, "pfPciAddress": pf, "pf": netdev, "vfIndex": index, "mode": "dpdk",
              "owner": {"network": "bnet0", "containerID": f"bench-{index}", "ifname": "net1", "netns": "/run/netns/x"}}
    tmp = os.path.join(d, f".{vf}.tmp")
    with open(tmp, "w") as f:
        json.dump(record, f)
    os.rename(tmp, os.path.join(d, f"{vf}.json"))


def give_back(state_dir, vf):
    os.unlink(os.path.join(state_dir, "sriov", f"{vf}.json"))


def writes(api, since):
    return [r for r in api.logged() if r["method"] in ("POST", "PUT", "DELETE") and r["path"].startswith(SLICES)
            and r["at"] >= since]


def devices(api):
    return {d["name"] for s in api.resource_slices(NODE).values() for d in s["spec"]["devices"]}


def run(args):
    tmp = tempfile.mkdtemp(prefix="topocni-bench-dra-")
    proc = None
    try:
        sysfs, vfs = make_node(tmp)
        state = os.path.join(tmp, "state")
        node = {"kind": "Node", "apiVersion": "v1", "metadata": {"name": NODE, "uid": "bench-node-uid", "labels": {}},
                "status": {}}
        api, kubeconfig = start_api(tmp, nodes=[node], nads=nads(os.path.join(tmp, "data")))
        want = len(vfs) + PFS + POOLS
        start = time.monotonic()
        proc = subprocess.Popen([args.topocni, "dra-driver", "--node", NODE, "--kubeconfig", kubeconfig,
                                 "--sysfs-root", sysfs, "--state-dir", state, "--kubelet-root-dir", tmp,
                                 "--interval", "60", "--no-kubelet-plugin"], stderr=subprocess.DEVNULL)
        while len(devices(api)) < want:
            if time.monotonic() - start > 60 or proc.poll() is not None:
                raise RuntimeError(f"the first publish did not complete: {len(devices(api))} of {want} devices")
            time.sleep(0.005)
        first = time.monotonic() - start
        first_writes = writes(api, 0)
        res = {"node": {"pfs": PFS, "vfs": len(vfs), "pools": POOLS, "devices": want,
                        "slices": len(api.resource_slices(NODE))},
               "first_publish": {"ms": round(first * 1000, 1), "writes": len(first_writes),
                                 "bytes": sum(len(json.dumps(r["body"])) for r in first_writes)}}
        time.sleep(1)
        latencies, change_writes, change_bytes, errors = [], [], [], 0
        for i in range(args.changes):
            pf, netdev, index, vf = vfs[(i * 37) % len(vfs)]
            name = "vf-" + vf.replace(":", "-").replace(".", "-")
            taking = name in devices(api)
            at = time.time()
            t0 = time.monotonic()
            take(state, pf, netdev, index, vf) if taking else give_back(state, vf)
            while (name in devices(api)) == taking:
                if time.monotonic() - t0 > 10:
                    errors += 1
                    break
                time.sleep(0.002)
            latencies.append((time.monotonic() - t0) * 1000)
            time.sleep(0.5)   # the change's writes all in
            w = writes(api, at)
            change_writes.append(len(w))
            change_bytes.append(sum(len(json.dumps(r["body"])) for r in w))
        res["change_to_api"] = {"changes": args.changes, "p50_ms": round(percentile(latencies, 50), 1),
                                "p99_ms": round(percentile(latencies, 99), 1), "max_ms": round(max(latencies), 1),
                                "writes_per_change": round(sum(change_writes) / len(change_writes), 2),
                                "bytes_per_change": int(sum(change_bytes) / len(change_bytes)), "errors": errors}
        quiet_from = time.time()
        time.sleep(args.idle)
        idle = len(writes(api, quiet_from))
        res["idle"] = {"seconds": args.idle, "writes": idle, "errors": idle}
        res["memory"] = memory(proc.pid)
        res["exit_status"] = stop(proc)
        proc = None
        api.stop()
        return res
    finally:
        if proc and proc.poll() is None:
            proc.kill()
            proc.wait()
        shutil.rmtree(tmp, ignore_errors=True)


def quick(args):
    args.changes = 5
    args.idle = 1.0


def markdown(res):
    c, f = res["change_to_api"], res["first_publish"]
    return (f"# dra-driver: {res['node']['vfs']} VFs on {res['node']['pfs']} PFs, {res['node']['pools']} pools "
            f"({res['node']['devices']} devices in {res['node']['slices']} slices)\n\n"
            f"| figure | value |\n|---|---|\n"
            f"| first publish | {f['ms']} ms, {f['writes']} writes, {f['bytes']} bytes |\n"
            f"| change to API, p50 / p99 / max | {c['p50_ms']} / {c['p99_ms']} / {c['max_ms']} ms |\n"
            f"| writes and bytes per change | {c['writes_per_change']}, {c['bytes_per_change']} |\n"
            f"| idle {res['idle']['seconds']} s | {res['idle']['writes']} writes |\n"
            f"| memory | {res['memory'].get('VmHWM')} peak, {res['memory'].get('VmRSS')} now, "
            f"{res['memory'].get('Threads')} threads |\n")


if __name__ == "__main__":
    bench_main("dra", {"--changes": 40, "--idle": 3.0}, quick, run, markdown)
