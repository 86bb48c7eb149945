#!/usr/bin/python3
"""The example manifests and configs in examples/, as a cluster would get them.

Every YAML document parses; every NAD and config says cniVersion 1.0.0 unless it uses
something only 1.1.0 has (Multus before v4.1 refuses a 1.1.0 result); rbac.yaml grants
exactly the two calls topocni makes; and the DaemonSet's kubeconfig script, taken from the
YAML and run for real with /bin/sh and with busybox sh in temp dirs, writes a kubeconfig
that parses, names the right server, CA and token file, and that topocni itself uses to
read a Node from a fake API server, also after the token rotated.

What topocni node-report writes is followed through to its readers: the DaemonSet's
node-report script, run for real (with a stand-in binary, and with the built one once it has
--format), writes the NFD feature file and the node_exporter textfile into the node paths
it mounts; the NodeFeatureRule (nfd-rule.yaml) sets valid label keys from features
node-report writes, and labels the right nodes when evaluated like NFD does; the
PrometheusRule (prometheus-rule.yaml) only reads metrics and labels node-report writes.
promtext, the strict Prometheus text-format parser these tests use, is tested here too.
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

import promtext
import schedrules
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
    """Every example, examples/dra/ included."""
    return sorted(os.path.join(d, f) for d in (EXAMPLES, os.path.join(EXAMPLES, "dra"))
                  for f in os.listdir(d) if f.endswith(suffixes))


def load_yaml(name):
    with open(os.path.join(EXAMPLES, name)) as f:
        return [d for d in yaml.safe_load_all(f) if d is not None]


def named(docs, kind, name):
    (doc,) = [d for d in docs if d["kind"] == kind and d["metadata"]["name"] == name]
    return doc


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
    """kTopocniKubeconfig from kube/kubeconfig.h: where topocni looks when a config has no "kubeconfig"."""
    with open(os.path.join(ROOT, "kube", "kubeconfig.h")) as f:
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


def shells(tmp):
    """/bin/sh as is, and busybox sh with nothing but busybox applets on PATH (under tmp):
    [(name, argv, PATH)]."""
    out = [("/bin/sh", ["/bin/sh"], "/usr/bin:/bin")]
    bb = busybox()
    if bb:
        bindir = os.path.join(tmp, "busybox-bin")
        os.makedirs(bindir, exist_ok=True)
        for applet in subprocess.run([bb, "--list"], capture_output=True, text=True, check=True).stdout.split():
            if not os.path.lexists(os.path.join(bindir, applet)):
                os.symlink(bb, os.path.join(bindir, applet))
        out.append(("busybox sh", [bb, "sh"], bindir))
    return out


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
                    # A component's config file (kube-scheduler's --config) is no API object: no metadata.
                    config_file = d.get("kind") == "KubeSchedulerConfiguration"
                    self.assertTrue(d.get("apiVersion") and d.get("kind") and
                                    (config_file or d.get("metadata", {}).get("name")), d)

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

    def test_the_cluster_role_grants_exactly_what_the_code_calls_in_the_core_group(self):
        docs = load_yaml("rbac.yaml")
        self.assertEqual(sorted(d["kind"] for d in docs), ["ClusterRole", "ClusterRoleBinding", "ServiceAccount",
                                                           "ValidatingAdmissionPolicy", "ValidatingAdmissionPolicy",
                                                           "ValidatingAdmissionPolicyBinding",
                                                           "ValidatingAdmissionPolicyBinding"])
        role = one(docs, "ClusterRole")
        self.assertNotIn("aggregationRule", role)
        grants = set()
        for rule in role["rules"]:
            self.assertEqual(set(rule), {"apiGroups", "resources", "verbs"},
                             f"no resourceNames, nonResourceURLs or anything else: {rule}")
            grants |= {(g, r, v) for g in rule["apiGroups"] for r in rule["resources"] for v in rule["verbs"]}
        self.assertEqual(grants, {("", "nodes", "get"), ("", "pods", "get"), ("", "nodes", "patch"),
                                  ("", "nodes", "list"), ("", "nodes", "watch"), ("", "nodes/status", "patch"),
                                  ("k8s.cni.cncf.io", "network-attachment-definitions", "get"),
                                  ("k8s.cni.cncf.io", "network-attachment-definitions", "list"),
                                  ("k8s.cni.cncf.io", "network-attachment-definitions", "watch"),
                                  ("", "events", "create"), ("", "events", "patch"), ("", "pods/eviction", "create"),
                                  ("resource.k8s.io", "resourceslices", "list"), ("resource.k8s.io", "resourceslices", "create"),
                                  ("resource.k8s.io", "resourceslices", "update"),
                                  ("resource.k8s.io", "resourceslices", "delete"),
                                  ("resource.k8s.io", "resourceclaims", "get")})

    def test_the_admission_policy_holds_topocnis_service_account_to_its_own_nodes_facts_annotation(self):
        docs = load_yaml("rbac.yaml")
        policy, binding = named(docs, "ValidatingAdmissionPolicy", "topocni-node-facts"), \
            named(docs, "ValidatingAdmissionPolicyBinding", "topocni-node-facts")
        sa = one(docs, "ServiceAccount")["metadata"]
        self.assertEqual(binding["spec"]["policyName"], policy["metadata"]["name"])
        self.assertEqual(binding["spec"]["validationActions"], ["Deny"])
        self.assertIn(f'system:serviceaccount:{sa["namespace"]}:{sa["name"]}',
                      policy["spec"]["matchConditions"][0]["expression"])
        rules = policy["spec"]["matchConstraints"]["resourceRules"]
        self.assertEqual([(r["resources"], r["operations"]) for r in rules], [(["nodes", "nodes/status"], ["UPDATE"])])
        self.assertEqual(policy["spec"]["variables"], [{"name": "onStatus",
                                                        "expression": 'request.?subResource.orValue("") == "status"'}])
        text = " ".join(v["expression"] for v in policy["spec"]["validations"])
        for needed in ("authentication.kubernetes.io/node-name", "topocni.io/facts", "object.spec == oldObject.spec",
                       '!variables.onStatus ||', "dyn(object.status).?capacity", "dyn(object.status).?allocatable",
                       '"bandwidth.topocni.io/"', '"addresses.topocni.io/"', 'k == "topocni.io/networks"'):
            self.assertIn(needed, text)

    def test_the_slice_policy_holds_topocnis_service_account_to_its_own_nodes_resourceslices(self):
        docs = load_yaml("rbac.yaml")
        policy = named(docs, "ValidatingAdmissionPolicy", "topocni-resourceslices")
        binding = named(docs, "ValidatingAdmissionPolicyBinding", "topocni-resourceslices")
        sa = one(docs, "ServiceAccount")["metadata"]
        self.assertEqual((binding["spec"]["policyName"], binding["spec"]["validationActions"]),
                         ("topocni-resourceslices", ["Deny"]))
        self.assertIn(f'system:serviceaccount:{sa["namespace"]}:{sa["name"]}',
                      policy["spec"]["matchConditions"][0]["expression"])
        (rule,) = policy["spec"]["matchConstraints"]["resourceRules"]
        self.assertEqual((rule["apiGroups"], rule["resources"], sorted(rule["operations"])),
                         (["resource.k8s.io"], ["resourceslices"], ["CREATE", "DELETE", "UPDATE"]))
        text = " ".join(v["expression"] for v in policy["spec"]["variables"] + policy["spec"]["validations"])
        for needed in ("authentication.kubernetes.io/node-name", "spec.?nodeName", "oldObject",
                       "variables.tokenNode == variables.sliceNode"):
            self.assertIn(needed, text)

    def test_the_webhook_mutates_only_pod_creation_outside_its_own_and_the_system_namespace_with_no_side_effects(self):
        docs = load_yaml("admission-webhook.yaml")
        self.assertEqual(sorted(d["kind"] for d in docs),
                         ["ClusterRole", "ClusterRoleBinding", "Deployment", "MutatingWebhookConfiguration", "Namespace",
                          "Service", "ServiceAccount"])
        ns = one(docs, "Namespace")["metadata"]["name"]
        hook = one(docs, "MutatingWebhookConfiguration")["webhooks"][0]
        self.assertEqual(len(hook["name"].split(".")), 3)
        self.assertEqual(hook["admissionReviewVersions"], ["v1"])
        self.assertEqual(hook["sideEffects"], "None")
        self.assertIn(hook["failurePolicy"], ("Ignore", "Fail"))
        self.assertEqual(hook["rules"], [{"operations": ["CREATE"], "apiGroups": [""], "apiVersions": ["v1"],
                                          "resources": ["pods"], "scope": "Namespaced"}])
        expr = hook["namespaceSelector"]["matchExpressions"][0]
        self.assertEqual((expr["key"], expr["operator"]), ("kubernetes.io/metadata.name", "NotIn"))
        self.assertEqual(set(expr["values"]), {"kube-system", ns})
        self.assertTrue(1 <= hook["timeoutSeconds"] <= 30)
        # The Service the configuration calls is the Deployment's, on the path it serves.
        svc, dep = one(docs, "Service"), one(docs, "Deployment")
        ref = hook["clientConfig"]["service"]
        self.assertEqual((ref["namespace"], ref["name"]), (svc["metadata"]["namespace"], svc["metadata"]["name"]))
        self.assertEqual(svc["metadata"]["namespace"], ns)
        self.assertEqual(svc["spec"]["selector"], dep["spec"]["template"]["metadata"]["labels"])
        self.assertEqual(ref["port"], svc["spec"]["ports"][0]["port"])
        pod = dep["spec"]["template"]["spec"]
        cmd = pod["containers"][0]["command"]
        self.assertEqual(cmd[1], "admission-webhook")
        self.assertEqual(cmd[cmd.index("--path") + 1], ref["path"])
        self.assertEqual(pod["serviceAccountName"], one(docs, "ServiceAccount")["metadata"]["name"])
        grants = set()
        for rule in one(docs, "ClusterRole")["rules"]:
            grants |= {(g, r, v) for g in rule["apiGroups"] for r in rule["resources"] for v in rule["verbs"]}
        self.assertEqual(grants, {("k8s.cni.cncf.io", "network-attachment-definitions", v) for v in ("get", "list", "watch")})
        # The subcommand knows every flag the Deployment passes.
        help_text = subprocess.run([BIN, "admission-webhook", "--help"], capture_output=True, text=True).stdout
        for flag in (a for a in cmd if a.startswith("--")):
            self.assertIn(flag, help_text)

    def test_the_extender_may_only_list_and_watch_what_its_caches_hold(self):
        docs = load_yaml("scheduler-extender.yaml")
        self.assertEqual(sorted(d["kind"] for d in docs),
                         ["ClusterRole", "ClusterRoleBinding", "Deployment", "Service", "ServiceAccount"])
        grants = set()
        for rule in one(docs, "ClusterRole")["rules"]:
            grants |= {(g, r, v) for g in rule["apiGroups"] for r in rule["resources"] for v in rule["verbs"]}
        self.assertEqual(grants, {(g, r, v) for g, r in (("", "nodes"), ("", "pods"),
                                                        ("k8s.cni.cncf.io", "network-attachment-definitions"))
                                  for v in ("list", "watch")})
        pod = one(docs, "Deployment")["spec"]["template"]["spec"]
        self.assertEqual(pod["serviceAccountName"], one(docs, "ServiceAccount")["metadata"]["name"])
        cmd = pod["containers"][0]["command"]
        self.assertEqual(cmd[1], "scheduler-extender")
        prefix = cmd[cmd.index("--url-prefix") + 1]
        sched = one(load_yaml("kube-scheduler-config.yaml"), "KubeSchedulerConfiguration")
        ext = sched["extenders"][0]
        self.assertTrue(ext["urlPrefix"].endswith(prefix))
        self.assertEqual((ext["filterVerb"], ext["prioritizeVerb"]), ("filter", "prioritize"))
        self.assertGreater(ext["weight"], 0)
        self.assertTrue(ext["nodeCacheCapable"])
        self.assertEqual(set(ext) - {"urlPrefix", "filterVerb", "prioritizeVerb", "weight", "nodeCacheCapable",
                                     "enableHTTPS", "tlsConfig", "httpTimeout", "ignorable", "managedResources"}, set())
        self.assertIn(100, [p.get("percentageOfNodesToScore") for p in sched["profiles"]])

    def test_the_scheduler_asks_the_extender_only_about_pods_carrying_the_webhooks_marker(self):
        # The marker the webhook writes (kMarkerResource, cluster/resources.h) is the one
        # managed resource, ignored by NodeResourcesFit; Go's field names (kube-scheduler
        # config/v1 types.go) and nothing else; ignorable false holds up only pods with it.
        with open(os.path.join(ROOT, "cluster", "resources.h")) as f:
            marker = re.search(r'kMarkerResource = "([^"]+)"', f.read()).group(1)
        ext = one(load_yaml("kube-scheduler-config.yaml"), "KubeSchedulerConfiguration")["extenders"][0]
        self.assertEqual(set(ext) - schedrules.EXTENDER_FIELDS, set())
        self.assertEqual(ext["managedResources"], [{"name": marker, "ignoredByScheduler": True}])
        for r in ext["managedResources"]:
            self.assertEqual(set(r) - schedrules.MANAGED_RESOURCE_FIELDS, set())
        self.assertIs(ext["ignorable"], False)
        # kube-scheduler's own rule: the extender's and the webhook's own pods are scheduled while the
        # extender is down (they must be, to bring it back); a pod asking for the marker waits for it.
        for name in ("scheduler-extender.yaml", "admission-webhook.yaml"):
            pod = one(load_yaml(name), "Deployment")["spec"]["template"]
            self.assertFalse(schedrules.is_interested(ext, pod), name)
        marked = {"spec": {"containers": [{"name": "a"}, {"name": "b", "resources": {"limits": {marker: "1"}}}]}}
        self.assertTrue(schedrules.is_interested(ext, marked))
        init = {"spec": {"containers": [{"name": "a"}], "initContainers": [{"name": "i", "resources": {"requests": {marker: "1"}}}]}}
        self.assertTrue(schedrules.is_interested(ext, init))
        self.assertTrue(schedrules.is_interested({}, {"spec": {"containers": []}}), "no managedResources: every pod")

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
        self.assertLess(init.index("kubeconfig-first"), init.index("install"),
                        "the kubeconfig exists before the binary can attach a pod")
        runs = {"init": pod["initContainers"], "sidecar": pod["containers"]}
        for where, containers in runs.items():
            with self.subTest(container=where):
                c = next(c for c in containers if c["name"] == ("kubeconfig-first" if where == "init" else "kubeconfig"))
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
        return shells(self.tmp)

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


# -- What topocni node-report writes (README: topocni node-report) -----------------------------

# An interface or network name as node-report puts it in a key: characters outside
# [A-Za-z0-9-_.] become '_'.
_SAFE = r"[A-Za-z0-9_.-]+"
NODE_REPORT_FEATURES = [re.compile(p) for p in (
    r"topocni\.io/numa-nodes",
    r"topocni\.io/sriov-capable",
    rf"topocni\.io/sriov-pf\.{_SAFE}\.(total|configured|free)-vfs",
    rf"topocni\.io/sriov-pf\.{_SAFE}\.numa-node",
    r"topocni\.io/sriov-numa([0-9]+|-unknown)\.(configured|free)-vfs",
    rf"topocni\.io/link\.{_SAFE}\.speed-mbps",
    rf"topocni\.io/bandwidth\.{_SAFE}\.(capacity|egress-free|ingress-free)-gbps",
    rf"topocni\.io/ipam\.{_SAFE}\.free-addresses",
)]

# node-report --format prometheus: family -> (type, label names).
NODE_REPORT_METRICS = {
    "topocni_bandwidth_capacity_bps": ("gauge", {"master", "direction"}),
    "topocni_bandwidth_committed_bps": ("gauge", {"master", "direction"}),
    "topocni_vfs_total": ("gauge", {"pf", "numa_node"}),
    "topocni_vfs_free": ("gauge", {"pf", "numa_node"}),
    "topocni_attachments": ("gauge", {"network", "attachment", "master"}),
    "topocni_ipam_addresses": ("gauge", {"network", "range_set", "state"}),
    "topocni_placement_refusals_total": ("counter", {"network", "constraint"}),
    "topocni_evictions_total": ("counter", {"network", "outcome"}),
}
# The labels whose values are a closed set.
METRIC_LABEL_VALUES = {"direction": {"egress", "ingress"}, "state": {"free", "used"},
                      "outcome": {"evicted", "blocked", "skipped"}}
# What Prometheus adds to every series it scrapes from node_exporter.
TARGET_LABELS = {"instance", "job"}

NFD_FEATURES_DIR = "/etc/kubernetes/node-feature-discovery/features.d"
TEXTFILE_DIR = "/var/lib/node_exporter/textfile_collector"


def ipam_default_data_dir():
    """host-local's default dataDir, from ipam/host_local.h."""
    with open(os.path.join(ROOT, "ipam", "host_local.h")) as f:
        return re.search(r'std::string data_dir = "([^"]+)"', f.read()).group(1)


