"""A fake node for placement tests: a sysfs tree (NUMA nodes, PCI devices with SR-IOV
layout, netdev speeds), the kubelet's cpu_manager_state, certificates made with the
openssl CLI, kubeconfigs, and a small HTTPS API server (HTTP/1.1, keep-alive) that serves
Node and Pod objects, PATCHes Nodes (merge patch), LISTs Nodes in pages and streams
scripted WATCH events, logs every request with the TCP connection it came on, and can be
told to misbehave (a given status and Status object, a body that is not JSON, a truncated
body, no answer at all, a dropped connection, an expired continue token) for paths of its
choice.

Run as a script (`python3 fakenode.py serve ...`) it is that server; the tests start it
inside their node netns with nsenter so that 127.0.0.1 is the plugin's loopback.
"""
import argparse
import base64
import json
import os
import re
import select
import ssl
import subprocess
import socket
import sys
import threading
import time
import urllib.parse
import uuid
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
import resourceslices


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


def free_port(host="127.0.0.1"):
    """A TCP port nothing listens on now, for a server the test starts next."""
    with socket.socket() as s:
        s.bind((host, 0))
        return s.getsockname()[1]


def k8s_status(code, message, reason=""):
    """A Kubernetes Status object, as the API server sends with every error."""
    body = {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure", "message": message, "code": code}
    if reason:
        body["reason"] = reason
    return body


def not_found_status(resource, name, group=""):
    """The 404 the API server sends for a named object that is not there
    (apimachinery errors.NewNotFound): `resource` the plural, `group` "" for the core group
    (details.group is then left out, as the API server's omitempty does)."""
    qualified = f"{resource}.{group}" if group else resource
    body = k8s_status(404, f'{qualified} "{name}" not found', "NotFound")
    body["details"] = {"name": name, "kind": resource}
    if group:
        body["details"]["group"] = group
    return body


def too_large_status(asked, current):
    """The 504 the API server gives for a LIST or WATCH at a resourceVersion newer than it has
    (apiserver's storage.NewTooLargeResourceVersionError: a Timeout with the
    ResourceVersionTooLarge cause)."""
    body = k8s_status(504, f"Timeout: Too large resource version: {asked}, current: {current}", "Timeout")
    body["details"] = {"causes": [{"reason": "ResourceVersionTooLarge", "message": "Too large resource version"}],
                       "retryAfterSeconds": 1}
    return body


# The message of the 410 a real API server gives for a continue token it compacted away
# (apiserver pkg/storage/etcd3/errors.go).
CONTINUE_EXPIRED = ("The provided continue parameter is too old to display a consistent list result. "
                    "You can start a new list without the continue parameter.")


def expired_continue(times=1, path="/api/v1/nodes"):
    """An override: the next `times` LIST requests that carry a continue token get a 410
    Status with reason Expired, as when etcd compacted the token's revision."""
    return {"path": path, "query": ["continue"], "status": 410, "times": times,
            "body": k8s_status(410, CONTINUE_EXPIRED, "Expired")}


def node_object(name, resource_version, labels=None, annotations=None, **extra):
    """A Node object as a WATCH event or a LIST item carries it."""
    md = {"name": name, "resourceVersion": str(resource_version)}
    if labels:
        md["labels"] = labels
    if annotations:
        md["annotations"] = annotations
    obj = {"kind": "Node", "apiVersion": "v1", "metadata": md}
    obj.update(extra)
    return obj


def merge_patch(target, patch):
    """RFC 7386 JSON Merge Patch: `patch` applied to `target`; null removes a member."""
    if not isinstance(patch, dict):
        return patch
    out = dict(target) if isinstance(target, dict) else {}
    for k, v in patch.items():
        if v is None:
            out.pop(k, None)
        else:
            out[k] = merge_patch(out.get(k), v)
    return out


# --- Events, Pods with owners, and the Eviction API (the refusal agent's calls) ---
# Kept apart from the Node routes so that they merge easily with other extensions.

def pdb_blocked_status(pdb="web-pdb", healthy=2, retry_after=None):
    """The 429 the eviction subresource sends while a PodDisruptionBudget forbids the
    eviction (kubernetes pkg/registry/core/pod/storage/eviction.go)."""
    body = k8s_status(429, "Cannot evict pod as it would violate the pod's disruption budget.", "TooManyRequests")
    body["details"] = {"causes": [{"reason": "DisruptionBudget",
                                   "message": f"The disruption budget {pdb} needs {healthy} healthy pods and has "
                                              f"{healthy} currently"}]}
    if retry_after is not None:
        body["details"]["retryAfterSeconds"] = retry_after
    return body


# More than one budget matches: 500 with no reason (finisher.go turns the Status into the code).
MULTIPLE_PDBS = k8s_status(500, "This pod has more than one PodDisruptionBudget, which the eviction subresource "
                                "does not support.")


def owner_ref(kind, name, uid, api_version="apps/v1", controller=True):
    """An ownerReference, as a controller sets it on its pods."""
    return {"apiVersion": api_version, "kind": kind, "name": name, "uid": uid, "controller": controller,
            "blockOwnerDeletion": True}


def pod_object(ns, name, spec):
    """The Pod served for an entry of the pods file: a node name (the old form), or
    {"nodeName", "uid", "ownerReferences", "deletionTimestamp"}; uid defaults to
    "uid-<ns>-<name>"."""
    if not isinstance(spec, dict):
        spec = {"nodeName": spec}
    md = {"name": name, "namespace": ns, "uid": spec.get("uid", f"uid-{ns}-{name}")}
    if spec.get("ownerReferences"):
        md["ownerReferences"] = spec["ownerReferences"]
    if spec.get("deletionTimestamp"):
        md["deletionTimestamp"] = spec["deletionTimestamp"]
    return {"kind": "Pod", "apiVersion": "v1", "metadata": md,
            "spec": {"nodeName": spec.get("nodeName", ""), "containers": [{"name": "c"}]}}


def pod_route(path):
    """(ns, name, sub) for /api/v1/namespaces/<ns>/pods/<name>[/<sub>], else None."""
    prefix = "/api/v1/namespaces/"
    if not path.startswith(prefix):
        return None
    parts = path[len(prefix):].split("/")
    if len(parts) in (3, 4) and parts[1] == "pods":
        return parts[0], parts[2], (parts[3] if len(parts) == 4 else "")
    return None


def events_route(path):
    """(ns, name) for /api/v1/namespaces/<ns>/events[/<name>] (name "" for the collection), else None."""
    prefix = "/api/v1/namespaces/"
    if not path.startswith(prefix):
        return None
    parts = path[len(prefix):].split("/")
    if len(parts) in (2, 3) and parts[1] == "events":
        return parts[0], (parts[2] if len(parts) == 3 else "")
    return None


class EventsAndEvictions:
    """The server's Events ({"<ns>/<name>": Event}) and the pods evicted so far (served as
    404 afterwards, as the pod is deleted). Both are in the events file, rewritten after
    every change: {"events": {...}, "evicted": ["<ns>/<name>", ...]}."""

    def __init__(self, path):
        self.path = path
        self.events, self.evicted = {}, []
        self.rv = 1000
        self.save()

    def save_if_dirty(self):
        """After the request is logged: a test that sees the change finds its request."""
        if getattr(self, "dirty", False):
            self.dirty = False
            self.save()

    def save(self):
        if not self.path:
            return
        tmp = self.path + ".tmp"
        with open(tmp, "w") as f:
            json.dump({"events": self.events, "evicted": self.evicted}, f)
        os.replace(tmp, self.path)

    def create_event(self, ns, body):
        try:
            ev = json.loads(body)
        except ValueError as e:
            return 400, k8s_status(400, f"error decoding event: {e}", "BadRequest")
        md = ev.get("metadata") if isinstance(ev, dict) else None
        if not isinstance(md, dict) or not md.get("name"):
            return 422, k8s_status(422, "metadata.name: Required value", "Invalid")
        inv = ev.get("involvedObject") or {}
        # core/v1 validation of a legacy event: the namespaces agree.
        if md.get("namespace", ns) != ns or inv.get("namespace", ns) != ns:
            return 422, k8s_status(422, "involvedObject.namespace: does not match event.namespace", "Invalid")
        key = f"{ns}/{md['name']}"
        if key in self.events:
            return 409, k8s_status(409, f"events \"{md['name']}\" already exists", "AlreadyExists")
        self.rv += 1
        md.update(namespace=ns, uid=f"ev-{self.rv}", resourceVersion=str(self.rv))
        self.events[key] = ev
        self.dirty = True   # saved once the request is logged (save_if_dirty)
        return 201, ev

    def patch_event(self, ns, name, content_type, body):
        media = (content_type or "").split(";")[0].strip().lower()
        if media != "application/strategic-merge-patch+json":
            return 415, k8s_status(415, "the body of the request was in an unknown format", "UnsupportedMediaType")
        key = f"{ns}/{name}"
        if key not in self.events:
            return 404, k8s_status(404, f"events \"{name}\" not found", "NotFound")
        try:
            patch = json.loads(body)
        except ValueError as e:
            return 400, k8s_status(400, f"error decoding patch: {e}", "BadRequest")
        self.rv += 1
        ev = merge_patch(self.events[key], patch)
        ev["metadata"]["resourceVersion"] = str(self.rv)
        self.events[key] = ev
        self.dirty = True   # saved once the request is logged (save_if_dirty)
        return 200, ev

    def evict(self, ns, name, pods, body):
        try:
            ev = json.loads(body)
        except ValueError as e:
            return 400, k8s_status(400, f"error decoding eviction: {e}", "BadRequest")
        if not isinstance(ev, dict) or ev.get("kind") != "Eviction" or \
                ev.get("apiVersion") not in ("policy/v1", "policy/v1beta1"):
            return 400, k8s_status(400, "not a policy/v1 Eviction", "BadRequest")
        if (ev.get("metadata") or {}).get("name") != name:
            return 400, k8s_status(400, "name in URL does not match name in Eviction object", "BadRequest")
        key = f"{ns}/{name}"
        if key not in pods or key in self.evicted:
            return 404, k8s_status(404, f"pods \"{name}\" not found", "NotFound")
        self.evicted.append(key)
        self.dirty = True   # saved once the request is logged (save_if_dirty)
        return 201, {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Success", "code": 201}


class FakeApiServer:
    """The HTTPS API server as a child process in netns `ns`; `requests()` reads its log.

    HTTP/1.1 with keep-alive: every answer has a Content-Length or is chunked, and a
    connection stays open until the client closes it (or an override closes it). Every
    request is logged with its method, its path (with the query), the client's source port
    ("peer": one per TCP connection), the parsed query ("query"), the status sent, when it
    came ("at", seconds since the epoch), and for
    PATCH the Content-Type and body ("contentType", "body", at most 64 KiB, "bodySize").

    nodes: {node name: labels}. The server keeps a Node object for each (metadata.name,
    labels, annotations, resourceVersion); set_nodes() adds, removes or relabels them (each
    change bumps the server's resourceVersion counter, like a PATCH does). annotations:
    {node name: {key: value}}, the Nodes' annotations at the start. The objects as they are
    now: node(name), annotations(name), state() (from api-state.json, rewritten after every
    change). pods: {"<namespace>/<name>": node name}, served as Pods with that spec.nodeName.
    host: the address it listens on (127.0.0.1, ::1, ...). token: one token, or a list of
    tokens, accepted as "Bearer"; a client certificate from the PKI's CA is accepted too.

    Routes:
      GET   /api/v1/nodes/<n>        the Node
      PATCH /api/v1/nodes/<n>        application/merge-patch+json (RFC 7386) or
                                     application/strategic-merge-patch+json (merged the same
                                     way): 200 with the Node; another Content-Type: 415
      GET   /api/v1/nodes?limit=N&continue=T    a NodeList in name order, metadata.continue
                                     while more remain, metadata.resourceVersion of the list
                                     (the same on every page of one list)
      GET   /api/v1/nodes?watch=1&resourceVersion=RV...   a chunked stream of watch events
                                     as the next script (set_watch_script) says; with no
                                     script left the stream stays open, silent, until
                                     timeoutSeconds or until the client goes
      GET   /api/v1/namespaces/<ns>/pods/<p>    a Pod

    overrides: a list of answers that replace the normal one for requests whose path
    (with the query) starts with the entry's "path" (the first match wins; it is read again
    for every request, see set_overrides). An entry may also name a "method" ("PATCH") and
    "query" (names of query parameters the request must carry, e.g. ["continue"] or
    ["watch"]), and "times": it applies to that many requests, then no more (counted
    until the overrides are set again). The answers:
      {"path": "/api/v1/nodes/", "status": 403, "body": <JSON value>}   a status and body
      {"text": "<html>", "contentType": "text/html"}                      a body sent as is
      {"truncate": 100, "closeNotify": False}   Content-Length 100 bytes more than what is
          sent, then the connection is closed: with a TLS close_notify, or a bare TCP close
      {"hang": 30}                              read the request, answer nothing for 30 s
      {"drop": N}                               read the request, close the connection
          without a word, for the next N requests (then the override no longer applies)
    silent: listen and accept TCP connections, but never speak (no TLS handshake even).
    """

    def __init__(self, ns, pki, nodes, workdir, token=None, pods=None, overrides=None, host="127.0.0.1",
                 silent=False, annotations=None):
        self.host = host
        self.log = os.path.join(workdir, "api-requests.log")
        self.nodes_file = os.path.join(workdir, "api-nodes.json")
        self.pods_file = os.path.join(workdir, "api-pods.json")
        self.overrides_file = os.path.join(workdir, "api-overrides.json")
        self.watch_file = os.path.join(workdir, "api-watch.json")
        self.annotations_file = os.path.join(workdir, "api-annotations.json")
        self.state_file = os.path.join(workdir, "api-state.json")
        self.events_file = os.path.join(workdir, "api-events.json")
        self.err = os.path.join(workdir, "api-server.err")
        self.set_nodes(nodes)
        self.set_pods(pods or {})
        self.set_overrides(overrides or [])
        self.set_watch_script([])
        self._write(self.annotations_file, annotations or {})
        cmd = ["nsenter", f"--net=/run/netns/{ns}", sys.executable, os.path.abspath(__file__), "serve",
               "--pki", pki, "--nodes", self.nodes_file, "--log", self.log, "--pods", self.pods_file,
               "--overrides", self.overrides_file, "--host", host, "--watch", self.watch_file,
               "--annotations", self.annotations_file, "--state", self.state_file, "--events", self.events_file]
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

    def set_watch_script(self, scripts):
        """What the next WATCH requests stream: a list of scripts, one per WATCH request in
        turn (a single script, a list of entries, is taken as one). Each entry:
          {"type": "ADDED", "object": {...}}   that event, one line (any type, as given)
          {"bookmark": "123"}       a BOOKMARK whose object has only kind, apiVersion and
                                    metadata.resourceVersion
          {"expire": True}          an ERROR event: a Status, code 410, reason Expired
          {"bump": N}               the server's resourceVersion moves on by N (changes elsewhere)
          {"sleep": 0.2}            a pause
          {"split": True}           the next event goes out in two chunks, split mid-line
          {"join": N}               the next N events go out in one chunk
          {"raw": "text"}           these bytes as one chunk, as they are
        After the last entry the stream ends (the final zero-length chunk)."""
        if scripts and isinstance(scripts[0], dict):
            scripts = [scripts]
        self._write(self.watch_file, list(scripts))

    def watch_scripts_left(self):
        with open(self.watch_file) as f:
            return json.load(f)

    def requests(self):
        if not os.path.exists(self.log):
            return []
        with open(self.log) as f:
            # The server (another process) may be halfway through a line: only whole lines.
            return [json.loads(l) for l in f if l.endswith("\n") and l.strip()]

    def patches(self):
        """The PATCH requests so far, as logged."""
        return [r for r in self.requests() if r.get("method") == "PATCH"]

    def watches(self):
        """The WATCH requests so far, as logged (each has "resourceVersion", the one asked from)."""
        return [r for r in self.requests() if r.get("watch")]

    def peers(self, requests=None):
        """The client source ports of `requests` (default: all), in order of first use: one per
        TCP connection."""
        out = []
        for r in self.requests() if requests is None else requests:
            if r.get("peer") is not None and r["peer"] not in out:
                out.append(r["peer"])
        return out

    def state(self):
        """{"resourceVersion": "N", "nodes": {name: Node object}} as the server has it now."""
        if not os.path.exists(self.state_file):
            return {"resourceVersion": "0", "nodes": {}}
        with open(self.state_file) as f:
            return json.load(f)

    def node(self, name):
        return self.state()["nodes"].get(name)

    def annotations(self, name):
        n = self.node(name)
        return dict((n or {}).get("metadata", {}).get("annotations") or {})

    # --- Events and evictions (the refusal agent) ---
    def events(self):
        """The Events the server holds now: {"<ns>/<name>": Event}."""
        if not os.path.exists(self.events_file):
            return {}
        with open(self.events_file) as f:
            return json.load(f)["events"]

    def evicted(self):
        """The pods evicted so far, "<ns>/<name>", in order."""
        if not os.path.exists(self.events_file):
            return []
        with open(self.events_file) as f:
            return json.load(f)["evicted"]

    def eviction_requests(self):
        """The POSTs to pods/<name>/eviction so far, as logged (with their status)."""
        return [r for r in self.requests() if r.get("method") == "POST" and r["path"].endswith("/eviction")]

    def event_requests(self):
        """The POSTs and PATCHes of Events so far, as logged."""
        return [r for r in self.requests() if r.get("method") in ("POST", "PATCH") and events_route(r["path"].split("?")[0])]

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


MAX_LOGGED_BODY = 64 << 10
NODE_IMAGES = [{"names": ["x" * 100]}] * 50   # a Node's status is large: answers span many TLS records


class ApiState:
    """The server's Node objects and resourceVersion counter (one per server process)."""

    def __init__(self, args, load):
        self.args, self.load = args, load
        self.lock = threading.Lock()
        self.rv = 0
        self.objects = {}        # name -> Node object (without status)
        self.file_labels = {}    # name -> labels as the nodes file had them when last read
        self.initial_annotations = load(args.annotations, {})
        self.overrides_text = None
        self.override_uses = {}
        with self.lock:
            self.sync()

    def bump(self, n=1):
        self.rv += n
        return str(self.rv)

    def sync(self):
        """Takes in the nodes file (under the lock): new, removed and relabelled nodes."""
        nodes = self.load(self.args.nodes, {})
        changed = False
        for name in list(self.objects):
            if name not in nodes:
                del self.objects[name]
                self.file_labels.pop(name, None)
                changed = True
        for name, labels in nodes.items():
            if name not in self.objects:
                md = {"name": name, "uid": f"uid-{name}", "labels": labels,
                      "annotations": dict(self.initial_annotations.get(name, {}))}
                self.objects[name] = {"kind": "Node", "apiVersion": "v1", "metadata": md, "spec": {}}
            elif self.file_labels.get(name) == labels:
                continue
            else:
                self.objects[name]["metadata"]["labels"] = labels
            self.file_labels[name] = labels
            self.objects[name]["metadata"]["resourceVersion"] = self.bump()
            changed = True
        if changed or not os.path.exists(self.args.state):
            self.save()

    def save(self):
        if not self.args.state:
            return
        tmp = self.args.state + ".tmp"
        with open(tmp, "w") as f:
            json.dump({"resourceVersion": str(self.rv), "nodes": self.objects}, f)
        os.replace(tmp, self.args.state)

    @staticmethod
    def served(obj):
        """The object as sent: no annotations member when there are none (omitempty), and a
        large status."""
        out = json.loads(json.dumps(obj))
        if not out["metadata"].get("annotations"):
            out["metadata"].pop("annotations", None)
        out.setdefault("status", {})["images"] = NODE_IMAGES
        return out

    def override_for(self, method, path, query):
        """The first override that applies to this request (and counts it), or None."""
        text = ""
        if self.args.overrides and os.path.exists(self.args.overrides):
            with open(self.args.overrides) as f:
                text = f.read()
        if text != self.overrides_text:   # set again: every "times" and "drop" starts over
            self.overrides_text, self.override_uses = text, {}
        overrides = json.loads(text) if text.strip() else []
        for i, o in enumerate(overrides):
            if not path.startswith(o.get("path", "")):
                continue
            if o.get("method") and o["method"] != method:
                continue
            if any(q not in query for q in o.get("query", [])):
                continue
            limit = o["drop"] if "drop" in o else o.get("times")
            if limit is not None:
                if self.override_uses.get(i, 0) >= limit:
                    continue
                self.override_uses[i] = self.override_uses.get(i, 0) + 1
            return o
        return None

    def next_watch_script(self):
        scripts = self.load(self.args.watch, [])
        if not scripts:
            return None
        script = scripts.pop(0)
        tmp = self.args.watch + ".tmp"
        with open(tmp, "w") as f:
            json.dump(scripts, f)
        os.replace(tmp, self.args.watch)
        return script


def encode_token(rv, start):
    raw = json.dumps({"v": "meta.k8s.io/v1", "rv": int(rv), "start": start}, separators=(",", ":")).encode()
    return base64.urlsafe_b64encode(raw).decode().rstrip("=")


def decode_token(token):
    try:
        raw = base64.urlsafe_b64decode(token + "=" * (-len(token) % 4))
        d = json.loads(raw)
        return str(d["rv"]), str(d["start"])
    except (ValueError, KeyError, TypeError):
        return None


def serve(args):
    if args.silent:
        return serve_silent(args)
    log_lock = threading.Lock()
    tokens = set(args.token or [])

    def load(path, default):
        if not path or not os.path.exists(path):
            return default
        with open(path) as f:
            return json.load(f)

    state = ApiState(args, load)
    extra = EventsAndEvictions(args.events)

    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"   # keep-alive: every answer has a Content-Length or is chunked

        def log_message(self, *a):
            pass

        def send_body(self, status, data, content_type="application/json", extra=0, close=False):
            self.send_response(status)
            self.send_header("Content-Type", content_type)
            self.send_header("Content-Length", str(len(data) + extra))
            if close:
                self.send_header("Connection", "close")
                self.close_connection = True
            self.end_headers()
            self.wfile.write(data)
            self.wfile.flush()

        def reply(self, status, body):
            self.send_body(status, json.dumps(body).encode())

        # --- the request ---
        def split_target(self):
            path, _, q = self.path.partition("?")
            return path, {k: v[-1] for k, v in urllib.parse.parse_qs(q, keep_blank_values=True).items()}

        def read_body(self):
            n = int(self.headers.get("Content-Length") or 0)
            return self.rfile.read(n) if n > 0 else b""

        def authenticate(self):
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
            return auth, token

        def record(self, entry):
            with log_lock, open(args.log, "a") as f:
                f.write(json.dumps(entry) + "\n")

        # --- the normal answers ---
        def route_get(self, auth, path, query):
            """(status, body), or (200, ("watch", from_rv)) for a WATCH."""
            with state.lock:
                state.sync()
            pods = load(args.pods, {})
            node_prefix, ns_prefix = "/api/v1/nodes/", "/api/v1/namespaces/"
            if auth in ("none", "bad-token"):
                return 401, k8s_status(401, "Unauthorized", "Unauthorized")
            if path == "/api/v1/nodes":
                if query.get("watch", "false").lower() not in ("0", "false"):
                    return 200, ("watch", query.get("resourceVersion", ""))
                return self.list_nodes(query)
            if path.startswith(node_prefix):
                name = path[len(node_prefix):]
                with state.lock:
                    obj = state.objects.get(name)
                    if obj is None:
                        return 404, k8s_status(404, f"nodes \"{name}\" not found", "NotFound")
                    return 200, state.served(obj)
            route = pod_route(path)
            if route and not route[2]:
                ns, name, _ = route
                with state.lock:
                    gone = f"{ns}/{name}" in extra.evicted
                if f"{ns}/{name}" not in pods or gone:
                    return 404, k8s_status(404, f"pods \"{name}\" not found", "NotFound")
                return 200, pod_object(ns, name, pods[f"{ns}/{name}"])
            return 404, k8s_status(404, "the server could not find the requested resource", "NotFound")

        def list_nodes(self, query):
            with state.lock:
                names = sorted(state.objects)
                rv, start = str(state.rv), ""
                if query.get("continue"):
                    decoded = decode_token(query["continue"])
                    if decoded is None:
                        return 400, k8s_status(400, "continue key is not valid", "BadRequest")
                    rv, start = decoded
                rest = [n for n in names if n > start] if start else names
                try:
                    limit = int(query.get("limit") or 0)
                except ValueError:
                    return 400, k8s_status(400, "limit is not a number", "BadRequest")
                page = rest[:limit] if limit > 0 else rest
                md = {"resourceVersion": rv}
                if len(page) < len(rest):
                    md["continue"] = encode_token(rv, page[-1])
                    md["remainingItemCount"] = len(rest) - len(page)
                items = [state.served(state.objects[n]) for n in page]
            return 200, {"kind": "NodeList", "apiVersion": "v1", "metadata": md, "items": items}

        def route_post(self, auth, path, body):
            """POST of an Event or of a pod's eviction."""
            if auth in ("none", "bad-token"):
                return 401, k8s_status(401, "Unauthorized", "Unauthorized")
            ev, pod = events_route(path), pod_route(path)
            with state.lock:
                if ev and not ev[1]:
                    return extra.create_event(ev[0], body)
                if pod and pod[2] == "eviction":
                    return extra.evict(pod[0], pod[1], load(args.pods, {}), body)
            return 405, k8s_status(405, "method POST not allowed", "MethodNotAllowed")

        def route_patch(self, auth, path, content_type, body):
            node_prefix = "/api/v1/nodes/"
            if auth in ("none", "bad-token"):
                return 401, k8s_status(401, "Unauthorized", "Unauthorized")
            ev = events_route(path)
            if ev and ev[1]:
                with state.lock:
                    return extra.patch_event(ev[0], ev[1], content_type, body)
            if not path.startswith(node_prefix) or "/" in path[len(node_prefix):]:
                return 404, k8s_status(404, "the server could not find the requested resource", "NotFound")
            name = path[len(node_prefix):]
            media = (content_type or "").split(";")[0].strip().lower()
            if media not in ("application/merge-patch+json", "application/strategic-merge-patch+json"):
                return 415, k8s_status(415, f"the body of the request was in an unknown format - accepted media types "
                                            f"include: application/merge-patch+json, "
                                            f"application/strategic-merge-patch+json", "UnsupportedMediaType")
            try:
                patch = json.loads(body)
            except ValueError as e:
                return 400, k8s_status(400, f"error decoding patch: {e}", "BadRequest")
            if not isinstance(patch, dict):
                return 400, k8s_status(400, "the patch is not a JSON object", "BadRequest")
            with state.lock:
                state.sync()
                obj = state.objects.get(name)
                if obj is None:
                    return 404, k8s_status(404, f"nodes \"{name}\" not found", "NotFound")
                new = merge_patch(obj, patch)
                md = new.get("metadata")
                if not isinstance(md, dict) or md.get("name") != name:
                    return 422, k8s_status(422, "metadata.name: the name of the object cannot change", "Invalid")
                for k in ("labels", "annotations"):
                    if not isinstance(md.get(k, {}), dict):
                        return 422, k8s_status(422, f"metadata.{k}: must be an object", "Invalid")
                md.setdefault("labels", {})
                md.setdefault("annotations", {})
                md["resourceVersion"] = state.bump()
                state.objects[name] = new
                self.changed = True   # saved once the request is logged: a test that sees it finds the log
                return 200, state.served(new)

        # --- WATCH streams ---
        def chunk(self, data):
            self.wfile.write(b"%x\r\n" % len(data) + data + b"\r\n")
            self.wfile.flush()

        def client_gone(self, seconds):
            """Waits up to `seconds`; true when the client closed (or sent something)."""
            r, _, _ = select.select([self.connection], [], [], seconds)
            return bool(r)

        def stream_watch(self, from_rv, script, timeout):
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Transfer-Encoding", "chunked")
            self.end_headers()
            self.wfile.flush()
            if script is None:   # nothing scripted: silent until the time-out, as an idle watch
                end = time.monotonic() + timeout
                while time.monotonic() < end:
                    if self.client_gone(min(0.2, max(0.0, end - time.monotonic()))):
                        self.close_connection = True
                        return
                self.chunk_end()
                return
            split, join, joined = False, 0, b""
            for entry in script:
                if "sleep" in entry:
                    time.sleep(entry["sleep"])
                    continue
                if "bump" in entry:
                    with state.lock:
                        state.bump(int(entry["bump"]))
                        state.save()
                    continue
                if "split" in entry:
                    split = True
                    continue
                if "join" in entry:
                    join, joined = int(entry["join"]), b""
                    continue
                if "raw" in entry:
                    self.chunk(entry["raw"].encode())
                    continue
                if "bookmark" in entry:
                    ev = {"type": "BOOKMARK", "object": {"kind": "Node", "apiVersion": "v1",
                                                         "metadata": {"resourceVersion": str(entry["bookmark"])}}}
                elif "expire" in entry:
                    with state.lock:
                        now = state.rv
                    ev = {"type": "ERROR", "object": k8s_status(
                        410, f"too old resource version: {from_rv or 0} ({now})", "Expired")}
                else:
                    ev = {"type": entry["type"], "object": entry.get("object")}
                line = json.dumps(ev, separators=(",", ":")).encode() + b"\n"
                if join > 0:
                    joined += line
                    join -= 1
                    if join == 0:
                        self.chunk(joined)
                    continue
                if split:
                    half = len(line) // 2
                    self.chunk(line[:half])
                    time.sleep(0.2)   # apart on the wire: the client reads the halves separately
                    self.chunk(line[half:])
                    split = False
                    continue
                self.chunk(line)
            if joined and join > 0:
                self.chunk(joined)
            self.chunk_end()

        def chunk_end(self):
            self.wfile.write(b"0\r\n\r\n")
            self.wfile.flush()

        # --- every method ---
        def handle_any(self):
            method = self.command
            path, query = self.split_target()
            body = self.read_body() if method in ("PATCH", "POST", "PUT") else b""
            auth, token = self.authenticate()
            with state.lock:
                override = state.override_for(method, self.path, query)
            if override is None:
                if method == "GET":
                    status, answer = self.route_get(auth, path, query)
                elif method == "PATCH":
                    status, answer = self.route_patch(auth, path, self.headers.get("Content-Type"), body)
                elif method == "POST":
                    status, answer = self.route_post(auth, path, body)
                else:
                    status, answer = 405, k8s_status(405, f"method {method} not allowed", "MethodNotAllowed")
            else:
                status, answer = override.get("status", 200), override.get("body")
            watching = isinstance(answer, tuple)
            entry = {"at": time.time(), "path": self.path, "method": method, "peer": self.client_address[1],
                     "auth": auth,
                     "status": None if override and "drop" in override else status,
                     "accept": self.headers.get("Accept"), "host": self.headers.get("Host"),
                     "token": token, "sni": getattr(self.connection, "topocni_sni", None), "override": override,
                     "query": query}
            if method != "GET" or body:
                entry.update(contentType=self.headers.get("Content-Type"), bodySize=len(body),
                             body=body[:MAX_LOGGED_BODY].decode("utf-8", "replace"))
            if path == "/api/v1/nodes" and query.get("watch", "false").lower() not in ("0", "false"):
                entry.update(watch=True, resourceVersion=query.get("resourceVersion"))
            if isinstance(answer, dict) and answer.get("kind") == "NodeList":
                entry.update(items=[i["metadata"]["name"] for i in answer["items"]],
                             listResourceVersion=answer["metadata"]["resourceVersion"],
                             continued=bool(answer["metadata"].get("continue")))
            script = None
            if watching:
                with state.lock:
                    script = state.next_watch_script()
                entry["script"] = script
            self.record(entry)
            if getattr(self, "changed", False):
                self.changed = False
                with state.lock:
                    state.save()
            with state.lock:
                extra.save_if_dirty()
            if override is None:
                if watching:
                    try:
                        timeout = min(float(query.get("timeoutSeconds") or 1800), 600.0)
                    except ValueError:
                        timeout = 600.0
                    return self.stream_watch(answer[1], script, timeout)
                return self.reply(status, answer)
            if "drop" in override:   # the request was read: the connection goes, no answer
                self.close_connection = True
                return
            if "hang" in override:
                self.close_connection = True
                time.sleep(override["hang"])   # the request was read; no answer
                return
            if "text" in override:
                data = override["text"].encode()
            else:
                data = json.dumps(answer).encode()
            truncate = override.get("truncate", 0)
            self.send_body(status, data, override.get("contentType", "application/json"), truncate,
                           close=bool(truncate))
            if truncate and override.get("closeNotify"):
                try:
                    self.connection.unwrap()   # TLS close_notify, then the TCP close
                except (OSError, ValueError):
                    pass

        def handle_one_request(self):
            try:
                super().handle_one_request()
            except (BrokenPipeError, ConnectionResetError, ssl.SSLError, socket.timeout):
                self.close_connection = True   # the client went mid-answer (a stopped watch)

        def do_GET(self):
            self.handle_any()

        def do_PATCH(self):
            self.handle_any()

        def do_POST(self):
            self.handle_any()

        def do_PUT(self):
            self.handle_any()

        def do_DELETE(self):
            self.handle_any()

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


# --- An in-process stand-in API for NADs and Nodes (the admission webhook, the publisher's
# extended resources). Kept apart from FakeApiServer, which stays as it is.

TEMPLATES_PATH = "/apis/resource.k8s.io/v1/resourceclaimtemplates"
CLAIMS_PATH = "/apis/resource.k8s.io/v1/resourceclaims"   # LIST, all namespaces
RESOURCE_V1 = "/apis/resource.k8s.io/v1/namespaces/"        # .../<ns>/resourceclaims[/<name>]
NAD_PATH = "/apis/k8s.cni.cncf.io/v1/network-attachment-definitions"
CLONE_NEWNET = 0x40000000


def _setns(fd):
    if hasattr(os, "setns"):
        os.setns(fd, CLONE_NEWNET)
        return
    import ctypes
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.setns(fd, CLONE_NEWNET) != 0:
        err = ctypes.get_errno()
        raise OSError(err, f"setns: {os.strerror(err)}")


def socket_in_netns(ns, family=socket.AF_INET):
    """A TCP socket of the named netns (/run/netns/<ns>): the calling thread enters the netns
    only to make it, then goes back. A socket stays in the netns it was made in, so a
    server in this process can listen on that netns's loopback."""
    own = os.open("/proc/thread-self/ns/net", os.O_RDONLY)
    try:
        target = os.open(f"/run/netns/{ns}", os.O_RDONLY)
        try:
            _setns(target)
            try:
                return socket.socket(family, socket.SOCK_STREAM)
            finally:
                _setns(own)
        finally:
            os.close(target)
    finally:
        os.close(own)


def nad_object(name, config, namespace="default", resource=None, resource_version="1"):
    """A NetworkAttachmentDefinition as the API serves it: `config` (a dict or a string) as
    spec.config, `resource` as the k8s.v1.cni.cncf.io/resourceName annotation."""
    md = {"name": name, "namespace": namespace, "uid": f"uid-nad-{namespace}-{name}",
          "resourceVersion": str(resource_version), "generation": 1}
    if resource:
        md["annotations"] = {"k8s.v1.cni.cncf.io/resourceName": resource}
    return {"apiVersion": "k8s.cni.cncf.io/v1", "kind": "NetworkAttachmentDefinition", "metadata": md,
            "spec": {"config": config if isinstance(config, str) else json.dumps(config)}}


# The fields of a resource.k8s.io/v1 DeviceRequestAllocationResult (k8s.io/api resource/v1
# types.go, json tags), so that allocated_claim() refuses a misspelt one; skipNodeOperations
# is newer than v0.36 (alpha, DRAOptionalNodeOperations).
ALLOCATION_RESULT_FIELDS = {"request", "driver", "pool", "device", "adminAccess", "tolerations", "bindingConditions",
                            "bindingFailureConditions", "shareID", "consumedCapacity", "skipNodeOperations"}
DEFAULT_DEVICE_CLASS = "vf.topocni.io"


def allocated_claim(ns, name, node, results, reserved_for_pods, annotations=None, requests=None, uid=None):
    """A resource.k8s.io/v1 ResourceClaim as the scheduler leaves it once it allocated and
    reserved it (the json names of k8s.io/api resource/v1 ResourceClaim):

    results: the DeviceRequestAllocationResults, each {request, driver, pool, device} and,
        for a share of a device that allows multiple allocations, shareID and
        consumedCapacity ({capacity name: quantity}); an unknown key is a ValueError.
    node: the node of the allocation (status.allocation.nodeSelector, matchFields
        metadata.name In [node], as for node-local devices); None leaves nodeSelector out.
    reserved_for_pods: the pods in status.reservedFor, each a Pod object or (name, uid);
        core objects: apiGroup left out, resource "pods".
    requests: spec.devices.requests; None: one per request name the results use, of class
        DEFAULT_DEVICE_CLASS, ExactCount with count = its number of results. Else a list of
        DeviceRequests given whole (with "exactly" or "firstAvailable"), or short ones
        {name, deviceClassName?, count?, capacity?} where capacity is
        exactly.capacity.requests ({capacity name: quantity}).
    """
    results = json.loads(json.dumps(list(results)))
    for r in results:
        unknown = set(r) - ALLOCATION_RESULT_FIELDS
        if unknown or not all(r.get(k) for k in ("request", "driver", "pool", "device")):
            raise ValueError(f"not a DeviceRequestAllocationResult: {r!r} (unknown {sorted(unknown)})")
    if requests is None:
        counts = {}
        for r in results:
            counts[r["request"]] = counts.get(r["request"], 0) + 1
        requests = [{"name": n, "count": c} for n, c in counts.items()]
    spec_requests = []
    for q in requests:
        if "exactly" in q or "firstAvailable" in q:
            spec_requests.append(json.loads(json.dumps(q)))
            continue
        exactly = {"deviceClassName": q.get("deviceClassName", DEFAULT_DEVICE_CLASS), "allocationMode": "ExactCount",
                   "count": q.get("count", 1)}
        if q.get("capacity"):
            exactly["capacity"] = {"requests": dict(q["capacity"])}
        spec_requests.append({"name": q["name"], "exactly": exactly})
    reserved = []
    for p in reserved_for_pods:
        pname, puid = (p["metadata"]["name"], p["metadata"]["uid"]) if isinstance(p, dict) else p
        reserved.append({"resource": "pods", "name": pname, "uid": puid})
    allocation = {"devices": {"results": results}}
    if node is not None:
        allocation["nodeSelector"] = {"nodeSelectorTerms": [
            {"matchFields": [{"key": "metadata.name", "operator": "In", "values": [node]}]}]}
    md = {"name": name, "namespace": ns, "uid": uid or str(uuid.uuid4())}
    if annotations:
        md["annotations"] = dict(annotations)
    status = {"allocation": allocation}
    if reserved:
        status["reservedFor"] = reserved
    return {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim", "metadata": md,
            "spec": {"devices": {"requests": spec_requests}}, "status": status}


# --- ClusterApi's authentication and nodes/status validation, as the API server's ---

DEFAULT_TOKEN = "t"   # the token ClusterApi accepts when a test names none (test_extender's kubeconfigs carry it)

# The API server's answer to a request it cannot authenticate: no token, or one it does not know
# (apiserver pkg/endpoints/filters/authentication.go: Unauthorized -> apierrors.NewUnauthorized("Unauthorized")).
UNAUTHORIZED = k8s_status(401, "Unauthorized", "Unauthorized")


def bearer_token(header):
    """The token of an `Authorization: Bearer <token>` header, else None."""
    scheme, _, token = (header or "").strip().partition(" ")
    if scheme.lower() != "bearer" or not token.strip():
        return None
    return token.strip()


# apimachinery pkg/util/validation/validation.go: IsQualifiedName.
_NAME_PART = re.compile(r"^([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]$")
_DNS1123_SUBDOMAIN = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")


def is_qualified_name(value):
    prefix, slash, name = value.rpartition("/")
    if slash and (not prefix or len(prefix) > 253 or not _DNS1123_SUBDOMAIN.match(prefix)):
        return False
    if value.count("/") > 1:
        return False
    return 0 < len(name) <= 63 and bool(_NAME_PART.match(name))


def is_extended_resource_name(name):
    """kubernetes pkg/apis/core/helper/helpers.go IsExtendedResourceName: not native (it has a
    domain, not *kubernetes.io/), not "requests."-prefixed, and "requests.<name>" is a
    qualified name."""
    native = "/" not in name or "kubernetes.io/" in name
    return not native and not name.startswith("requests.") and is_qualified_name("requests." + name)


# helpers.go integerResources: the standard resources counted in whole units.
_INTEGER_RESOURCES = {"pods", "quotas", "services", "replicationcontrollers", "secrets", "configmaps",
                      "persistentvolumeclaims", "services.nodeports", "services.loadbalancers"}

# apimachinery pkg/api/resource/quantity.go: the serialization format of a Quantity.
_QUANTITY = re.compile(r"^([+-]?)([0-9]+(?:\.[0-9]*)?|\.[0-9]+)"
                       r"(Ki|Mi|Gi|Ti|Pi|Ei|m|k|M|G|T|P|E|[eE][+-]?[0-9]+)?$")
_SUFFIX = {"": 0, "m": -3, "k": 3, "M": 6, "G": 9, "T": 12, "P": 15, "E": 18}
_BINARY = {"Ki": 10, "Mi": 20, "Gi": 30, "Ti": 40, "Pi": 50, "Ei": 60}


def parse_quantity(value):
    """A Quantity's value (Decimal), or None when `value` is not one. JSON numbers are taken as
    their text, as Quantity.UnmarshalJSON does."""
    from decimal import Decimal
    if isinstance(value, bool) or not isinstance(value, (str, int, float)):
        return None
    m = _QUANTITY.match(str(value).strip())
    if not m:
        return None
    sign, number, suffix = m.group(1), m.group(2), m.group(3) or ""
    amount = Decimal(number) * (-1 if sign == "-" else 1)
    if suffix in _BINARY:
        return amount * (2 ** _BINARY[suffix])
    if suffix[:1] in ("e", "E"):
        return amount.scaleb(int(suffix[1:]))
    return amount.scaleb(_SUFFIX[suffix])


def status_errors(status):
    """What the API server refuses in a Node's status.capacity and status.allocatable
    (kubernetes pkg/apis/core/validation/validation.go ValidateNodeResources, with
    ValidateResourceQuantityValue): a value that is not a quantity (the patched object does
    not decode), a negative one, and one that is not whole for an integer resource (an
    extended resource name or a standard count). It judges no name by itself: a name that is
    not an extended resource name is stored, and a pod could never request it.
    [(field, value, message)], empty when the status is valid."""
    import math
    errors = []
    for kind in ("capacity", "allocatable"):
        for name, value in (status.get(kind) or {}).items():
            field = f"status.{kind}.{name}"
            q = parse_quantity(value)
            if q is None:
                errors.append((field, value, "quantities must match the regular expression "
                                             "'^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$'"))
                continue
            if q < 0:
                errors.append((field, value, "must be greater than or equal to 0"))
            # MilliValue() rounds up; a whole number of units is a multiple of 1000 milli.
            if (name in _INTEGER_RESOURCES or is_extended_resource_name(name)) and math.ceil(q * 1000) % 1000:
                errors.append((field, value, "must be an integer"))
    return errors


def invalid_status(kind, name, errors):
    """The 422 Status of apierrors.NewInvalid: one cause per field error."""
    causes = [{"reason": "FieldValueInvalid", "message": f"Invalid value: {json.dumps(v)}: {msg}", "field": f}
              for f, v, msg in errors]
    body = k8s_status(422, f'{kind} "{name}" is invalid: ' +
                      ", ".join(f"{c['field']}: {c['message']}" for c in causes), "Invalid")
    body["details"] = {"name": name, "kind": kind, "causes": causes}
    return body


class ClusterApi:
    """An HTTPS API server in this process (HTTP/1.1, keep-alive) with NADs and Nodes that
    a test changes while clients watch, the way the API server does:

      GET   /apis/k8s.cni.cncf.io/v1/network-attachment-definitions   LIST (one page), or
            WATCH with ?watch=1&resourceVersion=RV: every change after RV as an event line
      GET   /apis/k8s.cni.cncf.io/v1/namespaces/<ns>/network-attachment-definitions/<n>
      GET   /api/v1/nodes[?fieldSelector=metadata.name%3D<n>]   LIST or WATCH, as above
      GET   /api/v1/nodes/<n>
      GET   /api/v1/pods[?fieldSelector=status.phase%3D<phase>]   LIST or WATCH, as above
      GET   /api/v1/namespaces/<ns>/pods/<n>   the Pod as put_pod() gave it (status and all:
            status.resourceClaimStatuses round-trips), or the API server's 404
      GET   /apis/resource.k8s.io/v1/namespaces/<ns>/resourceclaims/<n>   a ResourceClaim
            (put_claim; allocated_claim() builds an allocated one), or the API server's 404
      GET   /apis/resource.k8s.io/v1[/namespaces/<ns>]/resourceclaims[?fieldSelector=
            metadata.name%3D<n>|metadata.namespace%3D<ns>]   LIST or WATCH, as above
      GET   /apis/resource.k8s.io/v1/resourceslices[?fieldSelector=spec.nodeName%3D<n>%2C
            spec.driver%3D<d>]   LIST or WATCH (resourceslices.py: also POST, PUT, DELETE)
      PATCH /api/v1/nodes/<n>          application/merge-patch+json
      PATCH /api/v1/nodes/<n>/status   application/json-patch+json (RFC 6902, applied by
            jsonpatch_apply; an operation that does not apply: 422, nothing changes); only
            the status of the result is kept, as for the status subresource
    Every change (by a test or a PATCH) bumps the resourceVersion and becomes an ADDED,
    MODIFIED or DELETED event. `requests` logs every request: method, path, content type,
    body (parsed JSON when it is), status. fail(prefix, status) makes requests whose path
    starts with `prefix` get that status and a Status object. With `netns`, it listens on
    that netns's loopback (socket_in_netns); with `pki` None it speaks plain HTTP (the
    bench and the demo); stop() also closes every open connection.

    Authentication, as the API server's: every request must carry `Authorization: Bearer
    <token>` with `token` (one token or a list of them; the one the test's kubeconfig
    gives the binary), else 401 with the Status the API server sends, before anything else
    is looked at. Each logged request says which token it carried ("token", None for none).
    Validation of a nodes/status PATCH, as the API server's (status_errors below).
    """

    def __init__(self, pki, netns=None, host="127.0.0.1", token=DEFAULT_TOKEN):
        self.tokens = {token} if isinstance(token, str) else set(token)
        self.cond = threading.Condition()
        self.rv = 100
        self.nads, self.nodes, self.pods, self.slices = {}, {}, {}, {}   # slices: resourceslices.py
        # False: an API server before 1.36 (DRAConsumableCapacity off), which drops the
        # fields of shared devices from a slice on write.
        self.consumable_capacity = True
        self.templates = {}   # resource.k8s.io/v1 ResourceClaimTemplates, "namespace/name"
        self.claims = {}      # resource.k8s.io/v1 ResourceClaims, "namespace/name"
        # (rv, "nads" | "nodes" | "pods" | "slices" | "templates" | "claims", type, object,
        #  the object before or None)
        self.history = []
        self.requests = []
        self.failing = {}        # path prefix -> status
        self.holding = {}        # path prefix -> threading.Event set at release (hold())
        self.held_now = {}       # path prefix -> requests waiting under it now
        # The same after the request took effect (its events are out to every watch) and
        # before its answer is sent (hold_answers()).
        self.holding_answers, self.answers_held_now = {}, {}
        self.delivered = {}      # kind -> the newest resourceVersion a WATCH has written out
        # Watch faults (expire_watches, drop_watches, outage, too_large_lists): kind -> count
        # of times the open WATCHes were told to end; kinds whose every WATCH gets a 410.
        self.expired, self.dropped, self.expire_every = {}, {}, set()
        self.down = False
        self.too_large = {}      # kind -> LISTs at a resourceVersion still to refuse with a 504
        self.stopping = False
        self.connections = set()
        api = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *a):
                pass

            def setup(self):
                super().setup()
                # As Go's net/http (the API server) does: the headers and the body go out as
                # two writes, and Nagle would hold the body for the client's delayed ACK (40 ms).
                if self.connection.family in (socket.AF_INET, socket.AF_INET6):
                    self.connection.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
                with api.cond:
                    api.connections.add(self.connection)

            def finish(self):
                with api.cond:
                    api.connections.discard(self.connection)
                try:
                    super().finish()
                except (OSError, ValueError):
                    pass

            def handle_one_request(self):
                try:
                    super().handle_one_request()
                except (BrokenPipeError, ConnectionResetError, ssl.SSLError, socket.timeout, OSError):
                    self.close_connection = True

            def reply(self, status, body):
                data = json.dumps(body).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)
                self.wfile.flush()

            def handle_any(self):
                path, _, q = self.path.partition("?")
                query = {k: v[-1] for k, v in urllib.parse.parse_qs(q, keep_blank_values=True).items()}
                n = int(self.headers.get("Content-Length") or 0)
                raw = self.rfile.read(n) if n > 0 else b""
                try:
                    body = json.loads(raw) if raw else None
                except ValueError:
                    body = raw.decode("utf-8", "replace")
                token = bearer_token(self.headers.get("Authorization"))
                entry = {"method": self.command, "path": path, "query": query, "token": token,
                         "contentType": self.headers.get("Content-Type"), "body": body, "at": time.time()}
                if api.down:   # the API is away: the request is read, the connection closed
                    entry.update(status=None, outage=True)
                    with api.cond:
                        api.requests.append(entry)
                    self.close_connection = True
                    return
                if token in api.tokens:
                    api.wait_if_held(path)
                    status, answer = api._fault(self.command, path, query) or \
                        api.route(self.command, path, query, self.headers.get("Content-Type"), body)
                    if not isinstance(answer, tuple):
                        api.wait_if_held(path, api.holding_answers, api.answers_held_now)
                else:   # authentication comes first in the API server's handler chain
                    status, answer = 401, UNAUTHORIZED
                entry["status"] = status
                with api.cond:
                    api.requests.append(entry)
                if isinstance(answer, tuple):   # ("watch", kind, from_rv, keep)
                    return self.watch(*answer[1:], timeout=float(query.get("timeoutSeconds") or 300))
                self.reply(status, answer)

            do_GET = do_PATCH = do_POST = do_PUT = do_DELETE = handle_any

            def chunk(self, data):
                self.wfile.write(b"%x\r\n" % len(data) + data + b"\r\n")
                self.wfile.flush()

            def watch(self, kind, from_rv, keep, timeout):
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Transfer-Encoding", "chunked")
                self.end_headers()
                self.wfile.flush()
                end, seen = time.monotonic() + min(timeout, 300), 0
                with api.cond:
                    expired, dropped = api.expired.get(kind, 0), api.dropped.get(kind, 0)
                    expire_now = kind in api.expire_every
                while True:
                    with api.cond:
                        expire_now = expire_now or api.expired.get(kind, 0) != expired
                        drop_now = api.dropped.get(kind, 0) != dropped or api.down
                    if drop_now:   # the connection goes mid-stream, without the last chunk
                        self.close_connection = True
                        try:
                            self.connection.shutdown(socket.SHUT_RDWR)
                        except OSError:
                            pass
                        return
                    if expire_now:   # as the API server says it: an ERROR event, then the end
                        event = {"type": "ERROR", "object": k8s_status(
                            410, f"too old resource version: {from_rv} ({api.rv})", "Expired")}
                        self.chunk(json.dumps(event, separators=(",", ":")).encode() + b"\n")
                        break
                    with api.cond:
                        if seen == len(api.history) and not api.stopping:
                            api.cond.wait(0.2)
                        fresh, seen = api.history[seen:], len(api.history)
                        stopping = api.stopping
                    for rv, k, typ, obj, old in fresh:
                        if k != kind or rv <= from_rv:
                            continue
                        # As the API server's watch cache does for a selector: an object that
                        # comes to match is ADDED, one that stops matching is DELETED (its last
                        # matching content, at the event's resourceVersion).
                        now = typ != "DELETED" and keep(obj)
                        was = old is not None and keep(old)
                        if now:
                            event = {"type": "MODIFIED" if was else "ADDED", "object": obj}
                        elif was:
                            gone = dict(old, metadata=dict(old["metadata"], resourceVersion=str(rv)))
                            event = {"type": "DELETED", "object": gone}
                        else:
                            continue
                        self.chunk(json.dumps(event, separators=(",", ":")).encode() + b"\n")
                        with api.cond:
                            api.delivered[kind] = max(api.delivered.get(kind, 0), rv)
                    if stopping or time.monotonic() > end:
                        break
                    r, _, _ = select.select([self.connection], [], [], 0)
                    if r:   # the client closed (or spoke): the watch is over
                        self.close_connection = True
                        return
                self.wfile.write(b"0\r\n\r\n")
                self.wfile.flush()

        class Server(ThreadingHTTPServer):
            daemon_threads = True

        if netns:
            server = Server((host, 0), Handler, bind_and_activate=False)
            server.socket.close()
            server.socket = socket_in_netns(netns)
            server.server_bind()
            server.server_activate()
        else:
            server = Server((host, 0), Handler)
        if pki:
            ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
            ctx.load_cert_chain(os.path.join(pki, "server.crt"), os.path.join(pki, "server.key"))
            server.socket = ctx.wrap_socket(server.socket, server_side=True)
        self.scheme = "https" if pki else "http"
        self.server = server
        self.host, self.port = host, server.server_address[1]
        self.thread = threading.Thread(target=server.serve_forever, daemon=True)
        self.thread.start()

    def url(self):
        return f"{self.scheme}://{self.host}:{self.port}"

    # --- what a test changes ---
    def _changed(self, kind, typ, obj, old=None):
        """Under the lock: a new resourceVersion on `obj`, and its event; `old` is the version
        it replaces (a DELETED event's is the object itself)."""
        self.rv += 1
        if typ == "DELETED":
            old = obj
        obj["metadata"]["resourceVersion"] = str(self.rv)
        self.history.append((self.rv, kind, typ, json.loads(json.dumps(obj)),
                             json.loads(json.dumps(old)) if old is not None else None))
        self.cond.notify_all()

    def _store(self, kind):
        return {"nodes": self.nodes, "nads": self.nads, "pods": self.pods, "slices": self.slices,
                "templates": self.templates, "claims": self.claims}[kind]

    @staticmethod
    def _key(kind, obj):
        md = obj["metadata"]
        return md["name"] if kind in ("nodes", "slices") else f"{md['namespace']}/{md['name']}"

    def _put(self, kind, obj):
        """Under the lock: a copy of `obj` made, or replacing the one of its key, and its event."""
        obj = json.loads(json.dumps(obj))
        store, key = self._store(kind), self._key(kind, obj)
        old = store.get(key)
        store[key] = obj
        self._changed(kind, "MODIFIED" if old else "ADDED", obj, old)

    def put_nad(self, nad):
        with self.cond:
            self._put("nads", nad)

    def delete_nad(self, namespace, name):
        with self.cond:
            nad = self.nads.pop(f"{namespace}/{name}")
            self._changed("nads", "DELETED", nad)

    def put_node(self, node):
        """A Node made or replaced as a whole (kubelet re-registering: a recreated Node)."""
        with self.cond:
            self._put("nodes", node)

    def put_pod(self, pod):
        with self.cond:
            self._put("pods", pod)

    def put_claim(self, claim):
        """A ResourceClaim made or replaced as a whole (its metadata.namespace says where).
        As the API server: a uid (uuid4) and a creationTimestamp when it has none (a
        replacement keeps those of the one it replaces), a new resourceVersion, an ADDED or
        MODIFIED event. Returns the stored copy."""
        with self.cond:
            obj = json.loads(json.dumps(claim))
            obj.setdefault("apiVersion", "resource.k8s.io/v1")
            obj.setdefault("kind", "ResourceClaim")
            md = obj.setdefault("metadata", {})
            old = self.claims.get(f"{md['namespace']}/{md['name']}")
            was = (old or {}).get("metadata", {})
            md.setdefault("uid", was.get("uid") or str(uuid.uuid4()))
            md.setdefault("creationTimestamp", was.get("creationTimestamp") or
                          time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()))
            self._put("claims", obj)
            return json.loads(json.dumps(self.claims[f"{md['namespace']}/{md['name']}"]))

    def delete_claim(self, namespace, name):
        """The ResourceClaim gone (a DELETED event); KeyError when there is none."""
        with self.cond:
            claim = self.claims.pop(f"{namespace}/{name}")
            self._changed("claims", "DELETED", claim)
            return json.loads(json.dumps(claim))

    def claim(self, namespace, name):
        with self.cond:
            c = self.claims.get(f"{namespace}/{name}")
            return json.loads(json.dumps(c)) if c is not None else None

    def replace(self, nodes=(), nads=(), pods=()):
        """The cluster becomes exactly these objects: what is not among them is DELETED."""
        with self.cond:
            for kind, new in (("nodes", nodes), ("nads", nads), ("pods", pods)):
                store = self._store(kind)
                keep = {self._key(kind, o) for o in new}
                for k in [k for k in store if k not in keep]:
                    self._changed(kind, "DELETED", store.pop(k))
                for o in new:
                    self._put(kind, o)

    def node(self, name):
        with self.cond:
            n = self.nodes.get(name)
            return json.loads(json.dumps(n)) if n is not None else None

    # --- watch faults ---
    KINDS = {NAD_PATH: "nads", "/api/v1/nodes": "nodes", "/api/v1/pods": "pods"}

    def expire_watches(self, kinds=("nads", "nodes", "pods"), every=None):
        """The open WATCHes of `kinds` get an ERROR event with a 410 Status (their version
        is too old) and end. every=True: so does every WATCH of them from now on (a 410
        storm), until expire_watches(kinds, every=False)."""
        with self.cond:
            for k in kinds:
                self.expired[k] = self.expired.get(k, 0) + 1
                if every:
                    self.expire_every.add(k)
                elif every is False:
                    self.expire_every.discard(k)
            self.cond.notify_all()

    def drop_watches(self, kinds=("nads", "nodes", "pods")):
        """The open WATCHes of `kinds` lose their connection mid-stream (no last chunk)."""
        with self.cond:
            for k in kinds:
                self.dropped[k] = self.dropped.get(k, 0) + 1
            self.cond.notify_all()

    def outage(self, down):
        """down=True: the API is away: open WATCHes lose their connection, and every request
        is read and its connection closed without an answer (logged with "outage": True),
        until outage(False). The objects and their versions stay."""
        with self.cond:
            self.down = down
            self.cond.notify_all()

    def too_large_lists(self, kind, times=1):
        """The next `times` LISTs of `kind` that ask for a resourceVersion other than "" and
        "0" get the API server's 504 "Too large resource version"."""
        with self.cond:
            self.too_large[kind] = times

    def _fault(self, method, path, query):
        """(status, Status) for a LIST too_large_lists() refuses, else None."""
        kind = self.KINDS.get(path)
        watch = query.get("watch", "false").lower() not in ("0", "false")
        rv = query.get("resourceVersion", "")
        with self.cond:
            if method != "GET" or kind is None or watch or rv in ("", "0") or not self.too_large.get(kind):
                return None
            self.too_large[kind] -= 1
            return 504, too_large_status(rv, self.rv)

    def lists(self, path):
        """The LIST requests of `path` so far (not WATCHes), as logged."""
        return [r for r in self.logged("GET", path) if r["query"].get("watch") in (None, "0", "false")]

    def watches(self, path):
        """The WATCH requests of `path` so far, as logged."""
        return [r for r in self.logged("GET", path) if r["query"].get("watch") not in (None, "0", "false")]

    def fail(self, prefix, status):
        with self.cond:
            if status is None:
                self.failing.pop(prefix, None)
            else:
                self.failing[prefix] = status

    def hold(self, prefix):
        """Requests whose path starts with `prefix` wait, unanswered, until release(prefix)
        (an API slow to answer a first LIST, or a GET); at most 120 s, or until stop()."""
        with self.cond:
            self.holding.setdefault(prefix, threading.Event())

    def delivered_to_watches(self, kind):
        """The newest resourceVersion of `kind` that a WATCH has sent to its client."""
        with self.cond:
            return self.delivered.get(kind, 0)

    def hold_answers(self, prefix):
        """Requests whose path starts with `prefix` take effect (a watch sees their events at
        once) but their answers wait until release(prefix): a client whose watch is ahead of
        its own write's answer, as it can be with a real API server."""
        with self.cond:
            self.holding_answers.setdefault(prefix, threading.Event())

    def release(self, prefix):
        with self.cond:
            held = [t.pop(prefix, None) for t in (self.holding, self.holding_answers)]
        for e in held:
            if e:
                e.set()

    def held(self, prefix):
        """How many requests under `prefix` wait now (before taking effect or before their
        answers)."""
        with self.cond:
            return self.held_now.get(prefix, 0) + self.answers_held_now.get(prefix, 0)

    def wait_if_held(self, path, holding=None, held_now=None):
        holding = self.holding if holding is None else holding
        held_now = self.held_now if held_now is None else held_now
        with self.cond:
            held = [(p, e) for p, e in holding.items() if path.startswith(p)]
            for p, _ in held:
                held_now[p] = held_now.get(p, 0) + 1
        try:
            for _, e in held:
                deadline = time.monotonic() + 120
                while not e.wait(0.2) and not self.stopping and time.monotonic() < deadline:
                    pass
        finally:
            with self.cond:
                for p, _ in held:
                    held_now[p] -= 1

    def logged(self, method=None, path=None):
        with self.cond:
            return [r for r in self.requests
                    if (method is None or r["method"] == method) and (path is None or r["path"] == path)]

    def forget_requests(self):
        with self.cond:
            self.requests.clear()

    def watching(self, path):
        """True once a WATCH of `path` has been asked for."""
        with self.cond:
            return any(r["path"] == path and r["query"].get("watch") not in (None, "0", "false")
                       for r in self.requests)

    # --- the routes ---
    def route(self, method, path, query, content_type, body):
        with self.cond:
            for prefix, status in self.failing.items():
                if path.startswith(prefix):
                    return status, k8s_status(status, "the stand-in API was told to fail", "InternalError")
        watch = query.get("watch", "false").lower() not in ("0", "false")
        nad_prefix = "/apis/k8s.cni.cncf.io/v1/namespaces/"
        if method == "GET" and path == NAD_PATH:
            if watch:
                return 200, ("watch", "nads", int(query.get("resourceVersion") or 0), lambda obj: True)
            with self.cond:
                items = [self.nads[k] for k in sorted(self.nads)]
                return 200, {"apiVersion": "k8s.cni.cncf.io/v1", "kind": "NetworkAttachmentDefinitionList",
                             "metadata": {"resourceVersion": str(self.rv)}, "items": json.loads(json.dumps(items))}
        if method == "GET" and path.startswith(nad_prefix):
            parts = path[len(nad_prefix):].split("/")
            if len(parts) == 3 and parts[1] == "network-attachment-definitions":
                with self.cond:
                    nad = self.nads.get(f"{parts[0]}/{parts[2]}")
                    if nad is None:
                        return 404, k8s_status(404, f'network-attachment-definitions.k8s.cni.cncf.io "{parts[2]}" '
                                                    f'not found', "NotFound")
                    return 200, json.loads(json.dumps(nad))
        if method == "GET" and path == "/api/v1/nodes":
            name = ""
            sel = query.get("fieldSelector", "")
            if sel:
                if not sel.startswith("metadata.name="):
                    return 400, k8s_status(400, f"field selector {sel!r} not supported here", "BadRequest")
                name = sel[len("metadata.name="):]
            keep = lambda obj: not name or obj["metadata"]["name"] == name   # noqa: E731
            if watch:
                return 200, ("watch", "nodes", int(query.get("resourceVersion") or 0), keep)
            with self.cond:
                items = [self.nodes[n] for n in sorted(self.nodes) if keep(self.nodes[n])]
                return 200, {"apiVersion": "v1", "kind": "NodeList", "metadata": {"resourceVersion": str(self.rv)},
                             "items": json.loads(json.dumps(items))}
        if method == "GET" and path == "/api/v1/pods":
            sel = query.get("fieldSelector", "")
            if sel and not sel.startswith("status.phase="):
                return 400, k8s_status(400, f"field selector {sel!r} not supported here", "BadRequest")
            phase = sel[len("status.phase="):]
            keep = lambda obj: not phase or obj.get("status", {}).get("phase") == phase   # noqa: E731
            if watch:
                return 200, ("watch", "pods", int(query.get("resourceVersion") or 0), keep)
            with self.cond:
                items = [self.pods[k] for k in sorted(self.pods) if keep(self.pods[k])]
                return 200, {"apiVersion": "v1", "kind": "PodList", "metadata": {"resourceVersion": str(self.rv)},
                             "items": json.loads(json.dumps(items))}
        if method == "GET" and path == TEMPLATES_PATH:
            if watch:
                return 200, ("watch", "templates", int(query.get("resourceVersion") or 0), lambda obj: True)
            with self.cond:
                items = [self.templates[k] for k in sorted(self.templates)]
                return 200, {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaimTemplateList",
                             "metadata": {"resourceVersion": str(self.rv)}, "items": json.loads(json.dumps(items))}
        if method == "POST" and path.startswith("/apis/resource.k8s.io/v1/namespaces/") and \
                path.endswith("/resourceclaimtemplates"):
            ns = path.split("/")[5]
            if not isinstance(body, dict) or body.get("kind") != "ResourceClaimTemplate":
                return 400, k8s_status(400, "the body is no ResourceClaimTemplate", "BadRequest")
            md = body.get("metadata") or {}
            if md.get("namespace", ns) != ns:
                return 400, k8s_status(400, "the namespace of the provided object does not match the namespace "
                                            "sent on the request", "BadRequest")
            spec = (body.get("spec") or {}).get("spec") or {}
            if not ((spec.get("devices") or {}).get("requests")):
                return 422, k8s_status(422, "spec.spec.devices.requests: Required value", "Invalid")
            with self.cond:
                if f"{ns}/{md.get('name')}" in self.templates:
                    return 409, k8s_status(409, f'resourceclaimtemplates.resource.k8s.io "{md.get("name")}" already '
                                                f'exists', "AlreadyExists")
                obj = json.loads(json.dumps(body))
                obj["metadata"]["namespace"] = ns
                self._put("templates", obj)
                return 201, json.loads(json.dumps(self.templates[f"{ns}/{md.get('name')}"]))
        if method == "GET" and path.startswith("/api/v1/namespaces/"):
            parts = path[len("/api/v1/namespaces/"):].split("/")
            if len(parts) == 3 and parts[1] == "pods" and parts[2]:
                with self.cond:
                    pod = self.pods.get(f"{parts[0]}/{parts[2]}")
                    if pod is None:
                        return 404, not_found_status("pods", parts[2])
                    return 200, json.loads(json.dumps(pod))
        if method == "GET" and (path == CLAIMS_PATH or path.startswith(RESOURCE_V1)):
            parts = [] if path == CLAIMS_PATH else path[len(RESOURCE_V1):].split("/")
            if path == CLAIMS_PATH or (len(parts) in (2, 3) and parts[1] == "resourceclaims" and parts[-1]):
                return self.route_claims(parts[0] if parts else None, parts[2] if len(parts) == 3 else None,
                                         query, watch)
        if path == resourceslices.PATH or path.startswith(resourceslices.PATH + "/"):
            return self.route_slices(method, path[len(resourceslices.PATH):].strip("/"), query, body, watch)
        if path.startswith("/api/v1/nodes/"):
            rest = path[len("/api/v1/nodes/"):].split("/")
            name, sub = rest[0], "/".join(rest[1:])
            with self.cond:
                node = self.nodes.get(name)
                if node is None:
                    return 404, k8s_status(404, f'nodes "{name}" not found', "NotFound")
                if method == "GET" and sub == "":
                    return 200, json.loads(json.dumps(node))
                if method == "PATCH":
                    return self.patch_node(node, sub, (content_type or "").split(";")[0].strip(), body)
        return 404, k8s_status(404, "the server could not find the requested resource", "NotFound")

    def route_claims(self, namespace, name, query, watch):
        """GET of resource.k8s.io/v1 ResourceClaims: one (namespace and name), or a LIST or
        WATCH of a namespace's (name None) or of all (namespace None too)."""
        if name is not None:
            with self.cond:
                claim = self.claims.get(f"{namespace}/{name}")
                if claim is None:
                    return 404, not_found_status("resourceclaims", name, "resource.k8s.io")
                return 200, json.loads(json.dumps(claim))
        want = [("metadata.namespace", namespace)] if namespace is not None else []
        for term in filter(None, query.get("fieldSelector", "").split(",")):
            k, eq, v = term.partition("=")
            if not eq or k not in ("metadata.name", "metadata.namespace"):
                return 400, k8s_status(400, f"field label not supported: {k}", "BadRequest")
            want.append((k, v))

        def keep(obj):
            md = obj["metadata"]
            return all({"metadata.name": md["name"], "metadata.namespace": md["namespace"]}[k] == v for k, v in want)
        if watch:
            return 200, ("watch", "claims", int(query.get("resourceVersion") or 0), keep)
        with self.cond:
            items = [self.claims[k] for k in sorted(self.claims) if keep(self.claims[k])]
            return 200, {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaimList",
                         "metadata": {"resourceVersion": str(self.rv)}, "items": json.loads(json.dumps(items))}

    def resource_slices(self, node=None):
        """The ResourceSlices in the store (of `node`), by name."""
        with self.cond:
            return {k: json.loads(json.dumps(v)) for k, v in sorted(self.slices.items())
                    if node is None or (v.get("spec") or {}).get("nodeName") == node}

    def route_slices(self, method, name, query, body, watch):
        """resource.k8s.io/v1 ResourceSlices, as resourceslices.py describes them."""
        gone = lambda n: (404, k8s_status(404, f'resourceslices.resource.k8s.io "{n}" not found', "NotFound"))  # noqa: E731
        invalid = lambda n, errs: (422, k8s_status(  # noqa: E731
            422, f'ResourceSlice.resource.k8s.io "{n}" is invalid: ' + "; ".join(errs), "Invalid"))
        if not name and method == "GET":
            keep = resourceslices.field_selector(query)
            if keep is None:
                return 400, k8s_status(400, f"field label not supported: {query.get('fieldSelector')!r}", "BadRequest")
            if watch:
                return 200, ("watch", "slices", int(query.get("resourceVersion") or 0), keep)
            with self.cond:
                items = [self.slices[k] for k in sorted(self.slices) if keep(self.slices[k])]
                return 200, {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceSliceList",
                             "metadata": {"resourceVersion": str(self.rv)}, "items": json.loads(json.dumps(items))}
        if not name and method == "POST":
            if not isinstance(body, dict):
                return 400, k8s_status(400, "the body is no object", "BadRequest")
            n = (body.get("metadata") or {}).get("name", "")
            body = json.loads(json.dumps(body))
            if not self.consumable_capacity:
                resourceslices.drop_disabled_fields(body, None)
            errs = resourceslices.slice_errors(body)
            if errs:
                return invalid(n, errs)
            with self.cond:
                if n in self.slices:
                    return 409, k8s_status(409, f'resourceslices.resource.k8s.io "{n}" already exists', "AlreadyExists")
                obj = json.loads(json.dumps(body))
                obj["metadata"].pop("resourceVersion", None)
                obj["metadata"].update(uid=f"uid-slice-{self.rv + 1}", generation=1)
                self.slices[n] = obj
                self._changed("slices", "ADDED", obj)
                return 201, json.loads(json.dumps(obj))
        with self.cond:
            have = self.slices.get(name)
            if have is None:
                return gone(name)
            if method == "GET":
                return 200, json.loads(json.dumps(have))
            if method == "DELETE":
                del self.slices[name]
                self._changed("slices", "DELETED", have)
                return 200, json.loads(json.dumps(have))
            if method == "PUT":
                if not isinstance(body, dict):
                    return 400, k8s_status(400, "the body is no object", "BadRequest")
                rv = (body.get("metadata") or {}).get("resourceVersion")
                if rv and rv != have["metadata"]["resourceVersion"]:
                    return 409, k8s_status(409, f'Operation cannot be fulfilled on resourceslices.resource.k8s.io '
                                                f'"{name}": the object has been modified', "Conflict")
                body = json.loads(json.dumps(body))
                if not self.consumable_capacity:
                    resourceslices.drop_disabled_fields(body, have)
                errs = resourceslices.slice_errors(body)
                old, new = have.get("spec") or {}, body.get("spec") or {}
                errs += [f"spec.{k}: field is immutable" for k in ("driver", "nodeName")
                         if old.get(k) != new.get(k)]
                if (old.get("pool") or {}).get("name") != (new.get("pool") or {}).get("name"):
                    errs.append("spec.pool.name: field is immutable")
                if errs:
                    return invalid(name, errs)
                obj = json.loads(json.dumps(body))
                obj["metadata"].update(uid=have["metadata"]["uid"],
                                       generation=have["metadata"]["generation"] + (old != new))
                self.slices[name] = obj
                self._changed("slices", "MODIFIED", obj, have)
                return 200, json.loads(json.dumps(obj))
        return 405, k8s_status(405, f"{method} is not allowed here", "MethodNotAllowed")

    def patch_node(self, node, sub, media, body):
        """Under the lock."""
        from jsonpatch_apply import PatchError, apply_patch
        if sub == "" and media == "application/merge-patch+json" and isinstance(body, dict):
            new = merge_patch(node, body)
        elif sub == "status" and media == "application/json-patch+json" and isinstance(body, list):
            try:
                patched = apply_patch(node, body)
            except PatchError as e:
                return 422, k8s_status(422, f"the JSON patch does not apply: {e}", "Invalid")
            new = json.loads(json.dumps(node))
            new["status"] = patched.get("status", {})
            errors = status_errors(new["status"])
            if errors:
                return 422, invalid_status("Node", node["metadata"]["name"], errors)
        else:
            return 415, k8s_status(415, f"{media} is not accepted for nodes/{sub}", "UnsupportedMediaType")
        name = node["metadata"]["name"]
        self.nodes[name] = new
        self._changed("nodes", "MODIFIED", new, node)
        return 200, json.loads(json.dumps(new))

    def stop(self):
        with self.cond:
            self.stopping = True
            self.cond.notify_all()
            conns = list(self.connections)
        self.server.shutdown()
        self.server.server_close()
        for c in conns:   # kept-open connections and watches end too: the API is gone
            try:
                c.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass


if __name__ == "__main__":
    ap = argparse.ArgumentParser()
    sub = ap.add_subparsers(dest="cmd", required=True)
    s = sub.add_parser("serve")
    s.add_argument("--pki", required=True)
    s.add_argument("--nodes", required=True)
    s.add_argument("--log", required=True)
    s.add_argument("--pods")
    s.add_argument("--overrides")
    s.add_argument("--watch")
    s.add_argument("--annotations")
    s.add_argument("--state")
    s.add_argument("--events")
    s.add_argument("--host", default="127.0.0.1")
    s.add_argument("--token", action="append")
    s.add_argument("--silent", action="store_true")
    serve(ap.parse_args())
