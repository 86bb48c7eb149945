#!/usr/bin/python3
"""kubelet's DRA plugin (topocni-dra) at the scale issue 31 names: 100 claims, each a VF of a
node with 2 PFs x 64 VFs (every fourth also a share of its PF's bandwidth), prepared and then
unprepared one call at a time, as kubelet calls it, over the real gRPC protocol
(tests/integration/fakekubelet.py) against the stand-in API on loopback (plain HTTP). Every
claim names its network (topocni.io/network), so each first prepare reads the claim and the
NAD and re-checks the VF on the live node.

  - prepare (first time), prepare again (answered from the record), unprepare: p50, p99, max
    per call, in ms (issue 31's target: p99 <= 5 ms);
  - topocni-dra's memory (VmHWM, VmRSS, threads) after them;
  - crash cycles: prepare and unprepare of random claims while the plugin is killed with
    SIGKILL at random moments and started again, kubelet retrying each call until it is
    answered (as it does); then every claim unprepared: the records, VF holds, pod index and
    ledger entries left must be 0.

    bench/dra_kubelet.py --topocni build-release/topocni [--claims 100] [--cycles 1000] [--out bench/results]
    bench/dra_kubelet.py --quick ...     20 claims, 100 cycles (the ctest smoke test)
"""
import json
import multiprocessing
import os
import random
import shutil
import subprocess
import sys
import tempfile
import time

from standin import bench_main, memory, percentile, start_api, stop

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "integration"))
import grpc  # noqa: E402
from fakekubelet import FakeKubelet  # noqa: E402
from fakenode import FakeSysfs as NodeSysfs, allocated_claim, nad_object  # noqa: E402
from fakesysfs import FakeSysfs  # noqa: E402

NODE = "bench-node"
PFS, VFS_PER_PF = 2, 64


def make_node(tmp):
    sysfs = os.path.join(tmp, "sys")
    fake, node = FakeSysfs(sysfs), NodeSysfs(sysfs)
    node.numa_node(0, "0-15")
    node.numa_node(1, "16-31")
    vfs = []
    for i in range(PFS):
        pf, netdev = f"0000:{0x30 + i:02x}:00.0", f"bpf{i}"
        fake.add_pf(pf, netdev, totalvfs=VFS_PER_PF, numa_node=i)
        node.write(f"class/net/{netdev}/speed", "100000\n")
        for k in range(VFS_PER_PF):
            vf = f"0000:{0x30 + i:02x}:{2 + k // 8:02x}.{k % 8}"
            fake.add_vf(pf, k, vf, None, driver="vfio-pci", numa_node=i)
            vfs.append((pf, vf))
    return sysfs, vfs


def name(prefix, pci):
    return prefix + "-" + pci.replace(":", "-").replace(".", "-")


def claim_objects(vfs, n):
    """The claims as the scheduler leaves them (UIDs fixed here), and kubelet's references."""
    objs, refs = [], []
    for i in range(n):
        pf, vf = vfs[i]
        results = [{"request": "vf", "driver": "topocni.io", "pool": NODE, "device": name("vf", vf)}]
        if i % 4 == 0:
            results.append({"request": "link", "driver": "topocni.io", "pool": NODE, "device": name("pf", pf),
                            "shareID": f"{i:04x}", "consumedCapacity": {"egressMbps": "100"}})
        pod = (f"pod-{i}", f"00000000-0000-4000-8000-{i:012x}")
        uid = f"c1a10000-0000-4000-8000-{i:012x}"
        objs.append(allocated_claim("default", f"claim-{i}", NODE, results, [pod],
                                    annotations={"topocni.io/network": "default/bnet"}, uid=uid))
        refs.append({"namespace": "default", "uid": uid, "name": f"claim-{i}"})
    return objs, refs


def serve_api(tmp, objects, conn):
    """The stand-in API in a process of its own: in the bench's process, its threads and the
    fake kubelet's would share one interpreter lock, and the bench would time that."""
    node, nad, claims = objects
    api, kubeconfig = start_api(tmp, nodes=[node], nads=[nad])
    for c in claims:
        api.put_claim(c)
    conn.send(kubeconfig)
    conn.recv()   # until the bench is done
    api.stop()


