#!/usr/bin/python3
"""The example manifests and configs in examples/, as a cluster would get them.

Every YAML document parses; every NAD and config says cniVersion 1.0.0 unless it uses
something only 1.1.0 has (Multus before v4.1 refuses a 1.1.0 result); rbac.yaml grants
exactly the two calls topocni makes; and the DaemonSet's kubeconfig script, taken from the
YAML and run for real with /bin/sh and with busybox sh in temp dirs, writes a kubeconfig
that parses, names the right server, CA and token file, and that topocni itself uses to
read a Node from a fake API server, also after the token rotated.
"""
import json
import os
import re
import shutil
import signal
import subprocess
import tempfile
import time
import unittest

import yaml

from cnitest import BIN, NetnsTestCase
from fakenode import FakeApiServer, make_pki

ROOT = os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))
EXAMPLES = os.path.join(ROOT, "examples")
SCRIPT_KEY = "write-kubeconfig.sh"

# What only cniVersion 1.1.0 has, as config keys: GC's list of valid attachments, and the
# route fields that 1.1.0 added to results (README: "printed only in 1.1.0 results").
ONLY_1_1_0_KEYS = {"cni.dev/valid-attachments", "cni.dev/attachments"}
ONLY_1_1_0_ROUTE_KEYS = {"mtu", "advmss", "priority", "table", "scope"}


def example_files(*suffixes):
    return sorted(os.path.join(EXAMPLES, f) for f in os.listdir(EXAMPLES) if f.endswith(suffixes))


def load_yaml(name):
    with open(os.path.join(EXAMPLES, name)) as f:
        return [d for d in yaml.safe_load_all(f) if d is not None]


def one(docs, kind):
    found = [d for d in docs if d.get("kind") == kind]
    if len(found) != 1:
        raise AssertionError(f"expected one {kind}, found {len(found)}")
    return found[0]


def uses_1_1_0(conf, where=""):
    """The keys of a config (or conflist, or a delegate) that only cniVersion 1.1.0 has."""
    found = [where + k for k in sorted(ONLY_1_1_0_KEYS & set(conf))]
    for i, p in enumerate(conf.get("plugins") or []):
        found += uses_1_1_0(p, f"{where}plugins[{i}].")
    ipam = conf.get("ipam") or {}
    for i, r in enumerate(ipam.get("routes") or []):
        found += [f"{where}ipam.routes[{i}].{k}" for k in sorted(ONLY_1_1_0_ROUTE_KEYS & set(r))]
    if isinstance(conf.get("delegate"), dict):
        found += uses_1_1_0(conf["delegate"], where + "delegate.")
    return found


def topocni_default_kubeconfig():
    """kTopocniKubeconfig from cni/kube.h: where topocni looks when a config has no "kubeconfig"."""
    with open(os.path.join(ROOT, "cni", "kube.h")) as f:
        return re.search(r'kTopocniKubeconfig = "([^"]+)"', f.read()).group(1)


def daemonset_script():
    """The kubeconfig script as the DaemonSet mounts it: the ConfigMap its "scripts" volume names."""
    docs = load_yaml("daemonset.yaml")
    pod = one(docs, "DaemonSet")["spec"]["template"]["spec"]
    cm_name = next(v["configMap"]["name"] for v in pod["volumes"] if "configMap" in v)
    cm = next(d for d in docs if d["kind"] == "ConfigMap" and d["metadata"]["name"] == cm_name)
    return cm["data"][SCRIPT_KEY]


def busybox():
    return shutil.which("busybox")


