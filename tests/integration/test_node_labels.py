"""Node labels from the Kubernetes API: the static release binary alone in a chroot, every
failure mode of the API client, and the node taken from the pod's spec.nodeName.

The API server is fakenode.FakeApiServer, run inside the test's node netns, so every
connection goes to a loopback address of a namespace the test made. Its request log and
the plugin's log live in a temp dir of their own, out of the tree whose files a refused ADD
must leave as they were (self.tmp, where dataDir and stateDir are).
"""
import json
import os
import shutil
import struct
import subprocess
import tempfile
import time

from cnitest import BIN, NetnsTestCase, Outcome, main, snapshot_files
from fakenode import FakeApiServer, b64file, k8s_status, make_pki, write_kubeconfig

SRC = os.path.abspath(os.path.join(os.path.dirname(__file__), "../.."))
RELEASE = os.path.join(os.environ.get("TOPOCNI_RELEASE_BUILD", os.path.join(SRC, "build-release")), "topocni")
NSENTER = shutil.which("nsenter") or "/usr/bin/nsenter"
CHROOT = shutil.which("chroot") or "/usr/sbin/chroot"

LABELS = {"example.com/zone": "a", "example.com/api": "yes"}
MATCH = {"example.com/zone": "a", "example.com/api": "yes"}
MISMATCH = {"example.com/zone": "b"}
NODES = "/api/v1/nodes/"
PT_DYNAMIC, PT_INTERP = 2, 3


def elf_program_header_types(path):
    """The p_type of every program header of an ELF file (32 or 64 bit, either byte order)."""
    with open(path, "rb") as f:
        ident = f.read(16)
        if ident[:4] != b"\x7fELF":
            raise AssertionError(f"{path} is not an ELF file")
        bits64, end = ident[4] == 2, "<" if ident[5] == 1 else ">"
        f.seek(0)
        head = f.read(64)
        if bits64:
            phoff = struct.unpack_from(end + "Q", head, 0x20)[0]
            phentsize, phnum = struct.unpack_from(end + "HH", head, 0x36)
        else:
            phoff = struct.unpack_from(end + "I", head, 0x1C)[0]
            phentsize, phnum = struct.unpack_from(end + "HH", head, 0x2A)
        f.seek(phoff)
        table = f.read(phentsize * phnum)
    return [struct.unpack_from(end + "I", table, i * phentsize)[0] for i in range(phnum)]


def mount_points():
    with open("/proc/self/mountinfo") as f:
        return [line.split()[4].replace("\\040", " ") for line in f]


