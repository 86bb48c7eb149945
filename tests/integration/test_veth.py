"""veth attachment end to end: ADD, look inside, ping, CHECK, DEL, DEL again, nothing left."""
import concurrent.futures

from cnitest import NetnsTestCase, main, sh


class VethPointToPoint(NetnsTestCase):
    def assert_nothing_left(self, pod_ns, before, what="after DEL"):
        """No link or host route is left, and every file and directory new or changed since
        `before` (taken before the ADD) is named bookkeeping."""
        self.assertEqual(set(self.links(self.node)), {"lo"}, "links left in the node netns")
        if pod_ns:
            self.assertEqual(set(self.links(pod_ns)), {"lo"}, "links left in the pod netns")
        self.assertOnlyBookkeepingLeft(before, what)
        host_routes = [r for r in self.routes(self.node) if r.get("dev", "lo") != "lo"]
        self.assertEqual(host_routes, [], "routes left in the node netns")

    def test_add_check_del_for_every_version_with_a_result_list(self):
        for version in ["0.3.1", "0.4.0", "1.0.0", "1.1.0"]:
            with self.subTest(version=version):
                pod, path = self.make_pod()
                conf = self.conf(version, mtu=1400, mac="02:11:22:33:44:55")
                before = self.files()
                out = self.run_plugin("ADD", conf, container_id=f"ctr{version.replace('.', '')}", netns=path)
                self.assertOk(out)
                r = out.json
                self.assertEqual(r["cniVersion"], version)
                pod_if = r["interfaces"][r["ips"][0]["interface"]]
                self.assertEqual(pod_if["name"], "eth0")
                self.assertEqual(pod_if["sandbox"], path)
                self.assertEqual(pod_if["mac"], "02:11:22:33:44:55")
                if version in ("0.3.1", "0.4.0"):
                    self.assertEqual(r["ips"][0]["version"], "4")
                else:
                    self.assertNotIn("version", r["ips"][0])
                if version == "1.1.0":
                    self.assertEqual(pod_if["mtu"], 1400)
                else:
                    self.assertNotIn("mtu", pod_if)

                link = self.links(pod)["eth0"]
                self.assertEqual(link["linkinfo"]["info_kind"], "veth")
                self.assertEqual(link["mtu"], 1400)
                self.assertEqual(link["address"], "02:11:22:33:44:55")
                addr = r["ips"][0]["address"]
                ip = addr.split("/")[0]
                self.assertIn((ip, 24), [(a, p) for a, p, _ in self.addrs(pod, "eth0")])
                gw = r["ips"][0]["gateway"]
                self.assertEqual(gw, "10.77.0.1")
                pod_routes = {x["dst"]: x for x in self.routes(pod)}
                self.assertEqual(pod_routes["10.77.0.0/24"].get("gateway"), gw, "subnet goes via the gateway")
                self.assertTrue(self.ping(pod, gw), "pod cannot reach its gateway")
                self.assertTrue(self.ping(self.node, ip), "node cannot reach the pod")

                if version != "0.3.1":
                    prev = dict(conf, prevResult=r)
                    self.assertOk(self.run_plugin("CHECK", prev, container_id=f"ctr{version.replace('.', '')}",
                                                  netns=path))
                else:
                    chk = self.run_plugin("CHECK", dict(conf, prevResult=r), netns=path)
                    self.assertError(chk, 1, "CHECK")

                dconf = dict(conf, prevResult=r) if version != "0.3.1" else conf
                for _ in range(2):   # DEL, then DEL again
                    self.assertOk(self.run_plugin("DEL", dconf, container_id=f"ctr{version.replace('.', '')}",
                                                  netns=path))
                self.assert_nothing_left(pod, before, f"{version}: after DEL, DEL")
                self.remove_netns(pod)

    def test_legacy_versions_print_ip4_results(self):
        for version in ["0.1.0", "0.2.0"]:
            with self.subTest(version=version):
                pod, path = self.make_pod()
                out = self.run_plugin("ADD", self.conf(version), netns=path, container_id="legacy" + version[2])
                self.assertOk(out)
                self.assertEqual(out.json["cniVersion"], version)
                self.assertTrue(out.json["ip4"]["ip"].startswith("10.77.0."))
                self.assertEqual(out.json["ip4"]["gateway"], "10.77.0.1")
                self.assertNotIn("interfaces", out.json)
                self.assertOk(self.run_plugin("DEL", self.conf(version), netns=path, container_id="legacy" + version[2]))

    def test_dual_stack_addresses_work_as_soon_as_add_returns(self):
        pod, path = self.make_pod()
        conf = self.conf(v6="fd77::/64")
        before = self.files()
        out = self.run_plugin("ADD", conf, netns=path)
        self.assertOk(out)
        ips = [i["address"] for i in out.json["ips"]]
        self.assertEqual(len(ips), 2)
        v6 = [i for i in out.json["ips"] if ":" in i["address"]][0]
        self.assertEqual(v6["gateway"], "fd77::1")
        for local, _, a in self.addrs(pod, "eth0"):
            if not local.startswith("fe80"):
                self.assertNotIn("tentative", a, "address still doing DAD")
        # No sleep: the addresses must work right away.
        self.assertTrue(self.ping(pod, "fd77::1"), "pod cannot reach its v6 gateway")
        self.assertTrue(self.ping(self.node, v6["address"].split("/")[0]), "node cannot reach the pod over v6")
        self.assertTrue(self.ping(pod, "10.77.0.1"))
        self.assertOk(self.run_plugin("CHECK", dict(conf, prevResult=out.json), netns=path))
        self.assertOk(self.run_plugin("DEL", conf, netns=path))
        self.assert_nothing_left(pod, before)
        self.assertEqual([r for r in self.routes(self.node, "-6") if r.get("dev") not in ("lo", None)], [])

    def test_del_succeeds_when_the_netns_is_gone_or_empty_and_releases_addresses(self):
        pod, path = self.make_pod()
        conf = self.conf()
        before = self.files()
        self.assertOk(self.run_plugin("ADD", conf, netns=path))
        self.assertEqual(len(self.ipam_files(conf["name"])), 1)
        self.remove_netns(pod)
        self.assertOk(self.run_plugin("DEL", conf, netns=path))
        after = self.files()
        self.assertOk(self.run_plugin("DEL", conf, netns=""))
        self.assertFilesUnchanged(after, "a second DEL, without a netns")
        self.assert_nothing_left(None, before, "DEL once the netns is gone")

    def test_add_fails_and_changes_nothing_when_the_ifname_exists(self):
        pod, path = self.make_pod()
        sh("ip", "link", "add", "eth0", "type", "veth", "peer", "name", "p0", ns=pod)
        conf = self.conf()
        before = self.files()
        out = self.run_plugin("ADD", conf, netns=path)
        self.assertError(out, 105, "eth0", "already exists")
        self.assertEqual(set(self.links(self.node)), {"lo"})
        self.assertEqual(self.ipam_files(conf["name"]), [])
        self.assertFilesUnchanged(before, "refused ADD")
        # The DEL a runtime sends after it succeeds, leaves the pod's own eth0 and changes nothing.
        self.assertOk(self.run_plugin("DEL", conf, netns=path))
        self.assertEqual(set(self.links(pod)), {"lo", "eth0", "p0"})
        self.assertEqual(set(self.links(self.node)), {"lo"})
        self.assertFilesUnchanged(before, "DEL after the refused ADD")

    def test_pool_exhaustion_rolls_back_everything(self):
        conf = self.conf()
        conf["ipam"]["ranges"] = [[{"subnet": "10.77.0.0/24", "rangeStart": "10.77.0.10", "rangeEnd": "10.77.0.10"}]]
        pod1, path1 = self.make_pod()
        pod2, path2 = self.make_pod()
        before = self.files()
        self.assertOk(self.run_plugin("ADD", conf, container_id="first", netns=path1))
        with_first = self.files()
        out = self.run_plugin("ADD", conf, container_id="second", netns=path2)
        self.assertError(out, 101, "no IP addresses available")
        self.assertEqual(set(self.links(pod2)), {"lo"})
        self.assertEqual(len(self.links(self.node)), 2)   # lo + first's host end
        self.assertEqual(self.ipam_files(conf["name"]), ["10.77.0.10"])
        self.assertFilesUnchanged(with_first, "refused ADD")
        self.assertOk(self.run_plugin("DEL", conf, container_id="second", netns=path2))
        self.assertEqual(len(self.links(self.node)), 2)
        self.assertFilesUnchanged(with_first, "DEL after the refused ADD")
        self.assertOk(self.run_plugin("DEL", conf, container_id="first", netns=path1))
        self.assert_nothing_left(pod1, before)

    def test_check_names_each_difference(self):
        pod, path = self.make_pod()
        conf = self.conf()
        out = self.run_plugin("ADD", conf, netns=path)
        self.assertOk(out)
        prev = dict(conf, prevResult=out.json)
        ip = out.json["ips"][0]["address"]
        sh("ip", "addr", "del", ip, "dev", "eth0", ns=pod)
        self.assertError(self.run_plugin("CHECK", prev, netns=path), 103, ip, "missing")
        sh("ip", "link", "del", "eth0", ns=pod)
        self.assertError(self.run_plugin("CHECK", prev, netns=path), 103, "eth0")
        self.assertOk(self.run_plugin("DEL", conf, netns=path))

    def test_parallel_adds_get_distinct_addresses(self):
        n = 128
        conf = self.conf(subnet="10.78.0.0/16")
        pods = [self.make_pod() for _ in range(n)]
        before = self.files()

        def add(i):
            return self.run_plugin("ADD", conf, container_id=f"par{i}", netns=pods[i][1])

        with concurrent.futures.ThreadPoolExecutor(max_workers=32) as ex:
            results = list(ex.map(add, range(n)))
        for r in results:
            self.assertOk(r)
        addrs = [r.json["ips"][0]["address"] for r in results]
        self.assertEqual(len(set(addrs)), n, "an address was handed out twice")
        self.assertEqual(len(self.ipam_files(conf["name"])), n)

        def delete(i):
            return self.run_plugin("DEL", conf, container_id=f"par{i}", netns=pods[i][1])

        with concurrent.futures.ThreadPoolExecutor(max_workers=32) as ex:
            for r in ex.map(delete, range(n)):
                self.assertOk(r)
        self.assertEqual(self.ipam_files(conf["name"]), [])
        self.assertEqual(set(self.links(self.node)), {"lo"})
        self.assertOnlyBookkeepingLeft(before, f"{n} parallel ADDs and DELs")