class Manifests(unittest.TestCase):
    def test_every_yaml_document_of_every_example_parses_and_is_a_kubernetes_object(self):
        files = example_files(".yaml", ".yml")
        self.assertGreaterEqual(len(files), 5)
        for path in files:
            with self.subTest(example=os.path.basename(path)):
                with open(path) as f:
                    docs = [d for d in yaml.safe_load_all(f) if d is not None]
                self.assertTrue(docs, "no document")
                for d in docs:
                    self.assertIsInstance(d, dict)
                    self.assertTrue(d.get("apiVersion") and d.get("kind") and d.get("metadata", {}).get("name"), d)

    def assertVersionFits(self, conf, what):
        need = uses_1_1_0(conf)
        if need:
            self.assertEqual(conf.get("cniVersion"), "1.1.0", f"{what} uses {need}, which only 1.1.0 has")
        else:
            self.assertEqual(conf.get("cniVersion"), "1.0.0",
                             f"{what}: nothing in it needs 1.1.0, and Multus before v4.1 refuses a 1.1.0 result")

    def test_every_nad_config_is_json_with_cni_version_1_0_0_unless_it_uses_a_1_1_0_only_key(self):
        nads = 0
        for path in example_files(".yaml", ".yml"):
            with open(path) as f:
                for d in yaml.safe_load_all(f):
                    if not d or d.get("kind") != "NetworkAttachmentDefinition":
                        continue
                    nads += 1
                    what = f"{os.path.basename(path)} {d['metadata']['name']}"
                    with self.subTest(nad=what):
                        self.assertEqual(d["apiVersion"], "k8s.cni.cncf.io/v1")
                        conf = json.loads(d["spec"]["config"])
                        self.assertEqual(conf["name"], d["metadata"]["name"])
                        self.assertVersionFits(conf, what)
        self.assertGreaterEqual(nads, 3)

    def test_every_conf_and_conflist_is_json_with_cni_version_1_0_0_unless_it_uses_a_1_1_0_only_key(self):
        files = example_files(".conf", ".conflist")
        self.assertGreaterEqual(len(files), 6)
        for path in files:
            with self.subTest(example=os.path.basename(path)):
                with open(path) as f:
                    conf = json.load(f)
                self.assertEqual(path.endswith(".conflist"), "plugins" in conf)
                self.assertVersionFits(conf, os.path.basename(path))

    def test_the_1_1_0_check_finds_route_fields_and_gc_keys_but_not_a_link_mtu(self):
        self.assertEqual(uses_1_1_0({"mtu": 1500, "ipam": {"routes": [{"dst": "0.0.0.0/0"}]}}), [])
        self.assertEqual(uses_1_1_0({"ipam": {"routes": [{"dst": "0.0.0.0/0", "table": 100, "scope": 253}]}}),
                         ["ipam.routes[0].scope", "ipam.routes[0].table"])
        self.assertEqual(uses_1_1_0({"plugins": [{"cni.dev/valid-attachments": []}]}),
                         ["plugins[0].cni.dev/valid-attachments"])
        self.assertEqual(uses_1_1_0({"delegate": {"ipam": {"routes": [{"dst": "::/0", "mtu": 1400}]}}}),
                         ["delegate.ipam.routes[0].mtu"])

    def test_the_cluster_role_grants_exactly_get_on_nodes_and_pods_in_the_core_group(self):
        docs = load_yaml("rbac.yaml")
        self.assertEqual(sorted(d["kind"] for d in docs), ["ClusterRole", "ClusterRoleBinding", "ServiceAccount"])
        role = one(docs, "ClusterRole")
        self.assertNotIn("aggregationRule", role)
        grants = set()
        for rule in role["rules"]:
            self.assertEqual(set(rule), {"apiGroups", "resources", "verbs"},
                             f"no resourceNames, nonResourceURLs or anything else: {rule}")
            grants |= {(g, r, v) for g in rule["apiGroups"] for r in rule["resources"] for v in rule["verbs"]}
        self.assertEqual(grants, {("", "nodes", "get"), ("", "pods", "get")})

    def test_the_binding_and_the_daemonset_name_the_same_service_account(self):
        docs = load_yaml("rbac.yaml")
        sa, role, binding = one(docs, "ServiceAccount"), one(docs, "ClusterRole"), one(docs, "ClusterRoleBinding")
        self.assertEqual((sa["metadata"]["name"], sa["metadata"]["namespace"]), ("topocni", "kube-system"))
        self.assertNotEqual(sa.get("automountServiceAccountToken"), False, "the DaemonSet copies that token")
        self.assertEqual(binding["roleRef"], {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole",
                                              "name": role["metadata"]["name"]})
        self.assertEqual(binding["subjects"], [{"kind": "ServiceAccount", "name": sa["metadata"]["name"],
                                                "namespace": sa["metadata"]["namespace"]}])
        ds = one(load_yaml("daemonset.yaml"), "DaemonSet")
        pod = ds["spec"]["template"]["spec"]
        self.assertEqual(ds["metadata"]["namespace"], sa["metadata"]["namespace"])
        self.assertEqual(pod["serviceAccountName"], sa["metadata"]["name"])
        self.assertNotEqual(pod.get("automountServiceAccountToken"), False)

    def test_the_daemonset_writes_the_kubeconfig_first_into_topocnis_default_directory_and_keeps_it_fresh(self):
        docs = load_yaml("daemonset.yaml")
        pod = one(docs, "DaemonSet")["spec"]["template"]["spec"]
        volumes = {v["name"]: v for v in pod["volumes"]}
        kc_dir = os.path.dirname(topocni_default_kubeconfig())
        self.assertEqual(kc_dir, "/etc/cni/net.d/topocni.d")
        self.assertIn("${TOPOCNI_KUBECONFIG_DIR:-%s}" % kc_dir, daemonset_script())
        init = [c["name"] for c in pod["initContainers"]]
        self.assertLess(init.index("kubeconfig"), init.index("install"),
                        "the kubeconfig exists before the binary can attach a pod")
        runs = {"init": pod["initContainers"], "sidecar": pod["containers"]}
        for where, containers in runs.items():
            with self.subTest(container=where):
                c = next(c for c in containers if c["name"] == "kubeconfig")
                env = {e["name"]: e["value"] for e in c.get("env", [])}
                self.assertEqual(env.get("ONESHOT"), "1" if where == "init" else None)
                self.assertEqual(env["TOPOCNI_KUBECONFIG_DIR"], kc_dir)
                mounts = {m["mountPath"]: m for m in c["volumeMounts"]}
                script_path = c["command"][-1]
                self.assertEqual(c["command"], ["/bin/sh", script_path])
                scripts = mounts[os.path.dirname(script_path)]
                self.assertEqual(volumes[scripts["name"]]["configMap"]["name"],
                                 next(d["metadata"]["name"] for d in docs if d["kind"] == "ConfigMap"))
                self.assertEqual(os.path.basename(script_path), SCRIPT_KEY)
                # The node's /etc/cni/net.d at the same path: the kubeconfig's paths are the node's.
                host = mounts["/etc/cni/net.d"]
                self.assertEqual(volumes[host["name"]]["hostPath"]["path"], "/etc/cni/net.d")
                self.assertFalse(host.get("readOnly", False))


