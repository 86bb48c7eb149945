"""The stand-in API server (fakenode.ClusterApi) holds clients to what the API server does:
a request without the bearer token the test gave the binary, or with another, gets the API
server's 401 and nothing changes; a nodes/status PATCH whose capacity or allocatable the API
server would refuse (pkg/apis/core/validation/validation.go ValidateNodeResources) gets its
422 and nothing changes. The binary's own requests carry its kubeconfig's token: a topocni
that dropped or mangled it would be refused here, and every cluster-side test would fail.

No root needed: the stand-in and the extender listen on the host's loopback.
"""
import http.client
import json
import os
import shutil
import ssl
import subprocess
import tempfile
import time
import unittest

from cnitest import BIN, main
from fakenode import NAD_PATH, ClusterApi, free_port, make_pki, nad_object, write_kubeconfig

# Loopback only: no namespaces, so these run as any user (cnitest.main).
NEEDS_ROOT = False

TOKEN = "standin-token"
STATUS_PATH = "/api/v1/nodes/worker-1/status"
EXTENDED = "bandwidth.topocni.io/macvlan.eth1.egress"   # an extended resource name, as the publisher makes them
UNAUTHORIZED = {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure", "message": "Unauthorized",
                "reason": "Unauthorized", "code": 401}


def node():
    return {"apiVersion": "v1", "kind": "Node", "metadata": {"name": "worker-1"},
            "status": {"capacity": {"cpu": "8", "pods": "110"}, "allocatable": {"cpu": "8", "pods": "110"}}}


