"""What the two server benches (extender.py, admission.py) share: the stand-in API they read
the cluster from, a kubeconfig naming it, percentiles, and the server's memory.

The stand-in is the tests' fakenode.ClusterApi, in plain HTTP: LIST answers what the bench put
there, WATCH stays open and quiet since nothing changes during a run."""
import os
import signal
import subprocess
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "integration"))
from fakenode import ClusterApi, free_port, write_kubeconfig  # noqa: E402,F401  (free_port: for the benches)


def start_api(tmp, nodes=(), nads=(), pods=()):
    """The stand-in API holding these objects, and a kubeconfig (token auth) that names it."""
    api = ClusterApi(None)
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
