"""The README's two promises, checked as a user would: nothing is left after DEL, and a
refused ADD changes nothing. "Nothing" is every file and directory under the test's temp
dir (dataDir, stateDir and their parent) with no exclusions, bar the named bookkeeping
the README lists (cnitest.BOOKKEEPING), plus the links of the node and pod netns."""
import json
import os
import subprocess
import time

from cnitest import BIN, REF_DIR, NetnsTestCase, main, sh
from fakesysfs import FakeSysfs

PF = "0000:af:00.1"
VF0 = "0000:af:06.0"
VF1 = "0000:af:06.1"
VF_DPDK = "0000:af:06.2"
NOT_THERE = "0000:af:07.7"


class Promises(NetnsTestCase):
    def setUp(self):
        super().setUp()
        self.master = f"tm{self.tag}m"[:15]
        sh("ip", "link", "add", self.master, "type", "veth", "peer", "name", f"tm{self.tag}p"[:15], ns=self.node)
        sh("ip", "link", "set", self.master, "up", ns=self.node)
        self.bridge = f"tb{self.tag}"[:15]
        sh("ip", "link", "add", self.bridge, "type", "bridge", ns=self.node)
        sh("ip", "link", "set", self.bridge, "up", ns=self.node)
        self.pf = f"tpf{self.tag}"[:15]
        self.vf0, self.vf1 = f"tvf{self.tag}a"[:15], f"tvf{self.tag}b"[:15]
        for name in (self.pf, self.vf0, self.vf1):
            sh("ip", "link", "add", name, "type", "veth", "peer", "name", "p" + name[1:], ns=self.node)
        self.sysfs = os.path.join(self.tmp, "sys")
        self.fake = FakeSysfs(self.sysfs)
        self.fake.add_pf(PF, self.pf)
        self.fake.add_vf(PF, 0, VF0, self.vf0)
        self.fake.add_vf(PF, 1, VF1, self.vf1)
        self.fake.add_vf(PF, 2, VF_DPDK, None, driver="vfio-pci")

    def link_state(self, ns):
        """What a plugin could change of the links (not the kernel's own counters and timers)."""
        return sorted((l["ifname"], l.get("linkinfo", {}).get("info_kind"), l["mtu"], l.get("address"), l.get("master"),
                       "UP" in l["flags"]) for l in json.loads(sh("ip", "-j", "-d", "link", ns=ns)))

    def delete_pod(self, kind, pod):
        """The pod netns goes away. A real VF then comes back to the node under a new name;
        the veth standing in for it would die with the netns, so the test moves it out."""
        if kind.startswith("sriov") and "dpdk" not in kind:
            sh("ip", "link", "set", "net1", "netns", f"/run/netns/{self.node}", "name", "back0", ns=pod)
            self.fake.rename_netdev(VF0, self.vf0, "back0")
        self.remove_netns(pod)

    # --- configs of every kind ---
    def kinds(self):
        c = self.conf
        sriov = lambda device=VF0, **kw: c(attachment="sriov", deviceID=device, sysfsRoot=self.sysfs, **kw)
        meta = dict(c("1.0.0", ipam=False), delegate={
            "type": "ptp", "ipam": {"type": "host-local", "subnet": "10.78.0.0/24", "dataDir": self.data_dir}})
        return {
            "veth": c(),
            "veth in a bridge": c(bridge=self.bridge, isGateway=True),
            "macvlan": c(attachment="macvlan", master=self.master),
            "sriov with ipam": sriov(),
            "sriov L2 only": sriov(ipam=False),
            "sriov dpdk": sriov(VF_DPDK),
            "meta-plugin (ptp)": meta,
        }

    def refuse(self, conf, code, *words, pod=None, **kw):
        """ADD is refused with `code`, changes nothing; the DEL after it succeeds and changes nothing."""
        pod = pod or self.make_pod()
        files, links = self.files(), (self.link_state(self.node), self.link_state(pod[0]))
        out = self.run_plugin("ADD", conf, container_id="refused", netns=pod[1], ifname="net1", **kw)
        self.assertError(out, code, *words)
        if code == 100:
            self.assertOnlyRefusalCounted(files, out, conf["name"])
            files = self.files()
        else:
            self.assertFilesUnchanged(files, f"refused ADD ({out.json['msg']})")
        self.assertEqual((self.link_state(self.node), self.link_state(pod[0])), links, "links changed")
        out = self.run_plugin("DEL", conf, container_id="refused", netns=pod[1], ifname="net1", **kw)
        self.assertOk(out)
        self.assertFilesUnchanged(files, "DEL after the refused ADD")
        self.assertEqual((self.link_state(self.node), self.link_state(pod[0])), links, "links changed by DEL")

    # --- 1. after DEL, only named bookkeeping ---
    def test_add_then_del_of_every_attachment_kind_leaves_only_named_bookkeeping(self):
        for kind, conf in self.kinds().items():
            with self.subTest(kind=kind):
                before = self.files()
                node_links = set(self.links(self.node))
                for round_ in range(2):
                    pod, path = self.make_pod()
                    out = self.run_plugin("ADD", conf, container_id=f"c{round_}", netns=path, ifname="net1")
                    self.assertOk(out)
                    self.assertOk(self.run_plugin("DEL", conf, container_id=f"c{round_}", netns=path, ifname="net1"))
                    self.assertOnlyBookkeepingLeft(before, f"{kind}, round {round_}")
                    if round_ == 0:
                        after_first = self.files()
                    else:   # a second pair changes nothing at all, cursors aside
                        self.assertEqual(sorted(after_first), sorted(self.files()), f"{kind}: second ADD/DEL")
                    self.assertEqual(set(self.links(self.node)), node_links, f"{kind}: node links")

    def test_del_after_the_pod_netns_is_gone_leaves_only_named_bookkeeping(self):
        for kind in ("sriov with ipam", "macvlan", "veth"):
            with self.subTest(kind=kind):
                conf = self.kinds()[kind]
                before = self.files()
                pod, path = self.make_pod()
                self.assertOk(self.run_plugin("ADD", conf, container_id="gone", netns=path, ifname="net1"))
                self.delete_pod(kind, pod)
                self.assertOk(self.run_plugin("DEL", conf, container_id="gone", netns=path, ifname="net1"))
                self.assertOnlyBookkeepingLeft(before, kind)

    def test_a_retried_add_of_every_kind_whose_interface_is_there_is_code_105_and_changes_nothing(self):
        # CNI spec, ADD: "If an interface of the requested name already exists in the
        # container, the CNI plugin MUST return with an error." A retry of a completed ADD
        # (same container ID, ifname and netns) is no exception; the first attachment, its
        # record and its addresses (the same owner's) stay exactly as they were.
        for kind, conf in self.kinds().items():
            if kind == "sriov dpdk":
                continue   # no interface in the pod: see the next test
            with self.subTest(kind=kind):
                before = self.files()
                pod, path = self.make_pod()
                first = self.run_plugin("ADD", conf, container_id="r1", netns=path, ifname="net1")
                self.assertOk(first)
                files, links = self.files(), (self.link_state(self.node), self.link_state(pod))
                retry = self.run_plugin("ADD", conf, container_id="r1", netns=path, ifname="net1")
                self.assertError(retry, 105, "interface 'net1'", path, "DEL it before adding it again")
                self.assertFilesUnchanged(files, f"{kind}: the retried ADD")
                self.assertEqual((self.link_state(self.node), self.link_state(pod)), links, f"{kind}: links")
                self.assertOk(self.run_plugin("CHECK", dict(conf, prevResult=first.json), container_id="r1",
                                              netns=path, ifname="net1"))
                self.assertOk(self.run_plugin("DEL", conf, container_id="r1", netns=path, ifname="net1"))
                self.assertEqual(set(self.links(pod)), {"lo"}, kind)
                self.assertOnlyBookkeepingLeft(before, f"{kind}: DEL after the refused retry")

    def test_a_retried_add_whose_interface_is_gone_makes_it_again_with_the_same_addresses(self):
        # The friendly part the spec allows: no interface of that name, so the ADD runs,
        # and IPAM gives the same owner the addresses it holds. A DPDK VF never has one.
        for kind in ("veth", "veth in a bridge", "macvlan", "sriov dpdk"):
            with self.subTest(kind=kind):
                conf = self.kinds()[kind]
                before = self.files()
                pod, path = self.make_pod()
                first = self.run_plugin("ADD", conf, container_id="g1", netns=path, ifname="net1")
                self.assertOk(first)
                if "dpdk" not in kind:
                    sh("ip", "link", "del", "net1", ns=pod)
                again = self.run_plugin("ADD", conf, container_id="g1", netns=path, ifname="net1")
                self.assertOk(again)
                self.assertEqual(again.json["ips"], first.json["ips"], kind)
                self.assertEqual(len(self.ipam_files(conf["name"])), 1, kind)
                self.assertOk(self.run_plugin("CHECK", dict(conf, prevResult=again.json), container_id="g1",
                                              netns=path, ifname="net1"))
                self.assertOk(self.run_plugin("DEL", conf, container_id="g1", netns=path, ifname="net1"))
                self.assertOnlyBookkeepingLeft(before, f"{kind}: DEL after the second ADD")

    def test_gc_of_a_stale_attachment_leaves_only_named_bookkeeping(self):
        for kind in ("veth", "macvlan", "sriov with ipam"):
            with self.subTest(kind=kind):
                conf = self.kinds()[kind]
                before = self.files()
                pod, path = self.make_pod()
                self.assertOk(self.run_plugin("ADD", conf, container_id="stale", netns=path, ifname="net1"))
                self.delete_pod(kind, pod)
                gc = dict(conf, **{"cni.dev/valid-attachments": []})
                self.assertOk(self.run_plugin("GC", gc, container_id="", ifname=""))
                self.assertOnlyBookkeepingLeft(before, kind)

    def test_collect_deletes_every_kind_whose_pod_netns_is_gone_and_keeps_the_rest(self):
        for kind in ("veth", "veth in a bridge", "macvlan", "sriov with ipam", "sriov dpdk", "meta-plugin (ptp)"):
            with self.subTest(kind=kind):
                conf = self.kinds()[kind]
                live, live_path = self.make_pod()
                if kind.startswith("sriov"):   # the live pod gets the other VF
                    live_conf = dict(conf, deviceID=VF1 if "dpdk" not in kind else VF0)
                else:
                    live_conf = conf
                self.assertOk(self.run_plugin("ADD", live_conf, container_id="live", netns=live_path, ifname="net1"))
                with_live = self.files()
                node_links = self.link_state(self.node)
                dead, dead_path = self.make_pod()
                self.assertOk(self.run_plugin("ADD", conf, container_id="dead", netns=dead_path, ifname="net1"))
                self.delete_pod(kind, dead)
                collect = [BIN, "collect", "--state-dir", self.state_dir, "--cni-path", REF_DIR]
                p = subprocess.run(["nsenter", f"--net=/run/netns/{self.node}"] + collect + ["--dry-run"],
                                   capture_output=True, text=True)
                self.assertEqual(p.returncode, 0, p.stderr)
                self.assertIn("would delete", p.stdout)
                self.assertIn("dead/net1", p.stdout)
                p = subprocess.run(["nsenter", f"--net=/run/netns/{self.node}"] + collect, capture_output=True, text=True)
                self.assertEqual(p.returncode, 0, p.stdout + p.stderr)
                self.assertIn("1 attachment(s) collected, 1 still in use", p.stdout)
                if kind == "sriov with ipam":   # what sysfs shows once the VF has its name back
                    self.fake.rename_netdev(VF0, "back0", self.vf0)
                self.assertOnlyBookkeepingLeft(with_live, f"{kind}: after collect")
                want = {l[0] for l in node_links} - {"back0"}
                for _ in range(30):   # a deleted netns takes its veth peers with it a moment later
                    now = {l[0] for l in self.link_state(self.node)} - {"back0"}
                    if now == want:
                        break
                    time.sleep(0.1)
                self.assertEqual(now, want, f"{kind}: node links")
                self.assertIn("net1", self.links(live))
                self.assertOk(self.run_plugin("DEL", live_conf, container_id="live", netns=live_path, ifname="net1"))
                self.remove_netns(live)

    def test_collect_deletes_nothing_it_cannot_judge(self):
        conf = self.kinds()["veth"]
        pod, path = self.make_pod()
        self.assertOk(self.run_plugin("ADD", conf, container_id="alive", netns=path, ifname="net1"))
        collect = [BIN, "collect", "--state-dir", self.state_dir, "--cni-path", REF_DIR]
        # In another PID namespace, /proc/<pid>/ns/net paths of the node would all look gone.
        p = subprocess.run(["unshare", "-p", "-f", "--mount-proc"] + collect, capture_output=True, text=True)
        self.assertEqual(p.returncode, 2, p.stdout + p.stderr)
        self.assertIn("not in the node's PID namespace", p.stderr)
        # A netns path that exists but is no namespace (a bind mount that did not propagate
        # into a container) is kept, and so is one whose directory is not there at all.
        for cid, netns in (("unpropagated", os.path.join(self.tmp, "netns-file")), ("unmounted", "/no/such/dir/ns")):
            open(os.path.join(self.tmp, "netns-file"), "w").close()
            pod2, path2 = self.make_pod()
            self.assertOk(self.run_plugin("ADD", conf, container_id=cid, netns=path2, ifname="net1"))
            rec = os.path.join(self.state_dir, "attachments", conf["name"], f"{cid}_net1.json")
            with open(rec) as f:
                j = json.load(f)
            j["netns"] = netns
            with open(rec, "w") as f:
                json.dump(j, f)
        p = subprocess.run(["nsenter", f"--net=/run/netns/{self.node}"] + collect, capture_output=True, text=True)
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertIn("0 attachment(s) collected, 3 still in use", p.stdout)
        self.assertIn("kept " + conf["name"] + " unpropagated/net1: cannot tell", p.stdout)
        self.assertIn("kept " + conf["name"] + " unmounted/net1: cannot tell", p.stdout)
        self.assertIn("net1", self.links(pod))

    # --- 2. a refused ADD changes nothing, whatever refuses it ---
    def test_refused_sriov_adds_change_nothing_on_a_fresh_node(self):
        c = lambda device=VF0, **kw: self.conf(attachment="sriov", deviceID=device, sysfsRoot=self.sysfs, **kw)
        cases = [
            ("no such device", c(NOT_THERE), 7, NOT_THERE),
            ("not a VF", c(PF), 7, "not an SR-IOV VF"),
            ("ip outside the range", c(), 7, "10.99.0.5", {"args": "IP=10.99.0.5"}),
            ("PF rejects vlan", c(vlan=100), 999, "vlan 100"),
            ("PF rejects spoofchk", c(spoofchk="off"), 999, "spoofchk"),
            ("PF rejects trust", c(trust="on"), 999, "trust"),
            ("PF rejects a rate", c(max_tx_rate=100), 999, "rate"),
        ]
        for desc, conf, code, word, *kw in cases:
            with self.subTest(case=desc):
                self.refuse(conf, code, word, **(kw[0] if kw else {}))

    def test_refused_sriov_adds_put_the_cursor_back_in_a_used_store(self):
        c = lambda **kw: self.conf(attachment="sriov", deviceID=VF0, sysfsRoot=self.sysfs, **kw)
        pod, path = self.make_pod()
        self.assertOk(self.run_plugin("ADD", c(), container_id="first", netns=path, ifname="net1"))
        self.assertOk(self.run_plugin("DEL", c(), container_id="first", netns=path, ifname="net1"))
        for setting in ({"vlan": 100}, {"spoofchk": "off"}, {"trust": "on"}, {"min_tx_rate": 10}):
            with self.subTest(setting=setting):
                self.refuse(c(**setting), 999, "VF")

    def test_a_vf_held_by_a_live_attachment_is_refused_before_anything_changes(self):
        conf = self.conf(attachment="sriov", deviceID=VF0, sysfsRoot=self.sysfs)
        pod, path = self.make_pod()
        self.assertOk(self.run_plugin("ADD", conf, container_id="holder", netns=path, ifname="net1"))
        self.refuse(conf, 106, VF0, "holder")
        self.refuse(dict(conf, name=f"other{self.tag}"), 106, VF0, "holder")   # a network never used yet

    def test_refused_veth_and_macvlan_adds_change_nothing_on_a_fresh_node(self):
        c = self.conf
        self.refuse(c(attachment="macvlan", master="nosuch0"), 7, "nosuch0")
        self.refuse(c(), 7, "10.99.0.5", args="IP=10.99.0.5")
        self.refuse(c(ipam={"type": "no-such-ipam"}) if False else dict(c(), ipam={"type": "no-such-ipam"}), 7,
                    "no-such-ipam")
        pod = self.make_pod()
        sh("ip", "link", "add", "net1", "type", "veth", "peer", "name", "x1", ns=pod[0])
        self.refuse(c(), 105, "net1", pod=pod)

    def test_a_full_pool_refuses_after_the_lock_and_still_leaves_no_directory(self):
        conf = self.conf(subnet="10.77.0.0/30")   # one usable address besides the gateway
        pod, path = self.make_pod()
        self.assertOk(self.run_plugin("ADD", conf, container_id="only", netns=path, ifname="net1"))
        self.refuse(dict(conf, name=conf["name"]), 101, "no IP addresses available")
        other = dict(conf, name=f"fresh{self.tag}")
        other["ipam"] = dict(conf["ipam"], ranges=[[{"subnet": "10.79.0.0/30", "rangeStart": "10.79.0.2",
                                                      "rangeEnd": "10.79.0.2", "gateway": "10.79.0.1"}]])
        self.assertOk(self.run_plugin("ADD", other, container_id="a", netns=path, ifname="net2"))
        self.refuse(other, 101, "no IP addresses available")

    # --- 3. DEL with keys teardown does not need ---
    def test_del_succeeds_and_still_deletes_when_keys_del_does_not_need_are_invalid(self):
        bad_keys = {
            "nodeSelector operator": {"kubeconfig": "", "nodeSelector": {"matchExpressions": [{"key": "a", "operator": "Near"}]}},
            "nodeSelector value": {"kubeconfig": "", "nodeSelector": {"a": "b c"}},
            "nodeName": {"nodeName": "Not_A_Node"},
            "nodeLabelsFile": {"nodeLabelsFile": "relative"},
            "kubeconfig": {"kubeconfig": "relative"},
            "nodeLabelsTTL": {"nodeLabelsTTL": -1},
            "kubeletRootDir": {"kubeletRootDir": 5},
            "topology.numaPolicy": {"topology": {"numaPolicy": "strict"}},
            "topology.unknownTopology": {"topology": {"unknownTopology": "maybe"}},
            "topology.numaNode": {"topology": {"numaNode": -3}},
            "topology.minLinkSpeedMbps": {"topology": {"minLinkSpeedMbps": "fast"}},
            "topology.maxAttachmentsPerMaster": {"topology": {"maxAttachmentsPerMaster": 0}},
            "topology.minFreeAddresses": {"topology": {"minFreeAddresses": -1}},
            "topology unknown key": {"topology": {"colour": "blue"}},
            "logLevel": {"logLevel": "loud"},
            "logFile": {"logFile": "x.log"},
            "mtu": {"mtu": "big"},
            "mac": {"mac": "zz"},
            "capabilities": {"capabilities": ["mac"]},
            "dns": {"dns": {"nameservers": "1.1.1.1"}},
            "ipam ranges": {"ipam": {"type": "host-local", "ranges": "bad", "dataDir": self.data_dir}},
        }
        for kind in ("veth", "macvlan", "sriov with ipam"):
            for key, bad in bad_keys.items():
                with self.subTest(kind=kind, key=key):
                    conf = self.kinds()[kind]
                    before = self.files()
                    pod, path = self.make_pod()
                    self.assertOk(self.run_plugin("ADD", conf, container_id="c", netns=path, ifname="net1"))
                    broken = dict(conf, **bad)
                    out = self.run_plugin("DEL", broken, container_id="c", netns=path, ifname="net1")
                    self.assertOk(out)
                    self.assertNotIn("net1", self.links(pod))
                    self.assertOnlyBookkeepingLeft(before, f"{kind}: DEL with a bad {key}")
                    self.remove_netns(pod)

    def test_del_after_an_add_refused_for_an_invalid_selector_succeeds(self):
        conf = self.conf(kubeconfig="", nodeSelector={"matchExpressions": [{"key": "a", "operator": "Near"}]})
        self.refuse(conf, 7, "nodeSelector.matchExpressions[0].operator")

    # --- 4. no input makes it die ---
    def test_a_name_with_the_byte_0xff_gets_error_json_and_its_del_succeeds(self):
        raw = json.dumps(self.conf(name="n@@")).encode().replace(b"@@", b"\xff")
        pod, path = self.make_pod()
        files = self.files()
        out = self.run_plugin("ADD", None, netns=path, raw_stdin=raw)
        self.assertError(out, 6, "UTF-8", "\\xFF")
        out = self.run_plugin("DEL", None, netns=path, raw_stdin=raw)
        self.assertOk(out)
        self.assertFilesUnchanged(files, "ADD and DEL of a name that is not UTF-8")

    # --- 5. topology on a veth is unknown topology ---
    def test_numa_policy_on_a_veth_is_unknown_topology_allowed_by_default_and_refused_on_deny(self):
        numa = {"numaPolicy": "single-numa-node"}
        pod, path = self.make_pod()
        out = self.run_plugin("ADD", self.conf(topology=numa), netns=path, ifname="net1",
                              args="K8S_POD_UID=0f5c1a9e-1111-4222-8333-444455556666")
        self.assertOk(out)
        self.refuse(self.conf(name=f"deny{self.tag}", topology=dict(numa, unknownTopology="deny")), 100,
                    "topology.numaPolicy", "veth has no device", "unknownTopology deny")

    # --- 6. DEL, GC, STATUS of what was never added create nothing ---
    def test_verbs_on_a_network_never_used_create_no_directory(self):
        pod, path = self.make_pod()
        before = self.files()
        for kind, conf in self.kinds().items():
            if conf.get("delegate"):
                continue   # DEL is forwarded to the delegate, whose store is its own (the reference creates it)
            with self.subTest(kind=kind):
                self.assertOk(self.run_plugin("DEL", conf, container_id="never", netns=path, ifname="net1"))
                self.assertOk(self.run_plugin("DEL", conf, container_id="never", netns="", ifname="net1"))
                gc = dict(conf, **{"cni.dev/valid-attachments": []})
                self.assertOk(self.run_plugin("GC", gc, container_id="", ifname=""))
                self.assertOk(self.run_plugin("STATUS", conf, container_id="", ifname=""))
                self.assertFilesUnchanged(before, f"{kind}: DEL/GC/STATUS of a network never used")

    # --- 7. a store shared with the reference host-local ---
    def reference_ipam(self, command, conf, cid):
        env = {"CNI_COMMAND": command, "CNI_CONTAINERID": cid, "CNI_NETNS": "/proc/self/ns/net",
               "CNI_IFNAME": "eth0", "CNI_PATH": REF_DIR, "PATH": "/usr/bin:/bin"}
        p = subprocess.run([os.path.join(REF_DIR, "host-local")], input=json.dumps(conf), capture_output=True,
                           text=True, env=env)
        return p.returncode, p.stdout

    def test_a_store_shared_with_the_reference_never_holds_our_files_where_it_walks(self):
        conf = self.conf("1.0.0")
        net = conf["name"]
        store = os.path.join(self.data_dir, net)
        pods = []
        for i in range(12):
            pod, path = self.make_pod()
            self.assertOk(self.run_plugin("ADD", conf, container_id=f"t{i}", netns=path))
            pods.append((i, pod, path))
        for i, pod, path in pods[::2]:
            self.assertOk(self.run_plugin("DEL", conf, container_id=f"t{i}", netns=path))
        gc = dict(self.conf("1.1.0"), **{"cni.dev/valid-attachments": [
            {"containerID": f"t{i}", "ifname": "eth0"} for i, _, _ in pods[1::2]]})
        self.assertOk(self.run_plugin("GC", gc, container_id="", ifname=""))
        ours = sorted(f for f in os.listdir(store) if f[0].isdigit())
        self.assertEqual(len(ours), 6)
        for root, dirs, files in os.walk(store):   # what the reference's filepath.Walk reads
            self.assertEqual(dirs, [], f"directories inside {store}: {dirs}")
            for f in files:
                self.assertTrue(f in ("lock",) or f.startswith("last_reserved_ip.") or f[0].isdigit(), f)
        # The reference's view: it allocates around ours, finds and releases ours, and GC.
        ref = dict(conf["ipam"], type="host-local")
        ref_conf = {"cniVersion": "1.0.0", "name": net, "ipam": ref}
        rc, out = self.reference_ipam("ADD", ref_conf, "r1")
        self.assertEqual(rc, 0, out)
        theirs = json.loads(out)["ips"][0]["address"].split("/")[0]
        self.assertNotIn(theirs, ours)
        rc, out = self.reference_ipam("ADD", ref_conf, "t1")   # ours: a duplicate ADD is refused
        self.assertNotEqual(rc, 0)
        self.assertEqual(self.reference_ipam("DEL", ref_conf, "t1")[0], 0)
        rc, out = self.reference_ipam("GC", dict(ref_conf, cniVersion="1.1.0"), "")
        # Our view agrees: t1's address is gone, r1's is there, the others are ours.
        listed = subprocess.run([BIN, "ipam", "list", "--network", net, "--data-dir", self.data_dir],
                                capture_output=True, text=True)
        self.assertEqual(listed.returncode, 0, listed.stderr)
        self.assertIn(theirs, listed.stdout)
        self.assertIn("r1", listed.stdout)
        self.assertNotIn(" t1 ", listed.stdout)
        self.assertEqual(sum(1 for line in listed.stdout.splitlines() if " t" in line), 5)

    # --- 8, 9, 10 ---
    def test_an_unknown_subcommand_is_named_with_the_list_of_subcommands(self):
        p = subprocess.run([BIN, "bogus"], capture_output=True, text=True)
        self.assertEqual(p.returncode, 2)
        self.assertIn("'bogus'", p.stderr)
        for sub in ("exec", "explain", "ipam", "node-report", "version"):
            self.assertIn(sub, p.stderr)

    def test_capabilities_must_be_an_object_of_booleans(self):
        self.refuse(self.conf(capabilities=["mac"]), 7, "capabilities")
        self.refuse(self.conf(capabilities={"mac": "yes"}), 7, 'capabilities["mac"]')

    def test_an_empty_cni_version_is_0_1_0_on_every_verb(self):
        for version in ("", None):
            with self.subTest(version=version):
                conf = self.conf(name=f"v{self.tag}{version is None}")
                if version is None:
                    del conf["cniVersion"]
                else:
                    conf["cniVersion"] = version
                before = self.files()
                pod, path = self.make_pod()
                out = self.run_plugin("ADD", conf, netns=path, ifname="net1")
                self.assertOk(out)
                self.assertEqual(out.json["cniVersion"], "0.1.0")
                self.assertTrue(out.json["ip4"]["ip"].startswith("10.77.0."), out.json)
                self.assertError(self.run_plugin("CHECK", dict(conf, prevResult=out.json), netns=path, ifname="net1"),
                                 1, "CHECK")
                self.assertOk(self.run_plugin("DEL", conf, netns=path, ifname="net1"))
                self.assertOnlyBookkeepingLeft(before, "cniVersion " + repr(version))
                v = subprocess.run([BIN], input=json.dumps({"cniVersion": ""}), capture_output=True, text=True,
                                   env={"CNI_COMMAND": "VERSION"})
                self.assertEqual(json.loads(v.stdout)["cniVersion"], "0.1.0")


if __name__ == "__main__":
    main()