class ApiCase(NetnsTestCase):
    """A node netns with fake API servers in it, a PKI, and veth configs that read labels."""
    binary = BIN

    def setUp(self):
        super().setUp()
        self.servers, self.mounts, self.root = [], [], None
        self.fixture = tempfile.mkdtemp(prefix="topocni-api-")
        try:
            self.log = os.path.join(self.fixture, "topocni.log")
            self.pki = make_pki(os.path.join(self.tmp, "pki"))
            self.prepare()
        except BaseException:
            self.tearDown()   # unittest skips tearDown when setUp fails; mounts and namespaces must go
            raise

    def prepare(self):
        pass

    def tearDown(self):
        left = []
        try:
            for api in self.servers:
                api.stop()
            left = self.unmount_all()
        finally:
            super().tearDown()
            shutil.rmtree(self.fixture, ignore_errors=True)
            if self.root:
                if any((m + "/").startswith(self.root + "/") for m in mount_points()):
                    left.append(f"mounts left under {self.root}: not removed")
                else:
                    shutil.rmtree(self.root, ignore_errors=True)
        if left:
            raise AssertionError("; ".join(left))

    # --- mounts (the chroot) ---
    def mount(self, target, *args):
        p = subprocess.run(["mount", *args, target], capture_output=True, text=True)
        if p.returncode != 0:
            raise AssertionError(f"mount {' '.join(args)} {target}: {p.stderr.strip()}")
        self.mounts.append(target)

    def unmount_all(self):
        problems = []
        while self.mounts:
            target = self.mounts.pop()
            if subprocess.run(["umount", target], capture_output=True).returncode != 0:
                p = subprocess.run(["umount", "-l", target], capture_output=True, text=True)
                if p.returncode != 0:
                    problems.append(f"umount {target}: {p.stderr.strip()}")
        return problems

    # --- the API fixture ---
    def start_api(self, nodes=None, **kw):
        d = os.path.join(self.fixture, f"api{len(self.servers)}")
        os.makedirs(d)
        api = FakeApiServer(self.node, self.pki, {"worker-1": LABELS, "worker-2": LABELS} if nodes is None else nodes,
                            d, **kw)
        self.servers.append(api)
        return api

    def kubeconfig(self, server, name="kubeconfig", **kw):
        """A kubeconfig in self.tmp: the test CA and client certificate unless told otherwise."""
        if not any(k in kw for k in ("ca_data", "ca_file", "insecure")):
            kw["ca_data"] = b64file(f"{self.pki}/ca.crt")
        if not any(k in kw for k in ("cert_data", "cert_file", "token", "token_file")):
            kw.update(cert_data=b64file(f"{self.pki}/client.crt"), key_data=b64file(f"{self.pki}/client.key"))
        kw.setdefault("user", "topocni-sa")
        return write_kubeconfig(os.path.join(self.tmp, name), server, **kw)

    def aconf(self, kubeconfig, selector=None, **extra):
        """A point-to-point veth config whose nodeSelector needs the API; None drops a key."""
        c = self.conf("1.0.0", attachment="veth", kubeconfig=kubeconfig, nodeName="worker-1",
                      nodeSelector=MATCH if selector is None else selector, nodeLabelsTTL=0,
                      logFile=self.log, logLevel="info")
        for k, v in extra.items():
            if v is None:
                c.pop(k, None)
            else:
                c[k] = v
        return c

    def with_host_name(self, name):
        """A wrapper that runs the plugin in a UTS namespace of its own whose host name is `name`."""
        script = os.path.join(self.fixture, f"as-{name}")
        with open(script, "w") as f:
            f.write(f"""#!{shutil.which('python3') or '/usr/bin/python3'}
import ctypes, os, socket
if ctypes.CDLL(None, use_errno=True).unshare(0x04000000) != 0:   # CLONE_NEWUTS
    raise OSError(ctypes.get_errno(), "unshare(CLONE_NEWUTS)")
socket.sethostname({name!r})
os.execv({self.binary!r}, [{self.binary!r}])
""")
        os.chmod(script, 0o755)
        return script

    def log_text(self):
        if not os.path.exists(self.log):
            return ""
        with open(self.log) as f:
            return f.read()

    # --- running ADD ---
    def add(self, conf, container_id="c1", args=None, binary=None):
        pod, path = self.make_pod()
        out = self.run_plugin("ADD", conf, container_id=container_id, netns=path, args=args,
                              binary=binary or self.binary)
        return out, pod, path

    def admitted(self, conf, container_id="c1", args=None, binary=None):
        """ADD succeeds and the pod has its veth; DEL then leaves nothing."""
        out, pod, path = self.add(conf, container_id, args, binary)
        self.assertOk(out)
        self.assertEqual(self.links(pod)["eth0"]["linkinfo"]["info_kind"], "veth")
        self.assertEqual(len(self.ipam_files(conf["name"])), 1)
        self.assertOk(self.run_plugin("DEL", conf, container_id=container_id, netns=path, args=args,
                                      binary=binary or self.binary))
        self.assertEqual(set(self.links(pod)), {"lo"})
        self.assertEqual(set(self.links(self.node)), {"lo"})
        self.assertEqual(self.ipam_files(conf["name"]), [])
        return out

    def refused(self, conf, code, *words, container_id="r1", args=None, binary=None):
        """ADD fails with `code` and `words`; no link anywhere, and no file changed but the
        node label cache (listed bookkeeping)."""
        before = self.files()
        out, pod, _ = self.add(conf, container_id, args, binary)
        self.assertError(out, code, *words)
        self.assertEqual(set(self.links(pod)), {"lo"})
        self.assertEqual(set(self.links(self.node)), {"lo"})
        self.assertOnlyBookkeepingLeft(before, f"refused ADD (code {code})")
        changed = {os.path.relpath(p, self.tmp) for p, v in self.files().items() if before.get(p) != v}
        self.assertTrue(all(p.startswith("state") for p in changed), changed)
        self.assertEqual(self.ipam_files(conf["name"]), [])
        return out


