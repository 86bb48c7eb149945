"""Bandwidth: the CNI `bandwidth` capability shaped with tc on every attachment kind, and
admitted against a per-link ledger so that no master or PF is oversubscribed. Traffic is
measured with real TCP transfers between namespaces the test creates."""
import json
import os
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor

from cnitest import BIN, NetnsTestCase, main, sh
from fakesysfs import FakeSysfs
import promtext

MBIT = 1_000_000
SECONDS = 3

# A TCP sink: prints the bytes received and the seconds from the first byte to EOF.
SINK = r"""
import socket, sys, time
s = socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind((sys.argv[1], int(sys.argv[2]))); s.listen(1)
print("ready", flush=True)
c, _ = s.accept(); n = 0; first = None
while True:
    b = c.recv(1 << 16)
    if not b: break
    if first is None: first = time.monotonic()
    n += len(b)
print(n, time.monotonic() - (first or time.monotonic()), flush=True)
"""
# A TCP source: sends as fast as it can for argv[3] seconds.
SOURCE = r"""
import socket, sys, time
c = socket.create_connection((sys.argv[1], int(sys.argv[2])), timeout=30)
buf = b"x" * (1 << 16); end = time.monotonic() + float(sys.argv[3])
while time.monotonic() < end: c.sendall(buf)
c.close()
"""


def ifb_name(container_id, ifname):
    """topocni's name for an attachment's ifb: "ifb" + 12 hex digits of FNV-1a 64."""
    h = 1469598103934665603
    for ch in container_id.encode() + b"\0" + ifname.encode():
        h = ((h ^ ch) * 1099511628211) & (2 ** 64 - 1)
    return f"ifb{h & 0xffffffffffff:012x}"


