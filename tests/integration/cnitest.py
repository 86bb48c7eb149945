"""Test harness: real network namespaces, the real topocni binary, CNI_* variables.

Every namespace and link a test makes is named with a short prefix plus the pid and is
removed in tearDown, which also runs when a test fails. The plugin itself runs inside a
per-test "node" netns, so the machine's own netns is never touched.
"""
import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import unittest

BIN = os.environ.get("TOPOCNI_BIN", os.path.join(os.path.dirname(__file__), "../../build/topocni"))
REF_DIR = "/usr/lib/cni"   # Debian's containernetworking-plugins
PID = os.getpid()
ALL_VERSIONS = ["0.1.0", "0.2.0", "0.3.0", "0.3.1", "0.4.0", "1.0.0", "1.1.0"]


def sh(*args, check=True, ns=None, input=None):
    """Runs a command (optionally inside a named netns); returns stdout text."""
    cmd = list(args)
    if ns:
        cmd = ["nsenter", f"--net=/run/netns/{ns}"] + cmd
    p = subprocess.run(cmd, capture_output=True, text=True, input=input)
    if check and p.returncode != 0:
        raise AssertionError(f"{' '.join(cmd)} failed ({p.returncode}): {p.stderr.strip()}")
    return p.stdout


def snapshot_files(*roots):
    """Every file and directory under `roots`, with mode and content hash: no exclusions."""
    out = {}
    for root in roots:
        for dirpath, dirs, files in os.walk(root):
            for d in dirs:
                out[os.path.join(dirpath, d)] = "dir"
            for f in files:
                p = os.path.join(dirpath, f)
                st = os.lstat(p)
                if os.path.islink(p):
                    out[p] = ("link", os.readlink(p))
                    continue
                with open(p, "rb") as fh:
                    out[p] = (oct(st.st_mode), hashlib.sha256(fh.read()).hexdigest())
    return out


# The only things allowed to outlive every attachment (README: "What stays on the node"),
# as paths relative to the test's temp dir (dataDir = ipam/, stateDir = state/). A
# cursor may change its content; everything else must be gone or exactly as before.
# The traces a placement refusal (code 100) leaves: its counter, for the operator's metrics,
# and the pod's refusal record, for the refusal agent (an Event, an eviction) and explain --pod.
REFUSAL_COUNTER = (r"state", r"state/metrics", r"state/metrics/refusals\.json",
                   r"state/refused", r"state/refused/[a-z0-9-]+_[a-z0-9.-]+\.json")
BOOKKEEPING = [re.compile(p) for p in (
    r"ipam",                                          # dataDir
    r"ipam/[^/.][^/]*",                               # <dataDir>/<net>/
    r"ipam/[^/.][^/]*/lock",                          # the store lock (the reference's too)
    r"ipam/[^/.][^/]*/last_reserved_ip\.\d+",         # round-robin cursors
    r"ipam/\.topocni",                                # <dataDir>/.topocni/
    r"ipam/\.topocni/[^/]+",                          # <dataDir>/.topocni/<net>/
    r"ipam/\.topocni/[^/]+/(owners|tmp)",             # its (empty) index and temp directories
    r"state",                                         # stateDir
    r"state/attachments",
    r"state/attachments/[^/]+",                       # a network's records directory (the lock)
    r"state/sriov",                                   # the VF records directory
    r"state/node-labels",                             # the node label cache and its entry
    r"state/node-labels/[^/]+\.json",
    r"state/bandwidth",                               # the bandwidth ledger
    r"state/bandwidth/[^/]+",                         # a link's ledger directory (its lock)
    r"state/bandwidth/[^/]+/capacity",                # what its last admission counted against
) + REFUSAL_COUNTER]


def is_bookkeeping(rel):
    return any(p.fullmatch(rel) for p in BOOKKEEPING)


class Outcome:
    def __init__(self, proc):
        self.rc = proc.returncode
        self.stdout = proc.stdout
        self.stderr = proc.stderr
        try:
            self.json = json.loads(proc.stdout) if proc.stdout.strip() else None
        except json.JSONDecodeError:
            self.json = None

    def __repr__(self):
        return f"rc={self.rc} stdout={self.stdout!r} stderr={self.stderr!r}"