class StaticReleaseBinary(NetnsTestCase):
    def test_the_release_binary_has_no_program_interpreter_and_no_dynamic_section(self):
        if not os.path.exists(RELEASE):
            self.fail(f"no release binary at {RELEASE} (TOPOCNI_RELEASE_BUILD)")
        types = elf_program_header_types(RELEASE)
        self.assertIn(1, types, "no PT_LOAD: not an executable")
        self.assertNotIn(PT_INTERP, types, "PT_INTERP: the binary needs a dynamic loader")
        self.assertNotIn(PT_DYNAMIC, types, "PT_DYNAMIC: the binary has a dynamic section (NEEDED entries)")

    def test_libnl_costs_nothing_at_start_up_of_a_run_that_does_not_shape(self):
        """No constructor reads /etc/libnl (classid.o is not linked), and libnl's start-up
        registrations wait for the first tc call (bin/static_guards.cc)."""
        symbols = subprocess.run(["nm", RELEASE], capture_output=True, text=True, check=True).stdout.split()
        self.assertNotIn("classid_init", symbols)
        self.assertNotIn("rtnl_tc_read_classid_file", symbols)
        self.assertIn("topocni_nl_replay", symbols)
        self.assertIn("__wrap_rtnl_tc_register", symbols)


class ReleaseBinaryInAnEmptyRoot(ApiCase):
    """The release binary chrooted into a directory holding only itself, its config, a
    kubeconfig with its CA and client certificate, /etc/hosts, /proc, /sys, /dev/null,
    /dev/urandom and the pod's netns file: no libraries, no /etc/ssl, no NSS."""
    binary = RELEASE

    def prepare(self):
        if not os.path.exists(RELEASE):
            self.fail(f"no release binary at {RELEASE} (TOPOCNI_RELEASE_BUILD)")
        self.root = tempfile.mkdtemp(prefix="topocni-root-")
        r = self.root
        shutil.copy2(RELEASE, os.path.join(r, "topocni"))
        for d in ("etc", "kube", "proc", "sys", "dev", "run/netns"):
            os.makedirs(os.path.join(r, d))
        with open(os.path.join(r, "etc/hosts"), "w") as f:
            f.write("127.0.0.1 localhost\n127.0.0.1 api.topocni.test\n::1 localhost ip6-localhost ip6-loopback\n")
        for name in ("ca.crt", "client.crt", "client.key"):
            shutil.copy2(os.path.join(self.pki, name), os.path.join(r, "kube", name))
        self.mount(os.path.join(r, "proc"), "-t", "proc", "proc")
        self.mount(os.path.join(r, "sys"), "--bind", "/sys")
        self.mount(os.path.join(r, "sys"), "-o", "remount,bind,ro")
        self.mounts.pop()   # the remount is the same mount point
        for dev in ("null", "urandom"):
            open(os.path.join(r, "dev", dev), "w").close()
            self.mount(os.path.join(r, "dev", dev), "--bind", f"/dev/{dev}")

    def pod_in_root(self):
        """A pod netns, its /run/netns file bind-mounted into the root at the same path."""
        pod, path = self.make_pod()
        target = self.root + path
        open(target, "w").close()
        self.mount(target, "--bind", path)
        return pod, path

    def root_kubeconfig(self, name, server):
        """/kube/<name>.kubeconfig: the CA by a relative path, the client certificate by absolute paths."""
        write_kubeconfig(os.path.join(self.root, "kube", f"{name}.kubeconfig"), server, ca_file="ca.crt",
                         cert_file="/kube/client.crt", key_file="/kube/client.key", user="topocni-sa")
        return f"/kube/{name}.kubeconfig"

    def rconf(self, kubeconfig, selector):
        return {"cniVersion": "1.0.0", "name": f"cr{self.tag}", "type": "topocni", "attachment": "veth",
                "stateDir": "/state", "kubeconfig": kubeconfig, "nodeName": "worker-1", "nodeSelector": selector,
                "nodeLabelsTTL": 0, "apiTimeout": 2, "logFile": "/topocni.log", "logLevel": "info",
                "ipam": {"type": "host-local", "ranges": [[{"subnet": "10.78.0.0/24"}]], "dataDir": "/ipam"}}

    def run_in_root(self, command, conf, path, container_id):
        conf_file = os.path.join(self.root, "topocni.conf")
        with open(conf_file, "w") as f:
            json.dump(conf, f)
        env = {"CNI_COMMAND": command, "CNI_CONTAINERID": container_id, "CNI_NETNS": path, "CNI_IFNAME": "eth0",
               "CNI_PATH": "/opt/cni/bin"}
        with open(conf_file) as stdin:
            p = subprocess.run([NSENTER, f"--net=/run/netns/{self.node}", CHROOT, self.root, "/topocni"],
                               stdin=stdin, capture_output=True, text=True, env=env, timeout=60)
        return Outcome(p)

    def root_files(self):
        return snapshot_files(*[os.path.join(self.root, d) for d in ("state", "ipam")
                                if os.path.isdir(os.path.join(self.root, d))])

    def reservations(self, network):
        d = os.path.join(self.root, "ipam", network)
        return sorted(f for f in os.listdir(d) if f[0].isdigit()) if os.path.isdir(d) else []

    def check_server(self, api, server, host_header, sni=None):
        self.assertEqual(sorted(os.listdir(self.root)), ["dev", "etc", "kube", "proc", "run", "sys", "topocni"])
        for absent in ("lib", "lib64", "usr", "bin", "etc/ssl", "etc/resolv.conf", "etc/nsswitch.conf"):
            self.assertFalse(os.path.exists(os.path.join(self.root, absent)), absent)
        kc = self.root_kubeconfig("api", server)

        # A matching nodeSelector: admitted, the pod gets its veth, DEL removes it.
        conf = self.rconf(kc, MATCH)
        pod, path = self.pod_in_root()
        out = self.run_in_root("ADD", conf, path, "c1")
        self.assertOk(out)
        pod_if = out.json["interfaces"][out.json["ips"][0]["interface"]]
        self.assertEqual((pod_if["name"], pod_if["sandbox"]), ("eth0", path))
        self.assertEqual(self.links(pod)["eth0"]["linkinfo"]["info_kind"], "veth")
        self.assertEqual(len(self.reservations(conf["name"])), 1)
        reqs = api.requests()
        self.assertEqual([(r["path"], r["auth"], r["status"]) for r in reqs], [(NODES + "worker-1", "cert", 200)])
        self.assertEqual(reqs[0]["host"], host_header)
        self.assertEqual(reqs[0]["sni"], sni)
        with open(os.path.join(self.root, "topocni.log")) as f:
            self.assertIn(f"fetched 2 labels of node 'worker-1' from {server}", f.read())
        self.assertOk(self.run_in_root("DEL", conf, path, "c1"))
        self.assertEqual(set(self.links(pod)), {"lo"})
        self.assertEqual(set(self.links(self.node)), {"lo"})
        self.assertEqual(self.reservations(conf["name"]), [])

        # A mismatching one: code 100, nothing in the pod, no reservation, only the label cache written.
        before = self.root_files()
        pod, path = self.pod_in_root()
        out = self.run_in_root("ADD", self.rconf(kc, MISMATCH), path, "r1")
        self.assertError(out, 100, "placement constraint not met: nodeSelector", f"labels from the API at {server}",
                         "wants example.com/zone=b, has example.com/zone=a")
        self.assertEqual(set(self.links(pod)), {"lo"})
        self.assertEqual(set(self.links(self.node)), {"lo"})
        now = self.root_files()
        changed = [os.path.relpath(p, self.root) for p in set(now) | set(before) if now.get(p) != before.get(p)]
        self.assertEqual([p for p in changed if not p.startswith(("state/node-labels", "state/metrics"))], [])
        with open(os.path.join(self.root, "state", "metrics", "refusals.json")) as f:
            self.assertEqual(json.load(f), {conf["name"]: {"nodeSelector": 1}})
        self.assertEqual(self.reservations(conf["name"]), [])
        self.assertEqual(len(api.requests()), 2)

    def test_by_ipv4_address(self):
        api = self.start_api()
        self.check_server(api, f"https://127.0.0.1:{api.port}", f"127.0.0.1:{api.port}")

    def test_by_a_host_name_that_only_the_roots_etc_hosts_knows(self):
        api = self.start_api()
        self.check_server(api, f"https://api.topocni.test:{api.port}", f"api.topocni.test:{api.port}",
                          sni="api.topocni.test")

    def test_by_ipv6_loopback(self):
        api = self.start_api(host="::1")
        self.check_server(api, f"https://[::1]:{api.port}", f"[::1]:{api.port}")