class Bandwidth(NetnsTestCase):
    def setUp(self):
        super().setUp()
        # A veth pair in the node netns stands in for a NIC; one end is the macvlan master.
        self.master = f"tb{self.tag}a"[:15]
        sh("ip", "link", "add", self.master, "type", "veth", "peer", "name", f"tb{self.tag}b"[:15], ns=self.node)
        sh("ip", "link", "set", self.master, "up", ns=self.node)
        sh("ip", "link", "set", f"tb{self.tag}b"[:15], "up", ns=self.node)

    # --- helpers ---
    def rate_bps(self, src_ns, dst_ns, dst_ip, port=5201):
        """Bits per second of a SECONDS-long TCP transfer from src_ns to dst_ip in dst_ns."""
        sink = subprocess.Popen(["ip", "netns", "exec", dst_ns, sys.executable, "-c", SINK, dst_ip, str(port)],
                                stdout=subprocess.PIPE, text=True)
        try:
            self.assertEqual(sink.stdout.readline().strip(), "ready")
            sh("ip", "netns", "exec", src_ns, sys.executable, "-c", SOURCE, dst_ip, str(port), str(SECONDS))
            n, secs = sink.stdout.readline().split()
            sink.wait(timeout=60)
        finally:
            if sink.poll() is None:
                sink.kill()
                sink.wait()
            sink.stdout.close()
        return int(n) * 8 / max(float(secs), 0.001)

    def macvlan_conf(self, **extra):
        return self.conf(attachment="macvlan", master=self.master, **extra)

    def qdiscs(self, ns, dev):
        return sh("tc", "qdisc", "show", "dev", dev, ns=ns)

    def ifbs(self, ns):
        return sorted(n for n, l in self.links(ns).items() if l.get("linkinfo", {}).get("info_kind") == "ifb")

    def ledger(self, link):
        d = os.path.join(self.state_dir, "bandwidth", link)
        if not os.path.isdir(d):
            return []
        out = []
        for f in sorted(os.listdir(d)):
            if f.endswith(".json"):
                with open(os.path.join(d, f)) as fh:
                    out.append(json.load(fh))
        return out

    def refusals(self):
        return self.refusal_counts()

    # --- shaping ---
    def test_a_veth_pod_sending_with_an_egress_rate_is_held_to_it_and_without_one_is_not(self):
        bw = {"egressRate": 10 * MBIT, "egressBurst": 1 * MBIT}
        for shaped in (True, False):
            with self.subTest(shaped=shaped):
                conf = self.conf(bandwidth=bw) if shaped else self.conf()
                pod, path = self.make_pod()
                out = self.run_plugin("ADD", conf, netns=path, container_id=f"v{shaped}")
                self.assertOk(out)
                gw = "10.77.0.1"
                pod_ip = out.json["ips"][0]["address"].split("/")[0]
                rate = self.rate_bps(pod, self.node, gw)
                if shaped:
                    self.assertGreaterEqual(rate, 0.5 * 10 * MBIT, rate)
                    self.assertLessEqual(rate, 1.25 * 10 * MBIT, rate)
                    self.assertEqual(len(self.ifbs(self.node)), 1)
                else:
                    self.assertGreater(rate, 5 * 10 * MBIT, rate)
                    self.assertEqual(self.ifbs(self.node), [])
                self.assertTrue(pod_ip)
                self.assertOk(self.run_plugin("DEL", conf, netns=path, container_id=f"v{shaped}"))
                self.assertEqual(self.ifbs(self.node), [])

    def test_the_reference_ptp_and_bandwidth_pair_measures_in_the_same_band(self):
        """The yardstick: Debian's ptp then bandwidth plugin, chained by hand as libcni does,
        shaped to the same rates, measured the same way."""
        net = f"ref{self.tag}"
        ptp = {"cniVersion": "1.0.0", "name": net, "type": "ptp",
               "ipam": {"type": "host-local", "subnet": "10.79.0.0/24", "dataDir": self.data_dir}}
        bw = {"cniVersion": "1.0.0", "name": net, "type": "bandwidth", "egressRate": 10 * MBIT,
              "egressBurst": MBIT, "ingressRate": 10 * MBIT, "ingressBurst": MBIT}
        pod, path = self.make_pod()
        ref = os.path.join("/usr/lib/cni")
        first = self.run_plugin("ADD", ptp, netns=path, binary=os.path.join(ref, "ptp"))
        self.assertOk(first)
        try:
            self.assertOk(self.run_plugin("ADD", dict(bw, prevResult=first.json), netns=path,
                                          binary=os.path.join(ref, "bandwidth")))
            pod_ip = first.json["ips"][0]["address"].split("/")[0]
            up = self.rate_bps(pod, self.node, first.json["ips"][0]["gateway"])
            down = self.rate_bps(self.node, pod, pod_ip, port=5202)
            for rate in (up, down):
                self.assertGreaterEqual(rate, 0.5 * 10 * MBIT, rate)
                self.assertLessEqual(rate, 1.25 * 10 * MBIT, rate)
        finally:
            self.run_plugin("DEL", bw, netns=path, binary=os.path.join(ref, "bandwidth"))
            self.run_plugin("DEL", ptp, netns=path, binary=os.path.join(ref, "ptp"))

    def test_a_veth_pod_receiving_with_an_ingress_rate_is_held_to_it(self):
        conf = self.conf(bandwidth={"ingressRate": 10 * MBIT, "ingressBurst": 1 * MBIT})
        pod, path = self.make_pod()
        out = self.run_plugin("ADD", conf, netns=path)
        self.assertOk(out)
        pod_ip = out.json["ips"][0]["address"].split("/")[0]
        host_end = out.json["interfaces"][0]["name"]
        self.assertIn("tbf", self.qdiscs(self.node, host_end))
        self.assertOk(self.run_plugin("CHECK", dict(conf, prevResult=out.json), netns=path))
        sh("tc", "qdisc", "del", "dev", host_end, "root", ns=self.node)
        self.assertError(self.run_plugin("CHECK", dict(conf, prevResult=out.json), netns=path), 103,
                         "ingress", host_end, "not shaped")
        sh("tc", "qdisc", "add", "dev", host_end, "root", "tbf", "rate", "10mbit", "burst", "125000", "latency", "25ms",
           ns=self.node)
        rate = self.rate_bps(self.node, pod, pod_ip)
        self.assertGreaterEqual(rate, 0.5 * 10 * MBIT, rate)
        self.assertLessEqual(rate, 1.25 * 10 * MBIT, rate)
        self.assertOk(self.run_plugin("DEL", conf, netns=path))

    def test_macvlan_pods_are_shaped_inside_the_pod_in_both_directions(self):
        bw = {"egressRate": 10 * MBIT, "egressBurst": 1 * MBIT, "ingressRate": 20 * MBIT, "ingressBurst": 2 * MBIT}
        shaped, peer = self.make_pod(), self.make_pod()
        out = self.run_plugin("ADD", self.macvlan_conf(bandwidth=bw), netns=shaped[1], container_id="s")
        self.assertOk(out)
        out2 = self.run_plugin("ADD", self.macvlan_conf(), netns=peer[1], container_id="p")
        self.assertOk(out2)
        conf = self.macvlan_conf(bandwidth=bw)
        self.assertOk(self.run_plugin("CHECK", dict(conf, prevResult=out.json), netns=shaped[1], container_id="s"))
        # CHECK notices a rate that is not the one configured, and shaping that is gone.
        other = self.macvlan_conf(bandwidth=dict(bw, egressRate=11 * MBIT), prevResult=out.json)
        self.assertError(self.run_plugin("CHECK", other, netns=shaped[1], container_id="s"), 103, "egress", "eth0",
                         "10000000 bits/s")
        ip_shaped = out.json["ips"][0]["address"].split("/")[0]
        ip_peer = out2.json["ips"][0]["address"].split("/")[0]
        self.assertIn("tbf", self.qdiscs(shaped[0], "eth0"))
        self.assertEqual(len(self.ifbs(shaped[0])), 1)
        up = self.rate_bps(shaped[0], peer[0], ip_peer)
        self.assertGreaterEqual(up, 0.5 * 10 * MBIT, up)
        self.assertLessEqual(up, 1.25 * 10 * MBIT, up)
        down = self.rate_bps(peer[0], shaped[0], ip_shaped, port=5202)
        self.assertGreaterEqual(down, 0.5 * 20 * MBIT, down)
        self.assertLessEqual(down, 1.25 * 20 * MBIT, down)
        for cid, pod in (("s", shaped), ("p", peer)):
            self.assertOk(self.run_plugin("DEL", self.macvlan_conf(bandwidth=bw), netns=pod[1], container_id=cid))
        self.assertEqual(self.ifbs(shaped[0]), [])
        self.assertEqual(set(self.links(shaped[0])), {"lo"})

    def test_runtime_config_bandwidth_wins_over_the_config_key_and_a_rate_alone_gets_the_default_burst(self):
        conf = self.conf(bandwidth={"egressRate": 10 * MBIT, "egressBurst": 1 * MBIT},
                         runtimeConfig={"bandwidth": {"ingressRate": 30 * MBIT}})
        pod, path = self.make_pod()
        out = self.run_plugin("ADD", conf, netns=path)
        self.assertOk(out)
        host_end = out.json["interfaces"][0]["name"]
        q = self.qdiscs(self.node, host_end)
        self.assertIn("rate 30Mbit", q)
        # 100 ms at 30 Mbit/s = 3 Mbit = 375000 bytes.
        self.assertRegex(q, r"burst 37[0-9]\d*b|burst 366Kb|burst 375000b", q)
        self.assertEqual(self.ifbs(self.node), [], "the config's egress rate was replaced, not merged")
        self.assertOk(self.run_plugin("DEL", conf, netns=path))

    # --- nothing left ---
    def test_del_gc_and_rollback_leave_no_qdisc_filter_or_ifb(self):
        bw = {"egressRate": 10 * MBIT, "egressBurst": 1 * MBIT, "ingressRate": 10 * MBIT, "ingressBurst": 1 * MBIT}
        before = self.files()
        node_links = set(self.links(self.node))
        master_qdiscs = self.qdiscs(self.node, self.master)
        for kind, conf in (("veth", self.conf(bandwidth=bw)), ("macvlan", self.macvlan_conf(bandwidth=bw))):
            with self.subTest(kind=kind, how="DEL"):
                pod, path = self.make_pod()
                self.assertOk(self.run_plugin("ADD", conf, netns=path))
                where = self.node if kind == "veth" else pod
                self.assertEqual(len(self.ifbs(where)), 1)
                self.assertOk(self.run_plugin("DEL", conf, netns=path))
                self.assertOk(self.run_plugin("DEL", conf, netns=path))
                self.assertEqual(set(self.links(self.node)), node_links)
                self.assertEqual(set(self.links(pod)), {"lo"})
                self.assertEqual(self.ledger(self.master), [])
            with self.subTest(kind=kind, how="GC"):
                pod, path = self.make_pod()
                self.assertOk(self.run_plugin("ADD", conf, netns=path, container_id="gone"))
                self.remove_netns(pod)
                gc = dict(conf, **{"cni.dev/valid-attachments": []})
                self.assertOk(self.run_plugin("GC", gc))
                self.assertEqual(set(self.links(self.node)), node_links)
                self.assertEqual(self.ledger(self.master), [])
            with self.subTest(kind=kind, how="killed after shaping, then DEL"):
                pod, path = self.make_pod()
                out = self.run_plugin("ADD", conf, netns=path, extra_env={"TOPOCNI_FAILPOINT": "after-shaping"})
                self.assertEqual(out.rc, -9, out)
                self.assertOk(self.run_plugin("DEL", conf, netns=path))
                self.assertEqual(set(self.links(self.node)), node_links)
                self.assertEqual(set(self.links(pod)), {"lo"})
                self.assertEqual(self.ledger(self.master), [])
            with self.subTest(kind=kind, how="rollback"):
                # The ifb's name is taken (by a link the test made), so shaping fails half-way,
                # after the tbf: ADD must take back the tbf, the link, the addresses and the ledger.
                pod, path = self.make_pod()
                squat_ns = self.node if kind == "veth" else pod
                sh("ip", "link", "add", ifb_name("c1", "eth0"), "type", "ifb", ns=squat_ns)
                squat = set(self.links(squat_ns))
                out = self.run_plugin("ADD", conf, netns=path)
                self.assertError(out, 999, "failed to create ifb", ifb_name("c1", "eth0"))
                self.assertEqual(set(self.links(squat_ns)), squat)
                sh("ip", "link", "del", ifb_name("c1", "eth0"), ns=squat_ns)
                self.assertEqual(set(self.links(self.node)), node_links)
                self.assertEqual(set(self.links(pod)), {"lo"})
                self.assertEqual(self.ledger(self.master), [])
                self.assertOk(self.run_plugin("DEL", conf, netns=path))
        self.assertEqual(self.qdiscs(self.node, self.master), master_qdiscs)
        self.assertOnlyBookkeepingLeft(before, "after DEL, GC and rollback")

    # --- admission ---
    def admission_conf(self, egress_mbit, capacity=100, subnet="10.77.0.0/24", **topology):
        return self.macvlan_conf(bandwidth={"egressRate": egress_mbit * MBIT, "egressBurst": MBIT},
                                 topology=dict(linkCapacityMbps=capacity, **topology), subnet=subnet)

    def test_gc_collects_a_ledger_entry_whose_record_is_lost(self):
        conf = self.admission_conf(40)
        pod, path = self.make_pod()
        self.assertOk(self.run_plugin("ADD", conf, netns=path, container_id="lost"))
        records = os.path.join(self.state_dir, "attachments", conf["name"])
        for f in os.listdir(records):
            os.unlink(os.path.join(records, f))
        self.assertEqual(len(self.ledger(self.master)), 1)
        self.assertOk(self.run_plugin("GC", dict(conf, **{"cni.dev/valid-attachments": []})))
        self.assertEqual(self.ledger(self.master), [])

    def test_two_pods_that_fit_the_master_are_admitted_and_a_third_is_refused_naming_the_numbers(self):
        pods = [self.make_pod() for _ in range(3)]
        for i in range(2):
            self.assertOk(self.run_plugin("ADD", self.admission_conf(40), netns=pods[i][1], container_id=f"a{i}"))
        self.assertEqual(sorted(e["egressBps"] for e in self.ledger(self.master)), [40 * MBIT, 40 * MBIT])
        before = self.files()
        node_links = set(self.links(self.node))
        out = self.run_plugin("ADD", self.admission_conf(40), netns=pods[2][1], container_id="a2")
        self.assertError(out, 100, "bandwidth")
        details = out.json["details"]
        for words in (f"master '{self.master}'", "capacity 100 Mb/s", "topology.linkCapacityMbps",
                      "committed egress 80 Mb/s", "a0", "a1", "asks egress 40 Mb/s", "120 Mb/s > 100 Mb/s"):
            self.assertIn(words, details)
        self.assertEqual(set(self.links(pods[2][0])), {"lo"})
        self.assertEqual(set(self.links(self.node)), node_links)
        self.assertOnlyRefusalCounted(before, out, self.conf()["name"])
        self.assertEqual(self.refusals(), {self.conf()["name"]: {"bandwidth": 1}})
        # Overcommit 1.25 makes room; DEL of one pod does too.
        self.assertOk(self.run_plugin("ADD", self.admission_conf(40, bandwidthOvercommit=1.25), netns=pods[2][1],
                                      container_id="a2"))
        self.assertOk(self.run_plugin("DEL", self.admission_conf(40), netns=pods[2][1], container_id="a2"))
        self.assertOk(self.run_plugin("DEL", self.admission_conf(40), netns=pods[0][1], container_id="a0"))
        self.assertOk(self.run_plugin("ADD", self.admission_conf(40), netns=pods[2][1], container_id="a2"))

    def test_sixteen_parallel_adds_on_one_master_never_overcommit_it(self):
        pods = [self.make_pod() for _ in range(16)]
        conf = self.admission_conf(20)   # 100 Mb/s: room for 5

        def add(i):
            return self.run_plugin("ADD", conf, netns=pods[i][1], container_id=f"p{i}")

        with ThreadPoolExecutor(16) as ex:
            outs = list(ex.map(add, range(16)))
        ok = [o for o in outs if o.rc == 0]
        refused = [o for o in outs if o.rc != 0]
        self.assertEqual(len(ok), 5, outs)
        for o in refused:
            self.assertError(o, 100, "bandwidth")
        entries = self.ledger(self.master)
        self.assertEqual(len(entries), 5)
        self.assertLessEqual(sum(e["egressBps"] for e in entries), 100 * MBIT)
        self.assertEqual(self.refusals()[conf["name"]]["bandwidth"], 11)
        shaped = sum(1 for ns, _ in pods if "eth0" in self.links(ns))
        self.assertEqual(shaped, 5)

    def test_a_veth_has_no_shared_link_so_unknown_topology_decides(self):
        bw = {"egressRate": 10 * MBIT}
        pod, path = self.make_pod()
        out = self.run_plugin("ADD", self.conf(bandwidth=bw, topology={"unknownTopology": "deny"}), netns=path)
        self.assertError(out, 100, "bandwidth", "no shared link")
        self.assertOk(self.run_plugin("ADD", self.conf(bandwidth=bw), netns=path))

    def test_without_link_capacity_the_link_speed_is_the_capacity(self):
        # The node netns has no sysfs of its own mounted: a fake tree says what a veth
        # master reports in its own netns, 10000 Mb/s.
        sysfs = os.path.join(self.tmp, "sys")
        os.makedirs(os.path.join(sysfs, "class", "net", self.master))
        with open(os.path.join(sysfs, "class", "net", self.master, "speed"), "w") as f:
            f.write("10000\n")
        self.assertOk(self.run_plugin("ADD", self.macvlan_conf(bandwidth={"egressRate": 9000 * MBIT}, sysfsRoot=sysfs),
                                      netns=self.make_pod()[1], container_id="big"))
        out = self.run_plugin("ADD", self.macvlan_conf(bandwidth={"egressRate": 2000 * MBIT}, sysfsRoot=sysfs),
                              netns=self.make_pod()[1], container_id="more")
        self.assertError(out, 100, "bandwidth")
        self.assertIn("capacity 10 Gb/s (link speed)", out.json["details"])

    # --- bad values ---
    def test_invalid_bandwidth_values_are_code_7_naming_the_key_and_change_nothing(self):
        pod, path = self.make_pod()
        before = self.files()
        cases = [
            ({"bandwidth": {"egressRate": -1}}, "bandwidth.egressRate"),
            ({"bandwidth": {"egressRate": 5}}, "bandwidth.egressRate"),
            ({"bandwidth": {"ingressRate": 20_000_000_000}}, "bandwidth.ingressRate"),
            ({"bandwidth": {"egressRate": "10M"}}, "bandwidth.egressRate"),
            ({"bandwidth": {"egressRate": 1.5}}, "bandwidth.egressRate"),
            ({"bandwidth": {"ingressBurst": 1000}}, "bandwidth.ingressBurst"),
            ({"bandwidth": {"egressRate": MBIT, "egressBurst": 2 ** 35 * 8}}, "bandwidth.egressBurst"),
            ({"bandwidth": {"egress": MBIT}}, "bandwidth.egress"),
            ({"bandwidth": [1]}, "bandwidth"),
            ({"runtimeConfig": {"bandwidth": {"ingressRate": "x"}}}, "runtimeConfig.bandwidth.ingressRate"),
            ({"topology": {"linkCapacityMbps": 0}}, "topology.linkCapacityMbps"),
            ({"topology": {"bandwidthOvercommit": "2"}}, "topology.bandwidthOvercommit"),
        ]
        for extra, key in cases:
            with self.subTest(key=key, extra=extra):
                out = self.run_plugin("ADD", self.conf(**extra), netns=path)
                self.assertError(out, 7, key)
                self.assertFilesUnchanged(before, f"refused ADD ({out.json['msg']})")
                self.assertOk(self.run_plugin("DEL", self.conf(**extra), netns=path))
                self.assertFilesUnchanged(before, "DEL after it")
        out = self.run_plugin("ADD", self.conf(ipam=False, bandwidth={"egressRate": MBIT},
                                               delegate={"type": "bridge"}), netns=path)
        self.assertError(out, 7, "bandwidth", "delegate")

    # --- what explain and node-report say ---
    def test_explain_shows_the_admission_numbers(self):
        pod, path = self.make_pod()
        self.assertOk(self.run_plugin("ADD", self.admission_conf(70), netns=path, container_id="big"))
        nad = os.path.join(self.tmp, "nad.json")
        with open(nad, "w") as f:
            json.dump(self.admission_conf(40), f)
        p = subprocess.run(["ip", "netns", "exec", self.node, BIN, "explain", "--config", nad], capture_output=True, text=True)
        self.assertEqual(p.returncode, 1, p)
        self.assertRegex(p.stdout, r"FAIL\s+bandwidth: master '" + self.master + "'")
        self.assertIn("committed egress 70 Mb/s", p.stdout)
        self.assertIn("110 Mb/s > 100 Mb/s", p.stdout)

    def node_report(self, *args):
        p = subprocess.run(["ip", "netns", "exec", self.node, BIN, "node-report", "--state-dir", self.state_dir,
                            *args], capture_output=True, text=True)
        self.assertEqual(p.returncode, 0, p)
        return p.stdout

    def test_node_report_in_both_formats_matches_the_state(self):
        conf = self.admission_conf(30, subnet="10.78.0.0/29")   # 6 usable addresses (gateway .1 excluded)
        pods = [self.make_pod() for _ in range(3)]
        for i in range(2):
            self.assertOk(self.run_plugin("ADD", conf, netns=pods[i][1], container_id=f"r{i}"))
        refused = self.run_plugin("ADD", self.admission_conf(50, subnet="10.78.0.0/29"), netns=pods[2][1],
                                  container_id="r2")
        self.assertError(refused, 100, "bandwidth")
        text = self.node_report("--format", "prometheus")
        fams = promtext.parse(text)
        net = conf["name"]
        v = lambda name, **labels: promtext.value(fams, name, **labels)
        self.assertEqual(v("topocni_bandwidth_capacity_bps", master=self.master, direction="egress"), 100 * MBIT)
        self.assertEqual(v("topocni_bandwidth_committed_bps", master=self.master, direction="egress"), 60 * MBIT)
        self.assertEqual(v("topocni_bandwidth_committed_bps", master=self.master, direction="ingress"), 0)
        self.assertEqual(v("topocni_attachments", network=net, attachment="macvlan", master=self.master), 2)
        rs = "10.78.0.1-10.78.0.6"   # the reference's RangeSet.String(); the gateway .1 is never handed out
        self.assertEqual(v("topocni_ipam_addresses", network=net, range_set=rs, state="used"), 2)
        self.assertEqual(v("topocni_ipam_addresses", network=net, range_set=rs, state="free"), 3)
        self.assertEqual(v("topocni_placement_refusals_total", network=net, constraint="bandwidth"), 1)
        for fam in ("topocni_vfs_total", "topocni_vfs_free"):
            self.assertIn(fam, fams)
            self.assertTrue(fams[fam].help)
        nfd = dict(l.split("=", 1) for l in self.node_report().splitlines() if l and not l.startswith("#"))
        self.assertEqual(nfd[f"topocni.io/bandwidth.{self.master}.capacity-gbps"], "0")
        self.assertEqual(nfd[f"topocni.io/ipam.{net}.free-addresses"], "3")
        # A dual-stack network: its label is the fewest free addresses of any range set.
        dual = self.macvlan_conf(name=f"dual{self.tag}", subnet="10.81.0.0/29", v6="fd00:81::/64")
        self.assertOk(self.run_plugin("ADD", dual, netns=self.make_pod()[1], container_id="d0"))
        nfd = dict(l.split("=", 1) for l in self.node_report().splitlines() if l and not l.startswith("#"))
        self.assertEqual(nfd[f"topocni.io/ipam.dual{self.tag}.free-addresses"], "4")
        # An idle link keeps the capacity its admissions counted against.
        for i in range(2):
            self.assertOk(self.run_plugin("DEL", conf, netns=pods[i][1], container_id=f"r{i}"))
        fams = promtext.parse(self.node_report("--format", "prometheus"))
        self.assertEqual(promtext.value(fams, "topocni_bandwidth_capacity_bps", master=self.master, direction="egress"),
                         100 * MBIT)
        self.assertEqual(promtext.value(fams, "topocni_bandwidth_committed_bps", master=self.master,
                                        direction="egress"), 0)
        out = os.path.join(self.tmp, "out", "topocni.prom")
        os.makedirs(os.path.dirname(out))
        self.node_report("--format", "prometheus", "--output", out)
        with open(out) as f:
            promtext.parse(f.read())
        self.assertEqual(os.listdir(os.path.dirname(out)), ["topocni.prom"])


