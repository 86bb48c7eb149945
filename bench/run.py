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
  - placement validation: topocni macvlan ADD with and without nodeSelector + topology; a refused ADD (code 100)
    with and without the pod's refusal record (CNI_ARGS naming the pod or not), side by side.
  - peak RSS (/usr/bin/time -v) and binary sizes.
Rounds of the participants are interleaved (A B F, B F A, ...), each in fresh namespaces. Everything lives in a
temp dir and in namespaces named bz<pid>-...; they are removed at exit, also on failure or Ctrl-C.
Exit status: 0 when every operation succeeded and nothing leaked; timing never fails the run.
"""
import argparse
import atexit
import datetime
import json
import os
import platform
import signal
import sys
import time

from measure import Bench, Config
from nsproc import CLEAN, REF_DIR, TIME_BIN, _on_signal, sh
from report import evaluate, report


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
            "topocni": a.topocni, "ref_version": ref_version(), "ref_dir": REF_DIR,
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
