"""A fake node for placement tests: a sysfs tree (NUMA nodes, PCI devices with SR-IOV
layout, netdev speeds), the kubelet's cpu_manager_state, certificates made with the
openssl CLI, kubeconfigs, and a small HTTPS API server that serves Node objects and
logs every request.

Run as a script (`python3 fakenode.py serve ...`) it is that server; the tests start it
inside their node netns with nsenter so that 127.0.0.1 is the plugin's loopback.
"""
import argparse
import base64
import json
import os
import ssl
import subprocess
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


class FakeSysfs:
    """A sysfs tree under `root` laid out like the kernel's, as far as topocni reads it."""

    def __init__(self, root):
        self.root = root
        os.makedirs(root, exist_ok=True)

    def write(self, rel, text):
        path = os.path.join(self.root, rel)
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path, "w") as f:
            f.write(text)

    def numa_node(self, node, cpulist):
        self.write(f"devices/system/node/node{node}/cpulist", cpulist + "\n")

    def pci(self, addr, numa):
        self.write(f"bus/pci/devices/{addr}/numa_node", f"{numa}\n")

    def netdev(self, ifname, pci=None, speed=None):
        d = os.path.join(self.root, "class/net", ifname)
        os.makedirs(d, exist_ok=True)
        if speed is not None:
            self.write(f"class/net/{ifname}/speed", f"{speed}\n")
        if pci:
            os.symlink(f"../../../bus/pci/devices/{pci}", os.path.join(d, "device"))
            os.makedirs(os.path.join(self.root, "bus/pci/devices", pci, "net", ifname), exist_ok=True)

    def pf(self, addr, ifname, numa, speed):
        self.pci(addr, numa)
        self.netdev(ifname, pci=addr, speed=speed)

    def vf(self, addr, pf, numa, index=0):
        self.pci(addr, numa)
        os.symlink(f"../{pf}", os.path.join(self.root, "bus/pci/devices", addr, "physfn"))
        os.symlink(f"../{addr}", os.path.join(self.root, "bus/pci/devices", pf, f"virtfn{index}"))


def cpu_manager_state(pods, version=2):
    """cpu_manager_state text: pods maps pod UID -> {container: cpuset}."""
    if version == 2:
        return json.dumps({"policyName": "static", "defaultCpuSet": "0-1,6-7", "entries": pods, "checksum": 1352937015})
    if version == 3:
        return json.dumps({"policyName": "static", "defaultCpuSet": "0-1,6-7", "entries": {},
                           "podEntries": {uid: {"cpuSet": ",".join(c.values())} for uid, c in pods.items()},
                           "checksum": 7})
    data = {"policyName": "static", "defaultCpuSet": "0-1,6-7", "entries": pods}
    return json.dumps({"policyName": "static", "defaultCpuSet": "0-1,6-7", "data": json.dumps(data),
                       "dataChecksum": 1, "checksum": 0})


def openssl(*args, cwd):
    p = subprocess.run(["openssl", *args], cwd=cwd, capture_output=True, text=True)
    if p.returncode != 0:
        raise AssertionError(f"openssl {' '.join(args)}: {p.stderr}")


def make_pki(d):
    """A CA, a server certificate for 127.0.0.1 and a client certificate, in `d`."""
    os.makedirs(d, exist_ok=True)
    ec = ["-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes"]
    openssl("req", "-x509", *ec, "-keyout", "ca.key", "-out", "ca.crt", "-days", "2", "-subj", "/CN=topocni-test-ca",
            cwd=d)
    for name, subj, ext in [("server", "/CN=127.0.0.1", "subjectAltName=IP:127.0.0.1\nextendedKeyUsage=serverAuth\n"),
                            ("client", "/O=system:nodes/CN=system:node:worker-1", "extendedKeyUsage=clientAuth\n")]:
        openssl("req", "-new", *ec, "-keyout", f"{name}.key", "-out", f"{name}.csr", "-subj", subj, cwd=d)
        with open(os.path.join(d, f"{name}.ext"), "w") as f:
            f.write(ext)
        openssl("x509", "-req", "-in", f"{name}.csr", "-CA", "ca.crt", "-CAkey", "ca.key", "-CAcreateserial",
                "-out", f"{name}.crt", "-days", "2", "-extfile", f"{name}.ext", cwd=d)
    return d


def b64file(path):
    with open(path, "rb") as f:
        return base64.b64encode(f.read()).decode()


