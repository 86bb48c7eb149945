"""A stand-in for kubelet's side of DRA: the plugin watcher's registration handshake and
the DRA manager's NodePrepareResources / NodeUnprepareResources calls, over the vendored
protos in kubelet/proto. It lets the integration tests drive topocni's kubelet plugin
exactly as a real kubelet would, without a kubelet. Texts kubelet sends or shows (the
NotifyRegistrationStatus errors, the FailedPrepareDynamicResources event) are copied from
kubelet's pkg/kubelet/pluginmanager/operationexecutor, pkg/kubelet/cm/dra/plugin and
pkg/kubelet/cm/dra/manager.go, so that tests can compare them verbatim.
"""
import atexit
import importlib
import os
import shutil
import stat
import subprocess
import sys
import tempfile
import time
import types
from collections.abc import Mapping

import grpc

REPO = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
PROTO_ROOT = os.path.join(REPO, "kubelet", "proto", "pkg", "apis")
PROTOS = ("dra/v1/api.proto", "dra/v1beta1/api.proto", "pluginregistration/v1/api.proto")
PREPARE_TIMEOUT = 45   # kubelet's defaultClientCallTimeout for DRA calls
_stubs = None


def stubs():
    """Generates the Python stubs once per process and imports them.

    protoc names the modules after the proto paths, and the generated *_pb2_grpc files
    import `from dra.v1 import api_pb2`, so the output dir must be a sys.path root. We add
    __init__.py files so these are regular packages: a stray `dra` namespace directory
    elsewhere on sys.path can then neither shadow nor merge with ours.
    """
    global _stubs
    if _stubs is not None:
        return _stubs
    mods = (("dra_v1", "dra.v1"), ("dra_v1beta1", "dra.v1beta1"), ("reg", "pluginregistration.v1"))
    for top in ("dra", "pluginregistration"):
        where = str(getattr(sys.modules.get(top), "__path__", ""))
        if top in sys.modules and "fakekubelet-pb-" not in where:
            raise ImportError(f"another module named {top!r} is imported ({where}); it would hide the stubs")
    if "pluginregistration.v1.api_pb2_grpc" in sys.modules:   # made by another copy of this module
        _stubs = types.SimpleNamespace(**{k + s: sys.modules[m + ".api_pb2" + s] for k, m in mods for s in ("", "_grpc")})
        return _stubs
    protoc = os.environ.get("PROTOC") or shutil.which("protoc")
    plugin = os.environ.get("GRPC_PYTHON_PLUGIN") or shutil.which("grpc_python_plugin")
    if not protoc or not plugin:
        raise RuntimeError("need protoc and grpc_python_plugin (protobuf-compiler, protobuf-compiler-grpc)")
    out = tempfile.mkdtemp(prefix="fakekubelet-pb-")
    atexit.register(shutil.rmtree, out, True)
    subprocess.run([protoc, "-I", PROTO_ROOT, f"--python_out={out}", f"--grpc_out={out}",
                    f"--plugin=protoc-gen-grpc={plugin}", *PROTOS], check=True)
    for pkg in ("dra", "dra/v1", "dra/v1beta1", "pluginregistration", "pluginregistration/v1"):
        open(os.path.join(out, pkg, "__init__.py"), "a").close()
    sys.path.insert(0, out)
    importlib.invalidate_caches()
    ns = {}
    for key, mod in mods:
        pb2 = importlib.import_module(mod + ".api_pb2")
        if not pb2.__file__.startswith(out):
            raise ImportError(f"{mod}.api_pb2 came from {pb2.__file__}, not {out}")
        ns[key] = pb2
        ns[key + "_grpc"] = importlib.import_module(mod + ".api_pb2_grpc")
    _stubs = types.SimpleNamespace(**ns)
    return _stubs


