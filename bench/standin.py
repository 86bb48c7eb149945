"""What the two server benches (extender.py, admission.py) share: the stand-in API they read
the cluster from, a kubeconfig naming it, percentiles, the server's memory, and the command line.

The stand-in is the tests' fakenode.ClusterApi, in plain HTTP: LIST answers what the bench put
there, WATCH stays open and quiet since nothing changes during a run."""
import argparse
import json
import os
import signal
import subprocess
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "integration"))
from fakenode import ClusterApi, free_port, write_kubeconfig  # noqa: E402,F401  (free_port: for the benches)


def start_api(tmp, nodes=(), nads=(), pods=()):
    """The stand-in API holding these objects, and a kubeconfig (token auth) that names it."""
    api = ClusterApi(None, token="bench")
    api.replace(nodes, nads, pods)
    return api, write_kubeconfig(os.path.join(tmp, "kubeconfig"), api.url(), token="bench")


def percentile(xs, p):
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(round(p / 100 * (len(xs) - 1))))]


def memory(pid):
    """VmHWM (the peak), VmRSS and Threads of a running process."""
    out = {}
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith(("VmHWM", "VmRSS", "Threads")):
                k, v = line.split(":", 1)
                out[k] = v.strip()
    return out


def stop(proc):
    """SIGTERM, as the kubelet stops a pod; SIGKILL only past 20 s. Returns how it ended."""
    proc.send_signal(signal.SIGTERM)
    try:
        return proc.wait(timeout=20)
    except subprocess.TimeoutExpired:
        proc.kill()
        return "killed after 20 s"


def bench_main(name, options, quick, run, markdown=None):
    """The command line of a server bench: --topocni, the bench's own `options` (flag: default,
    whose type the default's is), --quick (`quick(args)` sets the small counts), --out DIR
    (<name>.json, and <name>.md from `markdown(results)`). Prints the results; the exit status
    is 1 when any figure counted errors, or the server did not end with 0 (`exit_status`)."""
    ap = argparse.ArgumentParser()
    ap.add_argument("--topocni", required=True)
    for flag, default in options.items():
        ap.add_argument(flag, type=type(default), default=default)
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--out")
    args = ap.parse_args()
    if args.quick:
        quick(args)
    res = run(args)
    text = json.dumps(res, indent=2)
    print(text)
    if args.out:
        os.makedirs(args.out, exist_ok=True)
        with open(os.path.join(args.out, name + ".json"), "w") as f:
            f.write(text + "\n")
        if markdown:
            with open(os.path.join(args.out, name + ".md"), "w") as f:
                f.write(markdown(res))
    bad = sum(v.get("errors", 0) for v in res.values() if isinstance(v, dict))
    sys.exit(1 if bad or res.get("exit_status", 0) != 0 else 0)
