"""A real control plane on one machine for the cluster tests: etcd (tmpfs, no fsync),
kube-apiserver (Node,RBAC and NodeRestriction), kube-controller-manager (every controller
but node lifecycle) and kube-scheduler, v1.37.2 from `make cluster-tools`, on loopback
and free ports, certificates from a harness CA.

Every process is started with PR_SET_PDEATHSIG, so none outlives the test process even
when it is killed; etcd's tmpfs is mounted in its own mount namespace and goes with it.
stop() ends them in reverse order and waits for each.
"""
import ctypes
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.append(os.path.join(HERE, "../integration"))   # after this dir: its test files have names of their own
from fakenode import free_port, openssl, write_kubeconfig  # noqa: E402  (the integration tests' helpers)
from kubeapi import Client  # noqa: E402
PR_SET_PDEATHSIG = 1


def _die_with_parent():
    ctypes.CDLL(None, use_errno=True).prctl(PR_SET_PDEATHSIG, signal.SIGKILL)


def tools_dir():
    d = os.environ.get("TOPOCNI_CLUSTER_TOOLS")
    if d:
        return d
    p = subprocess.run(["/usr/bin/python3", os.path.join(HERE, "../cluster_tools/build.py")],
                       capture_output=True, text=True, check=True)
    return p.stdout.strip().splitlines()[-1]


class Pki:
    """A CA, and certificates it signs, in `d` (EC P-256; openssl)."""

    def __init__(self, d):
        self.d = d
        os.makedirs(d, exist_ok=True)
        self._ssl("req", "-x509", *self._ec("ca"), "-out", "ca.crt", "-days", "2", "-subj", "/CN=topocni-cluster-ca")
        self._ssl("genpkey", "-algorithm", "RSA", "-pkeyopt", "rsa_keygen_bits:2048", "-out", "sa.key")
        self._ssl("pkey", "-in", "sa.key", "-pubout", "-out", "sa.pub")

    @staticmethod
    def _ec(name):
        return ["-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes", "-keyout", f"{name}.key"]

    def _ssl(self, *args):
        openssl(*args, cwd=self.d)

    def path(self, name):
        return os.path.join(self.d, name)

    def cert(self, name, cn, orgs=(), server_ips=(), server_dns=()):
        subj = "".join(f"/O={o}" for o in orgs) + f"/CN={cn}"
        self._ssl("req", "-new", *self._ec(name), "-out", f"{name}.csr", "-subj", subj)
        sans = [f"IP:{a}" for a in server_ips] + [f"DNS:{n}" for n in server_dns]
        ext = "extendedKeyUsage=" + ("serverAuth" if sans else "clientAuth") + "\n"
        if sans:
            ext += "subjectAltName=" + ",".join(sans) + "\n"
        with open(self.path(f"{name}.ext"), "w") as f:
            f.write(ext)
        self._ssl("x509", "-req", "-in", f"{name}.csr", "-CA", "ca.crt", "-CAkey", "ca.key", "-CAcreateserial",
                  "-out", f"{name}.crt", "-days", "2", "-extfile", f"{name}.ext")
        return self.path(f"{name}.crt"), self.path(f"{name}.key")


# Every write, with what was sent (requestObject) and what the server kept (responseObject):
# the read-back tests compare the two, and "no 403" is read from the same log. Reads are
# logged at Metadata (who, what, the answer's code), which is enough for the 403 check.
AUDIT_POLICY = """apiVersion: audit.k8s.io/v1
kind: Policy
omitStages: ["RequestReceived", "ResponseStarted"]
rules:
  - level: RequestResponse
    verbs: ["create", "update", "patch", "delete"]
    resources:
      - group: ""
        resources: ["nodes", "nodes/status", "events", "pods/eviction"]
      - group: "resource.k8s.io"
        resources: ["resourceslices"]
  - level: Metadata
"""


