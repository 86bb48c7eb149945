"""examples/ against the real kube-apiserver v1.37.2: every object it can serve is accepted
as shipped (strict field validation: an unknown or duplicated field fails), the admission
policies type-check without a warning, and each policy refuses what it exists to refuse,
for a token bound to a pod on another node."""
import glob
import json
import os
import unittest

from cluster import EXAMPLES, ClusterTestCase, load_yaml
from kubeapi import ApiError

# Objects that would run something: validated and admitted (dryRun=All), not stored. Their
# image is a placeholder; the commands they run are run as processes by the harness.
DRY_RUN_KINDS = {"DaemonSet", "Deployment", "Pod"}


def example_files():
    return sorted(os.path.relpath(p, EXAMPLES) for p in glob.glob(os.path.join(EXAMPLES, "**/*.yaml"), recursive=True))


class Manifests(ClusterTestCase):
    @classmethod
    def setUpClass(cls):
        super().setUpClass()
        if not cls.cluster.nodes:
            cls.cluster.add_nodes()
        cls.a, cls.b = cls.cluster.nodes[0], cls.cluster.nodes[1]

    def test_every_object_of_examples_that_the_server_serves_is_accepted_as_shipped(self):
        self.api.apply({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "tc-examples"}})
        kinds = {k for (_, k) in self.api.kinds(refresh=True)}
        accepted, unserved = [], []
        for name in example_files():
            for obj in load_yaml(name):
                if obj.get("kind") not in kinds:
                    unserved.append(f"{name}: {obj.get('apiVersion')} {obj.get('kind')}")
                    continue
                if obj["kind"] == "NetworkAttachmentDefinition" or (
                        obj["kind"] in ("ResourceClaimTemplate", "Pod") and obj["metadata"].get("namespace") == "default"):
                    obj["metadata"]["namespace"] = "tc-examples"   # the tests' own NADs live in default
                with self.subTest(file=name, kind=obj["kind"], name=obj["metadata"]["name"]):
                    out = self.api.apply(obj, dry_run=obj["kind"] in DRY_RUN_KINDS)
                    self.assertEqual(out["kind"], obj["kind"])
                    accepted.append(f"{name}: {obj['kind']} {obj['metadata']['name']}")
        self.assertGreaterEqual(len(accepted), 29, accepted)
        # Not API objects: kube-scheduler's own configuration (test_scheduling.py starts
        # kube-scheduler with it); and what no server here serves, the CRDs of projects this
        # harness does not install (NFD, prometheus-operator).
        self.assertEqual(sorted({u.split(":")[0] for u in unserved}),
                         ["kube-scheduler-config.yaml", "nfd-rule.yaml", "prometheus-rule.yaml"], unserved)
        print(f"\n  accepted {len(accepted)} objects; not served here (their CRDs belong to NFD and "
              f"prometheus-operator): {unserved}")

    def test_no_admission_policy_of_examples_reports_a_type_checking_warning(self):
        names = [d["metadata"]["name"] for d in load_yaml("rbac.yaml") if d["kind"] == "ValidatingAdmissionPolicy"]
        self.assertEqual(len(names), 2)
        for name in names:
            path = f"/apis/admissionregistration.k8s.io/v1/validatingadmissionpolicies/{name}"
            st = self.wait(f"{name}'s status.typeChecking", lambda: self.api.get(path).get("status", {}).get(
                "typeChecking") is not None and self.api.get(path)["status"], 60)
            self.assertEqual(st["typeChecking"].get("expressionWarnings", []), [], name)
            self.assertEqual([c for c in st.get("conditions", []) if c.get("status") != "True"], [], name)

    # --- the slice policy ---
    def slice_of(self, node, name):
        return {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceSlice", "metadata": {"name": name},
                "spec": {"driver": "topocni.io", "nodeName": node,
                         "pool": {"name": node, "generation": 1, "resourceSliceCount": 1}, "devices": []}}

    def as_node(self, node):
        return self.api.with_token(node.token)

    def wait_refused(self, what, fn):
        """A policy created a moment ago is enforced only once the API server has loaded it."""
        def refused():
            try:
                fn()
                return False
            except ApiError as e:
                return e
        return self.wait(what, refused, 30, 0.3)

    def test_a_nodes_token_may_write_its_own_nodes_slices_and_no_other_nodes(self):
        a, b = self.a, self.b
        own = self.as_node(a).create(self.slice_of(a.name, f"{a.name}-policy-own"))
        self.assertEqual(own["spec"]["nodeName"], a.name)
        e = self.wait_refused("a slice of another node", lambda: self.as_node(a).create(
            self.slice_of(b.name, f"{b.name}-policy-foreign"), dry_run=True))
        self.assertEqual(e.status, 422, e)
        self.assertIn(f"topocni on node '{a.name}' may not write node '{b.name}''s ResourceSlices", str(e))
        # Another node's slice may not be replaced or deleted either.
        theirs = self.as_node(b).create(self.slice_of(b.name, f"{b.name}-policy-theirs"))
        path = f"/apis/resource.k8s.io/v1/resourceslices/{theirs['metadata']['name']}"
        with self.assertRaises(ApiError) as cm:
            self.as_node(a).delete(path)
        self.assertEqual(cm.exception.status, 422)
        theirs["spec"]["pool"]["generation"] = 2
        with self.assertRaises(ApiError) as cm:
            self.as_node(a).put(path, theirs)
        self.assertEqual(cm.exception.status, 422)
        # ... nor moved to its node: the new object names a, the old one b.
        self.as_node(b).delete(path)
        self.as_node(a).delete(f"/apis/resource.k8s.io/v1/resourceslices/{own['metadata']['name']}")
        # A slice of no node (allNodes) is refused too.
        allnodes = self.slice_of(a.name, "tc-policy-allnodes")
        del allnodes["spec"]["nodeName"]
        allnodes["spec"]["allNodes"] = True
        with self.assertRaises(ApiError) as cm:
            self.as_node(a).create(allnodes, dry_run=True)
        self.assertEqual(cm.exception.status, 422)
        self.assertIn("a ResourceSlice of no node", str(cm.exception))

    def test_a_token_of_topocnis_account_bound_to_no_node_may_write_no_slice(self):
        tr = self.api.post("/api/v1/namespaces/kube-system/serviceaccounts/topocni/token",
                           {"apiVersion": "authentication.k8s.io/v1", "kind": "TokenRequest",
                            "spec": {"expirationSeconds": 600}})
        loose = self.api.with_token(tr["status"]["token"])
        e = self.wait_refused("a slice by a token without a node", lambda: loose.create(
            self.slice_of(self.a.name, "tc-policy-loose"), dry_run=True))
        self.assertEqual(e.status, 422, e)
        self.assertIn("names no node", str(e))

    # --- the node-facts policy ---
    def test_a_nodes_token_may_change_only_its_own_nodes_facts_annotation(self):
        a, b = self.a, self.b
        mine = {"metadata": {"annotations": {"topocni.io/facts": json.dumps({"probe": 1})}}}
        e = self.wait_refused("another node's annotation", lambda: self.as_node(a).patch(
            f"/api/v1/nodes/{b.name}?dryRun=All", mine))
        self.assertEqual(e.status, 422, e)
        self.assertIn("only change the Node its pod runs on", str(e))
        self.as_node(a).patch(f"/api/v1/nodes/{a.name}?dryRun=All", mine)
        for change, words in (({"metadata": {"labels": {"example.com/evil": "1"}}}, "topocni.io/facts annotation"),
                              ({"metadata": {"annotations": {"example.com/other": "1"}}}, "topocni.io/facts annotation"),
                              ({"spec": {"unschedulable": True}}, "topocni.io/facts annotation")):
            with self.subTest(change=change):
                with self.assertRaises(ApiError) as cm:
                    self.as_node(a).patch(f"/api/v1/nodes/{a.name}?dryRun=All", change)
                self.assertEqual(cm.exception.status, 422)
                self.assertIn(words, str(cm.exception))
        with self.assertRaises(ApiError) as cm:
            self.as_node(a).patch(f"/api/v1/nodes/{a.name}/status?dryRun=All", {"status": {"capacity": {"cpu": "64"}}})
        self.assertEqual(cm.exception.status, 422)
        self.as_node(a).patch(f"/api/v1/nodes/{a.name}/status?dryRun=All",
                              {"status": {"capacity": {"bandwidth.topocni.io/probe": "1k"}}})


if __name__ == "__main__":
    unittest.main(verbosity=2)