class StandIn(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.mkdtemp(prefix="topocni-sia-")
        self.addCleanup(shutil.rmtree, self.tmp, True)
        self.pki = make_pki(os.path.join(self.tmp, "pki"))
        self.api = ClusterApi(self.pki, token=TOKEN)
        self.addCleanup(self.api.stop)
        self.api.put_node(node())
        self.api.put_nad(nad_object("mv", {"cniVersion": "1.0.0", "name": "mv", "type": "topocni",
                                           "attachment": "macvlan", "master": "eth1"}))

    def call(self, method, path, body=None, auth=f"Bearer {TOKEN}", content_type="application/json-patch+json"):
        ctx = ssl.create_default_context(cafile=os.path.join(self.pki, "ca.crt"))
        c = http.client.HTTPSConnection("127.0.0.1", self.api.port, context=ctx, timeout=10)
        headers = {"Authorization": auth} if auth is not None else {}
        if body is not None:
            headers["Content-Type"] = content_type
        c.request(method, path, json.dumps(body) if body is not None else None, headers)
        r = c.getresponse()
        data = json.loads(r.read())
        c.close()
        return r.status, data

    @staticmethod
    def add(kind, name, value):
        return {"op": "add", "path": f"/status/{kind}/{name.replace('~', '~0').replace('/', '~1')}", "value": value}

    # --- the tests ---

    def test_a_request_without_the_token_or_with_another_gets_the_api_servers_401_and_changes_nothing(self):
        before = self.api.node("worker-1")
        patch = [self.add("capacity", EXTENDED, "1000")]
        for what, auth in (("no Authorization", None), ("another token", "Bearer not-the-token"),
                           ("an empty bearer", "Bearer "), ("basic auth", "Basic dXNlcjpwYXNz"),
                           ("the token without its scheme", TOKEN)):
            for method, path, body in (("GET", NAD_PATH, None), ("GET", "/api/v1/nodes/worker-1", None),
                                       ("GET", "/api/v1/nodes?watch=1&resourceVersion=0", None),
                                       ("PATCH", STATUS_PATH, patch)):
                with self.subTest(auth=what, method=method, path=path):
                    self.assertEqual(self.call(method, path, body, auth=auth), (401, UNAUTHORIZED))
        self.assertEqual(self.api.node("worker-1"), before, "a refused PATCH changes nothing")
        self.assertEqual({r["status"] for r in self.api.logged()}, {401})
        # The token itself opens every door.
        self.assertEqual(self.call("GET", "/api/v1/nodes/worker-1")[0], 200)
        status, obj = self.call("PATCH", STATUS_PATH, patch)
        self.assertEqual((status, obj["status"]["capacity"][EXTENDED]), (200, "1000"))

    def test_the_binary_sends_its_kubeconfigs_token_and_another_token_leaves_it_without_the_cluster(self):
        """The extender started with the stand-in's token LISTs and WATCHes with it (every
        request carries it, none refused); started with another, every request it makes gets
        401 and it never reaches a WATCH."""
        for token, served in ((TOKEN, True), ("stale-token", False)):
            with self.subTest(token=token):
                self.api.forget_requests()
                kc = write_kubeconfig(os.path.join(self.tmp, f"{token}.kubeconfig"), self.api.url(),
                                      ca_file=os.path.join(self.pki, "ca.crt"), token=token)
                log = os.path.join(self.tmp, f"{token}.log")
                with open(log, "w") as err:
                    p = subprocess.Popen([BIN, "scheduler-extender", "--listen", f"127.0.0.1:{free_port()}",
                                          "--kubeconfig", kc], stderr=err)
                try:
                    deadline = time.time() + 20
                    while not (self.api.watching(NAD_PATH) if served else self.api.logged()):
                        self.assertLess(time.time(), deadline, f"the extender's requests: {self.api.logged()}")
                        time.sleep(0.05)
                    time.sleep(1)   # what it does next on the same answers
                finally:
                    if p.poll() is None:
                        p.terminate()
                    p.wait(timeout=20)
                seen = self.api.logged()
                self.assertTrue(seen)
                self.assertEqual({r["token"] for r in seen}, {token}, "every request carries the kubeconfig's token")
                self.assertEqual({r["status"] for r in seen}, {200} if served else {401})
                if not served:
                    self.assertFalse(self.api.watching(NAD_PATH), "no WATCH without a LIST")
                    with open(log) as f:
                        self.assertIn("401", f.read(), "the extender says why it has no cluster")

    def test_a_status_patch_the_api_server_would_refuse_gets_its_422_and_changes_nothing(self):
        before = self.api.node("worker-1")
        for what, name, value, message in (
                ("a fraction of an extended resource", EXTENDED, "1500m", "must be an integer"),
                ("a fraction of a count", "pods", "0.5", "must be an integer"),
                ("a negative quantity", EXTENDED, "-1", "must be greater than or equal to 0"),
                ("no quantity", EXTENDED, "1 Gb/s", "quantities must match the regular expression"),
                ("a boolean", EXTENDED, True, "quantities must match the regular expression")):
            for kind in ("capacity", "allocatable"):
                with self.subTest(what=what, kind=kind):
                    status, body = self.call("PATCH", STATUS_PATH, [self.add(kind, name, value)])
                    self.assertEqual(status, 422, body)
                    self.assertEqual((body["kind"], body["status"], body["reason"], body["code"]),
                                     ("Status", "Failure", "Invalid", 422))
                    self.assertEqual([c["field"] for c in body["details"]["causes"]], [f"status.{kind}.{name}"])
                    self.assertIn(message, body["details"]["causes"][0]["message"])
                    self.assertTrue(body["message"].startswith('Node "worker-1" is invalid: '), body["message"])
        self.assertEqual(self.api.node("worker-1"), before, "a refused PATCH changes nothing")

    def test_a_status_patch_the_api_server_takes_is_stored(self):
        """Whole quantities in any form, a fraction of a resource that is not counted in whole
        units (cpu), and, as the API server does, a name that is no extended resource name (it
        stores it; no pod could ask for it, and the product's own names are checked where it
        makes them)."""
        patch = [self.add("capacity", EXTENDED, "25000"), self.add("allocatable", EXTENDED, "2Ki"),
                 self.add("capacity", "addresses.topocni.io/mv", 14), self.add("capacity", "cpu", "7500m"),
                 self.add("capacity", "example.com/not a name", "1500m")]
        status, obj = self.call("PATCH", STATUS_PATH, patch)
        self.assertEqual(status, 200, obj)
        st = self.api.node("worker-1")["status"]
        self.assertEqual((st["capacity"][EXTENDED], st["allocatable"][EXTENDED], st["capacity"]["cpu"]),
                         ("25000", "2Ki", "7500m"))


    # --- ResourceSlices (resourceslices.py) ---

    def slice(self, name="w1-topocni.io-0", devices=None, **spec):
        body = {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceSlice", "metadata": {"name": name},
                "spec": {"driver": "topocni.io", "nodeName": "worker-1",
                         "pool": {"name": "worker-1", "generation": 1, "resourceSliceCount": 1},
                         "devices": [{"name": "vf-1"}] if devices is None else devices}}
        body["spec"].update(spec)
        return body

    def test_a_resourceslice_the_api_server_would_refuse_gets_its_422_and_nothing_is_stored(self):
        path = "/apis/resource.k8s.io/v1/resourceslices"
        many = {f"a{i}": {"int": i} for i in range(33)}
        bad = {
            "33 attributes": self.slice(devices=[{"name": "d", "attributes": many}]),
            "a device name that is no DNS label": self.slice(devices=[{"name": "VF_1"}]),
            "two values in one attribute": self.slice(devices=[{"name": "d", "attributes": {"x": {"int": 1, "bool": True}}}]),
            "a string of 65": self.slice(devices=[{"name": "d", "attributes": {"x": {"string": "a" * 65}}}]),
            "a request policy without allowMultipleAllocations": self.slice(
                devices=[{"name": "d", "capacity": {"c": {"value": "1", "requestPolicy": {"default": "1"}}}}]),
            "129 devices": self.slice(devices=[{"name": f"d{i}"} for i in range(129)]),
            "a device twice": self.slice(devices=[{"name": "d"}, {"name": "d"}]),
            "no node": self.slice(nodeName=None),
            "a misspelt field": self.slice(devices=[{"name": "d", "allowMultipleAllocation": True}]),
        }
        for what, body in bad.items():
            with self.subTest(what):
                status, answer = self.call("POST", path, body, content_type="application/json")
                self.assertEqual(status, 422, answer)
                self.assertEqual(answer["reason"], "Invalid")
        self.assertEqual(self.api.resource_slices(), {})
        self.assertEqual(self.call("POST", path, self.slice(), content_type="application/json")[0], 201)

    def test_a_resourceslice_update_is_refused_when_stale_or_changing_what_is_immutable(self):
        path = "/apis/resource.k8s.io/v1/resourceslices"
        status, made = self.call("POST", path, self.slice(), content_type="application/json")
        self.assertEqual((status, made["metadata"]["generation"]), (201, 1))
        self.assertEqual(self.call("POST", path, self.slice(), content_type="application/json")[0], 409)
        one = f"{path}/w1-topocni.io-0"
        moved = self.slice(driver="example.com")
        moved["metadata"] = made["metadata"]
        self.assertEqual(self.call("PUT", one, moved, content_type="application/json")[0], 422)
        changed = self.slice(devices=[{"name": "vf-2"}])
        changed["metadata"] = made["metadata"]
        status, after = self.call("PUT", one, changed, content_type="application/json")
        self.assertEqual((status, after["metadata"]["generation"]), (200, 2))
        self.assertEqual(self.call("PUT", one, changed, content_type="application/json")[0], 409, "a stale version")
        self.assertEqual(self.call("PUT", f"{path}/absent", self.slice("absent"), content_type="application/json")[0], 404)
        self.assertEqual(self.call("GET", path + "?fieldSelector=spec.nodeName%3Dother")[1]["items"], [])
        self.assertEqual(len(self.call("GET", path + "?fieldSelector=spec.nodeName%3Dworker-1%2Cspec.driver%3Dtopocni.io")[1]["items"]), 1)
        self.assertEqual(self.call("GET", path + "?fieldSelector=spec.pool.name%3Dworker-1")[0], 400)
        self.assertEqual(self.call("DELETE", one)[0], 200)
        self.assertEqual(self.call("DELETE", one)[0], 404)

if __name__ == "__main__":
    main()
