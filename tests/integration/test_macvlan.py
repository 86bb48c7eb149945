"""macvlan attachment: created into the pod off a node master, renamed, verified, removed."""
from cnitest import NetnsTestCase, main, sh


class Macvlan(NetnsTestCase):
    def setUp(self):
        super().setUp()
        # A veth pair in the node netns stands in for a NIC: one end is the master.
        self.master = f"tm{self.tag}a"[:15]
        sh("ip", "link", "add", self.master, "mtu", "1500", "type", "veth", "peer", "name", f"tm{self.tag}b"[:15],
           ns=self.node)
        sh("ip", "link", "set", self.master, "up", ns=self.node)
        sh("ip", "link", "set", f"tm{self.tag}b"[:15], "up", ns=self.node)

    def test_two_pods_in_bridge_mode_reach_each_other(self):
        conf = self.conf(attachment="macvlan", master=self.master)
        pods = [self.make_pod() for _ in range(2)]
        before = self.files()
        results = []
        for i, (ns, path) in enumerate(pods):
            out = self.run_plugin("ADD", conf, container_id=f"mv{i}", netns=path)
            self.assertOk(out)
            results.append(out.json)
            link = self.links(ns)["eth0"]
            self.assertEqual(link["linkinfo"]["info_kind"], "macvlan")
            self.assertEqual(link["linkinfo"]["info_data"]["mode"], "bridge")
            self.assertEqual(out.json["interfaces"][0]["mac"], link["address"])
            self.assertEqual(out.json["ips"][0]["interface"], 0)
        ip1 = results[1]["ips"][0]["address"].split("/")[0]
        self.assertTrue(self.ping(pods[0][0], ip1, count=2))
        for i, (ns, path) in enumerate(pods):
            self.assertOk(self.run_plugin("CHECK", dict(conf, prevResult=results[i]), container_id=f"mv{i}",
                                          netns=path))
            self.assertOk(self.run_plugin("DEL", conf, container_id=f"mv{i}", netns=path))
            self.assertOk(self.run_plugin("DEL", conf, container_id=f"mv{i}", netns=path))
            self.assertEqual(set(self.links(ns)), {"lo"})
        self.assertEqual(self.ipam_files(conf["name"]), [])
        self.assertOnlyBookkeepingLeft(before, "two pods, after DEL, DEL")

    def test_private_mode_stops_pods_on_one_master_from_reaching_each_other(self):
        conf = self.conf(attachment="macvlan", master=self.master, mode="private")
        pods = [self.make_pod() for _ in range(2)]
        before = self.files()
        ips = []
        for i, (ns, path) in enumerate(pods):
            out = self.run_plugin("ADD", conf, container_id=f"pv{i}", netns=path)
            self.assertOk(out)
            ips.append(out.json["ips"][0]["address"].split("/")[0])
        self.assertFalse(self.ping(pods[0][0], ips[1]), "private mode must isolate macvlans on one master")
        for i, (ns, path) in enumerate(pods):
            self.assertOk(self.run_plugin("DEL", conf, container_id=f"pv{i}", netns=path))
        self.assertEqual(self.ipam_files(conf["name"]), [])
        self.assertOnlyBookkeepingLeft(before, "two private pods, after DEL")

    def test_mode_mac_and_mtu_are_set_at_creation(self):
        conf = self.conf(attachment="macvlan", master=self.master, mode="private", mtu=1400,
                         mac="02:aa:00:00:00:01")
        pod, path = self.make_pod()
        before = self.files()
        out = self.run_plugin("ADD", conf, netns=path)
        self.assertOk(out)
        link = self.links(pod)["eth0"]
        self.assertEqual(link["linkinfo"]["info_data"]["mode"], "private")
        self.assertEqual(link["mtu"], 1400)
        self.assertEqual(link["address"], "02:aa:00:00:00:01")
        self.assertEqual(sh("cat", "/proc/sys/net/ipv4/conf/eth0/arp_notify", ns=pod).strip(), "1")
        # CHECK notices a different mode in the config.
        other = dict(conf, mode="vepa", prevResult=out.json)
        self.assertError(self.run_plugin("CHECK", other, netns=path), 103, "mode")
        self.assertOk(self.run_plugin("CHECK", dict(conf, prevResult=out.json), netns=path))
        self.assertOk(self.run_plugin("DEL", conf, netns=path))
        self.assertOnlyBookkeepingLeft(before, "after DEL")

    def test_default_master_is_the_default_route_interface(self):
        sh("ip", "addr", "add", "10.66.0.2/24", "dev", self.master, ns=self.node)
        sh("ip", "route", "add", "default", "via", "10.66.0.1", "dev", self.master, ns=self.node)
        conf = self.conf(attachment="macvlan")
        pod, path = self.make_pod()
        before = self.files()
        out = self.run_plugin("ADD", conf, netns=path)
        self.assertOk(out)
        self.assertEqual(self.links(pod)["eth0"]["linkinfo"]["info_kind"], "macvlan")
        self.assertOk(self.run_plugin("DEL", conf, netns=path))
        self.assertOnlyBookkeepingLeft(before, "after DEL")

    def test_l2_only_without_ipam(self):
        conf = self.conf(ipam=False, attachment="macvlan", master=self.master)
        pod, path = self.make_pod()
        before = self.files()
        out = self.run_plugin("ADD", conf, netns=path)
        self.assertOk(out)
        self.assertNotIn("ips", out.json)
        self.assertIn("UP", self.links(pod)["eth0"]["flags"])
        self.assertOk(self.run_plugin("DEL", conf, netns=path))
        self.assertOnlyBookkeepingLeft(before, "after DEL")

    def test_bad_master_or_mtu_is_code_7_and_changes_nothing(self):
        pod, path = self.make_pod()
        node_links = self.links(self.node)
        before = self.files()
        cases = [
            (self.conf(attachment="macvlan", master="nosuchdev0"), ("master", "nosuchdev0")),
            (self.conf(attachment="macvlan", master=self.master, mtu=9000), ("mtu", "1500")),
            (self.conf(attachment="macvlan", master=self.master, mode="l3"), ("mode",)),
        ]
        for conf, words in cases:
            with self.subTest(words=words):
                out = self.run_plugin("ADD", conf, netns=path)
                self.assertError(out, 7, *words)
                self.assertFilesUnchanged(before, f"refused ADD ({out.json['msg']})")
                # The DEL a runtime sends after it succeeds and changes nothing either.
                self.assertOk(self.run_plugin("DEL", conf, netns=path))
                self.assertFilesUnchanged(before, "DEL after the refused ADD")
                self.assertEqual(set(self.links(pod)), {"lo"})
                self.assertEqual(set(self.links(self.node)), set(node_links))
        self.assertEqual(set(self.links(pod)), {"lo"})
        self.assertEqual(self.ipam_files(self.conf()["name"]), [])

    def test_link_in_container_finds_the_master_inside_the_pod(self):
        pod, path = self.make_pod()
        sh("ip", "link", "add", "inner0", "type", "veth", "peer", "name", "inner1", ns=pod)
        sh("ip", "link", "set", "inner0", "up", ns=pod)
        conf = self.conf(attachment="macvlan", master="inner0", linkInContainer=True)
        before = self.files()
        out = self.run_plugin("ADD", conf, netns=path, ifname="net1")
        self.assertOk(out)
        self.assertEqual(self.links(pod)["net1"]["linkinfo"]["info_kind"], "macvlan")
        self.assertOk(self.run_plugin("DEL", conf, netns=path, ifname="net1"))
        self.assertNotIn("net1", self.links(pod))
        self.assertOnlyBookkeepingLeft(before, "after DEL")


if __name__ == "__main__":
    main()