def write_kubeconfig(path, server, ca_data=None, ca_file=None, cert_data=None, key_data=None, token=None,
                     token_file=None, insecure=False):
    """A kubeconfig in kubectl's YAML layout (sequences at the parent key's indentation)."""
    cluster = [f"    server: {server}"]
    if ca_data:
        cluster.append(f"    certificate-authority-data: {ca_data}")
    if ca_file:
        cluster.append(f"    certificate-authority: {ca_file}")
    if insecure:
        cluster.append("    insecure-skip-tls-verify: true")
    user = []
    if cert_data:
        user += [f"    client-certificate-data: {cert_data}", f"    client-key-data: {key_data}"]
    if token:
        user.append(f"    token: \"{token}\"")
    if token_file:
        user.append(f"    tokenFile: {token_file}")
    text = "\n".join([
        "# written by fakenode.py",
        "apiVersion: v1",
        "kind: Config",
        "clusters:",
        "- cluster:",
        *cluster,
        "  name: test",
        "contexts:",
        "- context:",
        "    cluster: test",
        "    user: node",
        "  name: test-ctx",
        "current-context: test-ctx",
        "preferences: {}",
        "users:",
        "- name: node",
        "  user:",
        *(user or ["    username: nobody"]),
        "",
    ])
    with open(path, "w") as f:
        f.write(text)
    return path


class FakeApiServer:
    """The HTTPS API server as a child process in netns `ns`; `requests()` reads its log."""

    def __init__(self, ns, pki, nodes, workdir, token=None):
        self.log = os.path.join(workdir, "api-requests.log")
        self.nodes_file = os.path.join(workdir, "api-nodes.json")
        self.set_nodes(nodes)
        cmd = ["nsenter", f"--net=/run/netns/{ns}", sys.executable, os.path.abspath(__file__), "serve",
               "--pki", pki, "--nodes", self.nodes_file, "--log", self.log]
        if token:
            cmd += ["--token", token]
        self.proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        line = self.proc.stdout.readline()
        if not line.startswith("PORT "):
            self.stop()
            raise AssertionError(f"fake API server did not start: {line!r} {self.proc.stderr.read()}")
        self.port = int(line.split()[1])

    def set_nodes(self, nodes):
        with open(self.nodes_file, "w") as f:
            json.dump(nodes, f)

    def requests(self):
        if not os.path.exists(self.log):
            return []
        with open(self.log) as f:
            return [json.loads(l) for l in f if l.strip()]

    def stop(self):
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=5)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()


def serve(args):
    lock = threading.Lock()

    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *a):
            pass

        def reply(self, status, body):
            data = json.dumps(body).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def do_GET(self):
            auth = "none"
            if self.connection.getpeercert():
                auth = "cert"
            elif args.token and self.headers.get("Authorization") == f"Bearer {args.token}":
                auth = "token"
            elif self.headers.get("Authorization"):
                auth = "bad-token"
            with open(args.nodes) as f:
                nodes = json.load(f)
            prefix = "/api/v1/nodes/"
            if auth in ("none", "bad-token"):
                status, body = 401, {"kind": "Status", "status": "Failure", "message": "Unauthorized", "code": 401}
            elif not self.path.startswith(prefix) or self.path[len(prefix):] not in nodes:
                status, body = 404, {"kind": "Status", "status": "Failure", "code": 404,
                                     "message": f"nodes \"{self.path[len(prefix):]}\" not found"}
            else:
                name = self.path[len(prefix):]
                status, body = 200, {"kind": "Node", "apiVersion": "v1",
                                     "metadata": {"name": name, "labels": nodes[name]},
                                     "status": {"images": [{"names": ["x" * 100]}] * 50}}
            with lock, open(args.log, "a") as f:
                f.write(json.dumps({"path": self.path, "auth": auth, "status": status,
                                    "accept": self.headers.get("Accept")}) + "\n")
            self.reply(status, body)

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ctx.load_cert_chain(os.path.join(args.pki, "server.crt"), os.path.join(args.pki, "server.key"))
    ctx.load_verify_locations(os.path.join(args.pki, "ca.crt"))
    ctx.verify_mode = ssl.CERT_OPTIONAL
    server.socket = ctx.wrap_socket(server.socket, server_side=True)
    print(f"PORT {server.server_address[1]}", flush=True)
    server.serve_forever()


if __name__ == "__main__":
    ap = argparse.ArgumentParser()
    sub = ap.add_subparsers(dest="cmd", required=True)
    s = sub.add_parser("serve")
    s.add_argument("--pki", required=True)
    s.add_argument("--nodes", required=True)
    s.add_argument("--log", required=True)
    s.add_argument("--token")
    serve(ap.parse_args())
