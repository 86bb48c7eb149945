"""make cluster-up / cluster-down: the test cluster (control plane, the five node stand-ins
with topocni's agents, the kubelet stand-in) kept running for a person to try things on.

  up.py up DIR     starts it in the background and returns once it is ready; writes
                   DIR/admin.kubeconfig, DIR/pid and DIR/info
  up.py down DIR   ends it (SIGTERM to DIR/pid, which stops every process it started,
                   removes its netns and mounts), and waits until it is gone
"""
import json
import os
import signal
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.append(os.path.join(HERE, "../integration"))


def up(d):
    os.makedirs(d, exist_ok=True)
    if os.path.exists(os.path.join(d, "pid")):
        sys.exit(f"{d}/pid exists: a cluster is up (make cluster-down first)")
    r, w = os.pipe()
    if os.fork():
        os.close(w)
        msg = os.read(r, 65536).decode()
        if not msg.startswith("ready"):
            sys.exit(f"cluster-up failed: {msg}")
        print(open(os.path.join(d, "info")).read())
        return
    os.close(r)
    os.setsid()
    log = os.open(os.path.join(d, "up.log"), os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    for fd in (1, 2):   # not the caller's terminal or pipe: make returns once it is up
        os.dup2(log, fd)
    os.dup2(os.open(os.devnull, os.O_RDONLY), 0)
    try:
        import cluster
        from test_node_agents import ensure_agents
        c = cluster.session()
        ensure_agents(c)
        c.start_standin()
        import shutil
        shutil.copy(c.cp.admin_kubeconfig, os.path.join(d, "admin.kubeconfig"))
        with open(os.path.join(d, "info"), "w") as f:
            f.write(f"API server {c.cp.server} (kubeconfig {d}/admin.kubeconfig)\n"
                    f"nodes: {', '.join(n.name for n in c.nodes)}; component logs in {c.cp.dir}\n"
                    f"end it with: make cluster-down\n")
        with open(os.path.join(d, "pid"), "w") as f:
            f.write(str(os.getpid()))
        signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))   # atexit stops the cluster
        os.write(w, b"ready")
        os.close(w)
        while True:
            time.sleep(3600)
    except BaseException as e:
        if not isinstance(e, SystemExit):
            os.write(w, repr(e).encode())
        raise
    finally:
        for f in ("pid", "admin.kubeconfig", "info"):
            try:
                os.unlink(os.path.join(d, f))
            except FileNotFoundError:
                pass


def down(d):
    try:
        pid = int(open(os.path.join(d, "pid")).read())
    except FileNotFoundError:
        print("no cluster is up")
        return
    os.kill(pid, signal.SIGTERM)
    for _ in range(600):
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            print("cluster down")
            return
        time.sleep(0.1)
    sys.exit(f"the cluster (pid {pid}) did not end within 60 s")


if __name__ == "__main__":
    {"up": up, "down": down}[sys.argv[1]](sys.argv[2])
