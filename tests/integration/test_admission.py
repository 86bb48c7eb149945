"""topocni admission-webhook, called as the API server calls a mutating webhook: an
AdmissionReview (admission.k8s.io/v1) POSTed over HTTPS to /mutate, shaped as
k8s.io/api admission/v1 types.go marshals it (uid, kind, resource, requestKind,
requestResource, name omitted for a generateName pod, namespace, operation, userInfo,
object, oldObject null, dryRun false, CreateOptions), with the pod as the API server has
defaulted it by then.

The NADs come from fakenode.ClusterApi, an in-process stand-in API over HTTPS that the
webhook lists and watches (and GETs a NAD its cache lacks). Every patch the webhook
answers is decoded and applied with a real RFC 6902 implementation (jsonpatch_apply), and
the resulting pod is compared as a whole with the pod expected: the first container's
requests = limits of the networks' bandwidth and addresses, each NAD's nodeSelector ANDed
into every required nodeAffinity term, the annotation topocni.io/admitted, and nothing
else changed.
"""
import base64
import copy
import http.client
import json
import os
import shutil
import signal
import ssl
import subprocess
import tempfile
import time
import unittest

import yaml

import schedrules
from cnitest import BIN, main
from fakenode import NAD_PATH, TEMPLATES_PATH, ClusterApi, free_port, make_pki, nad_object, write_kubeconfig
from jsonpatch_apply import apply_checked
from memwatch import MiB, nested_bodies, proc_status, reset_peak, sanitized

# Loopback only: no namespaces, so these run as any user (cnitest.main).
NEEDS_ROOT = False

NETWORKS = "k8s.v1.cni.cncf.io/networks"
ADMITTED = "topocni.io/admitted"
BW = "bandwidth.topocni.io/"
ADDR = "addresses.topocni.io/"
MARKER = "topocni.io/networks"   # the scheduler extender's managedResources
EXAMPLES = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "examples")
M = 1_000_000

# --- the NADs: every config form, every selector operator, both bandwidth sources ---
# A plain config: NAD bandwidth, a label-map nodeSelector, built-in host-local.
PLAIN = {"cniVersion": "1.0.0", "name": "plain", "type": "topocni", "attachment": "macvlan", "master": "eth1",
         "bandwidth": {"egressRate": 100 * M, "ingressRate": 40 * M},
         "ipam": {"type": "host-local", "subnet": "10.10.0.0/24"},
         "nodeSelector": {"example.com/zone": "a"}}
# A conflist whose second plugin is topocni; the network's name is the list's. 2.500001
# Mb/s is asked for as 3 (rounded up); no ingress rate, so no ingress resource.
LISTED = {"cniVersion": "1.0.0", "name": "listed-net", "plugins": [
    {"type": "tuning", "sysctl": {"net.ipv4.conf.all.log_martians": "1"}},
    {"type": "topocni", "attachment": "macvlan", "master": "eth1", "bandwidth": {"egressRate": 2_500_001},
     "ipam": {"type": "host-local", "ranges": [[{"subnet": "10.11.0.0/28"}]]},
     "nodeSelector": {"matchExpressions": [{"key": "example.com/cores", "operator": "Gt", "values": ["8"]},
                                           {"key": "example.com/gpu", "operator": "DoesNotExist"}]}}]}
# A delegate config (with a device plugin resource): the delegate's host-local pool. A
# delegate takes no "bandwidth" (the reference bandwidth plugin is chained instead).
WRAPPED = {"cniVersion": "1.0.0", "name": "wrapped", "type": "topocni",
           "delegate": {"type": "sriov", "ipam": {"type": "host-local", "subnet": "10.12.0.0/24"}},
           "nodeSelector": {"matchLabels": {"example.com/nic": "fast"},
                            "matchExpressions": [
                                {"key": "example.com/rack", "operator": "NotIn", "values": ["r1", "r2"]},
                                {"key": "sriov-capable", "operator": "Exists"},
                                {"key": "example.com/load", "operator": "Lt", "values": ["90"]}]}}
SRIOV_RESOURCE = "intel.com/sriov_a"
# An SR-IOV attachment with bandwidth: Mb/s on the PFs of its resource ("/" becomes "_").
VF = {"cniVersion": "1.0.0", "name": "vf", "type": "topocni", "attachment": "sriov",
      "bandwidth": {"egressRate": 1000 * M, "ingressRate": 250 * M}}
# The bandwidth capability: the pod's kubernetes.io/*-bandwidth annotations, no pool.
CAPABLE = {"cniVersion": "1.0.0", "name": "capable", "type": "topocni", "attachment": "macvlan", "master": "eth2",
           "capabilities": {"bandwidth": True}}
# Both: the pod's annotations win over the NAD's bandwidth, as runtimeConfig does at ADD.
BOTH = {"cniVersion": "1.0.0", "name": "both", "type": "topocni", "attachment": "macvlan", "master": "eth2",
        "capabilities": {"bandwidth": True}, "bandwidth": {"egressRate": 5 * M, "ingressRate": 6 * M}}
# Bandwidth but no capability: the pod's annotations are not read.
DEAF = {"cniVersion": "1.0.0", "name": "deaf", "type": "topocni", "attachment": "macvlan", "master": "eth2",
        "bandwidth": {"egressRate": 7 * M}}
BRIDGE = {"cniVersion": "1.0.0", "name": "bridge", "type": "bridge", "bridge": "br0"}

