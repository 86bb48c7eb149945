"""The test-only DRA tools themselves: the CEL evaluator (dra_cel, kube-scheduler's device
environment on @bufbuild/cel) and the structured allocator (dra_allocator), proven on
slices shaped as cluster/dra_slices.cc shapes them, plus examples/dra/deviceclasses.yaml
checked through the real CEL.

Needs node (skips when it is absent) and tests/integration/dra_cel/node_modules (fails
when it is missing: `make dra-cel-deps`). No root, no topocni binary.
"""
import os
import shutil
import sys
import unittest
import uuid

import yaml

from dra_allocator import Allocator, format_quantity, parse_quantity
from dra_cel import Cel, CelError

NEEDS_ROOT = False
SKIP = 77   # ctest's SKIP_RETURN_CODE for integration tests (CMakeLists.txt)
ROOT = os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))
DRIVER = "topocni.io"
NODE = "worker-1"

# ---- devices as cluster/dra_slices.cc builds them -------------------------------------


def text(s):
    return {"string": s}


def integer(v):
    return {"int": v}


def device_name(prefix, what):
    # dra_slices.cc device_name() for the inputs used here (PCI addresses, plain names).
    return prefix + "-" + "".join(c if c.isalnum() or c == "-" else "-" for c in what.lower())


def vf(pci, pf, index, pf_netdev, numa=None, speed=25000, resource="intel.com/sriov"):
    attrs = {"type": text("vf"), "resource.kubernetes.io/pciBusID": text(pci), "k8s.cni.cncf.io/deviceID": text(pci),
             "pf": text(pf), "vfIndex": integer(index), "pfNetdev": text(pf_netdev), "linkSpeedMbps": integer(speed),
             "k8s.cni.cncf.io/resourceName": text(resource), "driver": text("iavf")}
    if numa is not None:
        attrs["resource.kubernetes.io/numaNode"] = integer(numa)
    return {"name": device_name("vf", pci), "attributes": attrs}


def bandwidth(free):
    c = {"value": str(max(free, 0))}
    if free > 0:
        c["requestPolicy"] = {"default": "0", "validRange": {"min": "0"}}
    return c


def one_each(free):
    return {"value": str(free), "requestPolicy": {"default": "1", "validRange": {"min": "1", "max": "1"}}}


def link(name, attrs, egress=None, ingress=None, attachments=None):
    caps = {}
    if egress is not None:
        caps["egressMbps"] = bandwidth(egress)
        caps["ingressMbps"] = bandwidth(ingress if ingress is not None else egress)
    if attachments is not None:
        caps["attachments"] = one_each(attachments)
    return {"name": name, "attributes": dict(attrs, type=text("link")), "capacity": caps,
            "allowMultipleAllocations": True}


def pf_link(pci, netdev, speed=25000, free=25000, numa=None):
    attrs = {"pf": text(pci), "resource.kubernetes.io/pciBusID": text(pci), "netdev": text(netdev),
             "linkSpeedMbps": integer(speed)}
    if numa is not None:
        attrs["resource.kubernetes.io/numaNode"] = integer(numa)
    return link(device_name("pf", pci), attrs, free, free)


def master_link(netdev, free=10000, room=2):
    return link(device_name("link", netdev), {"netdev": text(netdev), "linkSpeedMbps": integer(10000)}, free, free, room)


def pool_device(network, range_set, free):
    return {"name": device_name("pool", f"{network}-{range_set}"),
            "attributes": {"type": text("pool"), "network": text(network), "rangeSet": text(range_set)},
            "capacity": {"addresses": one_each(free)}, "allowMultipleAllocations": True}


def resource_slice(name, devices, node=NODE, generation=1, count=1, driver=DRIVER, pool=None):
    return {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceSlice", "metadata": {"name": name},
            "spec": {"driver": driver, "pool": {"name": pool or node, "generation": generation,
                                                "resourceSliceCount": count},
                     "nodeName": node, "devices": devices}}


PF1, PF2 = "0000:3b:00.0", "0000:af:00.0"
PF1_VFS = ["0000:3b:02.0", "0000:3b:02.1"]
PF2_VFS = ["0000:af:02.0", "0000:af:02.1"]