class VethBridge(NetnsTestCase):
    def test_two_pods_on_one_bridge_ping_each_other_and_the_gateway(self):
        br = f"tb{self.tag}"[:15]
        conf = self.conf(bridge=br, isGateway=True)
        pods = [self.make_pod() for _ in range(2)]
        before = self.files()
        results = []
        for i, (ns, path) in enumerate(pods):
            out = self.run_plugin("ADD", conf, container_id=f"br{i}", netns=path)
            self.assertOk(out)
            results.append(out.json)
            self.assertEqual([i["name"] for i in out.json["interfaces"]][0], br)
            self.assertEqual(out.json["ips"][0]["interface"], 2)
        links = self.links(self.node)
        self.assertEqual(links[br]["linkinfo"]["info_kind"], "bridge")
        ports = [l for l in links.values() if l.get("master") == br]
        self.assertEqual(len(ports), 2)
        self.assertIn(("10.77.0.1", 24), [(a, p) for a, p, _ in self.addrs(self.node, br)])
        ip1 = results[1]["ips"][0]["address"].split("/")[0]
        self.assertTrue(self.ping(pods[0][0], ip1, count=2), "pods on one bridge cannot reach each other")
        self.assertTrue(self.ping(pods[0][0], "10.77.0.1"), "pod cannot reach the gateway on the bridge")
        for i, (ns, path) in enumerate(pods):
            self.assertOk(self.run_plugin("CHECK", dict(conf, prevResult=results[i]), container_id=f"br{i}",
                                          netns=path))
            self.assertOk(self.run_plugin("DEL", conf, container_id=f"br{i}", netns=path))
        self.assertEqual(set(self.links(self.node)), {"lo", br}, "only the shared bridge stays")
        self.assertEqual(self.ipam_files(conf["name"]), [])
        self.assertOnlyBookkeepingLeft(before, "two pods on a bridge, after DEL")

    def test_l2_only_bridge_port_has_no_addresses(self):
        br = f"tb{self.tag}"[:15]
        conf = self.conf(ipam=False, bridge=br)
        pod, path = self.make_pod()
        out = self.run_plugin("ADD", conf, netns=path)
        self.assertOk(out)
        self.assertNotIn("ips", out.json)
        self.assertEqual([a for a, p, x in self.addrs(pod, "eth0") if not a.startswith("fe80")], [])
        self.assertOk(self.run_plugin("DEL", conf, netns=path))
        before = self.files()
        legacy_conf = self.conf("0.2.0", ipam=False, bridge=br)
        legacy = self.run_plugin("ADD", legacy_conf, netns=path)
        self.assertError(legacy, 7, "cniVersion")
        self.assertEqual(set(self.links(pod)), {"lo"})
        self.assertFilesUnchanged(before, "refused ADD")
        self.assertOk(self.run_plugin("DEL", legacy_conf, netns=path))
        self.assertFilesUnchanged(before, "DEL after the refused ADD")


if __name__ == "__main__":
    main()