class Plugin:
    """topocni-dra and the fake kubelet talking to it; start() again after a kill."""

    def __init__(self, binary, tmp, kubeconfig, sysfs, state):
        self.binary, self.tmp = binary, tmp
        self.registry = os.path.join(tmp, "kubelet", "plugins_registry")
        self.args = [binary, "dra-driver", "--node", NODE, "--kubeconfig", kubeconfig, "--sysfs-root", sysfs,
                     "--state-dir", state, "--kubelet-root-dir", tmp, "--interval", "60",
                     "--plugin-registration-dir", self.registry,
                     "--plugin-dir", os.path.join(tmp, "kubelet", "plugins", "topocni.io")]
        self.proc = self.k = None
        self.log = os.path.join(tmp, "plugin.log")

    def start(self):
        with open(self.log, "a") as log:
            self.proc = subprocess.Popen(self.args, stderr=log)
        self.k = FakeKubelet(self.registry).wait_registered(timeout=20)

    def wait_published(self, timeout=20, settle=1.0):
        """Until the publisher has put the node's ResourceSlices in the API, and `settle`
        seconds more: the scheduler allocates claims from the slices once its informer has
        them, and kubelet prepares a claim only after the pod is bound, so a node's first
        prepare comes well after its first publish. Timing prepares during the publisher's
        start (its watches' first LISTs, the Node's status) would time that, on the same cores."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            with open(self.log) as f:
                if "devices in" in f.read():
                    time.sleep(settle)
                    return
            time.sleep(0.05)
        raise RuntimeError("topocni-dra published no ResourceSlices")

    def kill(self):
        self.proc.kill()
        self.proc.wait()
        self.k.close()

    def call(self, what, claim):
        """One call, retried on a fresh plugin until answered, as kubelet retries."""
        while True:
            try:
                return (self.k.prepare if what == "prepare" else self.k.unprepare)([claim])[claim["uid"]]
            except grpc.RpcError:
                try:
                    self.proc.wait(timeout=2)   # the socket closes a moment before the process is gone
                except subprocess.TimeoutExpired:
                    raise RuntimeError("the plugin failed a call and lives on") from None
                self.k.close()
                self.start()


def in_plugin(log, call, skip):
    """The plugin's own time per call, from its log lines ("NodePrepareResources: 1 claim(s)
    in 2.41 ms"), after the first `skip` of them: what the call costs without gRPC's and the
    fake kubelet's share."""
    with open(log) as f:
        ms = [float(line.split(" in ")[-1].split()[0]) for line in f if f"{call}: " in line]
    return ms[skip:]


def stats(ms):
    return {"calls": len(ms), "p50_ms": round(percentile(ms, 50), 2), "p99_ms": round(percentile(ms, 99), 2),
            "max_ms": round(max(ms), 2)}


def timed(fn, xs):
    out = []
    for x in xs:
        t0 = time.perf_counter()
        r = fn(x)
        out.append((time.perf_counter() - t0) * 1000)
        if r["error"]:
            raise RuntimeError(f"{x['name']}: {r['error']}")
    return {"calls": len(out), "p50_ms": round(percentile(out, 50), 2), "p99_ms": round(percentile(out, 99), 2),
            "max_ms": round(max(out), 2)}


def leftovers(state):
    """Every file under the state dir's dra/ and bandwidth/ (a link's remembered capacity aside)."""
    out = []
    for sub in ("dra", "bandwidth"):
        for d, _, files in os.walk(os.path.join(state, sub)):
            out += [os.path.relpath(os.path.join(d, f), state) for f in files if f != "capacity"]
    return sorted(out)