class ApiFailures(ApiCase):
    """Each way the API can fail, with the code and words README promises; a refused ADD
    leaves no link, no reservation and no file but the label cache."""

    def test_401_is_code_7_naming_the_kubeconfig_and_user_and_quoting_the_status(self):
        api = self.start_api(overrides=[{"path": NODES, "status": 401,
                                         "body": k8s_status(401, "Unauthorized: the token has expired", "Unauthorized")}])
        kc = self.kubeconfig(api.url(), token="expired")
        self.refused(self.aconf(kc), 7, f"kubeconfig '{kc}' (user 'topocni-sa')",
                     "the API server refused the credentials (HTTP 401): Unauthorized: the token has expired")
        self.assertEqual([r["token"] for r in api.requests()], ["expired"])

    def test_403_on_nodes_is_code_7_naming_the_permission_and_examples_rbac_yaml(self):
        msg = ('nodes "worker-1" is forbidden: User "system:serviceaccount:kube-system:topocni" cannot get resource '
               '"nodes" in API group "" at the cluster scope')
        api = self.start_api(overrides=[{"path": NODES, "status": 403, "body": k8s_status(403, msg, "Forbidden")}])
        kc = self.kubeconfig(api.url())
        self.refused(self.aconf(kc), 7, f"kubeconfig '{kc}' (user 'topocni-sa')", "HTTP 403", msg,
                     'topocni needs "get" on "nodes"', "examples/rbac.yaml")

    def test_404_names_the_node_and_where_its_name_came_from(self):
        api = self.start_api(pods={"ns1/p9": "worker-moved"})
        kc = self.kubeconfig(api.url())
        with self.subTest("the config's nodeName"):
            self.refused(self.aconf(kc, nodeName="worker-9"), 7, "nodeName: node 'worker-9' not found",
                         "HTTP 404", "the config's nodeName")
        with self.subTest("this host's name"):
            self.refused(self.aconf(kc, nodeName=None), 7, "nodeName: node 'worker-gone' not found",
                         "this host's name", binary=self.with_host_name("Worker-Gone"))
        with self.subTest("the pod's spec.nodeName"):
            self.refused(self.aconf(kc, nodeName=None), 7, "nodeName: node 'worker-moved' not found",
                         "spec.nodeName of pod ns1/p9", args="K8S_POD_NAMESPACE=ns1;K8S_POD_NAME=p9")
        self.assertEqual([r["path"] for r in api.requests()],
                         [NODES + "worker-9", NODES + "worker-gone", "/api/v1/namespaces/ns1/pods/p9",
                          NODES + "worker-moved"])

    def test_a_body_that_is_not_json_is_code_11(self):
        api = self.start_api(overrides=[{"path": NODES, "status": 200, "contentType": "text/html",
                                         "text": "<html><body>502 Bad Gateway</body></html>"}])
        kc = self.kubeconfig(api.url())
        self.refused(self.aconf(kc), 11, f"GET {api.url()}/api/v1/nodes/worker-1", "the response is not a Node object")

    def test_a_node_without_metadata_is_code_11(self):
        api = self.start_api(overrides=[{"path": NODES, "status": 200,
                                         "body": {"kind": "Node", "apiVersion": "v1", "spec": {}}}])
        kc = self.kubeconfig(api.url())
        self.refused(self.aconf(kc), 11, "the response is not a Node object")

    def test_a_truncated_body_is_code_11_saying_the_server_closed_the_connection(self):
        node = {"kind": "Node", "apiVersion": "v1", "metadata": {"name": "worker-1", "labels": LABELS}}
        api = self.start_api(overrides=[
            {"path": NODES + "worker-1", "status": 200, "body": node, "truncate": 100, "closeNotify": True},
            {"path": NODES + "worker-2", "status": 200, "body": dict(node, metadata={"name": "worker-2", "labels": LABELS}),
             "truncate": 100, "closeNotify": False}])
        kc = self.kubeconfig(api.url())
        for node_name, how in (("worker-1", "TLS close_notify, then close"), ("worker-2", "bare TCP close")):
            with self.subTest(how):
                self.refused(self.aconf(kc, nodeName=node_name, apiTimeout=2), 11, "Kubernetes API unreachable",
                             "the server closed the connection before the answer was complete")

    def test_a_certificate_that_does_not_verify_is_code_7_naming_where_the_ca_came_from(self):
        api = self.start_api()
        other = make_pki(os.path.join(self.tmp, "other-pki"))
        with self.subTest("certificate-authority file"):
            kc = self.kubeconfig(api.url(), name="file.kubeconfig", ca_file=f"{other}/ca.crt")
            self.refused(self.aconf(kc, nodeName="worker-1"), 7, f"kubeconfig '{kc}'",
                         "the server's certificate does not verify against the CA from", f"'{other}/ca.crt'")
        with self.subTest("certificate-authority-data"):
            kc = self.kubeconfig(api.url(), name="data.kubeconfig", ca_data=b64file(f"{other}/ca.crt"))
            self.refused(self.aconf(kc, nodeName="worker-2"), 7, "the server's certificate does not verify",
                         f"kubeconfig '{kc}' clusters[\"test\"].cluster.certificate-authority-data")
        self.assertEqual(api.requests(), [], "a request went to a server that did not verify")

    def test_a_server_that_never_answers_is_code_11_within_api_timeout(self):
        hang = self.start_api(overrides=[{"path": NODES, "hang": 30}])
        silent = self.start_api(silent=True)
        for api, node, words in ((hang, "worker-1", "no complete answer within 500 ms"),
                                 (silent, "worker-2", "no TLS handshake within 500 ms")):
            with self.subTest(words):
                kc = self.kubeconfig(api.url(), name=f"{node}.kubeconfig")
                start = time.monotonic()
                self.refused(self.aconf(kc, nodeName=node, apiTimeout=0.5), 11, "Kubernetes API unreachable", words)
                elapsed = time.monotonic() - start
                self.assertLess(elapsed, 2.5, f"ADD took {elapsed:.2f} s with apiTimeout 0.5")
                self.assertEqual(len(api.requests()), 1, "the server saw no request (or more than one)")

    def test_insecure_skip_tls_verify_works_and_logs_a_warning(self):
        api = self.start_api()
        kc = self.kubeconfig(api.url(), insecure=True)   # no CA at all: only skipping verification can work
        self.admitted(self.aconf(kc, logLevel="warning"))
        self.assertEqual([r["path"] for r in api.requests()], [NODES + "worker-1"])
        text = self.log_text()
        self.assertIn("warning", text)
        self.assertIn(f"kubeconfig '{kc}' sets insecure-skip-tls-verify: the API server at {api.url()} is not verified",
                      text)
        self.refused(self.aconf(kc, MISMATCH), 100, "nodeSelector", "has example.com/zone=a")

    def test_token_file_is_read_again_for_every_request(self):
        api = self.start_api(token=["tok-1", "tok-2"])
        token = os.path.join(self.tmp, "token")
        with open(token, "w") as f:
            f.write("tok-1\n")
        kc = self.kubeconfig(api.url(), token_file="token")   # relative to the kubeconfig's directory
        self.admitted(self.aconf(kc), container_id="t1")
        with open(token, "w") as f:
            f.write("tok-2\n")   # a projected token rotated
        self.admitted(self.aconf(kc), container_id="t2")
        with open(token, "w") as f:
            f.write("tok-3\n")   # one the server does not take
        self.refused(self.aconf(kc), 7, "HTTP 401", "Unauthorized", container_id="t3")
        self.assertEqual([(r["token"], r["auth"]) for r in api.requests()],
                         [("tok-1", "token"), ("tok-2", "token"), ("tok-3", "bad-token")])

    def test_client_certificates_work_from_data_and_from_files(self):
        api = self.start_api()
        data = self.kubeconfig(api.url(), name="data.kubeconfig")
        files = self.kubeconfig(api.url(), name="files.kubeconfig", ca_file="pki/ca.crt", cert_file="pki/client.crt",
                                key_file=f"{self.pki}/client.key")
        self.admitted(self.aconf(data), container_id="k1")
        self.admitted(self.aconf(files), container_id="k2")
        self.refused(self.aconf(files, MISMATCH), 100, "nodeSelector", "wants example.com/zone=b")
        self.assertEqual([r["auth"] for r in api.requests()], ["cert"] * 3)