PLAIN_NEEDS = {BW + "macvlan.eth1.egress": 100, BW + "macvlan.eth1.ingress": 40, ADDR + "plain": 1}
PLAIN_TERMS = [{"key": "example.com/zone", "operator": "In", "values": ["a"]}]
LISTED_NEEDS = {BW + "macvlan.eth1.egress": 3, ADDR + "listed-net": 1}
LISTED_TERMS = [{"key": "example.com/cores", "operator": "Gt", "values": ["8"]},
                {"key": "example.com/gpu", "operator": "DoesNotExist"}]
WRAPPED_NEEDS = {ADDR + "wrapped": 1}
VF_NEEDS = {BW + "sriov.intel.com_sriov_a.egress": 1000, BW + "sriov.intel.com_sriov_a.ingress": 250}
WRAPPED_TERMS = [{"key": "example.com/nic", "operator": "In", "values": ["fast"]},
                 {"key": "example.com/rack", "operator": "NotIn", "values": ["r1", "r2"]},
                 {"key": "sriov-capable", "operator": "Exists"},
                 {"key": "example.com/load", "operator": "Lt", "values": ["90"]}]


def all_nads():
    return [nad_object("plain", PLAIN), nad_object("listed", LISTED, namespace="net"),
            nad_object("wrapped", WRAPPED, resource=SRIOV_RESOURCE), nad_object("vf", VF, resource=SRIOV_RESOURCE),
            nad_object("capable", CAPABLE),
            nad_object("both", BOTH), nad_object("deaf", DEAF), nad_object("bridge", BRIDGE)]


def defaulted_pod(networks=None, name=None, namespace="default", annotations=None, containers=None, affinity=None):
    """A Pod as a CREATE's AdmissionReview carries it: after the API server's defaulting and
    the built-in mutating admission (DefaultTolerationSeconds), before it has a uid or a
    name when it was made with generateName."""
    md = {"namespace": namespace, "creationTimestamp": None,
          "labels": {"app": "web", "pod-template-hash": "5d8f7c9b6"},
          "ownerReferences": [{"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "web-5d8f7c9b6",
                               "uid": "2c7e4a1e-3b9e-4c53-9d1e-0c8a4b1f7e21", "controller": True,
                               "blockOwnerDeletion": True}],
          "managedFields": [{"manager": "kube-controller-manager", "operation": "Update", "apiVersion": "v1",
                             "time": "2026-12-04T13:00:00Z", "fieldsType": "FieldsV1", "fieldsV1": {"f:metadata": {}}}]}
    if name:
        md["name"] = name
    else:
        md["generateName"] = "web-5d8f7c9b6-"
    ann = dict(annotations or {})
    if networks is not None:
        ann[NETWORKS] = networks
    if ann:
        md["annotations"] = ann
    if containers is None:
        containers = [{"name": "app", "image": "registry.example.com/web:1.2", "resources": {}}]
    for c in containers:
        c.setdefault("terminationMessagePath", "/dev/termination-log")
        c.setdefault("terminationMessagePolicy", "File")
        c.setdefault("imagePullPolicy", "IfNotPresent")
    spec = {"containers": containers, "restartPolicy": "Always", "terminationGracePeriodSeconds": 30,
            "dnsPolicy": "ClusterFirst", "serviceAccountName": "default", "serviceAccount": "default",
            "securityContext": {}, "schedulerName": "default-scheduler", "enableServiceLinks": True,
            "preemptionPolicy": "PreemptLowerPriority", "priority": 0,
            "tolerations": [{"key": "node.kubernetes.io/not-ready", "operator": "Exists", "effect": "NoExecute",
                             "tolerationSeconds": 300},
                            {"key": "node.kubernetes.io/unreachable", "operator": "Exists", "effect": "NoExecute",
                             "tolerationSeconds": 300}]}
    if affinity is not None:
        spec["affinity"] = affinity
    return {"kind": "Pod", "apiVersion": "v1", "metadata": md, "spec": spec, "status": {}}


def admission_review(obj, operation="CREATE", kind=("", "v1", "Pod"), resource=("", "v1", "pods"), namespace="default",
                     old=None, sub_resource=None, uid=None):
    """The AdmissionReview the API server POSTs (admission/v1 types.go, json tags and omitempty)."""
    gvk = {"group": kind[0], "version": kind[1], "kind": kind[2]}
    gvr = {"group": resource[0], "version": resource[1], "resource": resource[2]}
    req = {"uid": uid or f"0f6b7c3e-{os.getpid() % 10000:04d}-4e3b-9a7f-{int(time.time() * 1e6) % 10**12:012d}",
           "kind": gvk, "resource": gvr, "requestKind": dict(gvk), "requestResource": dict(gvr)}
    if sub_resource:
        req["subResource"] = req["requestSubResource"] = sub_resource
    name = ((obj or old or {}).get("metadata") or {}).get("name", "")
    if name:
        req["name"] = name   # omitempty: a generateName pod has none yet
    if namespace:
        req["namespace"] = namespace
    options = {"CREATE": {"kind": "CreateOptions", "apiVersion": "meta.k8s.io/v1"},
               "UPDATE": {"kind": "UpdateOptions", "apiVersion": "meta.k8s.io/v1"},
               "DELETE": {"kind": "DeleteOptions", "apiVersion": "meta.k8s.io/v1", "propagationPolicy": "Background"},
               "CONNECT": None}[operation]
    req.update({"operation": operation,
                "userInfo": {"username": "system:serviceaccount:kube-system:replicaset-controller",
                             "uid": "8a0e5a2c-6b1f-4d1e-9f43-2d1c7a0b9e11",
                             "groups": ["system:serviceaccounts", "system:serviceaccounts:kube-system",
                                        "system:authenticated"]},
                "object": obj, "oldObject": old, "dryRun": False, "options": options})
    return {"kind": "AdmissionReview", "apiVersion": "admission.k8s.io/v1", "request": req}


