"""The operator CLI and the logs, run as an operator would."""
import json
import os
import subprocess

from cnitest import BIN, NetnsTestCase, main, sh


def cli(*args, ns=None, env=None):
    cmd = [BIN] + list(args)
    if ns:
        cmd = ["nsenter", f"--net=/run/netns/{ns}"] + cmd
    e = dict(os.environ)
    e.pop("CNI_COMMAND", None)
    e.update(env or {})
    return subprocess.run(cmd, capture_output=True, text=True, env=e, timeout=60)


class Cli(NetnsTestCase):
    def write(self, name, obj):
        path = os.path.join(self.tmp, name)
        with open(path, "w") as f:
            f.write(json.dumps(obj) if not isinstance(obj, str) else obj)
        return path

    def test_version_prints_the_plugin_and_cni_versions(self):
        p = cli("version")
        self.assertEqual(p.returncode, 0)
        self.assertIn("topocni", p.stdout)
        self.assertIn("0.1.0 0.2.0 0.3.0 0.3.1 0.4.0 1.0.0 1.1.0", p.stdout)

    def test_every_subcommand_has_help_with_examples(self):
        for sub in [["exec"], ["ipam", "list"], ["ipam", "release"], ["ipam", "gc"], ["node-report"], ["explain"]]:
            with self.subTest(sub=sub):
                p = cli(*sub, "--help")
                self.assertEqual(p.returncode, 0, p.stderr)
                self.assertIn("Usage: " + BIN + " " + " ".join(sub), p.stdout.replace(os.path.abspath(BIN), BIN))
                self.assertIn("Example", p.stdout)

    def test_errors_name_what_was_wrong(self):
        p = cli("exec", "add", "--config", "/nonexistent.conf", "--netns", "/run/netns/x")
        self.assertNotEqual(p.returncode, 0)
        self.assertIn("/nonexistent.conf", p.stdout + p.stderr)
        p = cli("exec", "frob", "--config", "x")
        self.assertNotEqual(p.returncode, 0)
        self.assertIn("frob", p.stderr)
        p = cli("ipam", "list")
        self.assertNotEqual(p.returncode, 0)
        self.assertIn("--network", p.stderr)

    def test_exec_runs_add_check_del_from_a_conflist_and_keeps_the_result_for_check(self):
        pod, path = self.make_pod()
        conf = self.conf()
        entry = {k: v for k, v in conf.items() if k not in ("cniVersion", "name")}
        # exec runs the whole chain, as cnitool does: 1.0.0, the newest Debian's tuning speaks.
        conflist = {"cniVersion": "1.0.0", "name": conf["name"], "plugins": [entry, {"type": "tuning"}]}
        f = self.write("net.conflist", conflist)
        add = cli("exec", "add", "--config", f, "--netns", path, ns=self.node)
        self.assertEqual(add.returncode, 0, add.stdout + add.stderr)
        result = json.loads(add.stdout)
        self.assertEqual(result["interfaces"][1]["sandbox"], path)
        self.assertIn("eth0", self.links(pod))
        chk = cli("exec", "check", "--config", f, "--netns", path, ns=self.node)
        self.assertEqual(chk.returncode, 0, chk.stdout + chk.stderr)
        # A broken attachment makes exec check fail with the plugin's error and status.
        sh("ip", "addr", "flush", "dev", "eth0", ns=pod)
        chk = cli("exec", "check", "--config", f, "--netns", path, ns=self.node)
        self.assertNotEqual(chk.returncode, 0)
        self.assertEqual(json.loads(chk.stdout)["code"], 103)
        dele = cli("exec", "del", "--config", f, "--netns", path, ns=self.node)
        self.assertEqual(dele.returncode, 0, dele.stdout)
        self.assertEqual(set(self.links(pod)), {"lo"})
        self.assertEqual(self.ipam_files(conf["name"]), [])

    def test_exec_passes_only_declared_capabilities(self):
        pod, path = self.make_pod()
        conf = self.conf(capabilities={"mac": True})
        f = self.write("net.conf", conf)
        add = cli("exec", "add", "--config", f, "--netns", path, "--container-id", "capx",
                  "--cap-args", '{"mac":"02:00:00:00:00:77","ips":["10.77.0.50"]}', ns=self.node)
        self.assertEqual(add.returncode, 0, add.stdout + add.stderr)
        r = json.loads(add.stdout)
        self.assertEqual(r["interfaces"][1]["mac"], "02:00:00:00:00:77")
        self.assertNotEqual(r["ips"][0]["address"], "10.77.0.50/24")
        self.assertIn("ips", add.stderr)
        self.assertEqual(cli("exec", "del", "--config", f, "--netns", path, "--container-id", "capx",
                             ns=self.node).returncode, 0)

    def test_usage_errors_exit_2_and_help_exits_0(self):
        self.assertEqual(cli("exec", "frob", "--config", "x").returncode, 2)
        self.assertEqual(cli("nosuchcommand").returncode, 2)
        self.assertEqual(cli("--help").returncode, 0)

    def test_every_example_config_and_nad_is_readable(self):
        ex = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "examples")
        files = [f for f in os.listdir(ex) if f.endswith((".conf", ".conflist", "-nad.yaml"))]
        self.assertGreaterEqual(len(files), 9)
        for f in files:
            with self.subTest(example=f):
                p = cli("explain", "--config", os.path.join(ex, f), "--node-labels", "/dev/null")
                self.assertIn(p.returncode, (0, 1), p.stdout + p.stderr)   # 2 = unreadable
                if f.endswith("-nad.yaml"):
                    self.assertIn("nodeSelector", p.stdout, "each NAD example carries placement constraints")

    def test_exec_takes_a_nad_manifest_in_yaml(self):
        pod, path = self.make_pod()
        conf = self.conf()
        nad = ("apiVersion: k8s.cni.cncf.io/v1\nkind: NetworkAttachmentDefinition\nmetadata:\n  name: x\n"
               "spec:\n  config: |\n    " + json.dumps(conf) + "\n")
        f = self.write("nad.yaml", nad)
        add = cli("exec", "add", "--config", f, "--netns", path, ns=self.node)
        self.assertEqual(add.returncode, 0, add.stdout + add.stderr)
        self.assertIn("eth0", self.links(pod))
        self.assertEqual(cli("exec", "del", "--config", f, "--netns", path, ns=self.node).returncode, 0)
        self.assertEqual(set(self.links(pod)), {"lo"})

    def test_ipam_list_release_and_gc_know_which_owners_are_gone(self):
        conf = self.conf()
        pods = [self.make_pod() for _ in range(3)]
        ips = []
        for i, (ns, path) in enumerate(pods):
            out = self.run_plugin("ADD", conf, container_id=f"own{i}", netns=path)
            self.assertOk(out)
            ips.append(out.json["ips"][0]["address"].split("/")[0])
        common = ["--network", conf["name"], "--data-dir", self.data_dir, "--state-dir", self.state_dir]
        self.remove_netns(pods[0][0])      # own0's pod is gone without a DEL
        lst = cli("ipam", "list", *common)
        self.assertEqual(lst.returncode, 0, lst.stderr)
        rows = {l.split()[0]: l.split() for l in lst.stdout.splitlines()[1:]}
        self.assertEqual(rows[ips[0]][1:], ["own0", "eth0", "no"])
        self.assertEqual(rows[ips[1]][1:], ["own1", "eth0", "yes"])
        dry = cli("ipam", "gc", *common, "--dry-run")
        self.assertIn("would release " + ips[0], dry.stdout)
        self.assertEqual(len(self.ipam_files(conf["name"])), 3)
        gc = cli("ipam", "gc", *common)
        self.assertEqual(gc.returncode, 0, gc.stderr)
        self.assertEqual(sorted(self.ipam_files(conf["name"])), sorted(ips[1:]))
        rel = cli("ipam", "release", *common, "--ip", ips[2])
        self.assertEqual(rel.returncode, 0, rel.stderr)
        self.assertEqual(self.ipam_files(conf["name"]), [ips[1]])
        bad = cli("ipam", "release", *common, "--ip", "10.1.2.3")
        self.assertNotEqual(bad.returncode, 0)
        self.assertIn("10.1.2.3", bad.stderr)

    def test_node_report_lists_vfs_per_numa_node_and_link_speeds(self):
        root = os.path.join(self.tmp, "sys")
        pci = os.path.join(root, "bus/pci/devices")
        net = os.path.join(root, "class/net")
        for d in ["devices/system/node/node0", "devices/system/node/node1"]:
            os.makedirs(os.path.join(root, d))
        os.makedirs(net)
        pf_addr = {"ens1f0": ("0000:03:00.0", 0), "ens2f0": ("0000:81:00.0", 1)}
        for pf, (addr, numa) in pf_addr.items():
            pdir = os.path.join(pci, addr)
            os.makedirs(os.path.join(pdir, "net", pf))
            for k, v in {"sriov_totalvfs": "8", "sriov_numvfs": "2", "numa_node": str(numa)}.items():
                open(os.path.join(pdir, k), "w").write(v + "\n")
            os.makedirs(os.path.join(net, pf))
            os.symlink(pdir, os.path.join(net, pf, "device"))
            open(os.path.join(net, pf, "speed"), "w").write("25000\n")
            for i in range(2):
                vf = addr[:-4] + f"0{i + 2}.{i}"
                os.makedirs(os.path.join(pci, vf))
                os.symlink(pdir, os.path.join(pci, vf, "physfn"))
                os.symlink(os.path.join(pci, vf), os.path.join(pdir, f"virtfn{i}"))
        os.makedirs(os.path.join(self.state_dir, "sriov"))
        open(os.path.join(self.state_dir, "sriov", "0000:03:02.0.json"), "w").write("{}")
        out = os.path.join(self.tmp, "features.d", "topocni")
        os.makedirs(os.path.dirname(out))
        p = cli("node-report", "--sysfs-root", root, "--state-dir", self.state_dir, "--output", out)
        self.assertEqual(p.returncode, 0, p.stderr)
        with open(out) as f:
            labels = dict(l.split("=", 1) for l in f.read().splitlines() if l and not l.startswith("#"))
        self.assertEqual(labels["topocni.io/numa-nodes"], "2")
        self.assertEqual(labels["topocni.io/sriov-numa0.free-vfs"], "1")
        self.assertEqual(labels["topocni.io/sriov-numa1.free-vfs"], "2")
        self.assertEqual(labels["topocni.io/sriov-pf.ens1f0.total-vfs"], "8")
        self.assertEqual(labels["topocni.io/link.ens2f0.speed-mbps"], "25000")
        self.assertEqual([f for f in os.listdir(os.path.dirname(out))], ["topocni"], "no temp file left")
        for k in labels:
            self.assertRegex(k.split("/", 1)[1], r"^[A-Za-z0-9][-A-Za-z0-9_.]{0,62}$")