class ControlPlane:
    def __init__(self, workdir=None, apiserver_args=(), scheduler_config=None):
        """`scheduler_config`: see start_scheduler."""
        self.dir = workdir or tempfile.mkdtemp(prefix="tcp-", dir="/tmp")
        self.procs = []   # (name, Popen, log path)
        self.bin = tools_dir()
        self.apiserver_args = list(apiserver_args)
        self.scheduler_config = scheduler_config

    def _start(self, name, argv, unshare_tmpfs=None):
        log = os.path.join(self.dir, f"{name}.log")
        if unshare_tmpfs:   # the data dir on a tmpfs of the process's own mount namespace
            argv = ["unshare", "--mount", "--propagation", "private", "sh", "-c",
                    f'mount -t tmpfs -o size=512m tmpfs "$0" && exec "$@"', unshare_tmpfs] + argv
        with open(log, "w") as f:
            p = subprocess.Popen(argv, stdout=f, stderr=subprocess.STDOUT, preexec_fn=_die_with_parent)
        self.procs.append((name, p, log))
        return p

    def log(self, name):
        with open(os.path.join(self.dir, f"{name}.log")) as f:
            return f.read()

    def start(self):
        t0 = time.monotonic()
        pki = self.pki = Pki(os.path.join(self.dir, "pki"))
        self.port = free_port()
        self.server = f"https://127.0.0.1:{self.port}"
        self.ca = ca = pki.path("ca.crt")
        self.serving = pki.cert("apiserver", "kube-apiserver", server_ips=["127.0.0.1"],
                                server_dns=["localhost", "kubernetes.default.svc"])
        admin = pki.cert("admin", "topocni-admin", orgs=["system:masters"])
        kcm = pki.cert("kcm", "system:kube-controller-manager")
        sched = pki.cert("sched", "system:kube-scheduler")
        self.kubelet_client = pki.cert("kubelet-client", "kube-apiserver-kubelet-client", orgs=["system:masters"])
        def kubeconfig(name, cert):
            return write_kubeconfig(os.path.join(self.dir, f"{name}.kubeconfig"), self.server, ca_file=ca,
                                    cert_file=cert[0], key_file=cert[1], user=name)
        self.admin_kubeconfig = kubeconfig("admin", admin)
        kcm_kc, sched_kc = kubeconfig("kcm", kcm), kubeconfig("sched", sched)
        self.api = Client("127.0.0.1", self.port, ca, cert=admin[0], key=admin[1])

        etcd_client, etcd_peer = free_port(), free_port()
        etcd_dir = os.path.join(self.dir, "etcd")
        os.makedirs(etcd_dir)
        self._start("etcd", [os.path.join(self.bin, "etcd"), "--data-dir", etcd_dir + "/data",
                             "--listen-client-urls", f"http://127.0.0.1:{etcd_client}",
                             "--advertise-client-urls", f"http://127.0.0.1:{etcd_client}",
                             "--listen-peer-urls", f"http://127.0.0.1:{etcd_peer}",
                             "--initial-advertise-peer-urls", f"http://127.0.0.1:{etcd_peer}",
                             "--initial-cluster", f"default=http://127.0.0.1:{etcd_peer}",
                             "--unsafe-no-fsync", "--log-level", "warn"], unshare_tmpfs=etcd_dir)
        self.etcd_url = f"http://127.0.0.1:{etcd_client}"
        self.audit_log = os.path.join(self.dir, "audit.log")
        with open(os.path.join(self.dir, "audit-policy.yaml"), "w") as f:
            f.write(AUDIT_POLICY)
        self.start_apiserver()
        self.apiserver_ready_s = time.monotonic() - t0
        self._start("kube-controller-manager", [
            os.path.join(self.bin, "kube-controller-manager"), f"--kubeconfig={kcm_kc}",
            f"--authentication-kubeconfig={kcm_kc}", f"--authorization-kubeconfig={kcm_kc}",
            f"--service-account-private-key-file={pki.path('sa.key')}", f"--root-ca-file={ca}",
            "--use-service-account-credentials=true", "--leader-elect=false",
            "--controllers=*,-node-lifecycle-controller", "--secure-port=0",
            "--kube-api-qps=100", "--kube-api-burst=200"])
        self.sched_kubeconfig = sched_kc
        self.start_scheduler()
        self.wait_ready("the default ServiceAccount",
                        lambda: self.api.raw("GET", "/api/v1/namespaces/default/serviceaccounts/default")[0] == 200, 60)
        self.ready_s = time.monotonic() - t0
        return self

    def start_apiserver(self, extra=()):
        """kube-apiserver with the harness's flags, this plane's own extra ones, then `extra`
        (a restart with --feature-gates=...: later flags win)."""
        pki, ca = self.pki, self.ca
        self._start("kube-apiserver", [
            os.path.join(self.bin, "kube-apiserver"), f"--etcd-servers={self.etcd_url}",
            f"--secure-port={self.port}", "--bind-address=127.0.0.1", "--advertise-address=127.0.0.1",
            "--endpoint-reconciler-type=none", f"--tls-cert-file={self.serving[0]}",
            f"--tls-private-key-file={self.serving[1]}",
            f"--client-ca-file={ca}", f"--service-account-key-file={pki.path('sa.pub')}",
            f"--service-account-signing-key-file={pki.path('sa.key')}",
            "--service-account-issuer=https://kubernetes.default.svc", "--service-cluster-ip-range=10.96.0.0/16",
            "--authorization-mode=Node,RBAC", "--enable-admission-plugins=NodeRestriction",
            "--allow-privileged=true", f"--kubelet-client-certificate={self.kubelet_client[0]}",
            f"--kubelet-client-key={self.kubelet_client[1]}", f"--kubelet-certificate-authority={ca}",
            f"--audit-policy-file={os.path.join(self.dir, 'audit-policy.yaml')}",
            f"--audit-log-path={self.audit_log}", "--audit-log-format=json", "--audit-log-mode=blocking",
            *self.apiserver_args, *extra])
        self.wait_ready("kube-apiserver", self.api.ready, 60)

    def start_scheduler(self, config=None):
        """kube-scheduler; `config` (a KubeSchedulerConfiguration as a dict, its profiles and
        extenders) replaces the default, with this plane's kubeconfig and no leader election."""
        import json
        if config is not None:
            self.scheduler_config = config
        conf = dict(self.scheduler_config or {"apiVersion": "kubescheduler.config.k8s.io/v1",
                                              "kind": "KubeSchedulerConfiguration"})
        conf["clientConnection"] = {"kubeconfig": self.sched_kubeconfig}
        conf["leaderElection"] = {"leaderElect": False}
        sched_conf = os.path.join(self.dir, "scheduler.yaml")
        with open(sched_conf, "w") as f:
            json.dump(conf, f)   # JSON is YAML
        self._start("kube-scheduler", [os.path.join(self.bin, "kube-scheduler"), f"--config={sched_conf}",
                                       "--secure-port=0"])

    def restart_scheduler(self, config=None):
        self.stop_one("kube-scheduler")
        self.start_scheduler(config)

    def stop_one(self, name, sig=signal.SIGTERM):
        """Ends the named component (by its pid) and waits for it; it can be started again."""
        for i, (n, p, _) in enumerate(self.procs):
            if n == name and p.poll() is None:
                p.send_signal(sig)
                try:
                    p.wait(timeout=30)
                except subprocess.TimeoutExpired:
                    p.kill()
                    p.wait()
        self.procs = [t for t in self.procs if t[0] != name]

    def restart_apiserver(self, extra=()):
        self.stop_one("kube-apiserver")
        os.rename(os.path.join(self.dir, "kube-apiserver.log"),
                  os.path.join(self.dir, f"kube-apiserver.{time.monotonic_ns()}.log"))
        self.start_apiserver(extra)

    def audit(self):
        """Every audit event so far (the API server writes them before it answers)."""
        import json
        out = []
        try:
            with open(self.audit_log) as f:
                for line in f:
                    if line.strip():
                        out.append(json.loads(line))
        except FileNotFoundError:
            pass
        return out

    def wait_ready(self, what, fn, seconds):
        end = time.monotonic() + seconds
        while not fn():
            for name, p, _ in self.procs:
                if p.poll() is not None:
                    raise AssertionError(f"{name} exited ({p.returncode}) while waiting for {what}:\n"
                                         + self.log(name)[-3000:])
            if time.monotonic() > end:
                raise AssertionError(f"{what} not ready within {seconds} s")
            time.sleep(0.1)

    def stop(self):
        for name, p, _ in reversed(self.procs):
            if p.poll() is None:
                p.send_signal(signal.SIGTERM)
                try:
                    p.wait(timeout=20)
                except subprocess.TimeoutExpired:
                    p.kill()
                    p.wait()
        self.procs = []
        if os.environ.get("TOPOCNI_CLUSTER_KEEP"):   # every log and the audit log, to read after a failure
            print(f"tests/cluster: kept {self.dir}", file=sys.stderr)
        else:
            shutil.rmtree(self.dir, ignore_errors=True)


if __name__ == "__main__":   # a smoke run: up, a few facts, down
    cp = ControlPlane().start()
    try:
        print(f"apiserver ready {cp.apiserver_ready_s:.1f} s, control plane {cp.ready_s:.1f} s; {cp.server}")
        print([g["name"] for g in cp.api.get("/apis")["groups"]])
    finally:
        cp.stop()