def with_resources(pod, needs, extra_requests=None, extra_limits=None):
    """`pod` as the webhook must leave it: the first container asks requests = limits of
    `needs` on top of what it asked before, and one MARKER (every pod with a topocni network)."""
    out = copy.deepcopy(pod)
    res = out["spec"]["containers"][0].setdefault("resources", {})
    for k in ("requests", "limits"):
        m = res.setdefault(k, {})
        for name, v in dict(needs, **{MARKER: 1}).items():
            had = int(m.get(name, "0"))
            m[name] = str(had + v)
    return out


def with_terms(pod, exprs):
    """`pod` with `exprs` ANDed into every required nodeAffinity term (one new term when it has none)."""
    out = copy.deepcopy(pod)
    aff = out["spec"].setdefault("affinity", {})
    na = aff.setdefault("nodeAffinity", {})
    req = na.setdefault("requiredDuringSchedulingIgnoredDuringExecution", {})
    terms = req.get("nodeSelectorTerms") or [{}]
    for t in terms:
        t["matchExpressions"] = list(t.get("matchExpressions") or []) + copy.deepcopy(exprs)
    req["nodeSelectorTerms"] = terms
    return out


def canonical_affinity(pod):
    """The pod with each term's matchExpressions as a sorted list without repeats: a
    requirement written twice means the same, and their order means nothing."""
    out = copy.deepcopy(pod)
    terms = (((out["spec"].get("affinity") or {}).get("nodeAffinity") or {})
             .get("requiredDuringSchedulingIgnoredDuringExecution") or {}).get("nodeSelectorTerms") or []
    for t in terms:
        if "matchExpressions" in t:
            t["matchExpressions"] = sorted({json.dumps(e, sort_keys=True) for e in t["matchExpressions"]})
    return out