class Logs(NetnsTestCase):
    def test_log_file_gets_one_line_per_event_and_stdout_only_the_result(self):
        pod, path = self.make_pod()
        log = os.path.join(self.tmp, "topocni.log")
        conf = self.conf(logFile=log, logLevel="debug")
        out = self.run_plugin("ADD", conf, container_id="logc", netns=path)
        self.assertOk(out)
        self.assertIsNotNone(out.json)
        with open(log) as f:
            lines = f.read().splitlines()
        self.assertGreater(len(lines), 0)
        for l in lines:
            self.assertRegex(l, r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z (error|warning|info|debug) ADD logc eth0: ")
        bad = self.run_plugin("ADD", conf, container_id="logd", netns=path)   # another container, same ifname
        self.assertNotEqual(bad.rc, 0)
        with open(log) as f:
            self.assertIn(" error ADD logd eth0: code 105", f.read())
        self.assertOk(self.run_plugin("DEL", conf, container_id="logc", netns=path))

    def test_an_unopenable_log_file_never_fails_the_verb(self):
        pod, path = self.make_pod()
        conf = self.conf(logFile="/nonexistent-dir/x.log", logLevel="info")
        out = self.run_plugin("ADD", conf, netns=path)
        self.assertOk(out)
        self.assertOk(self.run_plugin("DEL", conf, netns=path))

    def test_errors_go_to_stderr_by_default_and_nothing_but_json_to_stdout(self):
        pod, path = self.make_pod()
        out = self.run_plugin("ADD", self.conf(mtu=1), netns=path)
        self.assertEqual(out.json["code"], 7)
        self.assertIn("error ADD", out.stderr)
        json.loads(out.stdout)


if __name__ == "__main__":
    main()
