"""A fake node for placement tests: a sysfs tree (NUMA nodes, PCI devices with SR-IOV
layout, netdev speeds), the kubelet's cpu_manager_state, certificates made with the
openssl CLI, kubeconfigs, and a small HTTPS API server that serves Node and Pod objects,
logs every request, and can be told to misbehave (a given status and Status object, a body
that is not JSON, a truncated body, no answer at all) for paths of its choice.

Run as a script (`python3 fakenode.py serve ...`) it is that server; the tests start it
inside their node netns with nsenter so that 127.0.0.1 is the plugin's loopback.
"""
import argparse
import base64
import json
import os
import ssl
import subprocess
import socket
import sys
import threading
import time
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


SERVER_NAMES = ("127.0.0.1", "::1", "localhost", "api.topocni.test")


def make_pki(d, server_names=SERVER_NAMES):
    """A CA, a server certificate and a client certificate, in `d`. The server certificate's
    subjectAltName holds every entry of `server_names`: addresses as IP, the rest as DNS."""
    os.makedirs(d, exist_ok=True)
    sans = []
    for n in server_names:
        try:
            socket.inet_pton(socket.AF_INET6 if ":" in n else socket.AF_INET, n)
            sans.append(f"IP:{n}")
        except OSError:
            sans.append(f"DNS:{n}")
    ec = ["-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes"]
    openssl("req", "-x509", *ec, "-keyout", "ca.key", "-out", "ca.crt", "-days", "2", "-subj", "/CN=topocni-test-ca",
            cwd=d)
    for name, subj, ext in [("server", f"/CN={server_names[0]}",
                             f"subjectAltName={','.join(sans)}\nextendedKeyUsage=serverAuth\n"),
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
                     token_file=None, insecure=False, cert_file=None, key_file=None, user="node"):
    """A kubeconfig in kubectl's YAML layout (sequences at the parent key's indentation)."""
    cluster = [f"    server: {server}"]
    user_name = user
    if ca_data:
        cluster.append(f"    certificate-authority-data: {ca_data}")
    if ca_file:
        cluster.append(f"    certificate-authority: {ca_file}")
    if insecure:
        cluster.append("    insecure-skip-tls-verify: true")
    user = []
    if cert_data:
        user += [f"    client-certificate-data: {cert_data}", f"    client-key-data: {key_data}"]
    if cert_file:
        user += [f"    client-certificate: {cert_file}", f"    client-key: {key_file}"]
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
        f"    user: {user_name}",
        "  name: test-ctx",
        "current-context: test-ctx",
        "preferences: {}",
        "users:",
        f"- name: {user_name}",
        "  user:",
        *(user or ["    username: nobody"]),
        "",
    ])
    with open(path, "w") as f:
        f.write(text)
    return path


def k8s_status(code, message, reason=""):
    """A Kubernetes Status object, as the API server sends with every error."""
    body = {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure", "message": message, "code": code}
    if reason:
        body["reason"] = reason
    return body


class FakeApiServer:
    """The HTTPS API server as a child process in netns `ns`; `requests()` reads its log.

    nodes: {node name: labels}. pods: {"<namespace>/<name>": node name}, served as Pods with
    that spec.nodeName. host: the address it listens on (127.0.0.1, ::1, ...). token: one
    token, or a list of tokens, accepted as "Bearer"; a client certificate from the PKI's CA
    is accepted too. overrides: a list of answers that replace the normal one for requests
    whose path starts with the entry's "path" (the first match wins; it is read again for
    every request, see set_overrides):
      {"path": "/api/v1/nodes/", "status": 403, "body": <JSON value>}   a status and body
      {"text": "<html>", "contentType": "text/html"}                      a body sent as is
      {"truncate": 100, "closeNotify": False}   Content-Length 100 bytes more than what is
          sent, then the connection is closed: with a TLS close_notify, or a bare TCP close
      {"hang": 30}                              read the request, answer nothing for 30 s
    silent: listen and accept TCP connections, but never speak (no TLS handshake even).
    """

    def __init__(self, ns, pki, nodes, workdir, token=None, pods=None, overrides=None, host="127.0.0.1",
                 silent=False):
        self.host = host
        self.log = os.path.join(workdir, "api-requests.log")
        self.nodes_file = os.path.join(workdir, "api-nodes.json")
        self.pods_file = os.path.join(workdir, "api-pods.json")
        self.overrides_file = os.path.join(workdir, "api-overrides.json")
        self.err = os.path.join(workdir, "api-server.err")
        self.set_nodes(nodes)
        self.set_pods(pods or {})
        self.set_overrides(overrides or [])
        cmd = ["nsenter", f"--net=/run/netns/{ns}", sys.executable, os.path.abspath(__file__), "serve",
               "--pki", pki, "--nodes", self.nodes_file, "--log", self.log, "--pods", self.pods_file,
               "--overrides", self.overrides_file, "--host", host]
        for t in [token] if isinstance(token, str) else (token or []):
            cmd += ["--token", t]
        if silent:
            cmd.append("--silent")
        # stderr to a file: a pipe nobody reads would block the server once full.
        with open(self.err, "w") as err:
            self.proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=err, text=True)
        line = self.proc.stdout.readline()
        if not line.startswith("PORT "):
            self.stop()
            with open(self.err) as f:
                raise AssertionError(f"fake API server did not start: {line!r} {f.read()}")
        self.port = int(line.split()[1])

    def url(self, host=None):
        """https://host:port, with brackets around an IPv6 address."""
        h = host or self.host
        return f"https://[{h}]:{self.port}" if ":" in h else f"https://{h}:{self.port}"

    def _write(self, path, value):
        tmp = path + ".tmp"
        with open(tmp, "w") as f:
            json.dump(value, f)
        os.replace(tmp, path)   # the server never reads half a file

    def set_nodes(self, nodes):
        self._write(self.nodes_file, nodes)

    def set_pods(self, pods):
        self._write(self.pods_file, pods)

    def set_overrides(self, overrides):
        self._write(self.overrides_file, overrides)

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
        if self.proc.stdout:
            self.proc.stdout.close()