class WebhookCase(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.mkdtemp(prefix="topocni-adm-")
        self.addCleanup(shutil.rmtree, self.tmp, True)
        self.pki = make_pki(os.path.join(self.tmp, "pki"))
        self.api = ClusterApi(self.pki, token="webhook-token")
        self.addCleanup(self.api.stop)
        for n in all_nads():
            self.api.put_nad(n)
        self.kubeconfig = write_kubeconfig(os.path.join(self.tmp, "kubeconfig"), self.api.url(),
                                           ca_file=os.path.join(self.pki, "ca.crt"), token="webhook-token")
        self.proc = None
        self.start()

    def tearDown(self):
        if self.proc and self.proc.poll() is None:   # a failed test left it running: this process, by its pid
            self.proc.kill()
            self.proc.wait()

    def start(self, *extra):
        self.port = free_port()
        self.log = os.path.join(self.tmp, "webhook.log")
        with open(self.log, "w") as err:
            self.proc = subprocess.Popen([BIN, "admission-webhook", "--listen", f"127.0.0.1:{self.port}",
                                          "--tls-cert", os.path.join(self.pki, "server.crt"),
                                          "--tls-key", os.path.join(self.pki, "server.key"),
                                          "--kubeconfig", self.kubeconfig, "--api-timeout", "2", *extra], stderr=err)
        deadline = time.monotonic() + 20
        while True:
            self.assertIsNone(self.proc.poll(), f"the webhook exited: {self.log_text()}")
            if self.api.watching(NAD_PATH):
                try:
                    status, _ = self.call("GET", "/healthz")
                    if status == 200:
                        return
                except OSError:
                    pass
            self.assertLess(time.monotonic(), deadline, f"the webhook did not list, watch and listen: {self.log_text()}")
            time.sleep(0.05)

    def log_text(self):
        with open(self.log) as f:
            return f.read()

    def call(self, method, path, body=None):
        ctx = ssl.create_default_context(cafile=os.path.join(self.pki, "ca.crt"))
        c = http.client.HTTPSConnection("127.0.0.1", self.port, context=ctx, timeout=30)
        try:
            c.request(method, path, body, {"Content-Type": "application/json"} if body is not None else {})
            r = c.getresponse()
            return r.status, r.read()
        finally:
            c.close()

    def review(self, review):
        """POSTs an AdmissionReview; returns its response, checked to be one (200, the
        request's uid, allowed a bool, a patch only with patchType JSONPatch)."""
        status, data = self.call("POST", "/mutate", json.dumps(review).encode())
        self.assertEqual(status, 200, data)
        out = json.loads(data)
        self.assertEqual((out.get("apiVersion"), out.get("kind")), ("admission.k8s.io/v1", "AdmissionReview"))
        resp = out["response"]
        self.assertEqual(resp["uid"], review["request"]["uid"])
        self.assertIsInstance(resp["allowed"], bool)
        self.assertEqual("patch" in resp, "patchType" in resp)
        if "patch" in resp:
            self.assertEqual(resp["patchType"], "JSONPatch")
        return resp

    def admit(self, pod, namespace="default"):
        """The pod after the webhook: allowed, its patch decoded and applied."""
        resp = self.review(admission_review(pod, namespace=namespace))
        self.assertTrue(resp["allowed"], resp)
        self.assertIn("patch", resp, f"no patch for {pod['metadata'].get('annotations')}")
        patch = json.loads(base64.b64decode(resp["patch"], validate=True))
        self.assertIsInstance(patch, list)
        return apply_checked(pod, patch), resp

    def assertUntouched(self, review, allowed=True):
        resp = self.review(review)
        self.assertEqual(resp["allowed"], allowed, resp)
        self.assertNotIn("patch", resp)
        return resp

    def assertAdmittedAs(self, pod, expected, keys, namespace="default"):
        """The patched pod is `expected` plus the admitted mark, which names the networks' NADs."""
        patched, resp = self.admit(pod, namespace)
        mark = patched["metadata"].get("annotations", {}).get(ADMITTED)
        self.assertIsNotNone(mark, "the pod is marked topocni.io/admitted")
        for k in keys:
            self.assertIn(k, mark)
        expected = copy.deepcopy(expected)
        expected["metadata"].setdefault("annotations", {})[ADMITTED] = mark
        self.assertEqual(canonical_affinity(patched), canonical_affinity(expected))
        return patched, resp


class Webhook(WebhookCase):
    # --- the tests ---

    def test_each_nad_form_and_annotation_form_becomes_requests_limits_affinity_and_the_mark(self):
        cases = [
            ("a plain config named by name", "plain", {}, PLAIN_NEEDS, PLAIN_TERMS, ["default/plain"]),
            ("a conflist named as namespace/name", "net/listed", {}, LISTED_NEEDS, LISTED_TERMS, ["net/listed"]),
            ("a delegate config named as name@interface", "wrapped@sriov1", {}, WRAPPED_NEEDS, WRAPPED_TERMS,
             ["default/wrapped"]),
            ("an SR-IOV config named as namespace/name@interface", "default/vf@net4", {}, VF_NEEDS, [],
             ["default/vf"]),
            ("a JSON list, bandwidth from the pod's annotations",
             json.dumps([{"name": "capable", "namespace": "default", "interface": "net9"}]),
             {"kubernetes.io/egress-bandwidth": "10M", "kubernetes.io/ingress-bandwidth": "1500M"},
             {BW + "macvlan.eth2.egress": 10, BW + "macvlan.eth2.ingress": 1500}, [], ["default/capable"]),
            ("the pod's annotations win over the NAD's bandwidth", "both",
             {"kubernetes.io/egress-bandwidth": "1G", "kubernetes.io/ingress-bandwidth": "2500k"},
             {BW + "macvlan.eth2.egress": 1000, BW + "macvlan.eth2.ingress": 3}, [], ["default/both"]),
            ("the NAD's bandwidth where the pod says nothing", "both", {},
             {BW + "macvlan.eth2.egress": 5, BW + "macvlan.eth2.ingress": 6}, [], ["default/both"]),
            ("no capability: the pod's annotations are not read", "deaf",
             {"kubernetes.io/egress-bandwidth": "900M"}, {BW + "macvlan.eth2.egress": 7}, [], ["default/deaf"]),
            ("a JSON list of several, another plugin's NAD among them",
             json.dumps([{"name": "plain"}, {"name": "listed", "namespace": "net", "interface": "n2"},
                         {"name": "bridge"}, {"name": "wrapped", "namespace": "default"}, {"name": "vf"}]), {},
             {BW + "macvlan.eth1.egress": 103, BW + "macvlan.eth1.ingress": 40, ADDR + "plain": 1,
              ADDR + "listed-net": 1, **WRAPPED_NEEDS, **VF_NEEDS},
             PLAIN_TERMS + LISTED_TERMS + WRAPPED_TERMS, ["default/plain", "net/listed", "default/wrapped", "default/vf"]),
        ]
        for what, networks, annotations, needs, terms, keys in cases:
            with self.subTest(what):
                pod = defaulted_pod(networks, annotations=annotations)
                expected = with_resources(pod, needs)
                if terms:
                    expected = with_terms(expected, terms)
                patched, _ = self.assertAdmittedAs(pod, expected, keys)
                res = patched["spec"]["containers"][0]["resources"]
                self.assertEqual(res["requests"], res["limits"], "extended resources: requests = limits")

    def test_the_same_network_twice_is_summed_and_added_to_what_the_pod_asks_and_every_term_gets_the_selector(self):
        # The pod asks for CPU, memory and another component's extended resource already.
        containers = [{"name": "app", "image": "web", "resources": {
                           "requests": {"cpu": "250m", "memory": "64Mi", "example.com/dongle": "1"},
                           "limits": {"memory": "128Mi", "example.com/dongle": "1"}}},
                      {"name": "sidecar", "image": "proxy", "resources": {"requests": {"cpu": "10m"}}}]
        affinity = {"nodeAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
                {"matchExpressions": [{"key": "kubernetes.io/arch", "operator": "In", "values": ["amd64"]}]},
                {"matchExpressions": [{"key": "kubernetes.io/arch", "operator": "In", "values": ["arm64"]}],
                 "matchFields": [{"key": "metadata.name", "operator": "NotIn", "values": ["w9"]}]}]},
            "preferredDuringSchedulingIgnoredDuringExecution": [
                {"weight": 10, "preference": {"matchExpressions": [
                    {"key": "example.com/ssd", "operator": "Exists"}]}}]},
            "podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [
                {"labelSelector": {"matchLabels": {"app": "web"}}, "topologyKey": "kubernetes.io/hostname"}]}}
        pod = defaulted_pod("plain@a, plain@b, net/listed", name="web-0", containers=containers, affinity=affinity)
        needs = {BW + "macvlan.eth1.egress": 203, BW + "macvlan.eth1.ingress": 80, ADDR + "plain": 2,
                 ADDR + "listed-net": 1}
        expected = with_terms(with_resources(pod, needs), PLAIN_TERMS + LISTED_TERMS)
        patched, _ = self.assertAdmittedAs(pod, expected, ["default/plain", "net/listed"])
        terms = patched["spec"]["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"][
            "nodeSelectorTerms"]
        self.assertEqual(len(terms), 2, "terms stay ORed: none added, none lost")
        self.assertEqual(patched["spec"]["containers"][1], pod["spec"]["containers"][1], "only the first container asks")
        # A pod with no affinity at all, and one whose affinity has only a podAntiAffinity.
        for aff in (None, {"podAntiAffinity": affinity["podAntiAffinity"]}):
            with self.subTest(affinity=aff):
                pod = defaulted_pod("wrapped", affinity=aff)
                self.assertAdmittedAs(pod, with_terms(with_resources(pod, WRAPPED_NEEDS), WRAPPED_TERMS),
                                      ["default/wrapped"])

    def test_readmission_of_the_patched_pod_is_allowed_without_a_patch(self):
        pod = defaulted_pod("plain, net/listed@n2, wrapped")
        patched, _ = self.admit(pod)
        self.assertUntouched(admission_review(patched))
        # The patched pod with its mark removed still asks for topocni resources: left as it is.
        unmarked = copy.deepcopy(patched)
        del unmarked["metadata"]["annotations"][ADMITTED]
        resp = self.assertUntouched(admission_review(unmarked))
        self.assertTrue(any("already" in w for w in resp.get("warnings", [])), resp)

    def test_a_missing_nad_denies_the_pod_naming_it(self):
        for networks, namespace, missing in (("plain, nosuch", "default", "default/nosuch"),
                                             ("other/plain", "default", "other/plain"),
                                             ("plain", "team", "team/plain"),   # the pod's namespace, not default
                                             ('[{"name": "gone", "namespace": "net"}]', "default", "net/gone")):
            with self.subTest(networks=networks, namespace=namespace):
                pod = defaulted_pod(networks, namespace=namespace)
                resp = self.assertUntouched(admission_review(pod, namespace=namespace), allowed=False)
                self.assertEqual(resp["status"]["code"], 400)
                self.assertEqual(resp["status"]["message"],
                                 f"topocni: network-attachment-definition {missing} not found")
                ns, name = missing.split("/")
                # Not in the cache: the API was asked before the pod was refused.
                self.assertTrue(self.api.logged("GET", f"/apis/k8s.cni.cncf.io/v1/namespaces/{ns}/"
                                                       f"network-attachment-definitions/{name}"))

    def test_a_nad_config_without_a_name_is_named_after_its_nad_as_multus_names_it(self):
        # Multus fills in a missing or empty "name" with the NAD's before the plugin runs, so
        # ADD's network (and its pool, addresses.topocni.io/<network>) is the NAD's name.
        for nad, conf in (("anon", {k: v for k, v in PLAIN.items() if k != "name"}), ("blank", dict(PLAIN, name=""))):
            with self.subTest(nad=nad):
                self.api.put_nad(nad_object(nad, conf))
                pod = defaulted_pod(nad)
                needs = {BW + "macvlan.eth1.egress": 100, BW + "macvlan.eth1.ingress": 40, ADDR + nad: 1}
                deadline = time.monotonic() + 5
                while True:   # the NAD arrives by the watch, or is read from the API
                    resp = self.review(admission_review(pod))
                    if resp.get("allowed") or time.monotonic() > deadline:
                        break
                    time.sleep(0.05)
                self.assertAdmittedAs(pod, with_terms(with_resources(pod, needs), PLAIN_TERMS), [f"default/{nad}"])

    def test_a_nad_the_watch_has_not_brought_yet_is_read_from_the_api_and_an_unreachable_api_fails_the_call(self):
        # In the API but not yet in the webhook's cache (its watch is behind): put without an event.
        late = nad_object("late", dict(PLAIN, name="late"), resource_version="900")
        with self.api.cond:
            self.api.nads["default/late"] = late
        pod = defaulted_pod("late")
        needs = {BW + "macvlan.eth1.egress": 100, BW + "macvlan.eth1.ingress": 40, ADDR + "late": 1}
        self.assertAdmittedAs(pod, with_terms(with_resources(pod, needs), PLAIN_TERMS), ["default/late"])
        get = "/apis/k8s.cni.cncf.io/v1/namespaces/default/network-attachment-definitions/late"
        self.assertEqual([r["status"] for r in self.api.logged("GET", get)], [200])
        # A NAD created after the webhook started arrives by the watch: no GET for it.
        self.api.put_nad(nad_object("fresh", dict(PLAIN, name="fresh")))
        deadline = time.monotonic() + 5
        fresh = defaulted_pod("fresh")
        while True:
            before = len(self.api.logged("GET"))
            resp = self.review(admission_review(fresh))
            gets = [r for r in self.api.logged("GET")[before:] if r["path"].endswith("/fresh")]
            if not gets:
                break
            self.assertLess(time.monotonic(), deadline, "the watch did not bring the new NAD")
            time.sleep(0.1)
        self.assertTrue(resp["allowed"] and "patch" in resp, resp)
        # The API answers 500 for a NAD not cached: the call fails (503), the failurePolicy decides.
        self.api.fail("/apis/k8s.cni.cncf.io/v1/namespaces/default/network-attachment-definitions/unknown", 500)
        status, data = self.call("POST", "/mutate", json.dumps(admission_review(defaulted_pod("unknown"))).encode())
        self.assertEqual(status, 503, data)
        self.assertIn("default/unknown", json.loads(data)["error"])
        # The API gone altogether: the same; cached NADs still serve.
        self.api.stop()
        status, data = self.call("POST", "/mutate", json.dumps(admission_review(defaulted_pod("unknown"))).encode())
        self.assertEqual(status, 503, data)
        pod = defaulted_pod("plain")
        self.assertAdmittedAs(pod, with_terms(with_resources(pod, PLAIN_NEEDS), PLAIN_TERMS), ["default/plain"])

    def test_a_pod_without_topocni_networks_is_allowed_without_a_patch(self):
        for what, pod in (("no annotations", defaulted_pod()),
                          ("other annotations", defaulted_pod(annotations={"example.com/x": "y"})),
                          ("an empty networks annotation", defaulted_pod("")),
                          ("another plugin's NAD", defaulted_pod("bridge")),
                          ("a JSON list of another plugin's NAD", defaulted_pod('[{"name": "bridge"}]'))):
            with self.subTest(what):
                resp = self.assertUntouched(admission_review(pod))
                self.assertNotIn("status", resp)

    def test_kube_scheduler_sends_the_extender_exactly_the_pods_with_topocni_networks_under_the_shipped_config(self):
        # kube-scheduler's own rule (schedrules.is_interested, from pkg/scheduler/extender.go)
        # on the pods as the webhook leaves them, with the extender entry the example ships.
        with open(os.path.join(EXAMPLES, "kube-scheduler-config.yaml")) as f:
            extender = yaml.safe_load(f)["extenders"][0]
        self.assertEqual(schedrules.ignored_by_scheduler(extender), {MARKER}, "NodeResourcesFit must not count it")
        # A topocni network that asks for nothing countable (no bandwidth, no pool, no selector) is marked too.
        self.api.put_nad(nad_object("bare", {"cniVersion": "1.0.0", "name": "bare", "type": "topocni",
                                             "attachment": "macvlan", "master": "eth1"}))
        for networks in ("plain", "net/listed@n2, bridge", "vf", '[{"name": "wrapped"}]', "bare"):
            with self.subTest(networks=networks):
                deadline = time.monotonic() + 5
                while True:   # "bare" arrives by the watch, or is read from the API
                    resp = self.review(admission_review(defaulted_pod(networks)))
                    if "patch" in resp or time.monotonic() > deadline:
                        break
                    time.sleep(0.1)
                patched, _ = self.admit(defaulted_pod(networks))
                self.assertTrue(schedrules.is_interested(extender, patched), patched["spec"]["containers"])
                res = patched["spec"]["containers"][0]["resources"]
                self.assertEqual((res["requests"][MARKER], res["limits"][MARKER]), ("1", "1"))
        for what, pod in (("no networks", defaulted_pod()), ("another plugin's NAD", defaulted_pod("bridge"))):
            with self.subTest(what):
                self.assertUntouched(admission_review(pod))
                self.assertFalse(schedrules.is_interested(extender, pod),
                                 "a pod without topocni networks is scheduled whether the extender is up or not")
        # A pod created while the webhook was not there carries no marker: the extender is not asked
        # about it (ADD is its guard), as the README says.
        self.assertFalse(schedrules.is_interested(extender, defaulted_pod("plain")))

    def test_requests_other_than_a_pod_create_are_allowed_without_a_patch(self):
        pod = defaulted_pod("plain", name="web-0")
        deployment = {"apiVersion": "apps/v1", "kind": "Deployment",
                      "metadata": {"name": "web", "namespace": "default", "annotations": {NETWORKS: "plain"}},
                      "spec": {"template": {"metadata": {"annotations": {NETWORKS: "plain"}}, "spec": pod["spec"]}}}
        running = copy.deepcopy(pod)
        running["metadata"]["uid"] = "5b0e8a86-7a9c-4f4e-8d3a-1e2f3a4b5c6d"
        for what, review in (
                ("a pod UPDATE", admission_review(running, "UPDATE", old=running)),
                ("a pod DELETE", admission_review(None, "DELETE", old=running)),
                ("a pod exec CONNECT", admission_review(
                    {"kind": "PodExecOptions", "apiVersion": "v1", "stdin": True, "command": ["sh"]}, "CONNECT",
                    kind=("", "v1", "PodExecOptions"), sub_resource="exec")),
                ("a Deployment CREATE", admission_review(deployment, kind=("apps", "v1", "Deployment"),
                                                         resource=("apps", "v1", "deployments"))),
                ("a pod's binding CREATE", admission_review(
                    {"kind": "Binding", "apiVersion": "v1", "metadata": {"name": "web-0", "namespace": "default"},
                     "target": {"kind": "Node", "name": "w1"}}, kind=("", "v1", "Binding"), sub_resource="binding")),
                ("a Pod of another group", admission_review(pod, kind=("example.com", "v1", "Pod"),
                                                            resource=("example.com", "v1", "pods")))):
            with self.subTest(what):
                resp = self.assertUntouched(review)
                self.assertNotIn("status", resp)

    def test_garbage_bodies_get_400_and_the_server_stays_up(self):
        good = admission_review(defaulted_pod("plain"))
        no_uid = copy.deepcopy(good)
        del no_uid["request"]["uid"]
        numeric_uid = copy.deepcopy(good)
        numeric_uid["request"]["uid"] = 7
        bodies = [b"", b"{not json", b"[]", b"null", b'"AdmissionReview"', b"\xff\xfe\x00garbage",
                  b'{"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview"}',
                  b'{"request": []}', json.dumps(no_uid).encode(), json.dumps(numeric_uid).encode(),
                  b"[" * 100000 + b"]" * 100000, b'{"request": {"uid": "x"' + b"," * 5000 + b"}}",
                  json.dumps(good).encode()[:-40]]
        for body in bodies:
            with self.subTest(body=body[:60]):
                status, data = self.call("POST", "/mutate", body)
                self.assertEqual(status, 400, data)
                self.assertIsNone(self.proc.poll(), "the webhook is still running")
        # Strange members inside a well-formed review: allowed, or refused, never a crash.
        odd = []
        for change in ({"metadata": {"annotations": {NETWORKS: 7}}}, {"metadata": {"annotations": []}},
                       {"spec": {"containers": {}}}, {"spec": {"containers": [7]}}, {"spec": None},
                       {"metadata": {"annotations": {NETWORKS: "[{"}}},
                       {"metadata": {"annotations": {NETWORKS: "capable", "kubernetes.io/egress-bandwidth": "x"}}}):
            pod = defaulted_pod()
            for k, v in change.items():
                pod[k] = v if v is None else {**(pod.get(k) or {}), **v}
            odd.append(admission_review(pod))
        for review in odd:
            with self.subTest(review=json.dumps(review["request"]["object"])[:80]):
                status, data = self.call("POST", "/mutate", json.dumps(review).encode())
                self.assertIn(status, (200, 400), data)
                if status == 200:
                    self.assertEqual(json.loads(data)["response"]["uid"], review["request"]["uid"])
        # The pod's annotation that is no quantity refuses the pod, naming it.
        resp = self.review(odd[-1])
        self.assertFalse(resp["allowed"])
        self.assertIn("kubernetes.io/egress-bandwidth", resp["status"]["message"])
        self.assertEqual(self.call("GET", "/mutate")[0], 405)
        self.assertEqual(self.call("POST", "/other", json.dumps(good).encode())[0], 404)
        self.assertEqual(self.call("GET", "/healthz")[0], 200)
        self.assertTrue(self.admit(defaulted_pod("plain"))[0])   # and it still serves

    def test_a_hostile_body_of_nested_objects_costs_a_bounded_multiple_of_its_size_and_its_memory_comes_back(self):
        if sanitized(BIN):
            self.skipTest("memory is ASan's here: its allocator quarantines what is freed")
        # 17 and 51 MiB of nested objects in the pod (--max-body raised from its 8 MiB to let them
        # in). README: a request costs at most its size plus 48 MiB at its peak (of a pod,
        # a tree is built only of what the webhook reads, at most 1 MiB of it), and RSS comes back
        # within 32 MiB of where it was.
        self.proc.send_signal(signal.SIGTERM)
        self.assertEqual(self.proc.wait(timeout=10), 0)
        self.start("--max-body", str(64 * MiB))
        pid = self.proc.pid
        self.admit(defaulted_pod("plain"))   # warm

        def wrap(where):
            def put(value):
                pod = defaulted_pod("plain")
                if where == "affinity":
                    pod["spec"]["affinity"] = "@"
                else:
                    pod["spec"]["x"] = "@"
                return json.dumps(admission_review(pod)).replace('"@"', value)
            return put

        for size in (17 * MiB, 51 * MiB):
            bodies = nested_bodies(size, wrap("x"))
            bodies["wide affinity"] = nested_bodies(size, wrap("affinity"))["wide"]
            for shape, body in bodies.items():
                with self.subTest(size=size, shape=shape):
                    reset_peak(pid)
                    rss = proc_status(pid, "VmRSS")
                    status, data = self.call("POST", "/mutate", body)
                    peak = proc_status(pid, "VmHWM")
                    if shape == "deep":
                        self.assertEqual(status, 400, data[:300])
                        self.assertIn("nested deeper than 10000 levels", json.loads(data)["error"])
                    elif shape == "wide affinity":   # a part the webhook reads: refused past 1 MiB
                        self.assertEqual(status, 400, data[:300])
                        self.assertIn("more than 1048576", json.loads(data)["error"])
                    else:   # a part it does not read: the pod is admitted as any other
                        self.assertEqual(status, 200, data[:300])
                        self.assertIn("patch", json.loads(data)["response"])
                    self.assertLessEqual(peak - rss, len(body) + 48 * MiB,
                                         f"peak {peak >> 20} MiB from {rss >> 20} MiB for {len(body) >> 20} MiB")
                    after = proc_status(pid, "VmRSS")
                    self.assertLessEqual(after - rss, 32 * MiB, f"RSS {after >> 20} MiB after, {rss >> 20} MiB before")
        self.assertTrue(self.admit(defaulted_pod("plain"))[0])

    def test_sigterm_ends_the_webhook_with_status_0(self):
        self.admit(defaulted_pod("plain"))
        start = time.monotonic()
        self.proc.send_signal(signal.SIGTERM)
        try:
            rc = self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.fail(f"the webhook did not stop within 10 s of SIGTERM: {self.log_text()}")
        self.assertEqual(rc, 0, self.log_text())
        self.assertLess(time.monotonic() - start, 3, "the webhook took over 3 s to stop")
        self.assertIn("admission webhook stopped", self.log_text())
        # A caller keeping its connection open (as the API server does between calls) does
        # not hold the stop: a connection waiting for its next request is closed at once.
        self.start()
        ctx = ssl.create_default_context(cafile=os.path.join(self.pki, "ca.crt"))
        kept = http.client.HTTPSConnection("127.0.0.1", self.port, context=ctx, timeout=30)
        self.addCleanup(kept.close)
        kept.request("POST", "/mutate", json.dumps(admission_review(defaulted_pod("plain"))).encode(),
                     {"Content-Type": "application/json"})
        self.assertEqual(kept.getresponse().read() and 200, 200)
        start = time.monotonic()
        self.proc.send_signal(signal.SIGTERM)
        try:
            rc = self.proc.wait(timeout=15)
        except subprocess.TimeoutExpired:
            self.fail(f"the webhook did not stop within 15 s of SIGTERM with a connection open: {self.log_text()}")
        self.assertEqual(rc, 0, self.log_text())
        self.assertLess(time.monotonic() - start, 3, "an idle kept-alive connection held the stop")