class NetnsTestCase(unittest.TestCase):
    """Gives each test a node netns, pod netns on demand, and temp dirs."""
    counter = 0

    def setUp(self):
        NetnsTestCase.counter += 1
        self.tag = f"{PID % 100000}{NetnsTestCase.counter}"
        self.namespaces = []
        self.tmp = tempfile.mkdtemp(prefix="topocni-test-")
        self.data_dir = os.path.join(self.tmp, "ipam")
        self.state_dir = os.path.join(self.tmp, "state")
        self.node = self.make_netns("tn")
        sh("ip", "link", "set", "lo", "up", ns=self.node)

    def tearDown(self):
        for ns in reversed(self.namespaces):
            subprocess.run(["ip", "netns", "del", ns], capture_output=True)
        shutil.rmtree(self.tmp, ignore_errors=True)

    def make_netns(self, prefix):
        name = f"{prefix}{self.tag}-{len(self.namespaces)}"
        sh("ip", "netns", "add", name)
        self.namespaces.append(name)
        return name

    def make_pod(self):
        ns = self.make_netns("tp")
        return ns, f"/run/netns/{ns}"

    def remove_netns(self, name):
        subprocess.run(["ip", "netns", "del", name], capture_output=True)
        if name in self.namespaces:
            self.namespaces.remove(name)

    # --- running plugins ---
    def run_plugin(self, command, conf, container_id="c1", netns="", ifname="eth0", args=None,
                   path=None, binary=None, extra_env=None, raw_stdin=None, env_override=None):
        env = {
            "PATH": os.environ.get("PATH", "/usr/sbin:/usr/bin:/sbin:/bin"),
            "CNI_COMMAND": command,
            "CNI_CONTAINERID": container_id,
            "CNI_NETNS": netns,
            "CNI_IFNAME": ifname,
            "CNI_PATH": path if path is not None else REF_DIR,
        }
        if args is not None:
            env["CNI_ARGS"] = args
        if extra_env:
            env.update(extra_env)
        if env_override is not None:
            env = env_override
        stdin = raw_stdin if raw_stdin is not None else json.dumps(conf)
        cmd = ["nsenter", f"--net=/run/netns/{self.node}", binary or BIN]
        if isinstance(stdin, bytes) or any(isinstance(v, bytes) for v in env.values()):
            # Raw bytes (invalid UTF-8) in and out; the output is checked as UTF-8 text.
            env = {k: v if isinstance(v, bytes) else v.encode() for k, v in env.items()}
            p = subprocess.run(cmd, input=stdin if isinstance(stdin, bytes) else stdin.encode(), capture_output=True,
                               env=env, timeout=120)
            p.stdout = p.stdout.decode("utf-8")   # raises if the plugin printed invalid UTF-8
            p.stderr = p.stderr.decode("utf-8", "replace")
            return Outcome(p)
        return Outcome(subprocess.run(cmd, input=stdin, capture_output=True, text=True, env=env, timeout=120))

    def conf(self, version="1.1.0", name=None, ipam=True, subnet="10.77.0.0/24", v6=None, **extra):
        c = {"cniVersion": version, "name": name or f"net{self.tag}", "type": "topocni", "stateDir": self.state_dir}
        if ipam:
            ranges = [[{"subnet": subnet}]]
            if v6:
                ranges.append([{"subnet": v6}])
            c["ipam"] = {"type": "host-local", "ranges": ranges, "dataDir": self.data_dir}
        c.update(extra)
        return c

    # --- looking at files: every file under dataDir, stateDir and their parent ---
    def files(self):
        """Every file and directory of the test's temp dir, but a fake sysfs tree in it
        ("sys"), which stands for the kernel's /sys and which tests change themselves."""
        return {p: v for p, v in snapshot_files(self.tmp).items()
                if not (p + "/").startswith(os.path.join(self.tmp, "sys") + "/")}

    def assertFilesUnchanged(self, before, what=""):
        now = self.files()
        if now != before:
            added = sorted(set(now) - set(before))
            gone = sorted(set(before) - set(now))
            changed = sorted(p for p in set(now) & set(before) if now[p] != before[p])
            self.fail(f"{what}: files changed: added {added}, removed {gone}, changed {changed}")

    def refusal_counts(self, state_dir=None):
        p = os.path.join(state_dir or self.state_dir, "metrics", "refusals.json")
        if not os.path.exists(p):
            return {}
        with open(p) as f:
            return json.load(f)

    def assertOnlyRefusalCounted(self, before, out, network, state_dir=None, also=()):
        """A refused ADD (code 100) changed nothing but the refusal counter, and that counts
        one more refusal for `network` and each constraint its message names."""
        counts = self.refusal_counts(state_dir).get(network, {})
        what = f"refused ADD ({out.json['msg']})"
        self.assertOnlyBookkeepingLeft(before, what, state_dir=state_dir,
                                       allowed=[re.compile(p) for p in REFUSAL_COUNTER + tuple(also)])
        named = out.json["msg"].split(": ", 1)[1].split(", ")
        for constraint in named:
            self.assertGreaterEqual(counts.get(constraint, 0), 1, f"{what}: {constraint} not counted in {counts}")

    def assertOnlyBookkeepingLeft(self, before, what="", state_dir=None, allowed=BOOKKEEPING):
        """Whatever is new or changed since `before` matches one of `allowed` (named
        bookkeeping). For a config whose stateDir is not the test's own (`state_dir`), what
        is under it is named as if it were under state/."""
        state_dir = state_dir or self.state_dir
        now = self.files()
        bad = []
        for p in sorted(set(now) | set(before)):
            if now.get(p) == before.get(p):
                continue
            rel = os.path.relpath(p, self.tmp)
            if p == state_dir or p.startswith(state_dir + "/"):
                named = os.path.normpath(os.path.join("state", os.path.relpath(p, state_dir)))
            elif rel == "state" or rel.startswith("state/"):
                named = "(another stateDir)/" + rel   # the test's own stateDir, not this config's
            else:
                named = rel
            if p in before and p not in now:
                bad.append(f"removed {rel}")
            elif not any(r.fullmatch(named) for r in allowed):
                bad.append(f"{'added' if p not in before else 'changed'} {rel}")
        if bad:
            self.fail(f"{what}: left behind: {bad}")

    # --- looking at the kernel ---
    def links(self, ns):
        return {l["ifname"]: l for l in json.loads(sh("ip", "-j", "-d", "link", "show", ns=ns))}

    # The links as a plugin set them up, without what the kernel changes on its own a
    # moment later: carrier comes up asynchronously (linkwatch), so NO-CARRIER, LOWER_UP
    # and operstate may differ between two readings with nothing done in between.
    def link_setup(self, ns):
        volatile = {"NO-CARRIER", "LOWER_UP", "M-DOWN", "DORMANT"}
        out = {}
        for name, l in self.links(ns).items():
            l = {k: v for k, v in l.items() if k not in ("operstate", "linkmode")}
            l["flags"] = [f for f in l.get("flags", []) if f not in volatile]
            out[name] = l
        return out

    def addrs(self, ns, dev):
        out = json.loads(sh("ip", "-j", "addr", "show", "dev", dev, ns=ns))
        return [(a["local"], a["prefixlen"], a) for a in out[0]["addr_info"]] if out else []

    def routes(self, ns, family="-4"):
        return json.loads(sh("ip", "-j", family, "route", "show", "table", "all", ns=ns))

    def ipam_files(self, network):
        d = os.path.join(self.data_dir, network)
        if not os.path.isdir(d):
            return []
        return sorted(f for f in os.listdir(d)
                      if f != "lock" and not f.startswith("last_reserved_ip") and not f.startswith("."))

    def ping(self, ns, addr, count=1):
        flag = "-6" if ":" in addr else "-4"
        p = subprocess.run(["nsenter", f"--net=/run/netns/{ns}", "ping", flag, "-c", str(count), "-W", "2", addr],
                           capture_output=True, text=True)
        return p.returncode == 0

    def assertOk(self, out):
        self.assertEqual(out.rc, 0, f"plugin failed: {out}")

    def assertError(self, out, code, *words):
        self.assertNotEqual(out.rc, 0, f"expected failure: {out}")
        self.assertIsNotNone(out.json, f"error JSON expected on stdout: {out}")
        self.assertEqual(out.json.get("code"), code, f"wrong code: {out}")
        for w in words:
            self.assertIn(w, out.json.get("msg", "") + " " + out.json.get("details", ""), f"message: {out}")


# ctest's SKIP_RETURN_CODE (CMakeLists.txt): a test that cannot run here is reported as
# skipped, never as passed.
SKIP = 77


def main():
    """Runs the calling test file. A file whose tests need no root (they talk to the binary
    over loopback only) says so with NEEDS_ROOT = False and runs as any user."""
    needs_root = getattr(sys.modules["__main__"], "NEEDS_ROOT", True)
    if needs_root and os.geteuid() != 0:
        if os.environ.get("CI"):
            raise SystemExit("integration tests must run as root in CI")
        print("SKIP: this test needs root (it makes network namespaces)")
        raise SystemExit(SKIP)
    unittest.main(verbosity=2)
