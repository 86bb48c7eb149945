#!/usr/bin/python3
"""topocni against Debian's reference CNI plugins, side by side in one run (issue 7).

    bench/run.py --topocni build-release/topocni --floor build-release/bench_floor --out bench/results
    bench/run.py --quick ...        a few ops per figure, seconds in total (the ctest smoke test)

What is measured (see bench/README.md for the method):
  - ADD and DEL latency of topocni veth vs ptp, veth+bridge vs bridge, macvlan vs macvlan, all with host-local
    IPAM, IPv4 and dual stack. Latency is per plugin process: posix_spawn to reaped, spawned from inside a
    node netns (the harness setns()es its own thread there, so no nsenter is timed).
  - the floor in the same rounds: exec of /bin/true (same spawn path) and bench_floor, which does the same
    kernel work over rtnetlink in one process and times it itself.
  - bursts of N parallel ADDs then DELs: wall time, failures, duplicate addresses, leftovers.
  - IPAM scale: ADD with 0, 1000, 10000 reservations already in the store (both plugins).
  - placement validation: topocni macvlan ADD with and without nodeSelector + topology.
  - peak RSS (/usr/bin/time -v) and binary sizes.
Rounds of the participants are interleaved (A B F, B F A, ...), each in fresh namespaces. Everything lives in a
temp dir and in namespaces named bz<pid>-...; they are removed at exit, also on failure or Ctrl-C.
Exit status: 0 when every operation succeeded and nothing leaked; timing never fails the run.
"""
import argparse
import atexit
import ctypes
import datetime
import ipaddress
import json
import math
import os
import platform
import re
import select
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time

REF_DIR = "/usr/lib/cni"
TIME_BIN = "/usr/bin/time"
PID = os.getpid()
PREFIX = f"bz{PID}"
CLONE_NEWNET = 0x40000000
OP_TIMEOUT_S = 120
SLOW_ADD_S = 0.5          # a reference ADD slower than this is waiting for IPv6 DAD

_libc = ctypes.CDLL("libc.so.6", use_errno=True)


# ---------------------------------------------------------------- namespaces and cleanup

class Cleanup:
    """Everything to undo at exit: namespaces, child processes, the temp dir."""

    def __init__(self):
        self.netns = set()
        self.children = set()
        self.tmp = None

    def run(self):
        for pid in list(self.children):
            try:
                os.kill(pid, signal.SIGKILL)
                os.waitpid(pid, 0)
            except (ProcessLookupError, ChildProcessError):
                pass
            self.children.discard(pid)
        if self.netns:
            delete_netns(sorted(self.netns))
        if self.tmp:
            shutil.rmtree(self.tmp, ignore_errors=True)
            self.tmp = None


CLEAN = Cleanup()


def _on_signal(signum, _frame):
    raise SystemExit(128 + signum)


def sh(*args, check=True, input=None):
    p = subprocess.run(list(args), capture_output=True, text=True, input=input)
    if check and p.returncode != 0:
        raise RuntimeError(f"{' '.join(args)} failed ({p.returncode}): {p.stderr.strip()}")
    return p.stdout


_ns_counter = 0


def new_netns(n, kind):
    """n fresh named namespaces (one `ip -batch`); returns their names."""
    global _ns_counter
    names = []
    for _ in range(n):
        _ns_counter += 1
        names.append(f"{PREFIX}-{kind}{_ns_counter}")
    CLEAN.netns.update(names)
    sh("ip", "-batch", "-", input="".join(f"netns add {x}\n" for x in names))
    return names


def delete_netns(names):
    if not names:
        return
    subprocess.run(["ip", "-force", "-batch", "-"], input="".join(f"netns del {x}\n" for x in names),
                   capture_output=True, text=True)
    CLEAN.netns.difference_update(names)


def ns_path(name):
    return f"/run/netns/{name}"


def _setns(fd):
    if _libc.setns(fd, CLONE_NEWNET) != 0:
        e = ctypes.get_errno()
        raise OSError(e, f"setns: {os.strerror(e)}")


class InNetns:
    """Moves this thread into a netns; children spawned meanwhile start there."""

    def __init__(self, name):
        self.name = name

    def __enter__(self):
        self.saved = os.open("/proc/thread-self/ns/net", os.O_RDONLY | os.O_CLOEXEC)
        fd = os.open(ns_path(self.name), os.O_RDONLY | os.O_CLOEXEC)
        try:
            _setns(fd)
        finally:
            os.close(fd)
        return self

    def __exit__(self, *exc):
        try:
            _setns(self.saved)
        finally:
            os.close(self.saved)


def links_in(name):
    with InNetns(name):
        return sorted(n for _, n in socket.if_nameindex())


# ---------------------------------------------------------------- running processes

class Proc:
    __slots__ = ("pid", "pidfd", "out", "err", "t0", "t1", "rc", "stdout", "stderr", "cpu")


def spawn(argv, env, stdin=b"", extra_fds=()):
    """posix_spawn with stdin/stdout/stderr pipes; the config is written at once (it fits in the pipe).
    extra_fds: (fd, target) pairs also given to the child."""
    in_r, in_w = os.pipe()
    out_r, out_w = os.pipe()
    err_r, err_w = os.pipe()
    actions = [(os.POSIX_SPAWN_DUP2, in_r, 0), (os.POSIX_SPAWN_DUP2, out_w, 1), (os.POSIX_SPAWN_DUP2, err_w, 2)]
    actions += [(os.POSIX_SPAWN_DUP2, fd, target) for fd, target in extra_fds]
    p = Proc()
    p.t0 = time.perf_counter()
    try:
        p.pid = os.posix_spawn(argv[0], argv, env, file_actions=actions)
    finally:
        for fd in (in_r, out_w, err_w):
            os.close(fd)
    CLEAN.children.add(p.pid)
    p.pidfd = os.pidfd_open(p.pid)
    p.out, p.err = out_r, err_r
    try:
        os.write(in_w, stdin)
    except BrokenPipeError:
        pass
    os.close(in_w)
    return p


def _drain(fd):
    chunks = []
    while True:
        b = os.read(fd, 65536)
        if not b:
            break
        chunks.append(b)
    os.close(fd)
    return b"".join(chunks).decode(errors="replace")


def _reap(p):
    _, status, ru = os.wait4(p.pid, 0)
    p.t1 = time.perf_counter()
    p.cpu = (ru.ru_utime + ru.ru_stime) * 1e3     # ms, with the children it waited for (host-local)
    CLEAN.children.discard(p.pid)
    os.close(p.pidfd)
    p.rc = os.waitstatus_to_exitcode(status)
    p.stdout, p.stderr = _drain(p.out), _drain(p.err)
    return p


