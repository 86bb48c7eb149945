"""SR-IOV VF attachment on a fake sysfs tree, with real veths in the node netns as the
VF and PF netdevs. The PF-side VF netlink calls cannot succeed on a veth PF, so the
successful cases set no PF-side key; one case checks that a PF rejecting `vlan` gives a
clear error and rolls everything back."""
import json
import os
import stat
from concurrent.futures import ThreadPoolExecutor

from cnitest import NetnsTestCase, main, sh
from fakesysfs import FakeSysfs

PF = "0000:af:00.1"
VF0 = "0000:af:06.0"
VF1 = "0000:af:06.1"
VF_DPDK = "0000:af:06.2"
VF0_MAC = "02:5f:00:00:06:00"
VF1_MAC = "02:5f:00:00:06:01"


class Sriov(NetnsTestCase):
    def setUp(self):
        super().setUp()
        self.pf = f"tpf{self.tag}"[:15]
        self.vf0 = f"tvf{self.tag}a"[:15]
        self.vf1 = f"tvf{self.tag}b"[:15]
        for name, mac, mtu in ((self.pf, "02:5f:00:00:00:01", 9000), (self.vf0, VF0_MAC, 1500),
                               (self.vf1, VF1_MAC, 1500)):
            sh("ip", "link", "add", name, "address", mac, "mtu", str(mtu), "type", "veth", "peer", "name",
               "p" + name[1:], ns=self.node)
        sh("ip", "link", "set", self.vf0, "up", ns=self.node)   # restored up; vf1 stays down
        self.sysfs = os.path.join(self.tmp, "sys")
        self.fake = FakeSysfs(self.sysfs)
        self.fake.add_pf(PF, self.pf)
        self.fake.add_vf(PF, 0, VF0, self.vf0, numa_node=1)
        self.fake.add_vf(PF, 1, VF1, self.vf1)
        self.fake.add_vf(PF, 2, VF_DPDK, None, driver="vfio-pci")

    def sriov_conf(self, device=VF0, **extra):
        return self.conf(attachment="sriov", deviceID=device, sysfsRoot=self.sysfs, **extra)

    def record_path(self, pci):
        return os.path.join(self.state_dir, "sriov", f"{pci}.json")

    def record(self, pci):
        with open(self.record_path(pci)) as f:
            return json.load(f)

    def assert_vf_home(self, name, mac, mtu=1500, up=None):
        """The VF netdev is in the node netns under its own name with its own MAC and MTU."""
        links = self.links(self.node)
        self.assertIn(name, links)
        self.assertEqual(links[name]["address"], mac)
        self.assertEqual(links[name]["mtu"], mtu)
        if up is not None:
            self.assertEqual("UP" in links[name]["flags"], up, links[name]["flags"])

    def add(self, conf, cid="c1", pod=None, ifname="net1"):
        pod = pod or self.make_pod()
        out = self.run_plugin("ADD", conf, container_id=cid, netns=pod[1], ifname=ifname)
        return pod, out

    def add_refused(self, conf, code, *words, cid="c2", ifname="net1"):
        """ADD in a new pod fails with `code` naming `words` and changes nothing: no link in
        the pod, the node's links and every file under the temp dir exactly as they were.
        The DEL a runtime sends after it succeeds and changes nothing either."""
        pod, path = self.make_pod()
        before, node_links = self.files(), set(self.links(self.node))
        out = self.run_plugin("ADD", conf, container_id=cid, netns=path, ifname=ifname)
        self.assertError(out, code, *words)
        self.assertEqual(set(self.links(pod)), {"lo"})
        self.assertEqual(set(self.links(self.node)), node_links)
        self.assertFilesUnchanged(before, f"refused ADD ({out.json['msg']})")
        self.assertOk(self.run_plugin("DEL", conf, container_id=cid, netns=path, ifname=ifname))
        self.assertEqual(set(self.links(pod)), {"lo"})
        self.assertEqual(set(self.links(self.node)), node_links)
        self.assertFilesUnchanged(before, "DEL after the refused ADD")
        return out

    # --- the life cycle ---

    def test_add_check_del_del_moves_the_vf_in_and_restores_its_name_mac_and_mtu(self):
        conf = self.sriov_conf(mtu=1400)
        before = self.files()
        (pod, path), out = self.add(conf)
        self.assertOk(out)
        link = self.links(pod)["net1"]
        self.assertEqual(link["address"], VF0_MAC)
        self.assertEqual(link["mtu"], 1400)
        self.assertIn("UP", link["flags"])
        self.assertEqual(self.addrs(pod, "net1")[0][:2], ("10.77.0.2", 24))
        self.assertEqual(sh("cat", "/proc/sys/net/ipv4/conf/net1/arp_notify", ns=pod).strip(), "1")
        self.assertNotIn(self.vf0, self.links(self.node))
        itf = out.json["interfaces"]
        self.assertEqual(itf, [{"name": "net1", "mac": VF0_MAC, "mtu": 1400, "sandbox": path, "pciID": VF0}])
        self.assertEqual(out.json["ips"][0]["interface"], 0)

        rec = self.record(VF0)
        self.assertEqual(rec["owner"], {"network": conf["name"], "containerID": "c1", "ifname": "net1", "netns": path})
        self.assertEqual(rec["netdev"], {"name": self.vf0, "mac": VF0_MAC, "mtu": 1500, "up": True})
        self.assertEqual((rec["pf"], rec["pfPciAddress"], rec["vfIndex"], rec["mode"]), (self.pf, PF, 0, "kernel"))
        self.assertEqual(stat.S_IMODE(os.stat(self.record_path(VF0)).st_mode), 0o600)

        self.assertOk(self.run_plugin("CHECK", dict(conf, prevResult=out.json), netns=path, ifname="net1"))
        wrong = dict(out.json, interfaces=[dict(itf[0], mac="02:00:00:00:00:99")])
        self.assertError(self.run_plugin("CHECK", dict(conf, prevResult=wrong), netns=path, ifname="net1"), 103, "MAC")

        for n in range(2):
            self.assertOk(self.run_plugin("DEL", conf, netns=path, ifname="net1"))
            self.assert_vf_home(self.vf0, VF0_MAC, up=True)
            self.assertEqual(set(self.links(pod)), {"lo"})
            self.assertFalse(os.path.exists(self.record_path(VF0)))
            self.assertEqual(self.ipam_files(conf["name"]), [])
            self.assertOnlyBookkeepingLeft(before, f"DEL {n + 1}")

    def test_a_vf_can_be_attached_again_after_del(self):
        conf = self.sriov_conf()
        before = self.files()
        (pod, path), out = self.add(conf, ifname="eth1")
        self.assertOk(out)
        self.assertOk(self.run_plugin("DEL", conf, netns=path, ifname="eth1"))
        (pod2, path2), out = self.add(conf, cid="c2")
        self.assertOk(out)
        self.assertIn("net1", self.links(pod2))
        self.assertOk(self.run_plugin("DEL", conf, container_id="c2", netns=path2, ifname="net1"))
        self.assert_vf_home(self.vf0, VF0_MAC)
        self.assertOnlyBookkeepingLeft(before, "two ADD and DEL pairs")

    def test_the_result_names_the_vf_pci_address_only_in_1_1_0(self):
        for version, cid in (("1.0.0", "v10"), ("1.1.0", "v11")):
            conf = self.sriov_conf(version=version)
            (pod, path), out = self.add(conf, cid=cid)
            self.assertOk(out)
            itf = out.json["interfaces"][0]
            self.assertEqual("pciID" in itf, version == "1.1.0", itf)
            self.assertEqual("mtu" in itf, version == "1.1.0", itf)
            self.assertOk(self.run_plugin("DEL", conf, container_id=cid, netns=path, ifname="net1"))

    def test_the_vf_gets_cni_ifname_even_when_the_pod_has_a_link_with_its_node_name(self):
        pod, path = self.make_pod()
        sh("ip", "link", "add", self.vf0, "address", "02:5f:00:00:99:99", "type", "veth", "peer", "name", "podpeer",
           ns=pod)
        conf = self.sriov_conf()
        before = self.files()
        _, out = self.add(conf, pod=(pod, path))
        self.assertOk(out)
        links = self.links(pod)
        self.assertEqual(links["net1"]["address"], VF0_MAC)
        self.assertEqual(links[self.vf0]["address"], "02:5f:00:00:99:99")
        self.assertOk(self.run_plugin("DEL", conf, netns=path, ifname="net1"))
        self.assert_vf_home(self.vf0, VF0_MAC)
        self.assertEqual(self.links(pod)[self.vf0]["address"], "02:5f:00:00:99:99")
        self.assertOnlyBookkeepingLeft(before, "after DEL")

    def test_del_without_cni_netns_restores_the_vf_from_the_netns_add_recorded(self):
        conf = self.sriov_conf()
        before = self.files()
        (pod, path), out = self.add(conf)
        self.assertOk(out)
        self.assertOk(self.run_plugin("DEL", conf, netns="", ifname="net1"))
        self.assert_vf_home(self.vf0, VF0_MAC, up=True)
        self.assertEqual(set(self.links(pod)), {"lo"})
        self.assertOnlyBookkeepingLeft(before, "DEL without CNI_NETNS")

    def test_two_adds_racing_for_one_vf_give_it_to_exactly_one(self):
        conf = self.sriov_conf()
        pods = [self.make_pod() for _ in range(4)]
        before = self.files()
        with ThreadPoolExecutor(len(pods)) as ex:
            outs = list(ex.map(lambda i: self.run_plugin("ADD", conf, container_id=f"r{i}", netns=pods[i][1],
                                                         ifname="net1"), range(len(pods))))
        self.assertEqual(sorted(o.rc for o in outs), [0, 1, 1, 1], outs)
        for o in outs:
            if o.rc:
                self.assertError(o, 106, VF0)
        winner = next(i for i, o in enumerate(outs) if o.rc == 0)
        self.assertEqual(self.record(VF0)["owner"]["containerID"], f"r{winner}")
        self.assertEqual(sum("net1" in self.links(ns) for ns, _ in pods), 1)
        self.assertOk(self.run_plugin("DEL", conf, container_id=f"r{winner}", netns=pods[winner][1], ifname="net1"))
        self.assert_vf_home(self.vf0, VF0_MAC)
        self.assertOnlyBookkeepingLeft(before, "the winner's DEL (the refused ADDs left nothing)")

    # --- refusals ---

    def test_a_vf_in_use_is_refused_with_code_106_naming_the_vf_and_its_owner(self):
        conf = self.sriov_conf()
        before = self.files()
        (pod1, path1), out = self.add(conf, cid="owner1")
        self.assertOk(out)
        with_owner = self.files()
        (pod2, path2), out = self.add(conf, cid="second")
        self.assertError(out, 106, VF0, "owner1", "net1")
        self.assertEqual(set(self.links(pod2)), {"lo"})
        self.assertIn("net1", self.links(pod1))
        self.assertEqual(self.record(VF0)["owner"]["containerID"], "owner1")
        self.assertEqual(len(self.ipam_files(conf["name"])), 1)   # the refused ADD released its address
        self.assertFilesUnchanged(with_owner, "refused ADD")
        # The refused attachment's DEL must not touch the VF that owner1 holds, nor any file.
        self.assertOk(self.run_plugin("DEL", conf, container_id="second", netns=path2, ifname="net1"))
        self.assertIn("net1", self.links(pod1))
        self.assertTrue(os.path.exists(self.record_path(VF0)))
        self.assertFilesUnchanged(with_owner, "DEL after the refused ADD")
        self.assertOk(self.run_plugin("DEL", conf, container_id="owner1", netns=path1, ifname="net1"))
        self.assertOnlyBookkeepingLeft(before, "the owner's DEL")

    def test_a_device_that_is_not_a_vf_is_code_7_naming_it(self):
        self.add_refused(self.sriov_conf(device=PF), 7, PF, "not an SR-IOV VF")
        self.add_refused(self.sriov_conf(device="0000:af:07.0"), 7, "0000:af:07.0", "not found")
        self.assertEqual(self.ipam_files(self.conf()["name"]), [])

    def test_a_device_id_that_is_not_a_pci_address_is_code_7_and_touches_nothing(self):
        for bad in ("../../../etc", "0000:af:06.0/../../x", "0000:af:06.0/"):
            with self.subTest(deviceID=bad):
                self.add_refused(self.sriov_conf(device=bad), 7, "deviceID", "not a PCI address")
        self.add_refused(dict(self.sriov_conf(), deviceID=None, pciBusID="../x"), 7, "pciBusID", ifname="eth0")
        self.assertFalse(os.path.exists(self.state_dir))

    def test_a_pf_that_rejects_vlan_gives_a_clear_error_and_everything_is_rolled_back(self):
        conf = self.sriov_conf(vlan=100, mtu=1400)
        before = self.files()
        (pod, path), out = self.add(conf)
        self.assertError(out, 999, self.pf, "vlan 100", "VF 0", "Operation not supported")
        self.assert_vf_home(self.vf0, VF0_MAC, up=True)
        self.assertEqual(set(self.links(pod)), {"lo"})
        self.assertFalse(os.path.exists(self.record_path(VF0)))
        self.assertEqual(self.ipam_files(conf["name"]), [])
        self.assertFilesUnchanged(before, "rolled back ADD")
        self.assertOk(self.run_plugin("DEL", conf, netns=path, ifname="net1"))
        self.assert_vf_home(self.vf0, VF0_MAC, up=True)
        self.assertFilesUnchanged(before, "DEL after the rolled back ADD")
        # Nothing is left that would block the VF.
        _, out = self.add(self.sriov_conf(), cid="c2")
        self.assertOk(out)

    # --- DEL without the pod, after a crash, and GC ---

    def simulate_pod_deletion(self, pod, new_name):
        """What the kernel does when a pod netns dies: the VF comes back to the node under a
        new name (here, since a veth would die with the netns, the test moves it)."""
        sh("ip", "link", "set", "net1", "netns", f"/run/netns/{self.node}", "name", new_name, ns=pod)
        self.fake.rename_netdev(VF0, self.vf0, new_name)
        self.remove_netns(pod)

    def test_del_after_the_pod_netns_is_gone_finds_the_vf_by_pci_address_and_restores_it(self):
        conf = self.sriov_conf(mtu=1400)
        before = self.files()
        (pod, path), out = self.add(conf)
        self.assertOk(out)
        self.simulate_pod_deletion(pod, "dev7")
        for n in range(2):
            self.assertOk(self.run_plugin("DEL", conf, netns=path, ifname="net1"))
            self.assertNotIn("dev7", self.links(self.node))
            self.assert_vf_home(self.vf0, VF0_MAC, up=True)
            self.assertFalse(os.path.exists(self.record_path(VF0)))
            self.assertEqual(self.ipam_files(conf["name"]), [])
            self.assertOnlyBookkeepingLeft(before, f"DEL {n + 1} after the pod netns is gone")

    def test_a_vf_left_by_a_pod_whose_netns_is_gone_is_restored_and_given_to_the_next_pod(self):
        conf = self.sriov_conf()
        (pod, _), out = self.add(conf, cid="gone")
        self.assertOk(out)
        pod2, path2 = self.make_pod()   # before the deletion, so its path is a new one
        self.simulate_pod_deletion(pod, "dev8")
        self.fake.rename_netdev(VF0, "dev8", self.vf0)   # what sysfs shows once renamed back
        sh("ip", "link", "set", "dev8", "name", self.vf0, ns=self.node)
        sh("ip", "link", "set", self.vf0, "address", "02:5f:00:00:66:66", ns=self.node)
        _, out = self.add(conf, cid="next", pod=(pod2, path2))
        self.assertOk(out)
        self.assertEqual(self.links(pod2)["net1"]["address"], VF0_MAC)   # the original MAC, restored first
        self.assertEqual(self.record(VF0)["owner"]["containerID"], "next")
        self.assertOk(self.run_plugin("DEL", conf, container_id="next", netns=path2, ifname="net1"))

    def test_a_crash_between_the_state_record_and_the_move_is_cleaned_up_by_del(self):
        conf = self.sriov_conf()
        pod, path = self.make_pod()
        before = self.files()
        # What ADD writes before its first change; then the plugin died.
        os.makedirs(os.path.join(self.state_dir, "sriov"))
        with open(self.record_path(VF0), "w") as f:
            json.dump({"version": 1, "pciAddress": VF0, "pfPciAddress": PF, "pf": self.pf, "vfIndex": 0,
                       "mode": "kernel",
                       "owner": {"network": conf["name"], "containerID": "c1", "ifname": "net1", "netns": path},
                       "netdev": {"name": self.vf0, "mac": VF0_MAC, "mtu": 1500, "up": True},
                       "pfOriginal": {}, "pfApplied": {}}, f)
        self.add_refused(conf, 106, VF0, "'c1'", cid="other")
        self.assertOk(self.run_plugin("DEL", conf, netns=path, ifname="net1"))
        self.assertFalse(os.path.exists(self.record_path(VF0)))
        self.assert_vf_home(self.vf0, VF0_MAC, up=True)
        self.assertEqual(set(self.links(pod)), {"lo"})
        self.assertOnlyBookkeepingLeft(before, "DEL of the crashed attachment")

    def test_del_after_the_plugin_is_killed_at_any_step_of_add_restores_the_vf(self):
        conf = self.sriov_conf(mtu=1400, runtimeConfig={"CNIDeviceInfoFile": os.path.join(self.tmp, "devinfo")})
        for point in ("after-ipam", "after-state-record", "after-move", "after-addresses", "before-result"):
            with self.subTest(point=point):
                pod, path = self.make_pod()
                before = self.files()
                out = self.run_plugin("ADD", conf, netns=path, ifname="net1", extra_env={"TOPOCNI_FAILPOINT": point})
                self.assertEqual(out.rc, -9, f"{point}: plugin was not killed (built without failpoints?): {out}")
                if point != "after-ipam":   # from the record on, the VF stays taken
                    self.add_refused(self.sriov_conf(), 106, VF0, cid="other")
                self.assertOk(self.run_plugin("DEL", conf, netns=path, ifname="net1"))
                self.assert_vf_home(self.vf0, VF0_MAC, up=True)
                self.assertEqual(set(self.links(pod)), {"lo"})
                self.assertFalse(os.path.exists(self.record_path(VF0)))
                self.assertFalse(os.path.exists(os.path.join(self.tmp, "devinfo")))
                self.assertEqual(self.ipam_files(conf["name"]), [])
                self.assertOnlyBookkeepingLeft(before, f"{point} + DEL")

    def test_gc_alone_after_the_plugin_is_killed_at_any_step_of_add_restores_the_vf(self):
        conf = self.sriov_conf(mtu=1400)
        for point in ("after-ipam", "after-state-record", "after-move", "after-addresses", "before-result"):
            with self.subTest(point=point):
                pod, path = self.make_pod()
                before = self.files()
                out = self.run_plugin("ADD", conf, netns=path, ifname="net1", extra_env={"TOPOCNI_FAILPOINT": point})
                self.assertEqual(out.rc, -9, f"{point}: plugin was not killed: {out}")
                gc = dict(conf, **{"cni.dev/valid-attachments": []})
                self.assertOk(self.run_plugin("GC", gc))
                self.assert_vf_home(self.vf0, VF0_MAC, up=True)
                self.assertEqual(set(self.links(pod)), {"lo"})
                self.assertFalse(os.path.exists(self.record_path(VF0)))
                self.assertEqual(self.ipam_files(conf["name"]), [])
                self.assertOnlyBookkeepingLeft(before, f"{point} + GC")

    def test_gc_restores_vfs_of_stale_attachments_and_keeps_valid_ones(self):
        conf = self.sriov_conf()
        before = self.files()
        (pod1, path1), out = self.add(conf, cid="stale")
        self.assertOk(out)
        (pod2, path2), out = self.add(self.sriov_conf(device=VF1), cid="live")
        self.assertOk(out)
        self.simulate_pod_deletion(pod1, "dev9")
        gc = dict(conf, **{"cni.dev/valid-attachments": [{"containerID": "live", "ifname": "net1"}]})
        self.assertOk(self.run_plugin("GC", gc))
        self.assert_vf_home(self.vf0, VF0_MAC, up=True)
        self.assertFalse(os.path.exists(self.record_path(VF0)))
        self.assertIn("net1", self.links(pod2))
        self.assertTrue(os.path.exists(self.record_path(VF1)))
        self.assertOk(self.run_plugin("DEL", conf, container_id="live", netns=path2, ifname="net1"))
        self.assert_vf_home(self.vf1, VF1_MAC, up=False)
        self.assertOnlyBookkeepingLeft(before, "GC of the stale attachment and DEL of the live one")

    # --- DPDK and device info ---

    def test_a_dpdk_vf_is_recorded_without_moving_anything_and_the_result_has_no_pod_interface(self):
        conf = self.sriov_conf(device=VF_DPDK)
        before = self.files()
        (pod, path), out = self.add(conf)
        self.assertOk(out)
        self.assertNotIn("interfaces", out.json)
        self.assertEqual(len(out.json["ips"]), 1)
        self.assertNotIn("interface", out.json["ips"][0])
        self.assertEqual(set(self.links(pod)), {"lo"})
        rec = self.record(VF_DPDK)
        self.assertEqual((rec["mode"], rec["vfIndex"]), ("dpdk", 2))
        self.assertNotIn("netdev", rec)
        self.assertOk(self.run_plugin("CHECK", dict(conf, prevResult=out.json), netns=path, ifname="net1"))
        self.add_refused(conf, 106, VF_DPDK, cid="c2")
        for n in range(2):
            self.assertOk(self.run_plugin("DEL", conf, netns=path, ifname="net1"))
            self.assertFalse(os.path.exists(self.record_path(VF_DPDK)))
            self.assertOnlyBookkeepingLeft(before, f"DEL {n + 1}")
        self.assertEqual(self.ipam_files(conf["name"]), [])

    def test_the_device_info_file_follows_the_spec_and_is_removed_by_del(self):
        self.fake.add_rdma(VF0, "mlx5_7")
        info = os.path.join(self.tmp, "devinfo", "cni", "ns-net-c1_net1")
        conf = self.sriov_conf(runtimeConfig={"CNIDeviceInfoFile": info})
        before = self.files()
        (pod, path), out = self.add(conf)
        self.assertOk(out)
        with open(info) as f:
            self.assertEqual(json.load(f), {"type": "pci", "version": "1.1.0",
                                            "pci": {"pci-address": VF0, "pf-pci-address": PF, "rdma-device": "mlx5_7"}})
        self.assertEqual(stat.S_IMODE(os.stat(info).st_mode), 0o444)
        self.assertOk(self.run_plugin("DEL", conf, netns=path, ifname="net1"))
        self.assertFalse(os.path.exists(info))
        self.assertOnlyBookkeepingLeft(before, "DEL of an attachment with a device-info file")

    def test_an_add_rolled_back_after_the_device_info_file_changes_nothing_and_neither_does_its_del(self):
        info = os.path.join(self.tmp, "devinfo", "cni", "ns-net-c1_net1")
        conf = self.sriov_conf(runtimeConfig={"CNIDeviceInfoFile": info})
        conf["ipam"]["routes"] = [{"dst": "10.99.0.0/16", "gw": "10.55.0.1"}]   # not on-link: fails late
        before = self.files()
        (pod, path), out = self.add(conf)
        self.assertError(out, 999, "10.99.0.0/16", "10.55.0.1")
        self.assert_vf_home(self.vf0, VF0_MAC, up=True)
        self.assertEqual(set(self.links(pod)), {"lo"})
        self.assertFalse(os.path.exists(info))
        self.assertFilesUnchanged(before, "rolled back ADD")
        self.assertOk(self.run_plugin("DEL", conf, netns=path, ifname="net1"))
        self.assertFilesUnchanged(before, "DEL after the rolled back ADD")

    def test_a_device_info_file_the_runtime_already_wrote_is_left_alone(self):
        info = os.path.join(self.tmp, "devinfo", "cni", "copied")
        os.makedirs(os.path.dirname(info))
        theirs = '{"type":"pci","version":"1.1.0","pci":{"pci-address":"%s"}}' % VF1
        with open(info, "w") as f:
            f.write(theirs)
        conf = self.sriov_conf(device=VF1, runtimeConfig={"cniDeviceInfoFile": info})
        before = self.files()
        (pod, path), out = self.add(conf)
        self.assertOk(out)
        self.assertOk(self.run_plugin("DEL", conf, netns=path, ifname="net1"))
        with open(info) as f:
            self.assertEqual(f.read(), theirs)
        self.assertOnlyBookkeepingLeft(before, "DEL with the runtime's device-info file")


if __name__ == "__main__":
    main()