IPAM_DEFAULT_DATA_DIR = ipam_default_data_dir()


def is_node_report_feature(key):
    return any(p.fullmatch(key) for p in NODE_REPORT_FEATURES)


def nfd_local_features(text):
    """What NFD's local source makes of a features.d file (source/local/local.go): each
    `key[=value]` line is an element of local.feature and of local.label, named by the key
    as written; no '=' means "true"; '#' lines are comments (node-report writes no directive)."""
    elems = {}
    for line in text.split("\n"):
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        key, sep, val = line.partition("=")
        elems[key] = val if sep else "true"
    return {"local.feature": elems, "local.label": dict(elems)}


# Kubernetes label syntax (apimachinery IsQualifiedName, IsValidLabelValue).
_DNS_SUBDOMAIN = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*")
_LABEL_NAME = re.compile(r"([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]")


def label_key_problem(key):
    """Why `key` is not a valid label key, or None."""
    parts = key.split("/")
    if len(parts) > 2:
        return "more than one '/'"
    if len(parts) == 2 and not (0 < len(parts[0]) <= 253 and _DNS_SUBDOMAIN.fullmatch(parts[0])):
        return f"prefix {parts[0]!r} is not a DNS subdomain of at most 253 characters"
    name = parts[-1]
    if not (0 < len(name) <= 63 and _LABEL_NAME.fullmatch(name)):
        return f"name {name!r}: 1-63 of [A-Za-z0-9-_.], starting and ending alphanumeric"
    return None


