"""Hostile input: every case gets the right CNI error code, a message naming the bad
input, a non-zero exit, and changes nothing at all: links, addresses and routes in the
node and pod netns, and every file under dataDir, stateDir and their parent, compared
before and after with no exclusions. The DEL a runtime sends after a refused ADD then
succeeds (or, for input DEL cannot read either, fails the same way) and changes nothing."""
import json
import os

from cnitest import REF_DIR, NetnsTestCase, main, sh

BIG = 10 * 1024 * 1024
BAD = "@@NOT-UTF-8@@"   # replaced by the byte 0xFF in the raw stdin


class Hostile(NetnsTestCase):
    def setUp(self):
        super().setUp()
        self.master = f"th{self.tag}m"[:15]
        sh("ip", "link", "add", self.master, "mtu", "1500", "type", "veth", "peer", "name", f"th{self.tag}p"[:15],
           ns=self.node)
        sh("ip", "link", "set", self.master, "up", ns=self.node)
        # Existing state, so "changes nothing" is checked against something.
        self.pod0, self.path0 = self.make_pod()
        self.assertOk(self.run_plugin("ADD", self.conf(), container_id="existing", netns=self.path0))
        self.pod, self.path = self.make_pod()
        self.regular_file = os.path.join(self.tmp, "not-a-netns")
        with open(self.regular_file, "w") as f:
            f.write("x")
        self.kubeconfig = os.path.join(self.tmp, "kubeconfig")
        with open(self.kubeconfig, "w") as f:
            f.write("apiVersion: v1\nclusters:\n- name: c\n  cluster:\n    server: https://127.0.0.1:1\n"
                    "    certificate-authority: /nonexistent/ca.crt\nusers:\n- name: u\n  user:\n"
                    "    client-certificate: /nonexistent/c.crt\n    client-key: /nonexistent/c.key\n"
                    "contexts:\n- name: x\n  context:\n    cluster: c\n    user: u\ncurrent-context: x\n")
        self.kubelet = os.path.join(self.tmp, "kubelet")
        os.makedirs(self.kubelet)
        with open(os.path.join(self.kubelet, "cpu_manager_state"), "w") as f:
            f.write('{"policyName":"static","entries":{"u1":{"c":"2-')   # truncated

    def kernel_state(self):
        """What a plugin could change; not what the kernel changes by itself (DAD, operstate)."""
        state = {}
        for ns in (self.node, self.pod0, self.pod):
            links = sorted((l["ifname"], l.get("linkinfo", {}).get("info_kind"), l["mtu"], l.get("address"),
                            l.get("master"), "UP" in l["flags"]) for l in json.loads(sh("ip", "-j", "-d", "link", ns=ns)))
            # The kernel adds IPv6 link-local addresses and their routes on its own, a
            # moment after a link comes up: leave them out.
            addrs = sorted((a["ifname"], i["local"], i["prefixlen"]) for a in json.loads(sh("ip", "-j", "addr", ns=ns))
                           for i in a.get("addr_info", []) if not i["local"].startswith("fe80"))
            routes = sorted(json.dumps({k: r.get(k) for k in ("dst", "gateway", "dev", "table", "protocol", "scope")})
                            for fam in ("-4", "-6")
                            for r in json.loads(sh("ip", "-j", fam, "route", "show", "table", "all", ns=ns))
                            if not r.get("dst", "").startswith(("fe80", "ff00")))
            state[ns] = (links, addrs, routes)
        return state

    def cases(self):
        """(description, conf-or-raw-stdin, env overrides, expected code, word in message)."""
        c = self.conf
        mv = lambda **kw: c(**dict({"attachment": "macvlan", "master": self.master}, **kw))

        def ipam(**kw):
            conf = c()
            conf["ipam"].update(kw)
            return conf

        def rng(**kw):
            conf = c()
            conf["ipam"]["ranges"][0][0].update(kw)
            return conf

        nested_ok = '{"cniVersion":"1.1.0","name":"n","x":' + "[" * 100 + "]" * 100 + "}"
        return [
            ("malformed json", '{"cniVersion": "1.1.0", "name": ', {}, 6, "decode"),
            ("truncated json", json.dumps(c())[:40], {}, 6, "decode"),
            ("10 MB json array", "[" + "1," * (BIG // 2) + "1]", {}, 6, "object"),
            ("10 MB network name", json.dumps(dict(c(), name="a" * BIG)), {}, 7, "name"),
            ("deeply nested json", "[" * 100000, {}, 6, "nested"),
            ("nested 100 levels under a key", nested_ok, {}, 6, "nested"),
            ("not an object", "[]", {}, 6, "object"),
            ("empty stdin", "", {}, 6, "decode"),
            ("binary garbage", "\x00\x01\x02\xff", {}, 6, "decode"),
            ("cniVersion is a number", dict(c(), cniVersion=1), {}, 7, "cniVersion"),
            ("unknown cniVersion", c("2.0.0"), {}, 1, "2.0.0"),
            ("name is a number", dict(c(), name=123), {}, 7, "name"),
            ("name with slash", c(name="a/b"), {}, 7, "name"),
            ("name dot dot", c(name=".."), {}, 7, "name"),
            ("name traversal", c(name="../../etc"), {}, 7, "name"),
            ("name too long", c(name="n" * 300), {}, 7, "name"),
            ("mtu string", c(mtu="1500"), {}, 7, "mtu"),
            ("mtu negative", c(mtu=-1), {}, 7, "mtu"),
            ("mtu huge", c(mtu=10 ** 12), {}, 7, "mtu"),
            ("mtu fraction", c(mtu=1500.5), {}, 7, "mtu"),
            ("mtu too small", c(mtu=10), {}, 7, "mtu"),
            ("ipam is a string", dict(c(), ipam="host-local"), {}, 7, "ipam"),
            ("ipam ranges object", ipam(ranges={}), {}, 7, "ipam.ranges"),
            ("subnet banana", rng(subnet="banana"), {}, 7, "ipam.ranges[0][0].subnet"),
            ("subnet host bits", rng(subnet="10.77.0.1/24"), {}, 7, "ipam.ranges[0][0].subnet"),
            ("subnet too small", rng(subnet="10.77.0.0/32"), {}, 7, "ipam.ranges[0][0].subnet"),
            ("rangeStart outside", rng(rangeStart="10.1.1.1"), {}, 7, "rangeStart"),
            ("rangeEnd before start", rng(rangeStart="10.77.0.50", rangeEnd="10.77.0.10"), {}, 7, "range"),
            ("gateway not an ip", rng(gateway="x"), {}, 7, "gateway"),
            ("dataDir relative", ipam(dataDir="rel/dir"), {}, 7, "dataDir"),
            ("lockTimeout negative", ipam(lockTimeout=-1), {}, 7, "lockTimeout"),
            ("ipam type traversal", ipam(type="../x"), {}, 7, "ipam.type"),
            ("ipam type absolute", ipam(type="/bin/sh"), {}, 7, "ipam.type"),
            ("ipam type missing plugin", ipam(type="no-such-ipam"), {}, 7, "no-such-ipam"),
            ("mac invalid", c(mac="zz:zz:zz:zz:zz:zz"), {}, 7, "mac"),
            ("mac multicast", c(mac="01:00:5e:00:00:01"), {}, 7, "mac"),
            ("mac wrong type", c(mac=42), {}, 7, "mac"),
            ("attachment unknown", c(attachment="tap"), {}, 7, "attachment"),
            ("bridge name too long", c(bridge="b" * 16), {}, 7, "bridge"),
            ("bridge name slash", c(bridge="br/0"), {}, 7, "bridge"),
            ("isGateway without bridge", c(isGateway=True), {}, 7, "isGateway"),
            ("veth without ipam or bridge", c(ipam=False), {}, 7, "ipam"),
            ("master with slash", mv(master="../eth0"), {}, 7, "master"),
            ("master missing", mv(master="nosuch0"), {}, 7, "nosuch0"),
            ("macvlan mode unknown", mv(mode="l3"), {}, 7, "mode"),
            ("macvlan mtu above master", mv(mtu=9000), {}, 7, "mtu"),
            ("stateDir relative", c(stateDir="state"), {}, 7, "stateDir"),
            ("sysfsRoot relative", c(sysfsRoot="sys"), {}, 7, "sysfsRoot"),
            ("logLevel unknown", c(logLevel="loud"), {}, 7, "logLevel"),
            ("logFile relative", c(logFile="x.log"), {}, 7, "logFile"),
            ("runtimeConfig mac bad", c(runtimeConfig={"mac": "nope"}), {}, 7, "runtimeConfig.mac"),
            ("runtimeConfig ips bad", c(runtimeConfig={"ips": ["x"]}), {}, 7, "runtimeConfig.ips"),
            ("args.cni.ips bad type", c(args={"cni": {"ips": [5]}}), {}, 7, "args.cni.ips"),
            ("prevResult garbage", c(prevResult={"ips": [{"address": "nope"}]}), {}, 7, "prevResult.ips[0].address"),
            ("dns nameservers not a list", c(dns={"nameservers": "1.1.1.1"}), {}, 7, "dns.nameservers"),
            ("requested ip outside the range", c(), {"CNI_ARGS": "IP=10.99.0.5"}, 7, "10.99.0.5"),
            ("requested ip is the gateway", c(), {"CNI_ARGS": "IP=10.77.0.1"}, 7, "10.77.0.1"),
            ("requested ip taken", c(), {"CNI_ARGS": "IP=10.77.0.2"}, 102, "10.77.0.2"),
            ("ifname with slash", c(), {"CNI_IFNAME": "et/h0"}, 4, "CNI_IFNAME"),
            ("ifname 16 bytes", c(), {"CNI_IFNAME": "x" * 16}, 4, "CNI_IFNAME"),
            ("ifname dot", c(), {"CNI_IFNAME": "."}, 4, "CNI_IFNAME"),
            ("ifname dot dot", c(), {"CNI_IFNAME": ".."}, 4, "CNI_IFNAME"),
            ("ifname with space", c(), {"CNI_IFNAME": "eth 0"}, 4, "CNI_IFNAME"),
            ("netns is a regular file", c(), {"CNI_NETNS": self.regular_file}, 8, self.regular_file),
            ("netns is a directory", c(), {"CNI_NETNS": self.tmp}, 8, self.tmp),
            ("netns is the node itself", c(), {"CNI_NETNS": f"/run/netns/{self.node}"}, 8, "own"),
            ("netns is /proc/self/ns/net", c(), {"CNI_NETNS": "/proc/self/ns/net"}, 8, "own"),
            ("netns relative", c(), {"CNI_NETNS": "run/netns/x"}, 4, "CNI_NETNS"),
            ("netns missing", c(), {"CNI_NETNS": "/run/netns/does-not-exist"}, 8, "does-not-exist"),
            ("cni path relative", c(), {"CNI_PATH": "bin:/usr/lib/cni"}, 4, "CNI_PATH"),
            ("cni args garbage", c(), {"CNI_ARGS": "a;b"}, 4, "CNI_ARGS"),
            ("cni args bad ip", c(), {"CNI_ARGS": "IP=1.2.3.4.5"}, 4, "CNI_ARGS"),
            ("cni args bad mac", c(), {"CNI_ARGS": "MAC=zz"}, 4, "CNI_ARGS"),
            ("container id with slash", c(), {"CNI_CONTAINERID": "a/../b"}, 4, "CNI_CONTAINERID"),
            ("container id empty", c(), {"CNI_CONTAINERID": ""}, 4, "CNI_CONTAINERID"),
            ("command bogus", c(), {"CNI_COMMAND": "EXPLODE"}, 4, "EXPLODE"),
            ("check without prevResult", c(), {"CNI_COMMAND": "CHECK"}, 7, "prevResult"),
            ("check on 0.3.1", c("0.3.1"), {"CNI_COMMAND": "CHECK"}, 1, "CHECK"),
            ("gc without valid attachments", c(), {"CNI_COMMAND": "GC"}, 7, "valid-attachments"),
            ("gc with a bad valid list", dict(c(), **{"cni.dev/valid-attachments": [{"ifname": "x"}]}),
             {"CNI_COMMAND": "GC"}, 7, "containerID"),
            ("ifname already exists in the pod", c(), {"CNI_NETNS": self.path0}, 105, "eth0"),
            ("deviceID traversal", c(ipam=False, attachment="sriov", deviceID="../../etc"), {}, 7, "deviceID"),
            ("deviceID not a pci address", c(ipam=False, attachment="sriov", deviceID="eth0"), {}, 7, "deviceID"),
            ("vlan out of range", c(ipam=False, attachment="sriov", deviceID="0000:03:02.0", vlan=5000), {}, 7, "vlan"),
            ("vlan negative", c(ipam=False, attachment="sriov", deviceID="0000:03:02.0", vlan=-1), {}, 7, "vlan"),
            ("tx rate negative", c(ipam=False, attachment="sriov", deviceID="0000:03:02.0", max_tx_rate=-5), {}, 7,
             "max_tx_rate"),
            ("kubeconfig naming missing files", c(kubeconfig=self.kubeconfig, nodeSelector={"a": "b"}), {}, 7,
             "/nonexistent/ca.crt"),
            ("truncated cpu_manager_state", mv(kubeletRootDir=self.kubelet, kubeconfig="",
                                                topology={"numaPolicy": "single-numa-node", "unknownTopology": "deny"}),
             {"CNI_ARGS": "K8S_POD_UID=u1"}, 100, "cpu_manager_state"),
            ("selector operator unknown", c(kubeconfig="", nodeSelector={"matchExpressions": [
                {"key": "a", "operator": "Near"}]}), {}, 7, "nodeSelector.matchExpressions[0].operator"),
            ("numaPolicy unknown", mv(topology={"numaPolicy": "strict"}), {}, 7, "topology.numaPolicy"),
            ("route table negative", ipam(routes=[{"dst": "0.0.0.0/0", "table": -5}]), {}, 7, "table"),
            ("capabilities is a list", c(capabilities=["mac"]), {}, 7, "capabilities"),
            ("capability not a boolean", c(capabilities={"mac": "yes"}), {}, 7, 'capabilities["mac"]'),
            ("ifname not UTF-8", c(), {"CNI_IFNAME": b"eth\xff"}, 4, "CNI_IFNAME"),
            ("netns not UTF-8", c(), {"CNI_NETNS": b"/run/netns/\xff"}, 4, "CNI_NETNS"),
            ("command not UTF-8", c(), {"CNI_COMMAND": b"AD\xff"}, 4, "CNI_COMMAND"),
        ] + self.utf8_cases()

    def utf8_cases(self):
        """Invalid UTF-8 (the byte 0xFF) in every string key of every kind of config."""
        c = self.conf
        sriov = dict(c(), attachment="sriov", deviceID="0000:03:02.0", vlan=5, vlanProto="802.1q", spoofchk="on",
                     trust="off", link_state="auto")
        mv = dict(c(), attachment="macvlan", master=self.master, mode="bridge")
        placed = dict(c(), nodeName="n1", nodeLabelsFile="/x", kubeconfig="", kubeletRootDir="/k",
                      nodeSelector={"matchExpressions": [{"key": "a", "operator": "In", "values": ["b"]}]},
                      topology={"numaPolicy": "none", "unknownTopology": "allow"})
        full = dict(c(), bridge="br0", mac="02:00:00:00:00:01", logFile="/tmp/x.log", logLevel="error",
                    sysfsRoot="/sys", dns={"nameservers": ["1.1.1.1"], "domain": "d", "search": ["s"], "options": ["o"]},
                    runtimeConfig={"mac": "02:00:00:00:00:02", "ips": ["10.77.0.9"]}, args={"cni": {"ips": ["10.77.0.9"]}},
                    capabilities={"mac": True})
        full["ipam"]["routes"] = [{"dst": "0.0.0.0/0", "gw": "10.77.0.1"}]
        full["ipam"]["ranges"][0][0].update(rangeStart="10.77.0.10", rangeEnd="10.77.0.20", gateway="10.77.0.1")
        meta = dict(c("1.0.0", ipam=False), delegate={"type": "macvlan", "master": self.master})   # Debian's: <= 1.0.0
        out = []
        for template in (full, mv, sriov, placed, meta):
            for path, value in string_leaves(template):
                conf = json.loads(json.dumps(template))
                set_at(conf, path, value[:1] + BAD + value[1:] if value else BAD)
                raw = json.dumps(conf).encode().replace(BAD.encode(), b"\xff")
                out.append((f"not UTF-8 in {'.'.join(map(str, path))} ({template.get('attachment', 'veth')})",
                            raw, {}, 6, "UTF-8"))
        return out

    def test_every_hostile_input_is_refused_and_changes_nothing_and_del_after_it_succeeds(self):
        cases = self.cases()
        self.assertGreaterEqual(len(cases), 150)
        before_files = self.files()
        before_kernel = self.kernel_state()
        for desc, conf, env, code, word in cases:
            with self.subTest(case=desc):
                raw = conf if isinstance(conf, (str, bytes)) else None
                e = {"CNI_COMMAND": "ADD", "CNI_CONTAINERID": "hostile", "CNI_NETNS": self.path,
                     "CNI_IFNAME": "eth0", "CNI_PATH": REF_DIR, "PATH": "/usr/sbin:/usr/bin:/sbin:/bin"}
                e.update(env)
                out = self.run_plugin(e["CNI_COMMAND"], None if raw else conf, env_override=e, raw_stdin=raw)
                self.assertNotEqual(out.rc, 0, f"{desc}: accepted")
                self.assertIsNotNone(out.json, f"{desc}: no error JSON on stdout: {out.stdout[:300]!r}")
                self.assertEqual(out.json.get("code"), code, f"{desc}: {out.json}")
                text = out.json.get("msg", "") + " " + out.json.get("details", "")
                self.assertIn(word, text, f"{desc}: message does not name the bad input")
                if code == 100:
                    # A placement refusal writes its counter, and nothing else.
                    self.assertOnlyRefusalCounted(before_files, out, conf["name"])
                    before_files = self.files()
                else:
                    self.assertFilesUnchanged(before_files, desc)
                self.assertEqual(self.kernel_state(), before_kernel, f"{desc}: kernel state changed")
                if e["CNI_COMMAND"] != "ADD":
                    continue
                # The DEL every runtime sends next.
                e["CNI_COMMAND"] = "DEL"
                out = self.run_plugin("DEL", None if raw else conf, env_override=e, raw_stdin=raw)
                if desc.startswith("not UTF-8 in cniVersion"):
                    # What DEL reads there (as a Go runtime would pass it on) is no version it knows.
                    self.assertEqual(out.json and out.json.get("code"), 1, f"{desc}: DEL: {out}")
                elif not del_refuses(desc, code):
                    self.assertEqual(out.rc, 0, f"{desc}: DEL after the refused ADD failed: {out}")
                    self.assertEqual(out.stdout, "", f"{desc}: DEL printed {out.stdout!r}")
                else:
                    self.assertNotEqual(out.rc, 0, f"{desc}: DEL accepted input it cannot read")
                    self.assertEqual(out.json.get("code"), code, f"{desc}: DEL: {out.json}")
                self.assertFilesUnchanged(before_files, f"{desc} (DEL)")
                self.assertEqual(self.kernel_state(), before_kernel, f"{desc} (DEL): kernel state changed")


def del_refuses(desc, code):
    """What DEL reports as well (README, "What DEL reports"): a config it cannot decode,
    an unsupported cniVersion, an invalid CNI_* variable. Invalid UTF-8 is not among it:
    DEL reads it as Go runtimes do (U+FFFD)."""
    return (code == 6 and not desc.startswith("not UTF-8")) or code in (1, 4)


def string_leaves(node, path=()):
    """(path, value) of every string in a JSON value, and of every object key."""
    if isinstance(node, dict):
        for k, v in node.items():
            yield from string_leaves(v, path + (k,))
    elif isinstance(node, list):
        for i, v in enumerate(node):
            yield from string_leaves(v, path + (i,))
    elif isinstance(node, str):
        yield path, node


def set_at(node, path, value):
    for p in path[:-1]:
        node = node[p]
    node[path[-1]] = value


if __name__ == "__main__":
    main()