def _kill(p):
    try:
        os.kill(p.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass


def finish(p, timeout=OP_TIMEOUT_S):
    """Waits for one process (its output is small, so it cannot block on a full pipe)."""
    poller = select.poll()
    poller.register(p.pidfd, select.POLLIN)
    if not poller.poll(timeout * 1000):
        _kill(p)
    return _reap(p)


def finish_all(procs, timeout=OP_TIMEOUT_S):
    """Reaps processes in the order they end, so each gets its own end time."""
    left = {p.pidfd: p for p in procs}
    poller = select.poll()
    for fd in left:
        poller.register(fd, select.POLLIN)
    deadline = time.monotonic() + timeout
    while left:
        ready = poller.poll(max(0, deadline - time.monotonic()) * 1000)
        if not ready:
            for p in left.values():
                _kill(p)
            continue
        for fd, _ in ready:
            poller.unregister(fd)
            _reap(left.pop(fd))
    return procs


def run(argv, env, stdin=b""):
    return finish(spawn(argv, env, stdin))


# ---------------------------------------------------------------- plugins and configs

BASE_ENV = {"PATH": "/usr/sbin:/usr/bin:/sbin:/bin"}


class Config:
    """One comparison: an attachment kind and address families."""

    def __init__(self, name, kind, dual, index):
        self.name, self.kind, self.dual, self.index = name, kind, dual, index
        self.v4 = ipaddress.ip_network(f"10.{100 + index}.0.0/16")
        self.v6 = ipaddress.ip_network(f"fd00:{100 + index}::/64") if dual else None
        self.ref_type = {"veth": "ptp", "bridge": "bridge", "macvlan": "macvlan"}[kind]

    @property
    def floor_kind(self):
        return {"veth": "ptp", "bridge": "bridge:bzbr0", "macvlan": "macvlan:bzm0"}[self.kind]


class Attach:
    """One participant's view of one round: node netns, its dirs and network name."""

    def __init__(self, cfg, node, tmp, tag):
        self.cfg, self.node = cfg, node
        self.network = f"bn{PID}{tag}"
        self.data_dir = os.path.join(tmp, f"ipam-{tag}")
        self.state_dir = os.path.join(tmp, f"state-{tag}")

    def ipam(self):
        ranges = [[{"subnet": str(self.cfg.v4)}]]
        if self.cfg.v6:
            ranges.append([{"subnet": str(self.cfg.v6)}])
        return {"type": "host-local", "ranges": ranges, "dataDir": self.data_dir}

    def conf(self, plugin, extra=None):
        k = self.cfg.kind
        c = {"cniVersion": "1.0.0", "name": self.network}
        if plugin == "topocni":
            c.update({"type": "topocni", "stateDir": self.state_dir})
            if k == "macvlan":
                c.update({"attachment": "macvlan", "master": "bzm0", "mode": "bridge"})
            elif k == "bridge":
                c.update({"bridge": "bzbr0", "isGateway": True})
        else:
            c["type"] = self.cfg.ref_type
            if k == "macvlan":
                c.update({"master": "bzm0", "mode": "bridge"})
            elif k == "bridge":
                c.update({"bridge": "bzbr0", "isGateway": True})
        c["ipam"] = self.ipam()
        if extra:
            c.update(extra)
        return c

    def reserved(self):
        d = os.path.join(self.data_dir, self.network)
        if not os.path.isdir(d):
            return []
        return sorted(f for f in os.listdir(d)
                      if f != "lock" and not f.startswith("last_reserved_ip") and not f.startswith("."))

    def records(self):
        d = os.path.join(self.state_dir, "attachments", self.network)
        return [f for f in os.listdir(d) if f.endswith(".json")] if os.path.isdir(d) else []


def setup_node(cfg, node):
    """lo up; a macvlan master (a veth with carrier: both ends up) when needed."""
    cmds = ["link set lo up"]
    if cfg.kind == "macvlan":
        cmds += ["link add bzm0 type veth peer name bzm0p", "link set bzm0p up", "link set bzm0 up"]
    sh("ip", "-n", node, "-batch", "-", input="".join(c + "\n" for c in cmds))


NODE_BASE_LINKS = {"lo", "bzm0", "bzm0p", "bzbr0"}


class Plugin:
    def __init__(self, name, binary):
        self.name, self.binary = name, binary

    def env(self, command, cid, pod, args=None):
        e = dict(BASE_ENV, CNI_COMMAND=command, CNI_CONTAINERID=cid, CNI_NETNS=ns_path(pod) if pod else "",
                 CNI_IFNAME="eth0", CNI_PATH=REF_DIR)
        if args:
            e["CNI_ARGS"] = args
        return e

    def start(self, command, conf, cid, pod, args=None, wrap=None, extra_fds=()):
        argv = (wrap or []) + [self.binary]
        return spawn(argv, self.env(command, cid, pod, args), json.dumps(conf).encode(), extra_fds)


# A burst starts like N runtime threads calling the plugin at once: each plugin process is first parked in a
# tiny shell that says it is ready (fd 4) and waits for the starting gun (EOF on fd 3), then execs the plugin.
# Spawning N processes one after another from this single-threaded harness would instead time the harness's
# own serial fork/exec (about N x 2 ms here), the same for both plugins, which hides the difference.
LAUNCHER = ["/bin/sh", "-c", 'echo >&4; read _ <&3; exec 3<&- 4>&-; exec "$0"']


def start_burst(starts):
    """starts: callables taking (wrap, extra_fds) and returning a Proc. Returns (procs, t0)."""
    gun_r, gun_w = os.pipe()
    ready_r, ready_w = os.pipe()
    procs = []
    try:
        for start in starts:
            procs.append(start(LAUNCHER, ((gun_r, 3), (ready_w, 4))))
        os.close(ready_w)
        ready_w = None
        got, poller = 0, select.poll()
        poller.register(ready_r, select.POLLIN)
        while got < len(procs) and poller.poll(10000):   # a launcher that died must not hang us
            chunk = os.read(ready_r, 4096)
            if not chunk:
                break
            got += chunk.count(b"\n")
        t0 = time.perf_counter()
        os.close(gun_w)           # EOF for every `read`: they all exec now
        gun_w = None
    finally:
        for fd in (gun_r, ready_r, gun_w, ready_w):
            if fd is not None:
                os.close(fd)
    for p in procs:
        p.t0 = t0
    return procs, t0


def result_ips(p):
    try:
        return [ip["address"].split("/")[0] for ip in json.loads(p.stdout).get("ips", [])]
    except (ValueError, AttributeError, KeyError):
        return []


def failure_text(what, p):
    return f"{what}: rc={p.rc} stdout={p.stdout.strip()[:300]!r} stderr={p.stderr.strip()[:300]!r}"


# ---------------------------------------------------------------- statistics

def pct(xs, q):
    if not xs:
        return None
    s = sorted(xs)
    return s[min(len(s) - 1, max(0, math.ceil(q * len(s)) - 1))]


def summary(xs):
    if not xs:
        return {"n": 0, "median": None, "p90": None, "p99": None}
    return {"n": len(xs), "median": statistics.median(xs), "p90": pct(xs, 0.90), "p99": pct(xs, 0.99)}


def ms(x, digits=2):
    return "–" if x is None else f"{x:.{digits}f}"


def ratio(a, b):
    return None if a is None or not b else a / b


def rx(r):
    return "–" if r is None else f"{r:.2f}x"


# ---------------------------------------------------------------- the bench

class Bench:
    def __init__(self, args):
        self.a = args
        self.tmp = CLEAN.tmp = tempfile.mkdtemp(prefix="topocni-bench-")
        self.topocni = Plugin("topocni", os.path.abspath(args.topocni))
        self.floor_bin = os.path.abspath(args.floor)
        self.problems = []           # correctness problems: failures, duplicates, leaks
        self.tags = 0
        self.data = {"latency": {}, "bursts": {}, "scale": {}, "placement": {}, "rss": {}, "sizes": {},
                     "floor": {}, "notes": []}
        self.loadavg = []

    def tag(self):
        self.tags += 1
        return self.tags

    def ref(self, cfg):
        return Plugin(cfg.ref_type, os.path.join(REF_DIR, cfg.ref_type))

    def problem(self, text):
        self.problems.append(text)
        print("  PROBLEM: " + text, file=sys.stderr)

    def note_load(self, where):
        with open("/proc/loadavg") as f:
            self.loadavg.append((where, float(f.read().split()[0])))

    # --- lanes: one participant in one round, with its own fresh node netns and pods.
    # A round steps all its lanes op by op (A B F A B F ..., the order rotating per
    # round), so load that comes and goes on a shared machine hits every participant alike.

    def run_lanes(self, lanes, n, rnd):
        """Runs op 0..n-1 (op 0 is the warm-up when warmup is on) of each lane, interleaved."""
        try:
            for lane in lanes:
                lane.open(n)
            order = lanes[rnd % len(lanes):] + lanes[:rnd % len(lanes)]
            for i in range(n):
                for lane in order:
                    lane.step(i, i < self.a.warmup)
        finally:
            for lane in lanes:
                lane.close()

    def latency(self, cfg):
        a = self.a
        ref = self.ref(cfg)
        per_round = max(1, a.ops // a.rounds)
        slow_per_round = max(1, math.ceil(a.slow_ops / a.rounds))
        lanes_all = {"topocni": [], "ref": [], "floor": []}
        self.note_load(cfg.name)
        for r in range(a.rounds):
            lanes = [PluginLane(self, cfg, self.topocni), PluginLane(self, cfg, ref, slow_cap=slow_per_round),
                     FloorLane(self, cfg, ref)]
            for k, lane in zip(("topocni", "ref", "floor"), lanes):
                lanes_all[k].append(lane)
            self.run_lanes(lanes, per_round + a.warmup, r)
            print(f"  {cfg.name}: round {r + 1}/{a.rounds} done", file=sys.stderr)

        def pooled(who, key):
            return [x for lane in lanes_all[who] for x in lane.times[key]]
        capped = any(lane.capped for lane in lanes_all["ref"])
        out = {
            "topocni": {k: summary(pooled("topocni", k)) for k in ("add", "del", "add_cpu", "del_cpu")},
            "ref": dict({k: summary(pooled("ref", k)) for k in ("add", "del", "add_cpu", "del_cpu")},
                        plugin=cfg.ref_type, capped_for_dad=capped),
            "floor": {k: summary(pooled("floor", k)) for k in FloorLane.KEYS},
        }
        # ADD floor: starting a process + the kernel work; DEL floor: the kernel removing the link.
        out["floor"]["add_total_median"] = (out["floor"]["true"]["median"] or 0) + (out["floor"]["add"]["median"] or 0)
        self.data["latency"][cfg.name] = out
        if capped:
            self.data["notes"].append(
                f"{cfg.name}: every reference ADD waits for IPv6 duplicate-address detection (> {SLOW_ADD_S} s), "
                f"so the reference ran {out['ref']['add']['n']} operations instead of {per_round * a.rounds} "
                f"to keep the run short.")

    def check_clean(self, what, at, pods):
        left = at.reserved()
        if len(left) > at.prepopulated:
            self.problem(f"{what}: {len(left) - at.prepopulated} reservations left after DEL")
        if at.records():
            self.problem(f"{what}: attachment records left after DEL: {at.records()[:5]}")
        extra = set(links_in(at.node)) - NODE_BASE_LINKS
        if extra:
            self.problem(f"{what}: links left in the node netns: {sorted(extra)[:5]}")
        dirty = [p for p in pods if set(links_in(p)) - {"lo"}]
        if dirty:
            self.problem(f"{what}: links left in {len(dirty)} pod netns")

    # --- bursts

    def burst_once(self, cfg, plugin, n):
        node = new_netns(1, "n")[0]
        setup_node(cfg, node)
        at = Attach(cfg, node, self.tmp, self.tag())
        pods = new_netns(n + 1, "p")
        r = {}
        try:
            with InNetns(node):
                conf = at.conf(plugin.name)
                # One op first so that shared state (the bridge, forwarding) exists, as on a busy node.
                w = finish(plugin.start("ADD", conf, "warm", pods[0]))
                finish(plugin.start("DEL", conf, "warm", pods[0]))
                if w.rc != 0:
                    self.problem(failure_text(f"burst {cfg.name} {plugin.name} warm-up ADD", w))
                cids = [f"b{at.network}-{i}" for i in range(n)]
                for verb in ("ADD", "DEL"):
                    procs, t0 = start_burst(
                        [lambda wrap, fds, cid=cid, pod=pod, verb=verb: plugin.start(verb, conf, cid, pod, wrap=wrap,
                                                                                     extra_fds=fds)
                         for cid, pod in zip(cids, pods[1:])])
                    finish_all(procs)
                    wall = (max(p.t1 for p in procs) - t0) * 1e3
                    fails = [p for p in procs if p.rc != 0]
                    r[verb] = {"wall": wall, "fails": len(fails), "op": summary([(p.t1 - p.t0) * 1e3 for p in procs])}
                    for p in fails[:3]:
                        self.problem(failure_text(f"burst {cfg.name} N={n} {plugin.name} {verb}", p))
                    if verb == "ADD":
                        ips = [ip for p in procs if p.rc == 0 for ip in result_ips(p)]
                        dups = len(ips) - len(set(ips))
                        store = set(at.reserved())
                        mismatch = len(store.symmetric_difference(ips))
                        want = n * (2 if cfg.dual else 1)
                        r["ips"], r["dups"], r["store_mismatch"] = len(ips), dups, mismatch
                        if dups or mismatch or len(ips) != want - len(fails) * (2 if cfg.dual else 1):
                            self.problem(f"burst {cfg.name} N={n} {plugin.name}: {len(ips)} IPs, {dups} duplicates, "
                                         f"{mismatch} store/result mismatches")
            r["store_left"] = len(at.reserved())
            r["links_left"] = len(set(links_in(node)) - NODE_BASE_LINKS)
            r["pods_dirty"] = sum(1 for p in pods if set(links_in(p)) - {"lo"})
            if r["store_left"] or r["links_left"] or r["pods_dirty"]:
                self.problem(f"burst {cfg.name} N={n} {plugin.name}: left {r['store_left']} reservations, "
                             f"{r['links_left']} node links, {r['pods_dirty']} pods with links")
        finally:
            delete_netns(pods + [node])
        return r

    def bursts(self, cfg):
        ref = self.ref(cfg)
        out = {}
        for n in self.a.burst_sizes:
            runs = {"topocni": [], "ref": []}
            for rep in range(self.a.burst_repeats):
                order = [("topocni", self.topocni), ("ref", ref)]
                if rep % 2:
                    order.reverse()
                for who, plugin in order:
                    runs[who].append(self.burst_once(cfg, plugin, n))
            agg = {}
            for who, rs in runs.items():
                agg[who] = {
                    "repeats": len(rs),
                    "add_wall": statistics.median(r["ADD"]["wall"] for r in rs),
                    "del_wall": statistics.median(r["DEL"]["wall"] for r in rs),
                    "add_walls": [round(r["ADD"]["wall"], 1) for r in rs],
                    "add_op_median": statistics.median(r["ADD"]["op"]["median"] for r in rs),
                    "add_op_p99": statistics.median(r["ADD"]["op"]["p99"] for r in rs),
                    "add_fails": sum(r["ADD"]["fails"] for r in rs),
                    "del_fails": sum(r["DEL"]["fails"] for r in rs),
                    "ips": [r["ips"] for r in rs],
                    "dups": sum(r["dups"] for r in rs),
                    "store_mismatch": sum(r["store_mismatch"] for r in rs),
                    "store_left": sum(r["store_left"] for r in rs),
                    "links_left": sum(r["links_left"] + r["pods_dirty"] for r in rs),
                }
            out[n] = agg
            print(f"  {cfg.name}: burst N={n} done", file=sys.stderr)
        self.data["bursts"][cfg.name] = out

    # --- IPAM scale: reservations already in the store

    def scale(self, cfg):
        ref = self.ref(cfg)
        per_round = max(1, self.a.scale_ops // self.a.rounds)
        out = {}

        def populate(count):
            def prep(at):
                d = os.path.join(at.data_dir, at.network)
                os.makedirs(d)
                last = None
                for i in range(count):
                    ip = cfg.v4[2 + i]          # .1 is the gateway
                    with open(os.path.join(d, str(ip)), "w") as f:
                        f.write(f"scale-{i}\r\neth0")
                    last = ip
                if last is not None:        # as the plugin itself leaves it after handing these out
                    with open(os.path.join(d, "last_reserved_ip.0"), "w") as f:
                        f.write(str(last))
                at.prepopulated = count
            return prep

        # All levels in the same rounds, op by op, so they see the same load.
        lanes_all = {(level, who): [] for level in self.a.scale_levels for who in ("topocni", "ref")}
        for r in range(self.a.rounds):
            lanes = []
            for level in self.a.scale_levels:
                for who, plugin in (("topocni", self.topocni), ("ref", ref)):
                    lane = PluginLane(self, cfg, plugin, prepare=populate(level))
                    lanes_all[(level, who)].append(lane)
                    lanes.append(lane)
            self.run_lanes(lanes, per_round + self.a.warmup, r)
            print(f"  scale: round {r + 1}/{self.a.rounds} done", file=sys.stderr)
        for level in self.a.scale_levels:
            out[level] = {who: {k: summary([x for lane in lanes_all[(level, who)] for x in lane.times[k]])
                                for k in ("add", "del")} for who in ("topocni", "ref")}
        self.data["scale"] = {"config": cfg.name, "levels": out}

    # --- placement validation: topocni macvlan with and without constraints

    def placement(self, cfg):
        sysfs = os.path.join(self.tmp, "sys")
        kubelet = os.path.join(self.tmp, "kubelet")
        labels = os.path.join(self.tmp, "labels")
        uid = "a0d9c3f4-0000-4000-8000-00000000000a"

        def write(path, text):
            os.makedirs(os.path.dirname(path), exist_ok=True)
            with open(path, "w") as f:
                f.write(text)

        # Like tests/integration/fakenode.py: master bzm0 on NUMA node 0 at 25 Gb/s; the pod's exclusive CPUs on node 0.
        write(f"{sysfs}/devices/system/node/node0/cpulist", "0-3\n")
        write(f"{sysfs}/devices/system/node/node1/cpulist", "4-7\n")
        write(f"{sysfs}/bus/pci/devices/0000:18:00.0/numa_node", "0\n")
        os.makedirs(f"{sysfs}/class/net/bzm0", exist_ok=True)
        write(f"{sysfs}/class/net/bzm0/speed", "25000\n")
        os.symlink("../../../bus/pci/devices/0000:18:00.0", f"{sysfs}/class/net/bzm0/device")
        os.makedirs(f"{sysfs}/bus/pci/devices/0000:18:00.0/net/bzm0", exist_ok=True)
        write(f"{kubelet}/cpu_manager_state", json.dumps({
            "policyName": "static", "defaultCpuSet": "0-1,6-7", "entries": {uid: {"app": "2-3"}}, "checksum": 1}))
        write(labels, "# NFD features.d style\nexample.com/zone=a\nexample.com/cores=16\nsriov-capable\n")
        args = f"IgnoreUnknown=1;K8S_POD_NAMESPACE=default;K8S_POD_NAME=p;K8S_POD_INFRA_CONTAINER_ID=x;K8S_POD_UID={uid}"
        common = {"sysfsRoot": sysfs, "kubeletRootDir": kubelet, "nodeName": "worker-1", "nodeLabelsFile": labels}
        constrained = dict(common, nodeSelector={"example.com/zone": "a", "example.com/cores": "16"},
                           topology={"numaPolicy": "single-numa-node", "numaNode": 0, "minLinkSpeedMbps": 10000})
        per_round = max(1, self.a.placement_ops // self.a.rounds)
        lanes_all = {"plain": [], "placement": []}
        for r in range(self.a.rounds):
            lanes = [PluginLane(self, cfg, self.topocni, extra=common, args=args),
                     PluginLane(self, cfg, self.topocni, extra=constrained, args=args)]
            lanes_all["plain"].append(lanes[0])
            lanes_all["placement"].append(lanes[1])
            self.run_lanes(lanes, per_round + self.a.warmup, r)
        res = {who: ([x for l in ls for x in l.times["add"]], [x for l in ls for x in l.times["del"]])
               for who, ls in lanes_all.items()}
        self.data["placement"] = {who: {"add": summary(v[0]), "del": summary(v[1])} for who, v in res.items()}
        self.data["placement"]["constraints"] = {k: constrained[k] for k in ("nodeSelector", "topology")}
        print("  placement done", file=sys.stderr)

    # --- peak RSS and sizes

    def rss(self, cfg):
        ref = self.ref(cfg)
        out = {}
        for who, plugin in (("topocni", self.topocni), ("ref", ref)):
            node = new_netns(1, "n")[0]
            setup_node(cfg, node)
            at = Attach(cfg, node, self.tmp, self.tag())
            pods = new_netns(self.a.rss_samples, "p")
            peak = {"ADD": 0, "DEL": 0}
            try:
                with InNetns(node):
                    for i, pod in enumerate(pods):
                        for verb in ("ADD", "DEL"):
                            f = os.path.join(self.tmp, f"time-{at.network}-{i}-{verb}")
                            p = finish(plugin.start(verb, at.conf(plugin.name), f"rss{i}", pod,
                                                    wrap=[TIME_BIN, "-v", "-o", f]))
                            if p.rc != 0:
                                self.problem(failure_text(f"rss {cfg.name} {plugin.name} {verb}", p))
                            with open(f) as fh:
                                m = re.search(r"Maximum resident set size \(kbytes\): (\d+)", fh.read())
                            if m:
                                peak[verb] = max(peak[verb], int(m.group(1)))
            finally:
                delete_netns(pods + [node])
            out[who] = {"add_kib": peak["ADD"], "del_kib": peak["DEL"]}
        self.data["rss"][cfg.name] = out

    def sizes(self):
        def size(p):
            return os.path.getsize(p)

        def libs(p):
            try:
                return len([l for l in sh("ldd", p, check=False).splitlines() if "=>" in l])
            except OSError:
                return None
        out = {"topocni": {"bytes": size(self.topocni.binary), "shared_libs": libs(self.topocni.binary)}}
        for t in ("ptp", "bridge", "macvlan", "host-local"):
            out[t] = {"bytes": size(os.path.join(REF_DIR, t))}
        self.data["sizes"] = out


class PluginLane:
    """One plugin's ADD/DEL pairs in one round: its own node netns, store and pods."""

    def __init__(self, bench, cfg, plugin, extra=None, args=None, prepare=None, slow_cap=None):
        self.b, self.cfg, self.plugin = bench, cfg, plugin
        self.extra, self.args, self.prepare, self.slow_cap = extra, args, prepare, slow_cap
        self.times = {"add": [], "del": [], "add_cpu": [], "del_cpu": []}
        self.capped = False
        self.node, self.pods, self.limit = None, [], None

    def open(self, n):
        self.node = new_netns(1, "n")[0]
        setup_node(self.cfg, self.node)
        self.at = Attach(self.cfg, self.node, self.b.tmp, self.b.tag())
        self.at.prepopulated = 0
        if self.prepare:
            self.prepare(self.at)
        self.pods = new_netns(n, "p")
        self.used = 0

    def step(self, i, warm):
        if self.limit is not None and i >= self.limit:
            return
        pod, name = self.pods[i], f"{self.cfg.name} {self.plugin.name}"
        cid = f"bench-{self.at.network}-{i}"
        conf = self.at.conf(self.plugin.name, self.extra)
        with InNetns(self.node):
            a = finish(self.plugin.start("ADD", conf, cid, pod, self.args))
            d = finish(self.plugin.start("DEL", conf, cid, pod, self.args))
        self.used = i + 1
        if a.rc != 0:
            self.b.problem(failure_text(f"{name} ADD", a))
        elif not result_ips(a):
            self.b.problem(f"{name} ADD printed no IPs: {a.stdout[:200]!r}")
        if d.rc != 0:
            self.b.problem(failure_text(f"{name} DEL", d))
        if self.slow_cap is not None and i == 0 and (a.t1 - a.t0) > SLOW_ADD_S:
            self.limit = self.slow_cap + self.b.a.warmup   # waiting for DAD: fewer samples
            self.capped = True
        if not warm:
            self.times["add"].append((a.t1 - a.t0) * 1e3)
            self.times["del"].append((d.t1 - d.t0) * 1e3)
            self.times["add_cpu"].append(a.cpu)
            self.times["del_cpu"].append(d.cpu)

    def close(self):
        try:
            if self.node:
                self.b.check_clean(f"{self.cfg.name} {self.plugin.name}", self.at, self.pods[:self.used])
        finally:
            delete_netns(self.pods + ([self.node] if self.node else []))
            if self.prepare and self.node:
                shutil.rmtree(self.at.data_dir, ignore_errors=True)


class FloorLane:
    """The floor in one round: bench_floor's kernel ADD/DEL of the same attachment, exec of /bin/true
    (the same spawn path as the plugins) and VERSION of both plugins, in its own node netns."""

    KEYS = ("true", "add", "del", "version_topocni", "version_ref", "true_cpu", "version_topocni_cpu")

    def __init__(self, bench, cfg, ref):
        self.b, self.cfg, self.ref = bench, cfg, ref
        self.times = {k: [] for k in self.KEYS}
        self.node, self.pods, self.srv = None, [], None

    def open(self, n):
        cfg = self.cfg
        self.node = new_netns(1, "n")[0]
        setup_node(cfg, self.node)
        self.pods = new_netns(n, "p")
        with InNetns(self.node):
            self.srv = spawn_floor(self.b.floor_bin)
        if cfg.kind == "bridge":
            gw6 = f"{cfg.v6[1]}/64" if cfg.v6 else "-"
            self.srv.call(f"bridge bzbr0 {cfg.v4[1]}/16 {gw6}")

    def step(self, i, warm):
        cfg, pod = self.cfg, self.pods[i]
        ip4 = f"{cfg.v4[2 + i]}/16 {cfg.v4[1]}"
        ip6 = f"{cfg.v6[2 + i]}/64 {cfg.v6[1]}" if cfg.v6 else "- -"
        host = f"bzf{i}"
        t_add = self.srv.call(f"add {cfg.floor_kind} {ns_path(pod)} eth0 {host} {ip4} {ip6}")
        with InNetns(self.node):
            # Between ADD and DEL, like a plugin's DEL process starting after its ADD.
            t_true = run(["/bin/true"], dict(BASE_ENV))
            t_del = self.srv.call(f"del {cfg.floor_kind} {ns_path(pod)} eth0 {host}")
            v_top = run([self.b.topocni.binary], dict(BASE_ENV, CNI_COMMAND="VERSION"))
            v_ref = run([self.ref.binary], dict(BASE_ENV, CNI_COMMAND="VERSION"))
        if warm:
            return
        self.times["add"].append(t_add)
        self.times["del"].append(t_del)
        self.times["true"].append((t_true.t1 - t_true.t0) * 1e3)
        self.times["version_topocni"].append((v_top.t1 - v_top.t0) * 1e3)
        self.times["version_ref"].append((v_ref.t1 - v_ref.t0) * 1e3)
        self.times["true_cpu"].append(t_true.cpu)
        self.times["version_topocni_cpu"].append(v_top.cpu)

    def close(self):
        try:
            if self.srv:
                self.srv.close()
        finally:
            delete_netns(self.pods + ([self.node] if self.node else []))


class FloorServer:
    def __init__(self, p):
        self.p = p
        self.rfile = os.fdopen(p.out, "r")

    def call(self, line):
        os.write(self.win, (line + "\n").encode())
        answer = self.rfile.readline().strip()
        if not answer.startswith("ok "):
            raise RuntimeError(f"bench_floor: {line!r}: {answer or 'no answer'}")
        return float(answer.split()[1]) / 1e3

    def close(self):
        os.close(self.win)
        p = self.p
        try:
            os.waitpid(p.pid, 0)
        except ChildProcessError:
            pass
        CLEAN.children.discard(p.pid)
        os.close(p.pidfd)
        self.rfile.close()
        os.close(p.err)


def spawn_floor(binary):
    """bench_floor as a coprocess: commands on its stdin, one answer line each on its stdout."""
    in_r, in_w = os.pipe()
    out_r, out_w = os.pipe()
    err_r, err_w = os.pipe()
    actions = [(os.POSIX_SPAWN_DUP2, in_r, 0), (os.POSIX_SPAWN_DUP2, out_w, 1), (os.POSIX_SPAWN_DUP2, err_w, 2)]
    p = Proc()
    p.pid = os.posix_spawn(binary, [binary], dict(BASE_ENV), file_actions=actions)
    for fd in (in_r, out_w, err_w):
        os.close(fd)
    CLEAN.children.add(p.pid)
    p.pidfd = os.pidfd_open(p.pid)
    p.out, p.err = out_r, err_r
    s = FloorServer(p)
    s.win = in_w
    return s


# ---------------------------------------------------------------- report

TARGETS = [
    ("ADD median ≤ 0.2x reference, every attachment", "add_vs_ref"),
    ("ADD median ≤ 1.5x floor (process start + kernel work)", "add_vs_floor"),
    ("dual-stack ADD median ≤ 1.2x IPv4 ADD median", "dual_vs_v4"),
    ("DEL median ≤ 1.1x kernel floor for removing the link", "del_vs_floor"),
    ("128 parallel ADDs: wall ≤ 0.25x reference, no failures, no duplicates", "burst"),
    ("ADD with 10,000 reservations ≤ 1.2x ADD with none", "scale"),
    ("peak RSS ≤ 0.5x reference", "rss"),
    ("placement validation adds ≤ 10% to ADD", "placement"),
]


def evaluate(d):
    """Each target: list of (subject, value, limit, ok)."""
    ev = {k: [] for _, k in TARGETS}
    lat = d["latency"]
    for name, L in lat.items():
        t_add, r_add = L["topocni"]["add"]["median"], L["ref"]["add"]["median"]
        if t_add is not None and r_add:
            ev["add_vs_ref"].append((name, t_add / r_add, 0.2))
        fl = L["floor"]["add_total_median"]
        if t_add is not None and fl:
            ev["add_vs_floor"].append((name, t_add / fl, 1.5))
        t_del, f_del = L["topocni"]["del"]["median"], L["floor"]["del"]["median"]
        if t_del is not None and f_del:
            ev["del_vs_floor"].append((name, t_del / f_del, 1.1))
        if name.endswith("-dual"):
            v4 = lat.get(name[:-5] + "-v4")
            if v4 and v4["topocni"]["add"]["median"] and t_add is not None:
                ev["dual_vs_v4"].append((name, t_add / v4["topocni"]["add"]["median"], 1.2))
    for name, B in d["bursts"].items():
        big = B.get(max(B)) if B else None
        if not big:
            continue
        t, r = big["topocni"], big["ref"]
        clean = t["add_fails"] == 0 and t["dups"] == 0 and t["store_mismatch"] == 0
        val = t["add_wall"] / r["add_wall"] if r["add_wall"] else None
        ev["burst"].append((f"{name} N={max(B)}", val, 0.25, clean))
    S = d["scale"].get("levels")
    if S:
        lo, hi = min(S), max(S)
        base = S[lo]["topocni"]["add"]["median"]
        if base:
            ev["scale"].append((f"topocni {hi} vs {lo}", S[hi]["topocni"]["add"]["median"] / base, 1.2))
    for name, R in d["rss"].items():
        t = max(R["topocni"]["add_kib"], R["topocni"]["del_kib"])
        r = max(R["ref"]["add_kib"], R["ref"]["del_kib"])
        if r:
            ev["rss"].append((name, t / r, 0.5))
    P = d["placement"]
    if P and P["plain"]["add"]["median"]:
        ev["placement"].append(("macvlan-v4", P["placement"]["add"]["median"] / P["plain"]["add"]["median"], 1.10))
    out = {}
    for k, rows in ev.items():
        res = []
        for row in rows:
            subject, val, limit = row[:3]
            clean = row[3] if len(row) > 3 else True
            res.append({"subject": subject, "value": val, "limit": limit, "ok": val is not None and val <= limit and clean,
                        "clean": clean})
        out[k] = res
    return out


def report(d, ev, meta):
    L = []
    w = L.append
    w("# topocni vs the reference CNI plugins")
    w("")
    w(f"Run {meta['when']} on {meta['host']} ({meta['cpus']} CPUs, kernel {meta['kernel']}), "
      f"{'quick mode, ' if meta['quick'] else ''}{meta['duration_s']:.0f} s. topocni `{meta['topocni']}`; reference "
      f"plugins Debian containernetworking-plugins {meta['ref_version']} from `{REF_DIR}`; cniVersion 1.0.0 for both; "
      f"host-local IPAM on a /16 (and a /64 for dual stack). Times in ms; latency is per plugin process, spawned "
      f"inside a node netns and timed from spawn to reaped; rounds of topocni, reference and floor interleaved, each in "
      f"fresh namespaces. Ratios are from this run only: absolute times move with the machine's load "
      f"(1-min load average seen: {meta['load']}).")
    w("")
    w("## Targets")
    w("")
    w("| target | result | worst | met |")
    w("|---|---|---:|---|")
    for title, key in TARGETS:
        rows = ev.get(key, [])
        if not rows:
            w(f"| {title} | not measured | | |")
            continue
        worst = max(rows, key=lambda r: (r["value"] or 0) / r["limit"])
        detail = ", ".join(f"{r['subject']} {rx(r['value'])}" + ("" if r["clean"] else " (failures/duplicates)")
                           for r in rows)
        ok = all(r["ok"] for r in rows)
        w(f"| {title} | {detail} | {rx(worst['value'])} | {'yes' if ok else '**no**'} |")
    w("")
    w("## ADD and DEL latency")
    w("")
    w("floor ADD = exec of /bin/true + bench_floor's kernel work for the same attachment; floor DEL = bench_floor "
      "removing the same link (kernel only).")
    w("")
    w("| config | op | topocni median / p90 / p99 (n) | reference median / p90 / p99 (n) | floor median | "
      "topocni/ref | topocni/floor |")
    w("|---|---|---|---|---:|---:|---:|")
    for name, X in d["latency"].items():
        for op in ("add", "del"):
            t, r = X["topocni"][op], X["ref"][op]
            fl = X["floor"]["add_total_median"] if op == "add" else X["floor"]["del"]["median"]
            w(f"| {name} ({X['ref']['plugin']}) | {op.upper()} | {ms(t['median'])} / {ms(t['p90'])} / {ms(t['p99'])} "
              f"({t['n']}) | {ms(r['median'])} / {ms(r['p90'])} / {ms(r['p99'])} ({r['n']}) | {ms(fl)} | "
              f"{rx(ratio(t['median'], r['median']))} | {rx(ratio(t['median'], fl))} |")
    w("")
    w("### Floor")
    w("")
    w("| config | exec /bin/true | kernel ADD (bench_floor) | kernel DEL (bench_floor) | topocni VERSION | "
      "reference VERSION |")
    w("|---|---:|---:|---:|---:|---:|")
    for name, X in d["latency"].items():
        F = X["floor"]
        w(f"| {name} | {ms(F['true']['median'])} | {ms(F['add']['median'])} | {ms(F['del']['median'])} | "
          f"{ms(F['version_topocni']['median'])} | {ms(F['version_ref']['median'])} |")
    w("")
    w("### CPU time per operation")
    w("")
    w("User + system time of the plugin process (and, for the reference, of the host-local it runs), from wait4: "
      "steadier than wall time when the machine is shared.")
    w("")
    w("| config | topocni ADD / DEL | reference ADD / DEL | topocni/ref ADD | /bin/true | topocni VERSION |")
    w("|---|---:|---:|---:|---:|---:|")
    for name, X in d["latency"].items():
        t, r, F = X["topocni"], X["ref"], X["floor"]
        w(f"| {name} | {ms(t['add_cpu']['median'])} / {ms(t['del_cpu']['median'])} | {ms(r['add_cpu']['median'])} / "
          f"{ms(r['del_cpu']['median'])} | {rx(ratio(t['add_cpu']['median'], r['add_cpu']['median']))} | "
          f"{ms(F['true_cpu']['median'])} | {ms(F['version_topocni_cpu']['median'])} |")
    w("")
    w("## Bursts of parallel ADDs, then DELs")
    w("")
    w("Wall = first spawn to last reaped, median over repeats. Duplicates = an address in two results; mismatches = "
      "results vs store files; left = reservations, node links or pod links after the DELs.")
    w("")
    w("| config | N | plugin | ADD wall | ADD op median / p99 | DEL wall | fails ADD/DEL | IPs per repeat | dups | "
      "mismatches | left | topocni/ref ADD wall |")
    w("|---|---:|---|---:|---|---:|---|---|---:|---:|---:|---:|")
    for name, B in d["bursts"].items():
        for n, agg in B.items():
            for who in ("topocni", "ref"):
                a = agg[who]
                rr = rx(ratio(agg["topocni"]["add_wall"], agg["ref"]["add_wall"])) if who == "topocni" else ""
                w(f"| {name} | {n} | {who} | {ms(a['add_wall'], 0)} | {ms(a['add_op_median'], 1)} / "
                  f"{ms(a['add_op_p99'], 1)} | {ms(a['del_wall'], 0)} | {a['add_fails']}/{a['del_fails']} | "
                  f"{'/'.join(map(str, a['ips']))} | {a['dups']} | {a['store_mismatch']} | "
                  f"{a['store_left'] + a['links_left']} | {rr} |")
    w("")
    S = d["scale"]
    if S:
        w(f"## IPAM scale ({S['config']})")
        w("")
        w("The store is filled with N reservation files in host-local's format (`<id>\\r\\n<ifname>`) for the first N "
          "addresses of the range, with `last_reserved_ip.0` at the last one, as a plugin leaves it after N ADDs.")
        w("")
        w("| reservations | topocni ADD median / p90 (n) | reference ADD median / p90 (n) | topocni/ref | "
          "topocni vs 0 | reference vs 0 |")
        w("|---:|---|---|---:|---:|---:|")
        levels = S["levels"]
        base = levels[min(levels)]
        for lvl, X in levels.items():
            t, r = X["topocni"]["add"], X["ref"]["add"]
            w(f"| {lvl} | {ms(t['median'])} / {ms(t['p90'])} ({t['n']}) | {ms(r['median'])} / {ms(r['p90'])} ({r['n']}) | "
              f"{rx(ratio(t['median'], r['median']))} | {rx(ratio(t['median'], base['topocni']['add']['median']))} | "
              f"{rx(ratio(r['median'], base['ref']['add']['median']))} |")
        w("")
    P = d["placement"]
    if P:
        w("## Placement validation (topocni macvlan, IPv4)")
        w("")
        w(f"Constraints: `{json.dumps(P['constraints'])}`, labels from a file, a fake sysfs for the master and "
          f"cpu_manager_state for the pod.")
        w("")
        w("| ADD | median / p90 / p99 (n) | vs without |")
        w("|---|---|---:|")
        for who in ("plain", "placement"):
            a = P[who]["add"]
            w(f"| {'without constraints' if who == 'plain' else 'with nodeSelector + topology'} | {ms(a['median'])} / "
              f"{ms(a['p90'])} / {ms(a['p99'])} ({a['n']}) | "
              f"{rx(ratio(a['median'], P['plain']['add']['median']))} |")
        w("")
    w("## Peak RSS and size")
    w("")
    w("Peak RSS: `/usr/bin/time -v`, max over samples; for the reference it covers the plugin and the host-local it "
      "runs. Binary sizes are the files on disk (the Go binaries link libc; topocni is static).")
    w("")
    w("| config | topocni ADD / DEL | reference ADD / DEL | topocni/ref |")
    w("|---|---|---|---:|")
    for name, R in d["rss"].items():
        t, r = R["topocni"], R["ref"]
        w(f"| {name} | {t['add_kib'] / 1024:.1f} / {t['del_kib'] / 1024:.1f} MiB | {r['add_kib'] / 1024:.1f} / "
          f"{r['del_kib'] / 1024:.1f} MiB | {rx(ratio(max(t.values()), max(r.values())))} |")
    Z = d["sizes"]
    if Z:
        w("")
        w(f"Sizes: topocni {Z['topocni']['bytes'] / 2**20:.2f} MiB ({Z['topocni']['shared_libs']} shared libraries); "
          + ", ".join(f"{k} {v['bytes'] / 2**20:.2f} MiB" for k, v in Z.items() if k != "topocni")
          + " (each reference attachment also runs host-local).")
    if d["notes"]:
        w("")
        w("## Notes")
        w("")
        for n in d["notes"]:
            w(f"- {n}")
    w("")
    w("## Summary")
    w("")
    w(summary_text(d, ev))
    w("")
    return "\n".join(L)


def summary_text(d, ev):
    lat = d["latency"]
    parts = []
    v = lat.get("veth-v4")
    if v and v["topocni"]["add"]["median"] and v["ref"]["add"]["median"]:
        t, r = v["topocni"]["add"]["median"], v["ref"]["add"]["median"]
        parts.append(f"On a 2-core VM, a topocni veth ADD takes {t:.1f} ms against {r:.1f} ms for the reference "
                     f"ptp + host-local ({t / r:.2f}x), {t / v['floor']['add_total_median']:.2f}x the floor of starting "
                     f"a process and doing the same kernel work in C.")
    vd = lat.get("veth-dual")
    if vd and vd["topocni"]["add"]["median"] and vd["ref"]["add"]["median"]:
        parts.append(f"Dual stack costs topocni {vd['topocni']['add']['median']:.1f} ms, while ptp waits "
                     f"{vd['ref']['add']['median'] / 1000:.1f} s for IPv6 duplicate-address detection.")
    if v and v["topocni"]["del"]["median"]:
        parts.append(f"DEL ({v['topocni']['del']['median']:.1f} ms) is dominated by the kernel removing the veth "
                     f"({v['floor']['del']['median']:.1f} ms from C).")
    b = d["bursts"].get("veth-v4", {})
    if b:
        n = max(b)
        parts.append(f"{n} parallel ADDs finish in {b[n]['topocni']['add_wall']:.0f} ms against "
                     f"{b[n]['ref']['add_wall']:.0f} ms, with no failures or duplicate addresses.")
    rs = d["rss"].get("veth-v4")
    if rs:
        parts.append(f"Peak RSS is {max(rs['topocni'].values()) / 1024:.1f} MiB against "
                     f"{max(rs['ref'].values()) / 1024:.1f} MiB.")
    missed = [title for title, key in TARGETS if ev.get(key) and not all(r["ok"] for r in ev[key])]
    parts.append("All targets of issue 7 were met in this run." if not missed else
                 "Missed in this run: " + "; ".join(missed) + " (see bench/results/latest.md).")
    return " ".join(parts)


def ref_version():
    try:
        return sh("dpkg-query", "-W", "-f=${Version}", "containernetworking-plugins", check=False).strip() or "?"
    except OSError:
        return "?"


# ---------------------------------------------------------------- main

CONFIGS = ["veth-v4", "veth-dual", "bridge-v4", "bridge-dual", "macvlan-v4", "macvlan-dual"]


def parse_args():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--topocni", default="build-release/topocni")
    ap.add_argument("--floor", default="build-release/bench_floor")
    ap.add_argument("--out", help="directory for latest.md and latest.json (quick mode: optional)")
    ap.add_argument("--quick", action="store_true", help="a few ops per figure: a smoke test of the bench")
    ap.add_argument("--only", help="comma-separated parts: latency,bursts,scale,placement,rss")
    ap.add_argument("--configs", help="comma-separated subset of " + ",".join(CONFIGS))
    ap.add_argument("--ops", type=int, default=200, help="timed ADD/DEL pairs per plugin and config")
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--slow-ops", type=int, default=40,
                    help="reference ops when each ADD waits for IPv6 DAD (~2 s each)")
    ap.add_argument("--burst-repeats", type=int, default=3)
    ap.add_argument("--scale-ops", type=int, default=200)
    ap.add_argument("--placement-ops", type=int, default=200)
    a = ap.parse_args()
    a.burst_sizes = [32, 128]
    a.scale_levels = [0, 1000, 10000]
    a.rss_samples = 3
    a.warmup = 1
    if a.quick:
        a.ops, a.rounds, a.slow_ops, a.burst_repeats, a.scale_ops, a.placement_ops = 2, 1, 1, 1, 2, 2
        a.burst_sizes, a.scale_levels, a.rss_samples, a.warmup = [4], [0, 100], 1, 0
    a.parts = set((a.only or "latency,bursts,scale,placement,rss").split(","))
    a.configs = (a.configs or ",".join(CONFIGS)).split(",")
    for c in a.configs:
        if c not in CONFIGS:
            ap.error(f"unknown config {c}")
    return a


def main():
    a = parse_args()
    if os.geteuid() != 0:
        raise SystemExit("bench/run.py needs root (network namespaces)")
    for p in [a.topocni, a.floor] + [os.path.join(REF_DIR, t) for t in ("ptp", "bridge", "macvlan", "host-local")]:
        if not os.access(p, os.X_OK):
            raise SystemExit(f"missing executable: {p}")
    if "rss" in a.parts and not os.access(TIME_BIN, os.X_OK):
        raise SystemExit(f"{TIME_BIN} is missing: apt-get install time")
    signal.signal(signal.SIGTERM, _on_signal)
    signal.signal(signal.SIGINT, _on_signal)
    atexit.register(CLEAN.run)
    start = time.time()
    b = Bench(a)
    configs = {name: Config(name, name.split("-")[0], name.endswith("-dual"), i)
               for i, name in enumerate(CONFIGS) if name in a.configs}
    try:
        b.sizes()
        for name, cfg in configs.items():
            print(f"{name}:", file=sys.stderr)
            if "latency" in a.parts:
                b.latency(cfg)
            if "bursts" in a.parts:
                b.bursts(cfg)
            if "rss" in a.parts:
                b.rss(cfg)
        if "scale" in a.parts:
            print("scale:", file=sys.stderr)
            b.scale(Config("veth-v4", "veth", False, 10))
        if "placement" in a.parts:
            print("placement:", file=sys.stderr)
            b.placement(Config("macvlan-v4", "macvlan", False, 11))
    finally:
        CLEAN.run()
    d = b.data
    ev = evaluate(d)
    loads = [l for _, l in b.loadavg]
    meta = {"when": datetime.datetime.now().strftime("%Y-%m-%d %H:%M"), "host": platform.node(),
            "cpus": os.cpu_count(), "kernel": platform.release(), "quick": a.quick, "duration_s": time.time() - start,
            "topocni": a.topocni, "ref_version": ref_version(),
            "load": (f"{min(loads):.1f}–{max(loads):.1f}" if loads else "?")}
    text = report(d, ev, meta)
    print(text)
    if a.out:
        os.makedirs(a.out, exist_ok=True)
        with open(os.path.join(a.out, "latest.md"), "w") as f:
            f.write(text)
        with open(os.path.join(a.out, "latest.json"), "w") as f:
            json.dump({"meta": meta, "data": d, "targets": ev, "problems": b.problems}, f, indent=1, default=str)
    if b.problems:
        print(f"\n{len(b.problems)} problem(s):", file=sys.stderr)
        for p in b.problems[:20]:
            print("  " + p, file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