def go_quote(s):
    """Go's %q of a string (strconv.Quote), for kubelet's error texts."""
    esc = {'"': '\\"', "\\": "\\\\", "\a": "\\a", "\b": "\\b", "\f": "\\f",
           "\n": "\\n", "\r": "\\r", "\t": "\\t", "\v": "\\v"}

    def one(ch, o):
        if ch in esc or ch.isprintable():
            return esc.get(ch, ch)
        return f"\\x{o:02x}" if o < 0x80 else f"\\u{o:04x}" if o < 0x10000 else f"\\U{o:08x}"
    return '"' + "".join(one(ch, ord(ch)) for ch in s) + '"'


def go_quote_list(xs):
    """Go's %q of a []string: ["a" "b"]."""
    return "[" + " ".join(go_quote(x) for x in xs) + "]"


class RegistrationError(Exception):
    """The plugin was refused; str(e) is the error kubelet sent in NotifyRegistrationStatus."""


class FakeKubelet:
    """kubelet's plugin watcher plus DRA manager, for one DRA driver."""

    def __init__(self, registry_dir, known_versions=("v1.DRAPlugin", "v1beta1.DRAPlugin"),
                 driver_name="topocni.io"):
        self.registry_dir, self.known_versions, self.driver_name = registry_dir, tuple(known_versions), driver_name
        self.pb = stubs()
        self.info = self.version = self.socket = self.endpoint = None
        self.notifications = []          # (plugin_registered, error) as sent
        self._reg_channel = self._channel = self._dra = None

    def _sockets(self):
        """Unix sockets under registry_dir, skipping dot names, as the plugin watcher does."""
        for root, dirs, files in os.walk(self.registry_dir):
            dirs[:] = sorted(d for d in dirs if not d.startswith("."))
            for f in sorted(files):
                p = os.path.join(root, f)
                try:
                    if not f.startswith(".") and stat.S_ISSOCK(os.lstat(p).st_mode):
                        yield p
                except FileNotFoundError:
                    pass

    def _notify(self, reg, registered, error):
        self.notifications.append((registered, error))
        reg.NotifyRegistrationStatus(self.pb.reg.RegistrationStatus(plugin_registered=registered, error=error),
                                     timeout=1)
        if not registered:
            raise RegistrationError(error)

    def wait_registered(self, timeout=10):
        """Polls for a registration socket, runs kubelet's handshake, dials the endpoint."""
        deadline, last = time.monotonic() + timeout, None
        while time.monotonic() < deadline:
            for sock in self._sockets():
                ch = grpc.insecure_channel("unix:" + sock)
                reg = self.pb.reg_grpc.RegistrationStub(ch)
                try:
                    info = reg.GetInfo(self.pb.reg.InfoRequest(), timeout=1)
                except grpc.RpcError as e:  # not listening yet: kubelet retries too
                    last = e
                    ch.close()
                    continue
                try:
                    self._handshake(reg, sock, info)
                except BaseException:
                    ch.close()
                    raise
                self._reg_channel = ch
                return self
            time.sleep(0.02)
        raise TimeoutError(f"no DRA plugin registered under {self.registry_dir} in {timeout}s (last: {last})")

    def _handshake(self, reg, sock, info):
        self.info, self.socket = info, sock
        if info.type != "DRAPlugin":
            self._notify(reg, False, "RegisterPlugin error -- no handler registered for plugin type: "
                         f"{info.type} at socket {sock}")
        if info.name != self.driver_name:   # kubelet would accept any name; a test must not
            self._notify(reg, False, f"fakekubelet: plugin name {go_quote(info.name)} "
                         f"is not the expected driver {go_quote(self.driver_name)}")
        self.endpoint = info.endpoint or sock
        versions = list(info.supported_versions)
        chosen = next((v for v in versions if v in self.known_versions), None)
        if chosen is None:
            why = ("empty list of supported gRPC services (aka supported versions)" if not versions else
                   f"none of services supported by the plugin ({go_quote_list(versions)}) "
                   f"are supported by the kubelet ({go_quote_list(self.known_versions)})")
            self._notify(reg, False, "RegisterPlugin error -- plugin validation failed with err: invalid supported "
                         f"gRPC versions of DRA driver plugin {info.name} at endpoint {self.endpoint}: {why}")
        self.version = chosen
        mod = {"v1.DRAPlugin": "dra_v1", "v1beta1.DRAPlugin": "dra_v1beta1"}[chosen]
        self._api, self._api_grpc = getattr(self.pb, mod), getattr(self.pb, mod + "_grpc")
        self._channel = grpc.insecure_channel("unix:" + self.endpoint)
        self._dra = self._api_grpc.DRAPluginStub(self._channel)
        self._notify(reg, True, "")

    def _call(self, method, claims):
        if self._dra is None:
            raise RuntimeError("call wait_registered() first")
        req = getattr(self._api, method + "Request")(claims=[self._api.Claim(**c) for c in claims])
        return getattr(self._dra, method)(req, timeout=PREPARE_TIMEOUT)

    def prepare_raw(self, claims):
        """NodePrepareResources; the response's deterministic (map keys sorted) encoding."""
        return self._call("NodePrepareResources", claims).SerializeToString(deterministic=True)

    def prepare(self, claims):
        """NodePrepareResources; the response as {uid: {"devices": [...], "error": str}}."""
        return self.response_dict(self._call("NodePrepareResources", claims))

    def unprepare(self, claims):
        """NodeUnprepareResources; the response as {uid: {"error": str}}."""
        return {uid: {"error": r.error} for uid, r in self._call("NodeUnprepareResources", claims).claims.items()}

    @staticmethod
    def response_dict(resp):
        """A NodePrepareResourcesResponse (v1 or v1beta1) as prepare() returns it."""
        def device(d):
            share = d.share_id if "share_id" in d.DESCRIPTOR.fields_by_name and d.HasField("share_id") else None
            return {"request_names": list(d.request_names), "pool_name": d.pool_name, "device_name": d.device_name,
                    "cdi_device_ids": list(d.cdi_device_ids), "share_id": share}
        return {uid: {"devices": [device(d) for d in r.devices], "error": r.error} for uid, r in resp.claims.items()}

    @staticmethod
    def describe_event(pod_claim_names, response):
        """The FailedPrepareDynamicResources event message kubelet would show for this
        NodePrepareResources response, or None if kubelet would accept it.

        pod_claim_names: {uid: claim name} or the claim dicts sent. response: prepare()'s
        dict or the message. kubelet walks the response map in Go's random order; we take
        the request order, so with several failed claims kubelet may name another one.
        """
        if not isinstance(pod_claim_names, Mapping):
            pod_claim_names = {c["uid"]: c["name"] for c in pod_claim_names}
        if not isinstance(response, Mapping):
            response = FakeKubelet.response_dict(response)
        err = next((f"NodePrepareResources failed for ResourceClaim {name}: {response[uid]['error']}"
                    for uid, name in pod_claim_names.items() if response.get(uid, {}).get("error")), None)
        err = err or next((f"NodePrepareResources returned result for unknown claim UID {uid}"
                           for uid in response if uid not in pod_claim_names), None)
        if not err and len(pod_claim_names) != len(response):
            err = f"NodePrepareResources skipped {len(pod_claim_names) - len(response)} ResourceClaims"
        return err and f"Failed to prepare dynamic resources: prepare dynamic resources: {err}"

    def close(self):
        for ch in (self._channel, self._reg_channel):
            if ch is not None:
                ch.close()
        self._channel = self._reg_channel = self._dra = None


