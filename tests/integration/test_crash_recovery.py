"""Crash injection: the plugin is killed (SIGKILL, no cleanup) after each step of ADD.
Then either DEL, as a runtime would, or only GC with an empty valid list must leave
nothing behind: no link in either netns, no host route, and of the files under the test's
temp dir (dataDir, stateDir and their parent) nothing but named bookkeeping."""
from cnitest import NetnsTestCase, main, sh

POINTS = {
    "veth": ["after-ipam", "after-link-create", "after-addresses", "after-host-routes", "before-result"],
    "bridge": ["after-ipam", "after-link-create", "after-addresses", "before-result"],
    "macvlan": ["after-ipam", "after-link-create", "after-move", "after-addresses", "before-result"],
}


class CrashInjection(NetnsTestCase):
    def setUp(self):
        super().setUp()
        self.master = f"tk{self.tag}m"[:15]
        self.bridge = f"tk{self.tag}b"[:15]
        sh("ip", "link", "add", self.master, "type", "veth", "peer", "name", f"tk{self.tag}p"[:15], ns=self.node)
        sh("ip", "link", "set", self.master, "up", ns=self.node)
        self.baseline = {"lo", self.master, f"tk{self.tag}p"[:15]}

    def conf_for(self, kind):
        if kind == "veth":
            return self.conf(v6="fd42::/64")
        if kind == "bridge":
            return self.conf(bridge=self.bridge, isGateway=True)
        return self.conf(attachment="macvlan", master=self.master)

    def assert_clean(self, pod, before, what):
        """No link or host route is left, and every file and directory new or changed since
        `before` (taken before the crashed ADD) is named bookkeeping."""
        node_links = set(self.links(self.node)) - {self.bridge}
        self.assertEqual(node_links, self.baseline, f"{what}: links left on the node")
        self.assertEqual(set(self.links(pod)), {"lo"}, f"{what}: links left in the pod")
        routes = [r for fam in ("-4", "-6") for r in self.routes(self.node, fam)
                  if r.get("dev") not in ("lo", self.bridge, self.master, None) and r.get("type") != "local"]
        self.assertEqual(routes, [], f"{what}: host routes left")
        self.assertOnlyBookkeepingLeft(before, what)

    def crash(self, kind, point, cid, path):
        conf = self.conf_for(kind)
        out = self.run_plugin("ADD", conf, container_id=cid, netns=path, extra_env={"TOPOCNI_FAILPOINT": point})
        self.assertEqual(out.rc, -9, f"{kind}/{point}: plugin was not killed: {out}")
        self.assertEqual(out.stdout, "", "nothing printed before the kill")
        return conf

    def test_del_after_a_crash_at_every_step_leaves_nothing(self):
        for kind, points in POINTS.items():
            for point in points:
                with self.subTest(kind=kind, point=point):
                    pod, path = self.make_pod()
                    before = self.files()
                    conf = self.crash(kind, point, f"d{kind}", path)
                    self.assertOk(self.run_plugin("DEL", conf, container_id=f"d{kind}", netns=path))
                    self.assert_clean(pod, before, f"{kind}/{point} + DEL")
                    self.remove_netns(pod)

    def test_gc_alone_after_a_crash_at_every_step_leaves_nothing(self):
        for kind, points in POINTS.items():
            for point in points:
                with self.subTest(kind=kind, point=point):
                    pod, path = self.make_pod()
                    before = self.files()
                    conf = self.crash(kind, point, f"g{kind}", path)
                    gc = dict(conf)
                    gc["cni.dev/valid-attachments"] = []
                    self.assertOk(self.run_plugin("GC", gc))
                    self.assert_clean(pod, before, f"{kind}/{point} + GC")
                    self.remove_netns(pod)


if __name__ == "__main__":
    main()