class WebhookDraClaims(WebhookCase):
    """--dra-claims: a network whose NAD has a ResourceClaimTemplate gets the pod a claim on
    it instead of extended resources (what the pod names must be what dra-template prints)."""

    def template(self, nad, namespace="default"):
        """The template `topocni dra-template` prints for a NAD of all_nads()."""
        path = os.path.join(self.tmp, f"{nad}.json")
        with open(path, "w") as f:
            json.dump(next(n for n in all_nads() if n["metadata"]["name"] == nad), f)
        r = subprocess.run([BIN, "dra-template", "--nad", f"{namespace}/{nad}", "--file", path],
                           capture_output=True, text=True, timeout=30)
        self.assertEqual(r.returncode, 0, r.stderr)
        return json.loads(r.stdout)

    def restart(self, mode):
        self.proc.terminate()
        self.proc.wait(timeout=10)
        self.start("--dra-claims", mode)
        deadline = time.monotonic() + 10
        while not self.api.watching(TEMPLATES_PATH):
            self.assertLess(time.monotonic(), deadline, self.log_text())
            time.sleep(0.05)

    def test_a_network_with_a_template_gets_a_claim_instead_of_extended_resources_and_others_do_not(self):
        t = self.template("vf")
        with self.api.cond:
            self.api._put("templates", t)
        self.restart("existing")
        pod = defaulted_pod("vf, plain")
        patched, _ = self.admit(pod)
        name = t["metadata"]["name"]
        self.assertEqual(name, "vf-topocni")
        self.assertEqual(patched["spec"]["resourceClaims"], [{"name": name, "resourceClaimTemplateName": name}])
        res = patched["spec"]["containers"][0]["resources"]
        self.assertEqual(res["claims"], [{"name": name}])
        # vf's VF and bandwidth are the claim's; plain (no template) keeps its extended resources.
        self.assertFalse([k for k in res["requests"] if "sriov" in k], res)
        self.assertEqual(res["requests"][ADDR + "plain"], "1")
        self.assertEqual(res["requests"][MARKER], "1")

    def test_claims_the_pod_has_already_are_not_added_twice(self):
        t = self.template("vf")
        with self.api.cond:
            self.api._put("templates", t)
        self.restart("existing")
        pod = defaulted_pod("vf")
        pod["spec"]["resourceClaims"] = [{"name": "vf-topocni", "resourceClaimTemplateName": "vf-topocni"},
                                         {"name": "gpu", "resourceClaimName": "gpu-1"}]
        pod["spec"]["containers"][0]["resources"] = {"claims": [{"name": "gpu"}, {"name": "vf-topocni"}]}
        patched, _ = self.admit(pod)
        self.assertEqual(patched["spec"]["resourceClaims"], pod["spec"]["resourceClaims"])
        self.assertEqual(patched["spec"]["containers"][0]["resources"]["claims"], [{"name": "gpu"}, {"name": "vf-topocni"}])
        # Only the other container-less claim reference missing is added.
        pod["spec"]["containers"][0]["resources"] = {"claims": [{"name": "gpu"}]}
        patched, _ = self.admit(pod)
        self.assertEqual(patched["spec"]["containers"][0]["resources"]["claims"], [{"name": "gpu"}, {"name": "vf-topocni"}])

    def test_without_a_template_existing_mode_leaves_extended_resources_and_create_mode_makes_it(self):
        self.restart("existing")
        patched, _ = self.admit(defaulted_pod("vf"))
        self.assertNotIn("resourceClaims", patched["spec"])
        self.assertEqual(self.api.templates, {})
        self.restart("create")
        # A dry run creates nothing, but shows the claim the pod would get.
        review = admission_review(defaulted_pod("vf"))
        review["request"]["dryRun"] = True
        resp = self.review(review)
        patch = json.loads(base64.b64decode(resp["patch"]))
        self.assertTrue(any(op["path"] == "/spec/resourceClaims" for op in patch), patch)
        self.assertEqual(self.api.templates, {})
        patched, _ = self.admit(defaulted_pod("vf"))
        self.assertEqual(patched["spec"]["resourceClaims"][0]["resourceClaimTemplateName"], "vf-topocni")
        made = self.api.templates["default/vf-topocni"]
        expected = self.template("vf")
        self.assertEqual(made["spec"], expected["spec"])
        # The next pod finds it (by the watch, or the API's 409): one template, still.
        patched, _ = self.admit(defaulted_pod("vf", name="second"))
        self.assertEqual(patched["spec"]["resourceClaims"][0]["resourceClaimTemplateName"], "vf-topocni")
        self.assertEqual(list(self.api.templates), ["default/vf-topocni"])


if __name__ == "__main__":
    main()