class SriovBandwidth(NetnsTestCase):
    PF, VF0, VF_DPDK = "0000:af:00.1", "0000:af:06.0", "0000:af:06.2"

    def setUp(self):
        super().setUp()
        self.pf = f"tbp{self.tag}"[:15]
        self.vf0 = f"tbv{self.tag}"[:15]
        for name in (self.pf, self.vf0):
            sh("ip", "link", "add", name, "type", "veth", "peer", "name", "p" + name[1:], ns=self.node)
        self.sysfs = os.path.join(self.tmp, "sys")
        fake = FakeSysfs(self.sysfs)
        fake.add_pf(self.PF, self.pf)
        fake.add_vf(self.PF, 0, self.VF0, self.vf0)
        fake.add_vf(self.PF, 2, self.VF_DPDK, None, driver="vfio-pci")

    def sriov_conf(self, device, **extra):
        return self.conf(attachment="sriov", deviceID=device, sysfsRoot=self.sysfs, **extra)

    def test_a_vf_netdev_is_shaped_in_the_pod_for_ingress_and_del_removes_it(self):
        conf = self.sriov_conf(self.VF0, bandwidth={"ingressRate": 10 * MBIT, "ingressBurst": MBIT})
        pod, path = self.make_pod()
        before = self.files()
        out = self.run_plugin("ADD", conf, netns=path, ifname="net1")
        self.assertOk(out)
        ifbs = [n for n, l in self.links(pod).items() if l.get("linkinfo", {}).get("info_kind") == "ifb"]
        self.assertEqual(len(ifbs), 1)
        self.assertIn("tbf", sh("tc", "qdisc", "show", "dev", ifbs[0], ns=pod))
        self.assertIn("mirred", sh("tc", "filter", "show", "dev", "net1", "ingress", ns=pod))
        self.assertOk(self.run_plugin("DEL", conf, netns=path, ifname="net1"))
        self.assertEqual(set(self.links(pod)), {"lo"})
        self.assertNotIn("tbf", sh("tc", "qdisc", "show", "dev", self.vf0, ns=self.node))
        self.assertOnlyBookkeepingLeft(before, "after DEL")

    def test_egress_goes_to_the_vf_max_tx_rate_through_the_pf(self):
        # A veth PF cannot take VF settings: the request shows the rate, and all is rolled back.
        conf = self.sriov_conf(self.VF0, bandwidth={"egressRate": 10 * MBIT})
        pod, path = self.make_pod()
        before = self.files()
        out = self.run_plugin("ADD", conf, netns=path, ifname="net1")
        self.assertError(out, 999, self.pf, "max_tx_rate 10")
        self.assertEqual(set(self.links(pod)), {"lo"})
        self.assertFilesUnchanged(before, "rolled back ADD")

    def test_ingress_on_a_dpdk_vf_or_with_max_tx_rate_is_code_7(self):
        pod, path = self.make_pod()
        before = self.files()
        out = self.run_plugin("ADD", self.sriov_conf(self.VF_DPDK, bandwidth={"ingressRate": MBIT}), netns=path)
        self.assertError(out, 7, "bandwidth.ingressRate", "userspace driver")
        out = self.run_plugin("ADD", self.sriov_conf(self.VF0, max_tx_rate=5, bandwidth={"egressRate": MBIT}),
                              netns=path)
        self.assertError(out, 7, "bandwidth.egressRate", "max_tx_rate")
        self.assertFilesUnchanged(before, "refused ADDs")


if __name__ == "__main__":
    main()