def label_value_problem(value):
    if value == "" or (len(value) <= 63 and _LABEL_NAME.fullmatch(value)):
        return None
    return f"value {value!r}: at most 63 of [A-Za-z0-9-_.], starting and ending alphanumeric"


def nfd_master_allows(key):
    """nfd-master (v0.13+, default flags) refuses labels in kubernetes.io and its subdomains,
    but for its own feature.node.kubernetes.io and profile.node.kubernetes.io (and their
    subdomains); an unprefixed rule label gets feature.node.kubernetes.io/."""
    ns = key.rpartition("/")[0] or "feature.node.kubernetes.io"
    own = ("feature.node.kubernetes.io", "profile.node.kubernetes.io")
    if ns in own or any(ns.endswith("." + o) for o in own):
        return True
    return not (ns == "kubernetes.io" or ns.endswith(".kubernetes.io"))


# NodeFeatureRule matchExpressions (NFD customization guide, "matchExpressions"): op -> how
# many values (None: one or more).
NFD_OPS = {"In": None, "NotIn": None, "InRegexp": None, "Exists": 0, "DoesNotExist": 0, "IsTrue": 0,
           "IsFalse": 0, "Gt": 1, "Ge": 1, "Lt": 1, "Le": 1, "GtLt": 2, "GeLe": 2}
NFD_INTEGER_OPS = {"Gt", "Ge", "Lt", "Le", "GtLt", "GeLe"}


def nfd_expression(expr, present, value):
    """One MatchExpression against one attribute element, as NFD evaluates it."""
    op, vals = expr["op"], expr.get("value") or []
    if op == "Exists":
        return present
    if op == "DoesNotExist":
        return not present
    if not present:
        return False
    if op in ("In", "NotIn"):
        return (value in vals) == (op == "In")
    if op == "InRegexp":
        return any(re.search(v, value) for v in vals)
    if op in ("IsTrue", "IsFalse"):
        return value == ("true" if op == "IsTrue" else "false")
    n, v = int(value), [int(x) for x in vals]   # NFD: both sides must be integers
    if op in ("GtLt", "GeLe"):
        return v[0] < n < v[1] if op == "GtLt" else v[0] <= n <= v[1]
    return {"Gt": n > v[0], "Ge": n >= v[0], "Lt": n < v[0], "Le": n <= v[0]}[op]


def nfd_matches(terms, features):
    """matchFeatures: every term holds (a missing feature matches nothing)."""
    for term in terms:
        elems = features.get(term["feature"])
        if elems is None:
            return False
        for key, expr in term["matchExpressions"].items():
            if not nfd_expression(expr, key in elems, elems.get(key)):
                return False
    return True


def nfd_rule_labels(rule, features):
    """The labels a rule sets on a node with these features ({} when it does not match)."""
    if rule.get("matchAny") and not any(nfd_matches(a["matchFeatures"], features) for a in rule["matchAny"]):
        return {}
    if rule.get("matchFeatures") and not nfd_matches(rule["matchFeatures"], features):
        return {}
    return dict(rule["labels"])


def nfd_terms(rule):
    """Every matchFeatures term of a rule, matchAny's included."""
    return list(rule.get("matchFeatures") or []) + [t for a in rule.get("matchAny") or [] for t in a["matchFeatures"]]


_PROMQL_TOKEN = re.compile(r"""
    (?P<space>\s+)
  | (?P<string>"(?:[^"\\]|\\.)*"|'(?:[^'\\]|\\.)*'|`[^`]*`)
  | (?P<range>\[[^\]]*\])
  | (?P<duration>[0-9]+(?:ms|[smhdwy])(?![A-Za-z0-9_:]))
  | (?P<number>(?:0x[0-9a-fA-F]+|(?:[0-9]+\.?[0-9]*|\.[0-9]+)(?:[eE][+-]?[0-9]+)?))
  | (?P<ident>[A-Za-z_:][A-Za-z0-9_:]*)
  | (?P<op>=~|!~|!=|==|>=|<=|[-+*/%^<>=(){},])
""", re.X)
_PROMQL_GROUPING = {"by", "without", "on", "ignoring", "group_left", "group_right"}
_PROMQL_WORDS = {"and", "or", "unless", "bool", "offset", "atan2", "inf", "nan", "sum", "min", "max", "avg",
                 "group", "stddev", "stdvar", "count", "count_values", "bottomk", "topk", "quantile",
                 "limitk", "limit_ratio"}


def promql_selectors(expr):
    """([(metric name or None, {label: (op, value)})], grouping labels) of a PromQL expression:
    the series it reads, and the labels named by by/without/on/ignoring/group_*."""
    toks, pos = [], 0
    while pos < len(expr):
        m = _PROMQL_TOKEN.match(expr, pos)
        if not m:
            raise ValueError(f"cannot read PromQL at {expr[pos:]!r}")
        pos = m.end()
        if m.lastgroup != "space":
            toks.append((m.lastgroup, m.group()))
    toks.append(("end", ""))
    selectors, grouping, i = [], set(), 0
    while i < len(toks) - 1:
        kind, text = toks[i]
        nxt = toks[i + 1][1]
        if kind == "ident" and text in _PROMQL_GROUPING:
            i += 1
            if toks[i][1] == "(":
                while toks[i][1] != ")":
                    if toks[i][0] == "ident":
                        grouping.add(toks[i][1])
                    i += 1
            continue
        if kind == "ident" and (nxt == "(" or text.lower() in _PROMQL_WORDS):
            i += 1
            continue
        if kind == "ident" or text == "{":
            name = text if kind == "ident" else None
            i += 1 if kind == "ident" else 0
            matchers = {}
            if toks[i][1] == "{":
                i += 1
                while toks[i][1] != "}":
                    if toks[i][1] == ",":
                        i += 1
                        continue
                    (_, label), (_, op), (vkind, val) = toks[i:i + 3]
                    if vkind != "string":
                        raise ValueError(f"label matcher {label}{op}{val}: the value must be a string")
                    matchers[label] = (op, val[1:-1])
                    i += 3
                i += 1
            selectors.append((name, matchers))
            continue
        i += 1
    return selectors, grouping