if __name__ == "__main__":
    from concurrent import futures
    pb = stubs()

    def plugin(sock, versions, ptype="DRAPlugin"):
        """A trivial plugin: Registration and v1 DRAPlugin on one socket; claim "bad" fails."""
        got = []

        class Reg(pb.reg_grpc.RegistrationServicer):
            def GetInfo(self, req, ctx):
                return pb.reg.PluginInfo(type=ptype, name="topocni.io", supported_versions=versions)

            def NotifyRegistrationStatus(self, req, ctx):
                got.append((req.plugin_registered, req.error))
                return pb.reg.RegistrationStatusResponse()

        class Dra(pb.dra_v1_grpc.DRAPluginServicer):
            def NodePrepareResources(self, req, ctx):
                r = pb.dra_v1.NodePrepareResourcesResponse()
                for i, c in enumerate(req.claims):
                    r.claims[c.uid].error = "no such NIC" if c.name == "bad" else ""
                    if c.name != "bad":
                        r.claims[c.uid].devices.add(request_names=["net"], pool_name="node0", device_name=f"vf{i}",
                                                    cdi_device_ids=[f"topocni.io/net=vf{i}"], share_id="s1" if i else None)
                return r

            def NodeUnprepareResources(self, req, ctx):
                return pb.dra_v1.NodeUnprepareResourcesResponse(
                    claims={c.uid: pb.dra_v1.NodeUnprepareResourceResponse() for c in req.claims})

        srv = grpc.server(futures.ThreadPoolExecutor(max_workers=4))
        pb.reg_grpc.add_RegistrationServicer_to_server(Reg(), srv)
        pb.dra_v1_grpc.add_DRAPluginServicer_to_server(Dra(), srv)
        srv.add_insecure_port("unix:" + sock)
        srv.start()
        return srv, got

    tmp = tempfile.mkdtemp(prefix="fakekubelet-check-")
    try:
        sock = os.path.join(tmp, "topocni.io-reg.sock")
        srv, got = plugin(sock, ["v1.DRAPlugin", "v1beta1.DRAPlugin"])
        k = FakeKubelet(tmp).wait_registered()
        assert (k.version, k.endpoint, got, k.notifications) == ("v1.DRAPlugin", sock, [(True, "")], [(True, "")])
        claims = [{"namespace": "ns", "uid": "u1", "name": "c1"}, {"namespace": "ns", "uid": "u2", "name": "c2"}]
        res = k.prepare(claims)
        assert res["u1"]["devices"][0] == {"request_names": ["net"], "pool_name": "node0", "device_name": "vf0",
                                           "cdi_device_ids": ["topocni.io/net=vf0"], "share_id": None}, res
        assert res["u2"]["devices"][0]["share_id"] == "s1" and res["u2"]["error"] == "", res
        assert k.prepare_raw(claims) == k.prepare_raw(claims)
        assert k.describe_event(claims, res) is None
        bad = claims + [{"namespace": "ns", "uid": "u3", "name": "bad"}]
        assert k.describe_event(bad, k.prepare(bad)) == ("Failed to prepare dynamic resources: prepare dynamic "
                                                         "resources: NodePrepareResources failed for ResourceClaim bad: no such NIC")
        assert k.describe_event(bad, res) == ("Failed to prepare dynamic resources: prepare dynamic resources: "
                                              "NodePrepareResources skipped 1 ResourceClaims")
        assert k.unprepare(claims) == {"u1": {"error": ""}, "u2": {"error": ""}}
        k.close()
        srv.stop(None).wait()   # grpc removes the socket file
        for versions, ptype, want in (
                (["v1alpha4.Node"], "DRAPlugin", "RegisterPlugin error -- plugin validation failed with err: invalid "
                 f"supported gRPC versions of DRA driver plugin topocni.io at endpoint {sock}: none of services supported "
                 'by the plugin (["v1alpha4.Node"]) are supported by the kubelet (["v1.DRAPlugin"])'),
                ([], "DRAPlugin", "empty list of supported gRPC services (aka supported versions)"),
                (["v1.DRAPlugin"], "CSIPlugin", f"no handler registered for plugin type: CSIPlugin at socket {sock}")):
            srv, got = plugin(sock, versions, ptype)
            try:
                FakeKubelet(tmp, known_versions=["v1.DRAPlugin"]).wait_registered(timeout=5)
                raise AssertionError("registered despite " + want)
            except RegistrationError as e:
                assert got == [(False, str(e))] and str(e).endswith(want), (got, want)
            srv.stop(None).wait()
        print("fakekubelet self-check OK")
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