class ApiFailuresWithTheReleaseBinary(ApiFailures):
    binary = RELEASE

    def prepare(self):
        if not os.path.exists(RELEASE):
            self.fail(f"no release binary at {RELEASE} (TOPOCNI_RELEASE_BUILD)")


class NodeFromThePod(ApiCase):
    """Without nodeName, CNI_ARGS K8S_POD_NAMESPACE/K8S_POD_NAME give the pod, and its
    spec.nodeName the Node; only when that fails, the host name."""
    ARGS = "IgnoreUnknown=1;K8S_POD_NAMESPACE=ns1;K8S_POD_NAME=p1;K8S_POD_INFRA_CONTAINER_ID=x"

    def test_the_node_is_the_pods_spec_node_name(self):
        api = self.start_api(nodes={"worker-7": LABELS}, pods={"ns1/p1": "worker-7"})
        kc = self.kubeconfig(api.url())
        self.admitted(self.aconf(kc, nodeName=None), args=self.ARGS)
        self.assertEqual([(r["path"], r["status"]) for r in api.requests()],
                         [("/api/v1/namespaces/ns1/pods/p1", 200), (NODES + "worker-7", 200)])
        with open(os.path.join(self.state_dir, "node-labels", ".pod-node.json")) as f:
            cached = json.load(f)
        self.assertEqual((cached["node"], cached["server"]), ("worker-7", api.url()))
        self.assertIn("node labels of 'worker-7' (spec.nodeName of pod ns1/p1)", self.log_text())
        self.refused(self.aconf(kc, MISMATCH, nodeName=None), 100, "node 'worker-7'", "has example.com/zone=a",
                     args=self.ARGS)

    def test_the_pods_node_name_is_cached_for_node_labels_ttl(self):
        api = self.start_api(nodes={"worker-7": LABELS}, pods={"ns1/p1": "worker-7"})
        kc = self.kubeconfig(api.url())
        self.admitted(self.aconf(kc, nodeName=None, nodeLabelsTTL=60), container_id="a1", args=self.ARGS)
        self.admitted(self.aconf(kc, nodeName=None, nodeLabelsTTL=60), container_id="a2", args=self.ARGS)
        self.assertEqual([r["path"] for r in api.requests()], ["/api/v1/namespaces/ns1/pods/p1", NODES + "worker-7"])

    def test_403_on_pods_falls_back_to_the_host_name_with_a_warning(self):
        msg = ('pods "p1" is forbidden: User "system:serviceaccount:kube-system:topocni" cannot get resource "pods" '
               'in API group "" in the namespace "ns1"')
        api = self.start_api(nodes={"worker-host": LABELS}, pods={"ns1/p1": "worker-7"},
                             overrides=[{"path": "/api/v1/namespaces/", "status": 403,
                                         "body": k8s_status(403, msg, "Forbidden")}])
        kc = self.kubeconfig(api.url())
        as_host = self.with_host_name("Worker-Host")   # lower-cased as kubelet does
        self.admitted(self.aconf(kc, nodeName=None, logLevel="warning"), args=self.ARGS, binary=as_host)
        self.assertEqual([(r["path"], r["status"]) for r in api.requests()],
                         [("/api/v1/namespaces/ns1/pods/p1", 403), (NODES + "worker-host", 200)])
        text = self.log_text()
        for words in ("node name from the pod", msg, 'topocni needs "get" on "pods"', "examples/rbac.yaml",
                      "using this host's name, lower-cased as kubelet does 'worker-host'"):
            self.assertIn(words, text)
        self.assertFalse(os.path.exists(os.path.join(self.state_dir, "node-labels", ".pod-node.json")))
        # The host's name is no Node: the 404 says where the name came from.
        api.set_nodes({"worker-7": LABELS})
        self.refused(self.aconf(kc, nodeName=None), 7, "nodeName: node 'worker-host' not found", "this host's name",
                     args=self.ARGS, binary=as_host)


class NodeFromThePodWithTheReleaseBinary(NodeFromThePod):
    binary = RELEASE

    def prepare(self):
        if not os.path.exists(RELEASE):
            self.fail(f"no release binary at {RELEASE} (TOPOCNI_RELEASE_BUILD)")


if __name__ == "__main__":
    main()