def mount_host_path(pod, container, path):
    """The node path behind `path` in the container (via its hostPath volume mounts), and
    whether that mount is read-only; (None, None) when no hostPath mount holds it."""
    volumes = {v["name"]: v for v in pod["volumes"]}
    best = None
    for m in container.get("volumeMounts", []):
        mp = m["mountPath"].rstrip("/")
        if (path == mp or path.startswith(mp + "/")) and (best is None or len(mp) > len(best["mountPath"])):
            best = m
    if best is None or "hostPath" not in volumes[best["name"]]:
        return None, None
    rel = os.path.relpath(path, best["mountPath"])
    host = volumes[best["name"]]["hostPath"]["path"]
    return (host if rel == "." else os.path.join(host, rel)), bool(best.get("readOnly", False))


def node_report_container():
    docs = load_yaml("daemonset.yaml")
    pod = one(docs, "DaemonSet")["spec"]["template"]["spec"]
    c = next(c for c in pod["containers"] if c["name"] == "node-report")
    cm_name = next(v["configMap"]["name"] for v in pod["volumes"] if "configMap" in v)
    cm = next(d for d in docs if d["kind"] == "ConfigMap" and d["metadata"]["name"] == cm_name)
    return pod, c, cm["data"]


class RefusalAgentInTheDaemonSet(unittest.TestCase):
    def test_the_daemonset_runs_the_refusal_agent_on_the_node_state_dir_with_its_node_name(self):
        docs = load_yaml("daemonset.yaml")
        pod = one(docs, "DaemonSet")["spec"]["template"]["spec"]
        c = next(c for c in pod["containers"] if c["name"] == "refusals")
        self.assertEqual(c["command"][:2], ["/opt/cni/bin/topocni", "refusal-agent"])
        state = c["command"][c["command"].index("--state-dir") + 1]
        # It reads the records and removes those of gone pods, and counts evictions: the
        # node's stateDir, writable; nothing else is mounted.
        self.assertEqual(mount_host_path(pod, c, state), ("/var/lib/cni/topocni", False))
        self.assertEqual([m["mountPath"] for m in c["volumeMounts"]], [state])
        env = {e["name"]: e for e in c["env"]}
        self.assertEqual(env["NODE_NAME"]["valueFrom"], {"fieldRef": {"fieldPath": "spec.nodeName"}})
        sc = c["securityContext"]
        self.assertFalse(sc.get("privileged", False))
        self.assertFalse(sc["allowPrivilegeEscalation"])
        self.assertTrue(sc["readOnlyRootFilesystem"])
        self.assertEqual(pod["serviceAccountName"], "topocni")


class NodeReportInTheDaemonSet(unittest.TestCase):
    def test_the_daemonset_runs_node_report_in_both_formats_writing_into_mounted_node_paths(self):
        pod, c, scripts = node_report_container()
        script_path = c["command"][-1]
        self.assertEqual(c["command"], ["/bin/sh", script_path])
        script = scripts[os.path.basename(script_path)]
        scripts_mount = next(m for m in c["volumeMounts"] if m["mountPath"] == os.path.dirname(script_path))
        self.assertTrue(next(v for v in pod["volumes"] if v["name"] == scripts_mount["name"]).get("configMap"))
        env = {e["name"]: e["value"] for e in c["env"]}
        self.assertEqual(env["REPORT_SECONDS"], "60")
        # The script reads each path from the environment, with the same default.
        for var in ("FEATURES_FILE", "PROM_FILE", "SYSFS_ROOT", "STATE_DIR", "REPORT_SECONDS"):
            with self.subTest(var=var):
                self.assertIn("${%s:-%s}" % (var, env[var]), script)
        self.assertRegex(script, r'node-report --sysfs-root "\$sysfs" --state-dir "\$state" --output "\$features"')
        self.assertRegex(script, r'node-report --format prometheus --sysfs-root "\$sysfs" --state-dir "\$state"'
                                 r' \\\n\s+--output "\$prom"')
        want = {  # what the container sees -> (the node path, writable)
            env["FEATURES_FILE"]: (f"{NFD_FEATURES_DIR}/topocni", True),
            env["PROM_FILE"]: (f"{TEXTFILE_DIR}/topocni.prom", True),
            env["SYSFS_ROOT"]: ("/sys", False),
            env["STATE_DIR"]: ("/var/lib/cni/topocni", False),
            # host-local's default dataDir: node-report reads each store at the path the
            # network's recorded config names, so at the node's own path.
            IPAM_DEFAULT_DATA_DIR: (IPAM_DEFAULT_DATA_DIR, False),
        }
        for path, (host, writable) in want.items():
            with self.subTest(path=path):
                got, ro = mount_host_path(pod, c, path)
                self.assertEqual(got, host)
                self.assertEqual(ro, not writable, "outputs writable, inputs read-only")
        self.assertTrue(env["PROM_FILE"].endswith(".prom"), "node_exporter reads *.prom only")
        writable = sorted(m["mountPath"] for m in c["volumeMounts"] if not m.get("readOnly"))
        self.assertEqual(writable, sorted({os.path.dirname(env["FEATURES_FILE"]), os.path.dirname(env["PROM_FILE"])}),
                         "nothing else is writable")
        self.assertFalse(c.get("securityContext", {}).get("privileged", False))

    def test_the_macvlan_nad_reads_the_feature_file_the_daemonset_writes(self):
        pod, c, _ = node_report_container()
        env = {e["name"]: e["value"] for e in c["env"]}
        host, _ = mount_host_path(pod, c, env["FEATURES_FILE"])
        nad = one(load_yaml("macvlan-nad.yaml"), "NetworkAttachmentDefinition")
        self.assertEqual(json.loads(nad["spec"]["config"])["nodeLabelsFile"], host)


# A stand-in for topocni: logs its arguments, writes its format's name to --output, and
# fails for the format named in STUB_FAIL.
STUB_TOPOCNI = """#!/bin/sh
echo "$*" >>"$STUB_LOG"
out= fmt=nfd
while [ $# -gt 0 ]; do
  case $1 in --output) out=$2; shift ;; --format) fmt=$2; shift ;; esac
  shift
done
[ "$fmt" != "${STUB_FAIL:-}" ] || exit 3
echo "$fmt" >"$out"
"""


