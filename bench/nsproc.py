"""Network namespaces and processes for the bench: every namespace, child process and temp
dir it makes is registered with CLEAN and removed at exit, also on failure or Ctrl-C; plugins
are spawned with posix_spawn from a thread setns()ed into a node netns, so no nsenter is
timed. Knows nothing of what is measured."""
import ctypes
import os
import select
import shutil
import signal
import socket
import subprocess
import time


REF_DIR = "/usr/lib/cni"       # Debian's containernetworking-plugins
TIME_BIN = "/usr/bin/time"
PID = os.getpid()
PREFIX = f"bz{PID}"
CLONE_NEWNET = 0x40000000
OP_TIMEOUT_S = 120

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