def sample_devices():
    """A node as dra_slices.cc offers it: two PFs with two free VFs each (NUMA 0 and 1), their
    links, a macvlan master, an address pool."""
    return ([vf(p, PF1, i, "ens1f0", numa=0) for i, p in enumerate(PF1_VFS)] +
            [vf(p, PF2, i, "ens2f0", numa=1) for i, p in enumerate(PF2_VFS)] +
            [pf_link(PF1, "ens1f0", numa=0), pf_link(PF2, "ens2f0", numa=1),
             master_link("eth1"), pool_device("net-a", "10.0.0.0/24", 3)])


def load_classes():
    with open(os.path.join(ROOT, "examples", "dra", "deviceclasses.yaml")) as f:
        return [d for d in yaml.safe_load_all(f) if d]


_claims = 0


def claim(*requests, constraints=None):
    """A ResourceClaim; each request is (name, class, {selectors, count, capacity, ...})."""
    global _claims
    _claims += 1
    reqs = []
    for name, cls, extra in requests:
        ex = {"deviceClassName": cls}
        for k, v in (extra or {}).items():
            if k == "selectors":
                v = [{"cel": {"expression": e}} for e in v]
            elif k == "capacity":
                v = {"requests": v}
            ex[k] = v
        reqs.append({"name": name, "exactly": ex})
    spec = {"devices": {"requests": reqs}}
    if constraints:
        spec["devices"]["constraints"] = constraints
    return {"metadata": {"name": f"c{_claims}", "namespace": "default", "uid": str(uuid.uuid4())}, "spec": spec}


def devices_of(allocation):
    return [r["device"] for r in allocation["devices"]["results"]]