class NodeReportScript(unittest.TestCase):
    """The DaemonSet's node-report.sh, run for real with a stand-in binary, in temp dirs."""

    def setUp(self):
        self.tmp = tempfile.mkdtemp(prefix="topocni-examples-")
        _, _, scripts = node_report_container()
        self.script = os.path.join(self.tmp, "node-report.sh")
        with open(self.script, "w") as f:
            f.write(scripts["node-report.sh"])
        self.bin = os.path.join(self.tmp, "topocni")
        with open(self.bin, "w") as f:
            f.write(STUB_TOPOCNI)
        os.chmod(self.bin, 0o755)
        self.log = os.path.join(self.tmp, "args.log")
        self.features = os.path.join(self.tmp, "features.d", "topocni")
        self.prom = os.path.join(self.tmp, "textfile", "topocni.prom")
        os.makedirs(os.path.dirname(self.features))
        os.makedirs(os.path.dirname(self.prom))

    def tearDown(self):
        shutil.rmtree(self.tmp, ignore_errors=True)

    def env(self, path, **extra):
        env = {"PATH": path, "TOPOCNI": self.bin, "STUB_LOG": self.log, "ONESHOT": "1",
               "FEATURES_FILE": self.features, "PROM_FILE": self.prom,
               "SYSFS_ROOT": "/fake/sys", "STATE_DIR": "/fake/state"}
        env.update(extra)
        return {k: v for k, v in env.items() if v is not None}

    def calls(self):
        with open(self.log) as f:
            return f.read().splitlines()

    def read(self, path):
        with open(path) as f:
            return f.read()

    def reset(self):
        for p in (self.log, self.features, self.prom):
            if os.path.exists(p):
                os.unlink(p)

    def test_one_iteration_writes_the_feature_file_and_the_prometheus_textfile_with_sh_and_busybox(self):
        for name, shell, path in shells(self.tmp):
            with self.subTest(shell=name):
                self.reset()
                p = subprocess.run(shell + [self.script], env=self.env(path), capture_output=True, text=True,
                                   timeout=30)
                self.assertEqual(p.returncode, 0, p.stderr)
                self.assertEqual(self.calls(), [
                    f"node-report --sysfs-root /fake/sys --state-dir /fake/state --output {self.features}",
                    f"node-report --format prometheus --sysfs-root /fake/sys --state-dir /fake/state "
                    f"--output {self.prom}"])
                self.assertEqual(self.read(self.features), "nfd\n")
                self.assertEqual(self.read(self.prom), "prometheus\n")

    def test_when_one_format_fails_the_other_is_still_written_and_the_iteration_fails(self):
        for name, shell, path in shells(self.tmp):
            for failing, written in (("nfd", "prom"), ("prometheus", "features")):
                with self.subTest(shell=name, failing=failing):
                    self.reset()
                    p = subprocess.run(shell + [self.script], env=self.env(path, STUB_FAIL=failing),
                                       capture_output=True, text=True, timeout=30)
                    self.assertEqual(p.returncode, 1)
                    failed = self.features if failing == "nfd" else self.prom
                    self.assertIn(f"writing {failed} failed", p.stderr)
                    self.assertEqual(len(self.calls()), 2)
                    self.assertTrue(os.path.exists(getattr(self, written)))

    def test_the_loop_reports_every_period_and_stops_at_once_on_sigterm(self):
        for name, shell, path in shells(self.tmp):
            with self.subTest(shell=name):
                self.reset()
                p = subprocess.Popen(shell + [self.script], env=self.env(path, ONESHOT=None, REPORT_SECONDS="1"),
                                     stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
                try:
                    deadline = time.monotonic() + 10
                    while time.monotonic() < deadline and not (os.path.exists(self.log) and len(self.calls()) >= 4):
                        time.sleep(0.05)
                    self.assertGreaterEqual(len(self.calls()), 4, "two iterations of both formats")
                    start = time.monotonic()
                    p.send_signal(signal.SIGTERM)
                    p.wait(timeout=5)
                    self.assertLess(time.monotonic() - start, 2)
                    self.assertEqual(p.returncode, 0, p.stderr.read())
                finally:
                    if p.poll() is None:
                        p.kill()
                        p.wait()
                    p.stdout.close()
                    p.stderr.close()


def binary_has_prometheus_format():
    if not os.access(BIN, os.X_OK):
        return False
    p = subprocess.run([BIN, "node-report", "--help"], capture_output=True, text=True, timeout=30)
    return "--format" in p.stdout + p.stderr


class NodeReportScriptWithTopocni(unittest.TestCase):
    """The script with the built topocni, on a fake sysfs: both files are what their readers take."""

    def setUp(self):
        if not binary_has_prometheus_format():
            self.skipTest(f"{BIN} node-report has no --format (yet)")
        self.tmp = tempfile.mkdtemp(prefix="topocni-examples-")
        self.addCleanup(shutil.rmtree, self.tmp, True)
        self.sys = os.path.join(self.tmp, "sys")
        self.state = os.path.join(self.tmp, "state")
        self.make_sysfs()

    def make_sysfs(self):
        """Two NUMA nodes, a PF on each with 2 of 8 VFs configured (one of ens1f0's in use), eth1."""
        pci = os.path.join(self.sys, "bus/pci/devices")
        net = os.path.join(self.sys, "class/net")
        for d in ["devices/system/node/node0", "devices/system/node/node1"]:
            os.makedirs(os.path.join(self.sys, d))
        os.makedirs(os.path.join(net, "eth1"))
        with open(os.path.join(net, "eth1", "speed"), "w") as f:
            f.write("25000\n")
        for pf, addr, numa in (("ens1f0", "0000:03:00.0", 0), ("ens2f0", "0000:81:00.0", 1)):
            pdir = os.path.join(pci, addr)
            os.makedirs(os.path.join(pdir, "net", pf))
            for k, v in {"sriov_totalvfs": "8", "sriov_numvfs": "2", "numa_node": str(numa)}.items():
                with open(os.path.join(pdir, k), "w") as f:
                    f.write(v + "\n")
            os.makedirs(os.path.join(net, pf))
            os.symlink(pdir, os.path.join(net, pf, "device"))
            with open(os.path.join(net, pf, "speed"), "w") as f:
                f.write("25000\n")
            for i in range(2):
                vf = addr[:-4] + f"0{i + 2}.{i}"
                os.makedirs(os.path.join(pci, vf))
                os.symlink(pdir, os.path.join(pci, vf, "physfn"))
                os.symlink(os.path.join(pci, vf), os.path.join(pdir, f"virtfn{i}"))
        os.makedirs(os.path.join(self.state, "sriov"))
        with open(os.path.join(self.state, "sriov", "0000:03:02.0.json"), "w") as f:
            f.write("{}")

    def test_the_feature_file_has_only_known_keys_and_the_textfile_parses_with_help_and_type(self):
        features = os.path.join(self.tmp, "features.d", "topocni")
        prom = os.path.join(self.tmp, "textfile", "topocni.prom")
        os.makedirs(os.path.dirname(features))
        os.makedirs(os.path.dirname(prom))
        _, _, scripts = node_report_container()
        script = os.path.join(self.tmp, "node-report.sh")
        with open(script, "w") as f:
            f.write(scripts["node-report.sh"])
        p = subprocess.run(["/bin/sh", script], capture_output=True, text=True, timeout=60,
                           env={"PATH": "/usr/bin:/bin", "ONESHOT": "1", "TOPOCNI": os.path.abspath(BIN),
                                "FEATURES_FILE": features, "PROM_FILE": prom, "SYSFS_ROOT": self.sys,
                                "STATE_DIR": self.state})
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertEqual(os.listdir(os.path.dirname(features)), ["topocni"], "no temp file left")
        self.assertEqual(os.listdir(os.path.dirname(prom)), ["topocni.prom"], "no temp file left")
        with open(features) as f:
            elems = nfd_local_features(f.read())["local.feature"]
        for key, val in elems.items():
            with self.subTest(feature=key):
                self.assertTrue(is_node_report_feature(key), "a key nfd-rule.yaml's checks know")
                self.assertIsNone(label_value_problem(val))
        with open(prom) as f:
            families = promtext.parse(f.read())
        for name, fam in families.items():
            with self.subTest(family=name):
                self.assertIn(name, NODE_REPORT_METRICS, "a metric prometheus-rule.yaml's checks know")
                type_, labels = NODE_REPORT_METRICS[name]
                self.assertEqual(fam.type, type_)
                self.assertTrue(fam.help, "every family has a HELP")
                for s in fam.samples:
                    self.assertEqual(set(s.labels), labels, s)
                    for label, values in METRIC_LABEL_VALUES.items():
                        if label in s.labels:
                            self.assertIn(s.labels[label], values, s)
        # The two formats agree: free VFs per PF.
        for pf in ("ens1f0", "ens2f0"):
            with self.subTest(pf=pf):
                self.assertEqual(promtext.value(families, "topocni_vfs_free", pf=pf),
                                 float(elems[f"topocni.io/sriov-pf.{pf}.free-vfs"]))


class NodeFeatureRuleExample(unittest.TestCase):
    def rule(self):
        return one(load_yaml("nfd-rule.yaml"), "NodeFeatureRule")

    def test_the_rule_is_a_cluster_scoped_nfd_v1alpha1_object_with_named_rules_that_set_labels(self):
        nfr = self.rule()
        self.assertEqual(nfr["apiVersion"], "nfd.k8s-sigs.io/v1alpha1")
        self.assertNotIn("namespace", nfr["metadata"], "NodeFeatureRule is cluster-scoped")
        names = [r["name"] for r in nfr["spec"]["rules"]]
        self.assertEqual(len(names), len(set(names)))
        for r in nfr["spec"]["rules"]:
            with self.subTest(rule=r["name"]):
                self.assertTrue(r["labels"])
                self.assertTrue(nfd_terms(r))
                self.assertLessEqual(set(r), {"name", "labels", "matchFeatures", "matchAny"})

    def test_every_label_the_rules_set_is_a_valid_kubernetes_label_that_nfd_master_allows(self):
        for r in self.rule()["spec"]["rules"]:
            for key, val in r["labels"].items():
                with self.subTest(rule=r["name"], label=key):
                    self.assertIsNone(label_key_problem(key))
                    self.assertIsNone(label_value_problem(val))
                    self.assertIn("/", key, "prefixed: NFD would put an unprefixed one in its own namespace")
                    self.assertTrue(nfd_master_allows(key))

    def test_every_expression_reads_a_local_feature_node_report_writes_with_a_valid_operator(self):
        for r in self.rule()["spec"]["rules"]:
            for term in nfd_terms(r):
                self.assertEqual(set(term), {"feature", "matchExpressions"})
                self.assertIn(term["feature"], ("local.feature", "local.label"))
                for key, expr in term["matchExpressions"].items():
                    with self.subTest(rule=r["name"], key=key):
                        self.assertTrue(is_node_report_feature(key), "a key topocni node-report writes")
                        self.assertLessEqual(set(expr), {"op", "value"})
                        self.assertIn(expr["op"], NFD_OPS)
                        vals = expr.get("value") or []
                        want = NFD_OPS[expr["op"]]
                        if want is None:
                            self.assertGreaterEqual(len(vals), 1)
                        else:
                            self.assertEqual(len(vals), want)
                        self.assertTrue(all(isinstance(v, str) for v in vals), "values are strings in the CRD")
                        if expr["op"] in NFD_INTEGER_OPS:
                            self.assertTrue(all(re.fullmatch(r"-?[0-9]+", v) for v in vals))

    def test_the_rules_label_nodes_by_free_vfs_per_numa_node_and_10_gbps_of_egress_headroom(self):
        rules = self.rule()["spec"]["rules"]

        def labels(report):
            feats = nfd_local_features(report)
            out = {}
            for r in rules:
                out.update(nfd_rule_labels(r, feats))
            return out

        base = ("# topocni node-report\ntopocni.io/numa-nodes=2\ntopocni.io/sriov-capable=true\n"
                "topocni.io/sriov-numa0.configured-vfs=8\ntopocni.io/sriov-numa1.configured-vfs=8\n")
        cases = [
            ("VFs free on NUMA 0 only, 10 Gb/s egress free on ens1f0",
             "topocni.io/sriov-numa0.free-vfs=3\ntopocni.io/sriov-numa1.free-vfs=0\n"
             "topocni.io/bandwidth.eth1.egress-free-gbps=9\ntopocni.io/bandwidth.ens1f0.egress-free-gbps=10\n",
             {"topocni.io/sriov-free-vfs-numa0", "topocni.io/bandwidth-headroom-10g"}),
            ("VFs free on NUMA 1, 9 Gb/s egress but 40 ingress free",
             "topocni.io/sriov-numa0.free-vfs=0\ntopocni.io/sriov-numa1.free-vfs=1\n"
             "topocni.io/bandwidth.eth1.egress-free-gbps=9\ntopocni.io/bandwidth.eth1.ingress-free-gbps=40\n",
             {"topocni.io/sriov-free-vfs-numa1"}),
            ("no SR-IOV, 100 Gb/s egress free on eth1", "topocni.io/bandwidth.eth1.egress-free-gbps=100\n",
             {"topocni.io/bandwidth-headroom-10g"}),
            ("nothing known", "", set()),
        ]
        for what, extra, want in cases:
            with self.subTest(node=what):
                got = labels(base + extra)
                self.assertEqual(set(got), want)
                self.assertTrue(all(v == "true" for v in got.values()))

    def test_the_pod_affinity_example_in_the_comments_uses_labels_the_rules_set(self):
        with open(os.path.join(EXAMPLES, "nfd-rule.yaml")) as f:
            comments = "\n".join(l for l in f.read().splitlines() if l.startswith("#"))
        keys = re.findall(r"\{ key: ([^,]+), operator: In", comments)
        self.assertTrue(keys)
        set_by_rules = {k for r in self.rule()["spec"]["rules"] for k in r["labels"]}
        self.assertLessEqual(set(keys), set_by_rules)

    def test_the_nfd_checks_here_know_every_key_node_report_documents_and_nothing_else(self):
        for key in ("topocni.io/numa-nodes", "topocni.io/sriov-capable", "topocni.io/sriov-pf.ens1f0.total-vfs",
                    "topocni.io/sriov-pf.ens1f0.numa-node", "topocni.io/sriov-numa-unknown.free-vfs",
                    "topocni.io/sriov-numa12.configured-vfs", "topocni.io/link.eth1.100.speed-mbps",
                    "topocni.io/bandwidth.eth_1.capacity-gbps", "topocni.io/bandwidth.ens1f0.ingress-free-gbps",
                    "topocni.io/ipam.macvlan-net1.free-addresses"):
            self.assertTrue(is_node_report_feature(key), key)
        for key in ("topocni.io/bandwidth.eth1.egress-free", "topocni.io/sriov-numa.free-vfs",
                    "feature.node.kubernetes.io/network-sriov.capable", "topocni.io/link.eth 1.speed-mbps",
                    "topocni.io/bandwidth-headroom-10g"):
            self.assertFalse(is_node_report_feature(key), key)
        self.assertIsNone(label_key_problem("topocni.io/sriov-free-vfs-numa0"))
        self.assertIsNotNone(label_key_problem("topocni.io/" + "a" * 64))
        self.assertIsNotNone(label_key_problem("Topocni.io/x"))
        self.assertIsNotNone(label_key_problem("a/b/c"))
        self.assertFalse(nfd_master_allows("node.kubernetes.io/x"))
        self.assertTrue(nfd_master_allows("sriov.feature.node.kubernetes.io/x"))
        feats = nfd_local_features("# c\na.io/x=5\na.io/flag\n")
        self.assertEqual(feats["local.feature"], {"a.io/x": "5", "a.io/flag": "true"})
        gt = {"feature": "local.feature", "matchExpressions": {"a.io/x": {"op": "Gt", "value": ["4"]}}}
        self.assertTrue(nfd_matches([gt], feats))
        gt["matchExpressions"]["a.io/x"]["value"] = ["5"]
        self.assertFalse(nfd_matches([gt], feats))


class PrometheusRuleExample(unittest.TestCase):
    def alerts(self):
        pr = one(load_yaml("prometheus-rule.yaml"), "PrometheusRule")
        self.assertEqual(pr["apiVersion"], "monitoring.coreos.com/v1")
        self.assertTrue(pr["metadata"].get("namespace"), "PrometheusRule is namespaced")
        return [r for g in pr["spec"]["groups"] for r in g["rules"]]

    def test_every_expression_reads_only_metrics_and_labels_node_report_writes(self):
        for a in self.alerts():
            with self.subTest(alert=a["alert"]):
                selectors, grouping = promql_selectors(a["expr"])
                self.assertTrue(selectors)
                for name, matchers in selectors:
                    self.assertIn(name, NODE_REPORT_METRICS)
                    labels = NODE_REPORT_METRICS[name][1] | TARGET_LABELS
                    for label, (op, val) in matchers.items():
                        self.assertIn(label, labels, f"{name} has no label {label}")
                        if op == "=" and label in METRIC_LABEL_VALUES:
                            self.assertIn(val, METRIC_LABEL_VALUES[label])
                    # A counter only through rate(), irate() or increase(); a gauge never.
                    through_rate = re.search(r"\b(rate|irate|increase)\(\s*" + name + r"\b", a["expr"])
                    self.assertEqual(bool(through_rate), NODE_REPORT_METRICS[name][0] == "counter", name)
                all_labels = set().union(*(NODE_REPORT_METRICS[n][1] for n, _ in selectors)) | TARGET_LABELS
                self.assertLessEqual(grouping, all_labels)

    def test_the_alerts_cover_free_bandwidth_free_addresses_and_refusals_with_thresholds(self):
        by_metrics = {frozenset(n for n, _ in promql_selectors(a["expr"])[0]): a for a in self.alerts()}
        bw = by_metrics[frozenset({"topocni_bandwidth_capacity_bps", "topocni_bandwidth_committed_bps"})]
        self.assertRegex(bw["expr"], r"\(\s*topocni_bandwidth_capacity_bps\s*-\s*topocni_bandwidth_committed_bps\s*\)"
                                     r"\s*<\s*1e9$")
        self.assertEqual(bw["for"], "10m")
        ipam = by_metrics[frozenset({"topocni_ipam_addresses"})]
        self.assertEqual(promql_selectors(ipam["expr"])[0], [("topocni_ipam_addresses", {"state": ("=", "free")})])
        self.assertRegex(ipam["expr"], r"<\s*5$")
        ref = by_metrics[frozenset({"topocni_placement_refusals_total"})]
        self.assertRegex(ref["expr"], r"^increase\(topocni_placement_refusals_total\[15m\]\)\s*>\s*0$")
        for a in self.alerts():
            with self.subTest(alert=a["alert"]):
                self.assertRegex(a["alert"], r"^[A-Z][A-Za-z0-9]+$")
                self.assertIn(a["labels"]["severity"], ("critical", "warning", "info"))
                if "for" in a:
                    self.assertRegex(a["for"], r"^[0-9]+(ms|s|m|h|d|w|y)$")

    def test_every_annotation_names_the_node_and_the_series_labels_the_expression_keeps(self):
        for a in self.alerts():
            with self.subTest(alert=a["alert"]):
                self.assertEqual(set(a["annotations"]), {"summary", "description"})
                selectors, _ = promql_selectors(a["expr"])
                kept = set.intersection(*(NODE_REPORT_METRICS[n][1] for n, _ in selectors)) | TARGET_LABELS
                fixed = {l for _, m in selectors for l, (op, _) in m.items() if op == "="}
                used = set(re.findall(r"\$labels\.([A-Za-z_][A-Za-z0-9_]*)", " ".join(a["annotations"].values())))
                self.assertLessEqual(used, kept, "only labels the alert's series have")
                self.assertLessEqual((kept - TARGET_LABELS - fixed) | {"instance"}, used,
                                     "the node and every label that tells the series apart")
                for text in a["annotations"].values():
                    self.assertEqual(text.count("{{"), text.count("}}"))

    def test_the_promql_reader_finds_selectors_matchers_and_grouping_labels(self):
        sel, grouping = promql_selectors(
            'sum by (master) (rate(foo_total{a="b", c=~"x.*",}[5m] offset 1h)) > on(instance) group_left '
            "bar - 1e9 and {__name__='baz'}")
        self.assertEqual(sel, [("foo_total", {"a": ("=", "b"), "c": ("=~", "x.*")}), ("bar", {}),
                               (None, {"__name__": ("=", "baz")})])
        self.assertEqual(grouping, {"master", "instance"})


# A realistic node-report --format prometheus output: every family, HELP and TYPE each.
REALISTIC_PROM = """\
# HELP topocni_bandwidth_capacity_bps Bandwidth topocni may commit on a master (link speed x overcommit), bit/s.
# TYPE topocni_bandwidth_capacity_bps gauge
topocni_bandwidth_capacity_bps{master="eth1",direction="egress"} 2.5e+10
topocni_bandwidth_capacity_bps{master="eth1",direction="ingress"} 2.5e+10
topocni_bandwidth_capacity_bps{master="ens1f0",direction="egress"} 50000000000
topocni_bandwidth_capacity_bps{master="ens1f0",direction="ingress"} 50000000000
# HELP topocni_bandwidth_committed_bps Bandwidth committed to attachments on a master, bit/s.
# TYPE topocni_bandwidth_committed_bps gauge
topocni_bandwidth_committed_bps{master="eth1",direction="egress"} 2.45e+10
topocni_bandwidth_committed_bps{master="eth1",direction="ingress"} 0
topocni_bandwidth_committed_bps{master="ens1f0",direction="egress"} 1e10
topocni_bandwidth_committed_bps{master="ens1f0",direction="ingress"} 1e10
# HELP topocni_vfs_total VFs configured on an SR-IOV PF.
# TYPE topocni_vfs_total gauge
topocni_vfs_total{pf="ens1f0",numa_node="0"} 8
topocni_vfs_total{pf="ens2f0",numa_node="-1"} 8
# HELP topocni_vfs_free Configured VFs of a PF without a topocni attachment.
# TYPE topocni_vfs_free gauge
topocni_vfs_free{pf="ens1f0",numa_node="0"} 7
topocni_vfs_free{pf="ens2f0",numa_node="-1"} 8
# HELP topocni_attachments Attachments topocni made, per network and master.
# TYPE topocni_attachments gauge
topocni_attachments{network="macvlan-net1",attachment="macvlan",master="eth1"} 12
topocni_attachments{network="sriov-net1",attachment="sriov",master="ens1f0"} 1
# HELP topocni_ipam_addresses Addresses of a host-local range set, free or used.
# TYPE topocni_ipam_addresses gauge
topocni_ipam_addresses{network="macvlan-net1",range_set="0",state="free"} 179
topocni_ipam_addresses{network="macvlan-net1",range_set="0",state="used"} 12
# HELP topocni_placement_refusals_total ADDs refused by a placement constraint (code 100).
# TYPE topocni_placement_refusals_total counter
topocni_placement_refusals_total{network="sriov-net1",constraint="topology.numaNode"} 3
topocni_placement_refusals_total{network="macvlan-net1",constraint="bandwidth"} 0
topocni_placement_refusals_total{network="macvlan-net1",constraint="nodeSelector"} 1
# HELP topocni_evictions_total What the refusal agent did about pods of networks with onRefusal evict.
# TYPE topocni_evictions_total counter
topocni_evictions_total{network="sriov-net1",outcome="evicted"} 2
topocni_evictions_total{network="sriov-net1",outcome="blocked"} 1
topocni_evictions_total{network="sriov-net1",outcome="skipped"} 0
"""


class PromTextParserTest(unittest.TestCase):
    """promtext: what it must take, and what it must refuse naming the line."""

    def assertRefused(self, text, line, why):
        with self.assertRaises(ValueError) as cm:
            promtext.parse(text)
        msg = str(cm.exception)
        self.assertTrue(msg.startswith(f"line {line}: "), msg)
        self.assertIn(why, msg)
        return msg

    def test_a_realistic_node_report_exposition_parses_into_its_families_samples_and_values(self):
        fams = promtext.parse(REALISTIC_PROM)
        self.assertEqual(list(fams), list(NODE_REPORT_METRICS))
        for name, (type_, labels) in NODE_REPORT_METRICS.items():
            with self.subTest(family=name):
                self.assertEqual(fams[name].type, type_)
                self.assertTrue(fams[name].help)
                self.assertTrue(all(set(s.labels) == labels for s in fams[name].samples))
        v = promtext.value
        self.assertEqual(v(fams, "topocni_bandwidth_capacity_bps", master="eth1", direction="egress"), 25e9)
        self.assertEqual(v(fams, "topocni_bandwidth_committed_bps", master="ens1f0", direction="egress"), 1e10)
        self.assertEqual(v(fams, "topocni_vfs_free", pf="ens2f0"), 8)
        self.assertEqual(v(fams, "topocni_ipam_addresses", network="macvlan-net1", state="free"), 179)
        self.assertEqual(v(fams, "topocni_placement_refusals_total", constraint="topology.numaNode"), 3)
        self.assertEqual(fams["topocni_vfs_total"].help, "VFs configured on an SR-IOV PF.")
        with self.assertRaises(KeyError):
            v(fams, "topocni_ipam_addresses", network="macvlan-net1")   # free and used: which?
        with self.assertRaises(KeyError):
            v(fams, "topocni_vfs_free", pf="nope")

    def test_escapes_special_values_timestamps_blanks_comments_and_both_counter_namings_parse(self):
        text = ('# a comment, and an empty line next\n\n'
                '# HELP esc A \\\\ backslash and\\na newline.\n'
                'esc{path="C:\\\\DIR\\\\F.TXT",err="no file:\\n\\"F.TXT\\"",}  1.458255915e9\n'
                '\t weird { problem = "div by zero" } +Inf -3982045 \n'
                '# just a comment between samples of one family\n'
                'weird{problem="nan"} NaN\n'
                'weird{problem="neg"} -Inf 1395066363000\n'
                'empty{} .5E-3\n'
                '# TYPE c1 counter\n'
                'c1_total 5\n'
                '# TYPE c2_total counter\n'
                'c2_total 0\n'
                '# TYPE c3 counter\n'
                'c3 1\n'
                '# TYPE h histogram\n'
                'h_bucket{le="+Inf"} 2\n'
                'h_sum 3\n'
                'h_count 2\n')
        fams = promtext.parse(text)
        self.assertEqual(fams["esc"].help, "A \\ backslash and\na newline.")
        self.assertEqual(fams["esc"].samples[0].labels, {"path": "C:\\DIR\\F.TXT", "err": 'no file:\n"F.TXT"'})
        self.assertEqual(fams["weird"].samples[0].labels, {"problem": "div by zero"})
        self.assertEqual(fams["weird"].samples[0].value, float("inf"))
        self.assertEqual(fams["weird"].samples[0].timestamp, -3982045)
        self.assertNotEqual(promtext.value(fams, "weird", problem="nan"), promtext.value(fams, "weird", problem="nan"))
        self.assertEqual(promtext.value(fams, "empty"), 0.0005)
        self.assertEqual([(n, f.type, [s.name for s in f.samples]) for n, f in fams.items() if f.type != "untyped"],
                         [("c1", "counter", ["c1_total"]), ("c2_total", "counter", ["c2_total"]),
                          ("c3", "counter", ["c3"]), ("h", "histogram", ["h_bucket", "h_sum", "h_count"])])
        self.assertEqual(promtext.parse(""), {})

    def test_the_same_series_twice_is_refused_whatever_the_label_order(self):
        self.assertRefused('# TYPE a gauge\na{x="1",y="2"} 1\na{y="2",x="1"} 2\n', 3, "same series as line 2")
        self.assertRefused("b 1\nb 1\n", 2, "same series")

    def test_bad_label_syntax_and_escaping_is_refused(self):
        cases = [('a{x="tab\\t"} 1\n', "invalid escape \\t"),
                 ('a{x="open} 1\n', "unterminated"),
                 ("a{x=unquoted} 1\n", "double-quoted value expected"),
                 ('a{x="1" y="2"} 1\n', "',' or '}' expected"),
                 ('a{x="1",x="2"} 1\n', "label x twice"),
                 ('a{1x="1"} 1\n', "invalid label name"),
                 ('a{,} 1\n', "invalid label name"),
                 ('a{x="1"\n', "',' or '}' expected"),
                 ("# HELP a bad \\q escape\n", "invalid escape \\q")]
        for text, why in cases:
            with self.subTest(text=text):
                self.assertRefused(text, 1, why)

    def test_bad_names_values_and_timestamps_are_refused(self):
        cases = [("1a 1\n", "must start with a metric name"),
                 ("a-b 1\n", "a blank expected after the metric name a"),
                 ("a\n", "without a value"),
                 ("a 1_000\n", "invalid value"),
                 ("a 0x1p3\n", "invalid value"),
                 ("a one\n", "invalid value"),
                 ("a 1 1.5\n", "invalid timestamp"),
                 ("a 1 9223372036854775808\n", "invalid timestamp"),
                 ("a 1 2 3\n", "more than a value and a timestamp"),
                 ("a 1\r\n", "invalid value"),
                 ("# TYPE a\n", "unknown type ''"),
                 ("# TYPE a gauge extra\n", "exactly a metric name and a type"),
                 ("# TYPE a Gauge\n", "unknown type 'Gauge'"),
                 ("# TYPE 0a gauge\n", "invalid metric name"),
                 ("# HELP\n", "HELP without a metric name"),
                 ("# TYPE c counter\nc_total -1\n", "counter c_total is negative")]
        for text, why in cases:
            with self.subTest(text=text):
                self.assertRefused(text, text.count("\n"), why)

    def test_a_sample_before_its_type_or_help_and_a_second_type_or_help_are_refused(self):
        self.assertRefused("a 1\n# TYPE a gauge\n", 2, "TYPE for a after its samples (a)")
        self.assertRefused("a_total 1\n# TYPE a counter\n", 2, "TYPE for a after its samples (a_total)")
        self.assertRefused("a 1\n# HELP a late\n", 2, "HELP for a after its samples")
        self.assertRefused("# TYPE a gauge\n# TYPE a gauge\n", 2, "a second TYPE for a")
        self.assertRefused("# HELP a x\n# HELP a y\n", 2, "a second HELP for a")
        self.assertRefused("# TYPE a counter\n# TYPE a_total gauge\n", 2, "claims sample names of family a")

    def test_a_family_whose_lines_are_not_one_group_is_refused(self):
        self.assertRefused("# TYPE a gauge\na 1\n# TYPE b gauge\nb 1\na{x=\"1\"} 2\n", 5, "not one group")
        self.assertRefused("a 1\nb 1\na{x=\"1\"} 2\n", 3, "not one group")
        self.assertRefused("# TYPE a gauge\n# HELP b x\n# HELP a y\n", 3, "not one group")
        self.assertRefused("# TYPE c counter\nc_total 1\nd 1\nc 2\n", 4, "not one group")

    def test_text_without_a_final_line_feed_is_refused(self):
        self.assertRefused("# TYPE a gauge\na 1", 2, "does not end with a line feed")
        self.assertRefused(REALISTIC_PROM.rstrip("\n"), REALISTIC_PROM.count("\n"), "line feed")



if __name__ == "__main__":
    from cnitest import main
    main()


class Demo(unittest.TestCase):
    """`make demo` runs examples/demo.py: it must tell the whole story and leave nothing."""

    def test_the_demo_attaches_one_pod_refuses_three_with_evidence_and_leaves_nothing(self):
        demo = os.path.join(os.path.dirname(__file__), "..", "..", "examples", "demo.py")
        tmp_before = set(os.listdir(tempfile.gettempdir()))
        ns_before = set(subprocess.run(["ip", "netns", "list"], capture_output=True, text=True).stdout.split())
        start = time.monotonic()
        p = subprocess.run(["/usr/bin/python3", demo, BIN], capture_output=True, text=True, timeout=60)
        self.assertEqual(p.returncode, 0, p.stdout[-2000:] + p.stderr[-2000:])
        self.assertLess(time.monotonic() - start, 60)
        out = p.stdout
        for words in ("placement constraint not met: nodeSelector", "placement constraint not met: topology.numaNode",
                      "placement constraint not met: bandwidth", "egress would reach 1100 Mb/s > 1 Gb/s",
                      "FAIL  bandwidth", "topocni.io/bandwidth.", "# TYPE topocni_placement_refusals_total counter",
                      "rate 400Mbit", "files left besides bookkeeping: none"):
            self.assertIn(words, out)
        self.assertEqual(out.count("nothing changed: links as before"), 3)
        promtext.parse(out.split("topocni node-report --format prometheus\n", 1)[1].split("\n\n==")[0].strip() + "\n")
        ns_after = set(subprocess.run(["ip", "netns", "list"], capture_output=True, text=True).stdout.split())
        self.assertEqual({n for n in ns_after - ns_before if n.startswith("demo-")}, set())
        self.assertEqual({d for d in set(os.listdir(tempfile.gettempdir())) - tmp_before
                          if d.startswith("topocni-demo-")}, set())