def serve_silent(args):
    """Accept connections and never say a word; each connection is logged."""
    family = socket.AF_INET6 if ":" in args.host else socket.AF_INET
    s = socket.socket(family, socket.SOCK_STREAM)
    s.bind((args.host, 0))
    s.listen(16)
    print(f"PORT {s.getsockname()[1]}", flush=True)
    held = []
    while True:
        conn, _ = s.accept()
        held.append(conn)   # kept open, never read or written
        with open(args.log, "a") as f:
            f.write(json.dumps({"path": None, "connected": True}) + "\n")


def serve(args):
    if args.silent:
        return serve_silent(args)
    lock = threading.Lock()
    tokens = set(args.token or [])

    def load(path, default):
        if not path or not os.path.exists(path):
            return default
        with open(path) as f:
            return json.load(f)

    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *a):
            pass

        def send_body(self, status, data, content_type="application/json", extra=0):
            self.send_response(status)
            self.send_header("Content-Type", content_type)
            self.send_header("Content-Length", str(len(data) + extra))
            self.end_headers()
            self.wfile.write(data)
            self.wfile.flush()

        def reply(self, status, body):
            self.send_body(status, json.dumps(body).encode())

        def route(self, auth):
            """The normal answer: (status, body)."""
            nodes = load(args.nodes, {})
            pods = load(args.pods, {})
            node_prefix, ns_prefix = "/api/v1/nodes/", "/api/v1/namespaces/"
            if auth in ("none", "bad-token"):
                return 401, k8s_status(401, "Unauthorized", "Unauthorized")
            if self.path.startswith(node_prefix):
                name = self.path[len(node_prefix):]
                if name not in nodes:
                    return 404, k8s_status(404, f"nodes \"{name}\" not found", "NotFound")
                return 200, {"kind": "Node", "apiVersion": "v1", "metadata": {"name": name, "labels": nodes[name]},
                             "status": {"images": [{"names": ["x" * 100]}] * 50}}
            parts = self.path[len(ns_prefix):].split("/") if self.path.startswith(ns_prefix) else []
            if len(parts) == 3 and parts[1] == "pods":
                ns, name = parts[0], parts[2]
                if f"{ns}/{name}" not in pods:
                    return 404, k8s_status(404, f"pods \"{name}\" not found", "NotFound")
                return 200, {"kind": "Pod", "apiVersion": "v1", "metadata": {"name": name, "namespace": ns},
                             "spec": {"nodeName": pods[f"{ns}/{name}"], "containers": [{"name": "c"}]}}
            return 404, k8s_status(404, "the server could not find the requested resource", "NotFound")

        def do_GET(self):
            auth, token = "none", None
            header = self.headers.get("Authorization") or ""
            if header.startswith("Bearer "):
                token = header[len("Bearer "):]
            if self.connection.getpeercert():
                auth = "cert"
            elif token is not None and token in tokens:
                auth = "token"
            elif header:
                auth = "bad-token"
            override = next((o for o in load(args.overrides, []) if self.path.startswith(o.get("path", ""))), None)
            if override is None:
                status, body = self.route(auth)
            else:
                status, body = override.get("status", 200), override.get("body")
            with lock, open(args.log, "a") as f:
                f.write(json.dumps({"path": self.path, "auth": auth, "status": status,
                                    "accept": self.headers.get("Accept"), "host": self.headers.get("Host"),
                                    "token": token, "sni": getattr(self.connection, "topocni_sni", None),
                                    "override": override}) + "\n")
            if override is None:
                return self.reply(status, body)
            self.close_connection = True
            if "hang" in override:
                time.sleep(override["hang"])   # the request was read; no answer
                return
            if "text" in override:
                data = override["text"].encode()
            else:
                data = json.dumps(body).encode()
            self.send_body(status, data, override.get("contentType", "application/json"), override.get("truncate", 0))
            if override.get("truncate") and override.get("closeNotify"):
                try:
                    self.connection.unwrap()   # TLS close_notify, then the TCP close
                except (OSError, ValueError):
                    pass

    class Server(ThreadingHTTPServer):
        address_family = socket.AF_INET6 if ":" in args.host else socket.AF_INET

    server = Server((args.host, 0), Handler)
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ctx.load_cert_chain(os.path.join(args.pki, "server.crt"), os.path.join(args.pki, "server.key"))
    ctx.load_verify_locations(os.path.join(args.pki, "ca.crt"))
    ctx.verify_mode = ssl.CERT_OPTIONAL

    def on_sni(sock, name, _ctx):
        try:
            sock.topocni_sni = name
        except AttributeError:
            pass

    ctx.sni_callback = on_sni
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
    s.add_argument("--pods")
    s.add_argument("--overrides")
    s.add_argument("--host", default="127.0.0.1")
    s.add_argument("--token", action="append")
    s.add_argument("--silent", action="store_true")
    serve(ap.parse_args())