def disk_floor(tmp, n):
    """What one prepare's writes cost on this disk with nothing else around them, in a
    directory beside the state dir: the VF's hold (a symlink) and the record (an exclusive
    create, its write, fsync, the directory's fsync). The prepare's figures less these are the
    plugin's own; this VM's disk has been seen at 0.02 to over 1 ms per file created."""
    d = os.path.join(tmp, "floor")
    os.makedirs(os.path.join(d, "devices"))
    os.makedirs(os.path.join(d, "claims"))
    out = []
    for i in range(n):
        t0 = time.perf_counter()
        os.symlink(f"uid-{i}", os.path.join(d, "devices", f"vf-{i}"))
        fd = os.open(os.path.join(d, "claims", f"{i}.json"), os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        os.write(fd, b"x" * 360)
        os.fsync(fd)
        os.close(fd)
        dfd = os.open(os.path.join(d, "claims"), os.O_RDONLY | os.O_DIRECTORY)
        os.fsync(dfd)
        os.close(dfd)
        out.append((time.perf_counter() - t0) * 1000)
        time.sleep(0.001)
    shutil.rmtree(d)
    return stats(out)


def run(args):
    tmp = tempfile.mkdtemp(prefix="topocni-bench-drak-")
    plugin = None
    binary = args.topocni_dra or os.path.join(os.path.dirname(os.path.abspath(args.topocni)), "topocni-dra")
    try:
        sysfs, vfs = make_node(tmp)
        state = os.path.join(tmp, "state")
        net = {"cniVersion": "1.0.0", "name": "bnet", "type": "topocni", "attachment": "sriov",
               "topology": {"minLinkSpeedMbps": 25000}}
        node = {"kind": "Node", "apiVersion": "v1", "metadata": {"name": NODE, "uid": "u", "labels": {}}, "status": {}}
        objs, cs = claim_objects(vfs, args.claims)
        ours, theirs = multiprocessing.Pipe()
        server = multiprocessing.get_context("fork").Process(
            target=serve_api, args=(tmp, (node, nad_object("bnet", net), objs), theirs), daemon=True)
        server.start()
        kubeconfig = ours.recv()
        plugin = Plugin(binary, tmp, kubeconfig, sysfs, state)
        plugin.start()
        plugin.wait_published()
        res = {"node": {"pfs": PFS, "vfs": len(vfs), "claims": len(cs)}}
        res["disk_floor_before"] = disk_floor(tmp, len(cs))
        res["prepare"] = timed(lambda c: plugin.k.prepare([c])[c["uid"]], cs)
        res["prepare_again"] = timed(lambda c: plugin.k.prepare([c])[c["uid"]], cs)
        res["memory"] = memory(plugin.proc.pid)
        res["unprepare"] = timed(lambda c: plugin.k.unprepare([c])[c["uid"]], cs)
        res["disk_floor_after"] = disk_floor(tmp, len(cs))
        prepares = in_plugin(plugin.log, "NodePrepareResources", 0)
        res["in_plugin"] = {"prepare": stats(prepares[:len(cs)]), "prepare_again": stats(prepares[len(cs):2 * len(cs)]),
                            "unprepare": stats(in_plugin(plugin.log, "NodeUnprepareResources", 0)[:len(cs)])}
        # Reported, not asserted (no timing is, anywhere): the target is p99 <= 5 ms.
        res["prepare"]["p99_within_5ms"] = res["prepare"]["p99_ms"] <= 5
        res["in_plugin"]["prepare"]["p99_within_5ms"] = res["in_plugin"]["prepare"]["p99_ms"] <= 5
        # Crash cycles: a claim prepared then unprepared is a cycle; kill -9 at random moments.
        rng = random.Random(31)
        kills, done, t0 = 0, 0, time.monotonic()
        held = set()
        while done < args.cycles:
            c = rng.choice(cs)
            what = "unprepare" if c["uid"] in held else "prepare"
            if rng.random() < args.kill_rate:
                # The kill lands while the call runs, or just before it.
                delay = rng.uniform(0, 0.004)
                subprocess.Popen(["/bin/sh", "-c", f"sleep {delay:.4f}; kill -9 {plugin.proc.pid} 2>/dev/null"])
                kills += 1
            r = plugin.call(what, c)
            if r["error"]:
                raise RuntimeError(f"{what} {c['name']}: {r['error']}")
            if what == "prepare":
                held.add(c["uid"])
            else:
                held.discard(c["uid"])
                done += 1
            if plugin.proc.poll() is not None:   # killed after answering: kubelet's next call finds a new one
                plugin.k.close()
                plugin.start()
        for c in cs:
            if c["uid"] in held:
                plugin.call("unprepare", c)
        left = leftovers(state)
        res["crash_cycles"] = {"cycles": done, "kills": kills, "seconds": round(time.monotonic() - t0, 1),
                               "files_left": len(left), "left": left[:10], "errors": len(left)}
        plugin.k.close()
        res["exit_status"] = stop(plugin.proc)
        plugin = None
        # The same prepares with the state directory on tmpfs: the plugin's own cost (the API
        # reads, the re-check, gRPC) apart from this machine's disk, where one file's creation
        # or rename has been seen to take from 0.02 to over 1 ms.
        shm = tempfile.mkdtemp(prefix="topocni-bench-drak-", dir="/dev/shm")
        try:
            plugin = Plugin(binary, tmp, kubeconfig, sysfs, os.path.join(shm, "state"))
            plugin.start()
            plugin.wait_published()
            res["prepare_tmpfs"] = timed(lambda c: plugin.k.prepare([c])[c["uid"]], cs)
            res["unprepare_tmpfs"] = timed(lambda c: plugin.k.unprepare([c])[c["uid"]], cs)
            res["prepare_tmpfs"]["p99_within_5ms"] = res["prepare_tmpfs"]["p99_ms"] <= 5
            plugin.k.close()
            status = stop(plugin.proc)
            if status != 0:
                res["exit_status"] = status
            plugin = None
        finally:
            shutil.rmtree(shm, ignore_errors=True)
        ours.send("done")
        server.join(timeout=10)
        return res
    finally:
        if plugin and plugin.proc and plugin.proc.poll() is None:
            plugin.proc.kill()
            plugin.proc.wait()
        shutil.rmtree(tmp, ignore_errors=True)


def quick(args):
    args.claims = 20
    args.cycles = 100


def markdown(res):
    c, i = res["crash_cycles"], res["in_plugin"]

    def tmpfs_row(name, k):
        x = res[k]
        return f"| {name} | {x['p50_ms']} / {x['p99_ms']} / {x['max_ms']} | |\n"

    def row(name, k):
        x, y = res[k], i[k]
        return (f"| {name} | {x['p50_ms']} / {x['p99_ms']} / {x['max_ms']} | "
                f"{y['p50_ms']} / {y['p99_ms']} / {y['max_ms']} |\n")
    return (f"# topocni-dra, kubelet's DRA plugin: {res['node']['claims']} claims on {res['node']['vfs']} VFs\n\n"
            f"| call | as the fake kubelet times it: p50 / p99 / max (ms) | in the plugin |\n|---|---|---|\n"
            + row("NodePrepareResources, first", "prepare") + row("NodePrepareResources, again", "prepare_again")
            + row("NodeUnprepareResources", "unprepare")
            + tmpfs_row("NodePrepareResources, first, state dir on tmpfs", "prepare_tmpfs")
            + tmpfs_row("NodeUnprepareResources, state dir on tmpfs", "unprepare_tmpfs")
            + tmpfs_row("the disk's floor: a prepare's writes alone (before the prepares)", "disk_floor_before")
            + tmpfs_row("the disk's floor (after the unprepares)", "disk_floor_after") + "\n"
            f"Memory: {res['memory'].get('VmHWM')} peak, {res['memory'].get('VmRSS')} now, "
            f"{res['memory'].get('Threads')} threads.\n\n"
            f"Crash cycles: {c['cycles']} prepare/unprepare cycles, {c['kills']} kill -9, {c['seconds']} s; "
            f"{c['files_left']} records, holds, index files or ledger entries left.\n")


if __name__ == "__main__":
    bench_main("dra_kubelet", {"--claims": 100, "--cycles": 1000, "--kill-rate": 0.05, "--topocni-dra": ""},
               quick, run, markdown)
