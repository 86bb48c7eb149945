"""The measurements: configs for both plugins, one node and pod netns per operation, ADD/DEL
latency in interleaved rounds with the floor, bursts, IPAM scale, placement, peak RSS and
sizes. Collects raw figures and problems in Bench.data / Bench.problems; report.py turns them
into text."""
import ipaddress
import json
import math
import os
import re
import shutil
import statistics
import sys
import tempfile

from nsproc import (CLEAN, PID, REF_DIR, TIME_BIN, InNetns, Proc, delete_netns, finish, finish_all, links_in, new_netns,
                    ns_path, run, sh, spawn, start_burst)


SLOW_ADD_S = 0.5          # a reference ADD slower than this is waiting for IPv6 DAD


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


def result_ips(p):
    try:
        return [ip["address"].split("/")[0] for ip in json.loads(p.stdout).get("ips", [])]
    except (ValueError, AttributeError, KeyError):
        return []


def error_code(p):
    try:
        return json.loads(p.stdout).get("code")
    except (ValueError, AttributeError):
        return None


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
        self.data["placement"]["refused"] = self.refusals(cfg, common, uid)
        print("  placement done", file=sys.stderr)

    def refusals(self, cfg, common, uid):
        """A refused ADD (code 100, nodeSelector) with and without the pod's refusal record
        (<stateDir>/refused/<ns>_<name>.json, written only when CNI_ARGS names the pod), in
        interleaved lanes: what the record costs the ADD. Each lane refuses the same pod
        again and again, as kubelet retries a sandbox, so the record is rewritten each time."""
        refused = dict(common, nodeSelector={"example.com/zone": "b"})
        named = f"IgnoreUnknown=1;K8S_POD_NAMESPACE=default;K8S_POD_NAME=p;K8S_POD_INFRA_CONTAINER_ID=x;K8S_POD_UID={uid}"
        unnamed = f"IgnoreUnknown=1;K8S_POD_INFRA_CONTAINER_ID=x;K8S_POD_UID={uid}"
        per_round = max(1, self.a.placement_ops // self.a.rounds)
        lanes_all = {"without record": [], "with record": []}
        for r in range(self.a.rounds):
            lanes = [PluginLane(self, cfg, self.topocni, extra=refused, args=unnamed, refused=True),
                     PluginLane(self, cfg, self.topocni, extra=refused, args=named, refused=True)]
            lanes_all["without record"].append(lanes[0])
            lanes_all["with record"].append(lanes[1])
            self.run_lanes(lanes, per_round + self.a.warmup, r)
            for who, lane in zip(lanes_all, lanes):
                rec = os.path.join(lane.at.state_dir, "refused", "default_p.json")
                if os.path.exists(rec) != (who == "with record"):
                    self.problem(f"refused ADD {who}: the refusal record is {'missing' if who == 'with record' else 'there'}")
        return {who: summary([x for l in ls for x in l.times["add"]]) for who, ls in lanes_all.items()}

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

    def __init__(self, bench, cfg, plugin, extra=None, args=None, prepare=None, slow_cap=None, refused=False):
        self.b, self.cfg, self.plugin = bench, cfg, plugin
        self.extra, self.args, self.prepare, self.slow_cap = extra, args, prepare, slow_cap
        self.refused = refused   # every ADD must be a placement refusal (code 100)
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
        if self.refused:
            if a.rc == 0 or error_code(a) != 100:
                self.b.problem(failure_text(f"{name} ADD (a refusal, code 100, expected)", a))
        elif a.rc != 0:
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