class CelCase(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        if not shutil.which("node"):
            raise unittest.SkipTest("node is not installed: the DRA CEL evaluator runs on Node.js")
        cls.cel = Cel()   # raises, failing every test, when node_modules is missing

    @classmethod
    def tearDownClass(cls):
        cls.cel.close()


class CelHarness(CelCase):
    LINK = dict(pf_link(PF1, "ens1f0", numa=0), driver=DRIVER)
    VF = dict(vf(PF1_VFS[0], PF1, 0, "ens1f0", numa=0), driver=DRIVER)

    def ev(self, expr, device=None):
        return self.cel.evaluate(expr, device or self.LINK)

    def test_a_selector_reads_unqualified_attributes_under_the_drivers_domain_with_their_types(self):
        self.assertTrue(self.ev('device.driver == "topocni.io" && device.attributes["topocni.io"].type == "link"'))
        self.assertTrue(self.ev('device.attributes["topocni.io"].linkSpeedMbps >= 25000'))
        self.assertFalse(self.ev('device.attributes["topocni.io"].linkSpeedMbps > 25000'))
        self.assertTrue(self.ev('device.attributes["topocni.io"].vfIndex == 0', self.VF))
        self.assertTrue(self.ev('device.allowMultipleAllocations') and not self.ev('device.allowMultipleAllocations', self.VF))

    def test_a_qualified_attribute_is_split_at_the_first_slash_into_domain_and_id(self):
        self.assertTrue(self.ev('device.attributes["resource.kubernetes.io"].pciBusID == "0000:3b:00.0"'))
        self.assertTrue(self.ev('device.attributes["resource.kubernetes.io"].numaNode == 0'))
        self.assertTrue(self.ev('device.attributes["k8s.cni.cncf.io"].resourceName == "intel.com/sriov"', self.VF))

    def test_a_capacity_is_a_quantity_compared_with_compare_to(self):
        self.assertTrue(self.ev('device.capacity["topocni.io"].egressMbps.compareTo(quantity("100")) >= 0'))
        self.assertFalse(self.ev('device.capacity["topocni.io"].egressMbps.compareTo(quantity("30000")) >= 0'))
        self.assertTrue(self.ev('device.capacity["topocni.io"].egressMbps == quantity("25k")'))
        self.assertTrue(self.ev('device.capacity["topocni.io"].egressMbps.isLessThan(quantity("25001"))'))

    def test_quantities_compare_exactly_across_decimal_and_binary_suffixes(self):
        for expr in ['quantity("1G").isGreaterThan(quantity("999M"))', 'quantity("1G").compareTo(quantity("999M")) == 1',
                     'quantity("1Ki") == quantity("1024")', 'quantity("1Mi").asInteger() == 1048576',
                     'quantity("1Gi").isGreaterThan(quantity("1G"))', 'quantity("1") == quantity("1000m")',
                     'quantity("1e3") == quantity("1k")', 'quantity("1.5Gi").asInteger() == 1610612736',
                     'quantity("500m").asApproximateFloat() == 0.5', 'quantity("-2k").sign() == -1',
                     'quantity("10").add(5).sub(quantity("15")).sign() == 0', 'quantity("1k").add(quantity("1Ki")) == quantity("2024")',
                     '!quantity("1.5").isInteger() && quantity("2").isInteger()',
                     'isQuantity("12Gi") && !isQuantity("12Q") && !isQuantity("")']:
            with self.subTest(expr=expr):
                self.assertTrue(self.ev(expr))

    def test_quantities_have_no_relational_operators_as_in_kubernetes(self):
        # kube-scheduler's compiler refuses `quantity > quantity` (no overload); here it
        # fails when evaluated. isGreaterThan/compareTo are the way.
        with self.assertRaises(CelError):
            self.ev('quantity("1G") > quantity("999M")')

    def test_a_malformed_quantity_or_a_fraction_as_integer_is_an_error(self):
        for expr in ['quantity("12Q") == quantity("1")', 'quantity("1.5").asInteger() == 1']:
            with self.subTest(expr=expr), self.assertRaises(CelError):
                self.ev(expr)

    def test_a_missing_attribute_is_an_evaluation_error_not_false(self):
        with self.assertRaises(CelError) as e:
            self.ev('device.attributes["topocni.io"].pfNetdev == "ens1f0"')
        self.assertIn("pfNetdev", str(e.exception))
        # The guards a selector should use instead:
        self.assertFalse(self.ev('has(device.attributes["topocni.io"].pfNetdev) && device.attributes["topocni.io"].pfNetdev == "x"'))
        self.assertTrue(self.ev('"pfNetdev" in device.attributes["topocni.io"]', self.VF))

    def test_an_unknown_domain_is_an_empty_map(self):
        self.assertTrue(self.ev('device.attributes["example.com"].size() == 0'))
        self.assertFalse(self.ev('"example.com" in device.attributes'))
        self.assertFalse(self.ev('has(device.capacity["example.com"].egressMbps)'))

    def test_cel_bind_names_a_domain_once(self):
        self.assertTrue(self.ev('cel.bind(t, device.attributes["topocni.io"], t.type == "vf" && t.pf == "0000:3b:00.0")', self.VF))
        self.assertTrue(self.ev('cel.bind(a, 1, cel.bind(b, a + 1, b == 2))'))

    def test_a_version_attribute_is_a_semver(self):
        d = dict(self.VF, attributes=dict(self.VF["attributes"], firmware={"version": "1.2.3-rc.1"}))
        self.assertTrue(self.ev('device.attributes["topocni.io"].firmware.isLessThan(semver("1.2.3"))', d))
        self.assertTrue(self.ev('device.attributes["topocni.io"].firmware.major() == 1', d))
        self.assertTrue(self.ev('device.attributes["topocni.io"].firmware.compareTo(semver("1.2.3-rc.0")) == 1', d))

    def test_a_non_bool_result_or_a_syntax_error_is_an_error(self):
        for expr in ['device.attributes["topocni.io"].linkSpeedMbps', '1 +',
                     # Optional syntax is not parsed by @bufbuild/cel 0.6.1 (kube-scheduler has it).
                     'device.attributes["topocni.io"].?pf.orValue("") == ""']:
            with self.subTest(expr=expr), self.assertRaises(CelError):
                self.ev(expr)


class AllocatorTests(CelCase):
    def setUp(self):
        self.classes = load_classes()

    def allocator(self, slices=None):
        return Allocator(slices if slices is not None else [resource_slice("s1", sample_devices())], self.classes, self.cel)

    def test_a_vf_claim_gets_one_vf_without_share_id_tied_to_the_node(self):
        a = self.allocator()
        got = a.allocate(claim(("nic", "vf.topocni.io", None)), NODE)
        self.assertEqual(got["devices"]["results"],
                         [{"request": "nic", "driver": DRIVER, "pool": NODE, "device": "vf-0000-3b-02-0"}])
        self.assertEqual(got["nodeSelector"]["nodeSelectorTerms"][0]["matchFields"][0]["values"], [NODE])

    def test_an_exclusive_device_is_never_handed_out_twice(self):
        a = self.allocator()
        claims = [claim(("nic", "vf.topocni.io", None)) for _ in range(4)]
        got = [devices_of(a.allocate(c, NODE))[0] for c in claims]
        self.assertEqual(sorted(got), sorted(device_name("vf", p) for p in PF1_VFS + PF2_VFS))
        self.assertIsNone(a.allocate(claim(("nic", "vf.topocni.io", None)), NODE))
        two = claim(("a", "vf.topocni.io", None), ("b", "vf.topocni.io", None))
        a.release(claims[1]["metadata"]["uid"])
        self.assertIsNone(a.allocate(two, NODE), "one VF free, two wanted, the same one cannot serve both")
        self.assertEqual(devices_of(a.allocate(claim(("nic", "vf.topocni.io", None)), NODE)), [got[1]])

    def test_match_attribute_pairs_a_vf_with_its_pfs_link_by_backtracking(self):
        a = self.allocator()
        # The link request comes first and would take PF1's link; the VF request wants a VF
        # of ens2f0 (PF2), so the constraint fails and the search tries PF2's link.
        c = claim(("uplink", "link.topocni.io", {"selectors": ['has(device.attributes["topocni.io"].pf)']}),
                  ("nic", "vf.topocni.io", {"selectors": ['device.attributes["topocni.io"].pfNetdev == "ens2f0"']}),
                  constraints=[{"matchAttribute": "topocni.io/pf"}])
        got = a.allocate(c, NODE)
        self.assertEqual(devices_of(got), [device_name("pf", PF2), device_name("vf", PF2_VFS[0])])

    def test_match_attribute_on_some_requests_only_and_by_a_qualified_standard_attribute(self):
        a = self.allocator()
        c = claim(("x", "vf.topocni.io", {"selectors": ['device.attributes["topocni.io"].pfNetdev == "ens1f0"']}),
                  ("y", "vf.topocni.io", {"count": 2}), ("ip", "pool.topocni.io", None),
                  constraints=[{"requests": ["y"], "matchAttribute": "resource.kubernetes.io/numaNode"}])
        got = devices_of(a.allocate(c, NODE))
        # y's two VFs share a NUMA node: the one left on PF1 cannot pair with one on PF2.
        self.assertEqual(got, [device_name("vf", PF1_VFS[0]), device_name("vf", PF2_VFS[0]),
                               device_name("vf", PF2_VFS[1]), device_name("pool", "net-a-10.0.0.0/24")])

    def test_a_device_lacking_the_matched_attribute_cannot_be_chosen(self):
        a = self.allocator()
        # The macvlan master (link-eth1) has no pf attribute; PF links are excluded by selector.
        c = claim(("uplink", "link.topocni.io", {"selectors": ['device.attributes["topocni.io"].netdev == "eth1"']}),
                  ("nic", "vf.topocni.io", None), constraints=[{"matchAttribute": "topocni.io/pf"}])
        self.assertIsNone(a.allocate(c, NODE))
        c = claim(("uplink", "link.topocni.io", {"selectors": ['device.attributes["topocni.io"].netdev == "eth1"']}),
                  ("nic", "vf.topocni.io", None))
        self.assertIsNotNone(a.allocate(c, NODE))

    def test_link_capacity_is_exhausted_after_n_claims_and_freed_by_release(self):
        a = self.allocator()
        want = {"selectors": ['device.attributes["topocni.io"].netdev == "ens1f0"'], "capacity": {"egressMbps": "10000"}}
        first = claim(("bw", "link.topocni.io", want))
        r = a.allocate(first, NODE)["devices"]["results"][0]
        self.assertEqual(r["device"], device_name("pf", PF1))
        uuid.UUID(r["shareID"])
        # Every capacity of the device, the unnamed one at its policy's default (0).
        self.assertEqual(r["consumedCapacity"], {"egressMbps": "10000", "ingressMbps": "0"})
        self.assertIsNotNone(a.allocate(claim(("bw", "link.topocni.io", want)), NODE))
        self.assertIsNone(a.allocate(claim(("bw", "link.topocni.io", want)), NODE), "25000 - 2 x 10000 < 10000")
        small = dict(want, capacity={"egressMbps": "5G"})   # quantities are exact: 5G Mb/s is far too much
        self.assertIsNone(a.allocate(claim(("bw", "link.topocni.io", small)), NODE))
        self.assertIsNotNone(a.allocate(claim(("bw", "link.topocni.io", dict(want, capacity={"egressMbps": "5k"}))), NODE))
        a.release(first["metadata"]["uid"])
        self.assertIsNotNone(a.allocate(claim(("bw", "link.topocni.io", want)), NODE))

    def test_a_master_takes_one_attachment_per_claim_and_refuses_two_in_one_request(self):
        a = self.allocator()
        sel = {"selectors": ['device.attributes["topocni.io"].netdev == "eth1"']}
        self.assertIsNone(a.allocate(claim(("m", "link.topocni.io", dict(sel, capacity={"attachments": "2"}))), NODE),
                          "above the policy's max of 1")
        for _ in range(2):
            r = a.allocate(claim(("m", "link.topocni.io", sel)), NODE)["devices"]["results"][0]
            self.assertEqual(r["consumedCapacity"], {"egressMbps": "0", "ingressMbps": "0", "attachments": "1"})
        self.assertIsNone(a.allocate(claim(("m", "link.topocni.io", sel)), NODE), "room for 2 attachments only")

    def test_request_policy_rounds_up_to_min_and_step_and_refuses_above_max(self):
        dev = {"name": "dev", "attributes": {"type": text("link")}, "allowMultipleAllocations": True,
               "capacity": {"bw": {"value": "1000", "requestPolicy": {"default": "10",
                                                                    "validRange": {"min": "10", "max": "100", "step": "5"}}},
                            "slots": {"value": "20", "requestPolicy": {"default": "1", "validValues": ["1", "5", "10"]}},
                            "whole": {"value": "1"}}}
        a = self.allocator([resource_slice("s1", [dev])])

        def consumed(caps):
            got = a.allocate(claim(("r", "link.topocni.io", {"capacity": caps})), NODE)
            return got and got["devices"]["results"][0]["consumedCapacity"]

        self.assertEqual(consumed({"bw": "12", "slots": "6", "whole": "0"}), {"bw": "15", "slots": "10", "whole": "0"})
        self.assertEqual(consumed({"bw": "3", "whole": "0"}), {"bw": "10", "slots": "1", "whole": "0"})
        self.assertEqual(consumed({"bw": "100", "slots": "1", "whole": "0"}), {"bw": "100", "slots": "1", "whole": "0"})
        self.assertEqual(consumed({"bw": "1500m", "whole": "0"}), {"bw": "10", "slots": "1", "whole": "0"})
        self.assertIsNone(consumed({"bw": "101", "whole": "0"}), "above max")
        self.assertIsNone(consumed({"slots": "11", "whole": "0"}), "above the largest valid value")
        self.assertIsNone(consumed({"nonesuch": "1"}), "a capacity the device does not have")
        # A capacity without a policy, not named, is taken whole: after that only claims
        # that ask for none of it fit.
        self.assertEqual(consumed({}), {"bw": "10", "slots": "1", "whole": "1"})
        self.assertIsNone(consumed({}))
        self.assertIsNone(consumed({"whole": "1"}))
        self.assertEqual(consumed({"whole": "0"}), {"bw": "10", "slots": "1", "whole": "0"})

    def test_a_partial_pool_or_an_older_generation_is_ignored(self):
        vfs = sample_devices()[:4]
        first = resource_slice("s1", vfs[:2], generation=2, count=2)
        second = resource_slice("s2", vfs[2:], generation=2, count=2)
        old = resource_slice("s0", [vf("0000:01:02.0", "0000:01:00.0", 0, "old0")], generation=1, count=1)
        self.assertIsNone(self.allocator([first, old]).allocate(claim(("nic", "vf.topocni.io", None)), NODE),
                          "generation 2 lacks a slice; generation 1 is superseded")
        a = self.allocator([old, second, first])
        got = [devices_of(a.allocate(claim(("nic", "vf.topocni.io", None)), NODE))[0] for _ in range(4)]
        self.assertEqual(got, [d["name"] for d in vfs], "slices in name order, the old VF never offered")

    def test_slices_of_other_nodes_and_other_drivers_are_ignored(self):
        other_node = resource_slice("s1", sample_devices()[:1], node="worker-2")
        other_driver = resource_slice("s2", sample_devices()[:1], driver="other.example.com")
        a = self.allocator([other_node, other_driver])
        self.assertIsNone(a.allocate(claim(("nic", "vf.topocni.io", None)), NODE))
        self.assertIsNotNone(a.allocate(claim(("nic", "vf.topocni.io", None)), "worker-2"))

    def test_class_selectors_run_first_and_a_request_selectors_cel_error_aborts(self):
        a = self.allocator()
        # Under the VF class, pfNetdev exists on every device that gets that far.
        ok = claim(("nic", "vf.topocni.io", {"selectors": ['device.attributes["topocni.io"].pfNetdev == "ens2f0"']}))
        self.assertEqual(devices_of(a.allocate(ok, NODE)), [device_name("vf", PF2_VFS[0])])
        # Under the link class it does not: kube-scheduler aborts with the CEL error.
        bad = claim(("nic", "link.topocni.io", {"selectors": ['device.attributes["topocni.io"].pfNetdev == "x"']}))
        with self.assertRaises(CelError):
            a.allocate(bad, NODE)

    def test_allocation_mode_all_takes_every_matching_device_or_nothing(self):
        a = self.allocator()
        every = claim(("nics", "vf.topocni.io", {"allocationMode": "All",
                                                 "selectors": ['device.attributes["topocni.io"].pfNetdev == "ens1f0"']}))
        self.assertEqual(devices_of(a.allocate(every, NODE)), [device_name("vf", p) for p in PF1_VFS])
        again = claim(("nics", "vf.topocni.io", {"allocationMode": "All"}))
        self.assertIsNone(a.allocate(again, NODE), "two of the matching VFs are held")

    def test_quantity_helpers_are_exact(self):
        self.assertEqual(parse_quantity("1.5Gi"), 1610612736)
        self.assertEqual(parse_quantity("1e3"), 1000)
        self.assertEqual(format_quantity(parse_quantity("1500m")), "1500m")
        self.assertEqual(format_quantity(parse_quantity("25k")), "25000")


class DeviceClassesExample(CelCase):
    def test_each_example_class_matches_exactly_its_type_of_device(self):
        classes = {c["metadata"]["name"]: c for c in load_classes()}
        self.assertEqual(sorted(classes), ["link.topocni.io", "pool.topocni.io", "vf.topocni.io"])
        devices = sample_devices()
        kinds = {"vf.topocni.io": "vf", "link.topocni.io": "link", "pool.topocni.io": "pool"}
        for name, cls in classes.items():
            with self.subTest(cls=name):
                self.assertEqual(cls["apiVersion"], "resource.k8s.io/v1")
                self.assertEqual(cls["kind"], "DeviceClass")
                (sel,) = cls["spec"]["selectors"]
                expr = sel["cel"]["expression"]
                matched = [d["name"] for d in devices if self.cel.evaluate(expr, dict(d, driver=DRIVER))]
                self.assertEqual(matched, [d["name"] for d in devices if d["attributes"]["type"]["string"] == kinds[name]])
                self.assertTrue(matched)
                # Another driver's device with the same attributes is no topocni device.
                self.assertFalse(self.cel.evaluate(expr, dict(devices[0], driver="other.example.com", attributes={
                    "topocni.io/type": text(kinds[name])})))


if __name__ == "__main__":
    if not shutil.which("node"):
        print("SKIP: node is not installed (the DRA CEL evaluator runs on Node.js)")
        sys.exit(SKIP)
    unittest.main(verbosity=2)