class KubeconfigScript(unittest.TestCase):
    """The DaemonSet's script, run for real, one iteration (ONESHOT=1) unless stated."""

    def setUp(self):
        self.tmp = tempfile.mkdtemp(prefix="topocni-examples-")
        self.sa = os.path.join(self.tmp, "serviceaccount")
        self.dir = os.path.join(self.tmp, "etc/cni/net.d/topocni.d")   # its parent does not exist yet
        os.makedirs(self.sa)
        self.set_sa(token="token-1\n", ca="-----BEGIN CERTIFICATE-----\nfake\n-----END CERTIFICATE-----\n")
        self.script = os.path.join(self.tmp, SCRIPT_KEY)
        with open(self.script, "w") as f:
            f.write(daemonset_script())

    def tearDown(self):
        shutil.rmtree(self.tmp, ignore_errors=True)

    def set_sa(self, token=None, ca=None):
        """Like kubelet's atomic writer: the files are symlinks into a ..data directory."""
        for name, text in (("token", token), ("ca.crt", ca)):
            if text is None:
                continue
            d = os.path.join(self.sa, f"..{name}-{time.monotonic_ns()}")
            os.makedirs(d)
            with open(os.path.join(d, name), "w") as f:
                f.write(text)
            link = os.path.join(self.sa, name)
            if os.path.lexists(link):
                os.unlink(link)
            os.symlink(os.path.join(os.path.basename(d), name), link)

    def shells(self):
        """/bin/sh as is, and busybox sh with nothing but busybox applets on PATH."""
        out = [("/bin/sh", ["/bin/sh"], "/usr/bin:/bin")]
        bb = busybox()
        if bb:
            bindir = os.path.join(self.tmp, "busybox-bin")
            os.makedirs(bindir, exist_ok=True)
            for applet in subprocess.run([bb, "--list"], capture_output=True, text=True, check=True).stdout.split():
                if not os.path.lexists(os.path.join(bindir, applet)):
                    os.symlink(bb, os.path.join(bindir, applet))
            out.append(("busybox sh", [bb, "sh"], bindir))
        return out

    def env(self, path, **extra):
        env = {"PATH": path, "TOPOCNI_KUBECONFIG_DIR": self.dir, "SA_DIR": self.sa, "ONESHOT": "1",
               "KUBERNETES_SERVICE_HOST": "10.96.0.1", "KUBERNETES_SERVICE_PORT": "443"}
        env.update(extra)
        return {k: v for k, v in env.items() if v is not None}

    def run_script(self, shell, path, **extra):
        return subprocess.run(shell + [self.script], env=self.env(path, **extra), capture_output=True, text=True,
                              timeout=30)

    def kubeconfig(self):
        with open(os.path.join(self.dir, "topocni.kubeconfig")) as f:
            kc = yaml.safe_load(f)
        ctx = next(c["context"] for c in kc["contexts"] if c["name"] == kc["current-context"])
        cluster = next(c["cluster"] for c in kc["clusters"] if c["name"] == ctx["cluster"])
        user = next(u["user"] for u in kc["users"] if u["name"] == ctx["user"])
        return kc, cluster, user

    def read(self, name):
        with open(os.path.join(self.dir, name)) as f:
            return f.read()

    def assertModes(self):
        self.assertEqual(oct(os.stat(self.dir).st_mode & 0o7777), "0o700")
        self.assertEqual(sorted(os.listdir(self.dir)), ["ca.crt", "token", "topocni.kubeconfig"],
                         "exactly the three files, no temp file left")
        for name in os.listdir(self.dir):
            st = os.lstat(os.path.join(self.dir, name))
            self.assertEqual(oct(st.st_mode), "0o100600", f"{name}: a regular file, mode 0600")

    def test_the_script_writes_a_kubeconfig_for_an_ipv4_and_an_ipv6_api_server_with_sh_and_busybox(self):
        if not busybox():
            print("note: no busybox on PATH (Debian: busybox-static); only /bin/sh is tried")
        cases = [("10.96.0.1", "443", "https://10.96.0.1:443"),
                 ("fd00:10:96::1", "443", "https://[fd00:10:96::1]:443"),
                 ("192.168.49.2", "8443", "https://192.168.49.2:8443"),
                 ("2001:db8::a", "6443", "https://[2001:db8::a]:6443")]
        for name, shell, path in self.shells():
            for host, port, server in cases:
                with self.subTest(shell=name, host=host):
                    shutil.rmtree(os.path.join(self.tmp, "etc"), ignore_errors=True)
                    p = self.run_script(shell, path, KUBERNETES_SERVICE_HOST=host, KUBERNETES_SERVICE_PORT=port)
                    self.assertEqual(p.returncode, 0, p.stderr)
                    self.assertIn(server, p.stderr)
                    kc, cluster, user = self.kubeconfig()
                    self.assertEqual((kc["apiVersion"], kc["kind"]), ("v1", "Config"))
                    self.assertEqual(cluster, {"server": server,
                                               "certificate-authority": os.path.join(self.dir, "ca.crt")})
                    self.assertEqual(user, {"tokenFile": os.path.join(self.dir, "token")})
                    self.assertEqual(self.read("token"), "token-1\n")
                    self.assertIn("BEGIN CERTIFICATE", self.read("ca.crt"))
                    self.assertModes()

    def test_a_rotated_token_is_copied_by_the_next_iteration_and_loose_modes_are_tightened(self):
        for name, shell, path in self.shells():
            with self.subTest(shell=name):
                self.set_sa(token="token-1\n")
                self.assertEqual(self.run_script(shell, path).returncode, 0)
                kc_before = self.read("topocni.kubeconfig")
                os.chmod(self.dir, 0o755)
                os.chmod(os.path.join(self.dir, "token"), 0o644)
                self.set_sa(token="token-2\n")
                p = self.run_script(shell, path)
                self.assertEqual(p.returncode, 0, p.stderr)
                self.assertEqual(self.read("token"), "token-2\n")
                self.assertEqual(self.read("topocni.kubeconfig"), kc_before)
                self.assertModes()

    def test_without_a_token_or_the_service_host_the_script_fails_and_writes_nothing(self):
        for name, shell, path in self.shells():
            with self.subTest(shell=name, missing="KUBERNETES_SERVICE_HOST"):
                p = self.run_script(shell, path, KUBERNETES_SERVICE_HOST=None)
                self.assertNotEqual(p.returncode, 0)
                self.assertIn("KUBERNETES_SERVICE_HOST", p.stderr)
                self.assertFalse(os.path.exists(self.dir))
            with self.subTest(shell=name, missing="token"):
                p = self.run_script(shell, path, SA_DIR=os.path.join(self.tmp, "nothing"))
                self.assertNotEqual(p.returncode, 0)
                self.assertIn("no token", p.stderr)
                self.assertFalse(os.path.exists(self.dir))

    def test_the_loop_copies_a_rotated_token_and_stops_at_once_on_sigterm(self):
        for name, shell, path in self.shells():
            with self.subTest(shell=name):
                shutil.rmtree(os.path.join(self.tmp, "etc"), ignore_errors=True)
                self.set_sa(token="token-1\n")
                p = subprocess.Popen(shell + [self.script], env=self.env(path, ONESHOT=None, REFRESH_SECONDS="2"),
                                     stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
                try:
                    token = os.path.join(self.dir, "token")
                    deadline = time.monotonic() + 10
                    while not os.path.exists(token) and time.monotonic() < deadline:
                        time.sleep(0.05)
                    self.assertEqual(self.read("token"), "token-1\n")
                    self.set_sa(token="token-2\n")
                    while self.read("token") != "token-2\n" and time.monotonic() < deadline:
                        time.sleep(0.05)
                    self.assertEqual(self.read("token"), "token-2\n")
                    start = time.monotonic()
                    p.send_signal(signal.SIGTERM)
                    p.wait(timeout=5)
                    self.assertLess(time.monotonic() - start, 1.0, "SIGTERM does not wait for the sleep")
                    self.assertEqual(p.returncode, 0, p.stderr.read())
                    self.assertModes()
                finally:
                    if p.poll() is None:
                        p.kill()
                        p.wait()
                    p.stdout.close()
                    p.stderr.close()


class KubeconfigScriptWithTopocni(NetnsTestCase):
    """topocni reads a Node through the kubeconfig the script wrote (fake API server in the node netns)."""

    def setUp(self):
        super().setUp()
        self.api = None
        self.pki = make_pki(os.path.join(self.tmp, "pki"))
        self.sa = os.path.join(self.tmp, "serviceaccount")
        self.dir = os.path.join(self.tmp, "topocni.d")
        os.makedirs(self.sa)
        shutil.copy(os.path.join(self.pki, "ca.crt"), os.path.join(self.sa, "ca.crt"))
        self.script = os.path.join(self.tmp, SCRIPT_KEY)
        with open(self.script, "w") as f:
            f.write(daemonset_script())

    def tearDown(self):
        if self.api:
            self.api.stop()   # also closes its pipes
        super().tearDown()

    def write(self, token, host, port):
        with open(os.path.join(self.sa, "token"), "w") as f:
            f.write(token)
        p = subprocess.run(["/bin/sh", self.script], capture_output=True, text=True, timeout=30,
                           env={"PATH": "/usr/bin:/bin", "ONESHOT": "1", "TOPOCNI_KUBECONFIG_DIR": self.dir,
                                "SA_DIR": self.sa, "KUBERNETES_SERVICE_HOST": host, "KUBERNETES_SERVICE_PORT": port})
        self.assertEqual(p.returncode, 0, p.stderr)
        return os.path.join(self.dir, "topocni.kubeconfig")

    def explain(self, kubeconfig, n):
        conf = {"cniVersion": "1.0.0", "name": f"kc{self.tag}", "type": "topocni", "attachment": "veth",
                "bridge": "br0", "nodeName": "worker-1", "kubeconfig": kubeconfig, "apiTimeout": 2,
                "nodeSelector": {"example.com/api": "yes"}, "stateDir": os.path.join(self.tmp, f"state{n}")}
        f = os.path.join(self.tmp, f"net{n}.conf")
        with open(f, "w") as fh:
            json.dump(conf, fh)
        return subprocess.run(["nsenter", f"--net=/run/netns/{self.node}", BIN, "explain", "--config", f],
                              capture_output=True, text=True, timeout=60)

    def test_topocni_reads_the_node_with_the_written_kubeconfig_and_follows_a_rotated_token(self):
        self.api = FakeApiServer(self.node, self.pki, {"worker-1": {"example.com/api": "yes"}}, self.tmp,
                                 token="token-2")
        kc = self.write("token-1\n", "127.0.0.1", str(self.api.port))
        out = self.explain(kc, 1)
        self.assertEqual(out.returncode, 1, out.stdout + out.stderr)
        self.assertIn("401", out.stdout)
        self.assertEqual([r["auth"] for r in self.api.requests()], ["bad-token"])
        # The token rotates: the next iteration copies it, and topocni reads the file again.
        self.write("token-2\n", "127.0.0.1", str(self.api.port))
        out = self.explain(kc, 2)
        self.assertEqual(out.returncode, 0, out.stdout + out.stderr)
        self.assertIn("PASS", out.stdout)
        reqs = self.api.requests()
        self.assertEqual([(r["path"], r["auth"]) for r in reqs[1:]], [("/api/v1/nodes/worker-1", "token")])

    def test_topocni_takes_the_ipv6_server_of_the_written_kubeconfig(self):
        # Nothing answers at fd00::1 in the node netns: topocni names the address it tried.
        kc = self.write("t\n", "fd00::1", "443")
        out = self.explain(kc, 1)
        self.assertEqual(out.returncode, 1, out.stdout + out.stderr)
        self.assertIn("https://[fd00::1]:443/api/v1/nodes/worker-1", out.stdout)


if __name__ == "__main__":
    from cnitest import main
    main()
