"""A newcomer's first hour (issue 23): the README's quick start and "Try it by hand" run word
for word, typos are named, empty answers are errors, messages point at what to do."""
import json
import os
import re
import subprocess

from cnitest import BIN, NetnsTestCase, main, sh

ROOT = os.path.abspath(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))
README = os.path.join(ROOT, "README.md")
EXAMPLES = os.path.join(ROOT, "examples")


def cli(*args, ns=None, env=None, cwd=None):
    cmd = [BIN] + list(args)
    if ns:
        cmd = ["nsenter", f"--net=/run/netns/{ns}"] + cmd
    e = dict(os.environ)
    for k in [k for k in e if k.startswith("CNI_")]:
        e.pop(k)
    e.update(env or {})
    return subprocess.run(cmd, capture_output=True, text=True, env=e, timeout=60, cwd=cwd)


def readme_section(title):
    with open(README) as f:
        text = f.read()
    start = text.index("\n## " + title)
    end = text.index("\n## ", start + 1)
    return text[start:end]


def sh_blocks(section):
    return re.findall(r"```sh\n(.*?)```", section, re.S)


class Readme(NetnsTestCase):
    """The README's commands, exactly as printed, in a bash whose pid names its namespaces."""

    def run_verbatim(self, script, prefixes):
        bindir = os.path.join(self.tmp, "bin")
        os.makedirs(bindir, exist_ok=True)
        os.symlink(os.path.abspath(BIN), os.path.join(bindir, "topocni"))
        scratch = os.path.join(self.tmp, "scratch")   # mktemp -d lands here
        os.makedirs(scratch)
        env = {k: v for k, v in os.environ.items() if not k.startswith("CNI_")}
        env["PATH"] = bindir + ":" + env.get("PATH", "/usr/sbin:/usr/bin:/sbin:/bin")
        env["TMPDIR"] = scratch
        p = subprocess.Popen(["bash", "-e", "-c", script], cwd=ROOT, env=env, stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE, text=True)
        # The README names its namespaces after the shell's pid ($$): remove them even when
        # a command fails half-way.
        names = [f"{prefix}{p.pid}" for prefix in prefixes]
        self.addCleanup(lambda: [subprocess.run(["ip", "netns", "del", n], capture_output=True) for n in names])
        out, err = p.communicate(timeout=120)
        self.assertEqual(p.returncode, 0, f"stdout:\n{out}\nstderr:\n{err}")
        for n in names:
            self.assertFalse(os.path.exists(f"/run/netns/{n}"), f"the README's last line removes netns {n}")
        self.assertEqual(os.listdir(scratch), [], "the README's last line removes its temp dir")
        return out, err

    def test_try_it_by_hand_runs_as_written_and_shows_what_it_says(self):
        blocks = sh_blocks(readme_section("Try it by hand: topocni exec"))
        self.assertEqual(len(blocks), 1)
        script = blocks[0]
        for word in ["/var/lib/cni", "/etc/cni", "/opt/cni"]:
            self.assertNotIn(word, script, "the walk-through writes only its temp dir")
        out, err = self.run_verbatim(script, ["node", "pod"])
        self.assertIn("examples/macvlan.conf: valid", out)
        results = re.findall(r"^\{\n.*?^\}\n", out, re.S | re.M)
        self.assertEqual(len(results), 2, out)
        first, retry = (json.loads(r) for r in results)
        self.assertEqual(first["interfaces"][0]["name"], "net1")
        self.assertEqual(retry["code"], 105, "a retried ADD whose interface is there is an error (CNI spec)")
        self.assertIn("interface 'net1' already exists", retry["msg"])
        self.assertIn("\nexit status 1\n", out)
        row = [l.split() for l in out.splitlines() if l.startswith("192.168.100.")]
        self.assertEqual(len(row), 1, out)
        self.assertRegex(row[0][1], r"^topocni-[0-9a-f]{16}$", "the whole container ID")
        self.assertEqual(row[0][2:], ["net1", "yes"])

    def test_the_quick_start_near_the_top_runs_as_written(self):
        with open(README) as f:
            text = f.read()
        self.assertLess(text.index("\n## Quick start"), 3000, "the quick start is near the top")
        blocks = sh_blocks(readme_section("Quick start"))
        self.assertEqual(len(blocks), 1)
        out, err = self.run_verbatim(blocks[0], ["qsnode", "qspod"])
        result = json.loads(out[:out.index("\n}\n") + 3])
        self.assertEqual(result["interfaces"][-1]["name"], "net1")
        self.assertIn("inet 10.99.0.", out, "ip addr show net1 shows the address")


class Newcomer(NetnsTestCase):
    def write(self, name, text):
        path = os.path.join(self.tmp, name)
        with open(path, "w") as f:
            f.write(text if isinstance(text, str) else json.dumps(text))
        return path

    def dirs(self):
        return ["--state-dir", self.state_dir, "--data-dir", self.data_dir]

    # --- 1. typos ---
    def test_a_typo_of_a_top_level_key_and_unknown_ipam_keys_are_logged_with_a_did_you_mean(self):
        pod, path = self.make_pod()
        conf = self.conf(attachement="macvlan", logLevel="debug", **{"example.com/other-tool": 1})
        conf["ipam"]["rangeStrat"] = "10.77.0.9"
        out = self.run_plugin("ADD", conf, netns=path)
        self.assertOk(out)
        self.assertIn('attachement: unknown key, ignored (did you mean "attachment"?)', out.stderr)
        self.assertIn('ipam.rangeStrat: unknown key, ignored (did you mean "rangeStart"?)', out.stderr)
        warnings = [l for l in out.stderr.splitlines() if " warning " in l]
        self.assertEqual(len(warnings), 2, out.stderr)
        self.assertNotIn("other-tool", "\n".join(warnings), "another tool's top-level key is allowed, as the spec wants")
        self.assertOk(self.run_plugin("DEL", conf, netns=path))

    def test_a_selector_with_matchlabel_names_the_key_it_nearly_is(self):
        conf = self.conf(nodeSelector={"matchLabel": {"zone": "a"}}, nodeLabelsFile="/dev/null")
        out = self.run_plugin("ADD", conf, netns="/run/netns/" + self.make_pod()[0])
        self.assertError(out, 7, "nodeSelector.matchLabel", 'did you mean "matchLabels"')

    def test_validate_refuses_unknown_keys_and_passes_every_example(self):
        conf = self.conf(attachement="macvlan", dns={"nameserver": ["10.0.0.1"]})
        conf["ipam"]["routes"] = [{"dst": "0.0.0.0/0", "gateway": "10.77.0.1"}]
        p = cli("validate", "--config", self.write("typo.conf", conf))
        self.assertEqual(p.returncode, 1, p.stdout + p.stderr)
        self.assertIn('attachement: unknown key, ignored (did you mean "attachment"?)', p.stdout)
        self.assertIn('dns.nameserver: unknown key, ignored (did you mean "nameservers"?)', p.stdout)
        self.assertIn("ipam.routes[0].gateway: unknown key, ignored (known: dst, gw, ", p.stdout)
        good = cli("validate", "--config", self.write("good.conf", self.conf()))
        self.assertEqual(good.returncode, 0, good.stdout + good.stderr)
        for f in sorted(os.listdir(EXAMPLES)):
            if f.endswith((".conf", ".conflist", "-nad.yaml")):
                with self.subTest(example=f):
                    p = cli("validate", "--config", os.path.join(EXAMPLES, f))
                    self.assertEqual(p.returncode, 0, p.stdout + p.stderr)

    def test_exec_warns_of_unknown_keys_and_strict_refuses_them(self):
        pod, path = self.make_pod()
        f = self.write("typo.conf", self.conf(attachement="macvlan"))
        strict = cli("exec", "add", "--config", f, "--netns", path, "--strict", ns=self.node)
        self.assertEqual(strict.returncode, 1)
        self.assertEqual(json.loads(strict.stdout)["code"], 7)
        self.assertEqual(set(self.links(pod)), {"lo"}, "--strict refused before anything ran")
        add = cli("exec", "add", "--config", f, "--netns", path, ns=self.node)
        self.assertEqual(add.returncode, 0, add.stdout + add.stderr)
        self.assertIn('did you mean "attachment"', add.stderr)
        self.assertEqual(cli("exec", "del", "--config", f, "--netns", path, ns=self.node).returncode, 0)

    # --- 2. exec parses as the plugin parses ---
    def test_exec_reads_a_json_config_exactly_as_the_plugin_does(self):
        pod, path = self.make_pod()
        text = json.dumps(self.conf())[:-1] + ',}'   # a trailing comma: YAML would take it
        f = self.write("trailing.conf", text)
        plugin = self.run_plugin("ADD", None, netns=path, raw_stdin=text)
        self.assertError(plugin, 6)
        ex = cli("exec", "add", "--config", f, "--netns", path, ns=self.node)
        self.assertEqual(ex.returncode, plugin.rc)
        self.assertEqual(json.loads(ex.stdout)["code"], 6)
        self.assertEqual(json.loads(ex.stdout)["msg"], plugin.json["msg"])
        self.assertEqual(set(self.links(pod)), {"lo"})
        self.assertEqual(cli("explain", "--config", f).returncode, 2, "explain reads it the same way")

    # --- 3. scratch directories for exec ---
    def test_exec_state_dir_and_data_dir_replace_the_configs_own(self):
        pod, path = self.make_pod()
        elsewhere = os.path.join(self.tmp, "never")
        conf = self.conf(stateDir=os.path.join(elsewhere, "state"))
        conf["ipam"]["dataDir"] = os.path.join(elsewhere, "ipam")
        f = self.write("net.conf", conf)
        add = cli("exec", "add", "--config", f, "--netns", path, *self.dirs(), ns=self.node)
        self.assertEqual(add.returncode, 0, add.stdout + add.stderr)
        self.assertFalse(os.path.exists(elsewhere))
        self.assertEqual(len(self.ipam_files(conf["name"])), 1)
        lst = cli("ipam", "list", "--network", conf["name"], *self.dirs())
        self.assertEqual(len(lst.stdout.splitlines()), 2, lst.stdout)
        self.assertEqual(cli("exec", "del", "--config", f, "--netns", path, *self.dirs(), ns=self.node).returncode, 0)
        self.assertEqual(self.ipam_files(conf["name"]), [])

    # --- 4. whole container IDs ---
    def test_ipam_list_shows_whole_ids_that_release_takes_and_a_unique_prefix_works(self):
        conf = self.conf()
        f = self.write("net.conf", conf)
        ids = []
        for _ in range(3):
            pod, path = self.make_pod()
            add = cli("exec", "add", "--config", f, "--netns", path, ns=self.node)
            self.assertEqual(add.returncode, 0, add.stdout + add.stderr)
        common = ["--network", conf["name"], *self.dirs()]
        lst = cli("ipam", "list", *common)
        ids = [l.split()[1] for l in lst.stdout.splitlines()[1:]]
        self.assertEqual(len(ids), 3)
        for i in ids:
            self.assertRegex(i, r"^topocni-[0-9a-f]{16}$")
        rel = cli("ipam", "release", *common, "--container-id", ids[0])
        self.assertEqual(rel.returncode, 0, rel.stderr)
        self.assertIn("released 1 reservation", rel.stdout)
        ambiguous = cli("ipam", "release", *common, "--container-id", "topocni-")
        self.assertEqual(ambiguous.returncode, 1)
        self.assertIn("prefix of several", ambiguous.stderr)
        # The shortest prefix of ids[1] that is no other's.
        prefix = next(ids[1][:n] for n in range(9, 25) if not ids[2].startswith(ids[1][:n]))
        rel = cli("ipam", "release", *common, "--container-id", prefix)
        self.assertEqual(rel.returncode, 0, rel.stderr)
        self.assertIn(ids[1], rel.stdout)
        self.assertEqual(len(self.ipam_files(conf["name"])), 1)

    def test_a_bandwidth_refusal_names_the_holder_by_pod_and_whole_container_id(self):
        master = f"nw{self.tag}m"[:15]
        sh("ip", "link", "add", master, "type", "veth", "peer", "name", f"nw{self.tag}p"[:15], ns=self.node)
        sh("ip", "link", "set", master, "up", ns=self.node)
        conf = self.conf(attachment="macvlan", master=master, topology={"linkCapacityMbps": 10},
                         bandwidth={"egressRate": 8_000_000})
        holder = "0123456789abcdef0123456789abcdef"
        pod1, path1 = self.make_pod()
        self.assertOk(self.run_plugin("ADD", conf, container_id=holder, netns=path1,
                                      args="K8S_POD_NAMESPACE=team-a;K8S_POD_NAME=web-0"))
        pod2, path2 = self.make_pod()
        out = self.run_plugin("ADD", conf, container_id="second", netns=path2)
        self.assertError(out, 100, "pod team-a/web-0", holder)
        self.assertOk(self.run_plugin("DEL", conf, container_id=holder, netns=path1))

    # --- 5. empty answers ---
    def test_a_missing_store_or_sysfs_and_a_release_of_nothing_are_errors(self):
        pod, path = self.make_pod()
        conf = self.conf()
        self.assertOk(self.run_plugin("ADD", conf, netns=path))
        nosuch = cli("ipam", "list", "--network", "nosuchnet", *self.dirs())
        self.assertEqual(nosuch.returncode, 1)
        self.assertIn("nosuchnet", nosuch.stderr)
        nodir = cli("ipam", "list", "--network", conf["name"], "--data-dir", "/nonexistent")
        self.assertEqual(nodir.returncode, 1)
        self.assertIn("/nonexistent", nodir.stderr)
        nothing = cli("ipam", "release", "--network", conf["name"], *self.dirs(), "--container-id", "nobody")
        self.assertEqual(nothing.returncode, 1)
        self.assertIn("no reservation of container 'nobody'", nothing.stderr)
        self.assertEqual(len(self.ipam_files(conf["name"])), 1)
        report = cli("node-report", "--sysfs-root", "/nonexistent", "--state-dir", self.state_dir)
        self.assertEqual(report.returncode, 1)
        self.assertNotIn("sriov-capable=false", report.stdout)
        self.assertIn("/nonexistent", report.stderr)
        self.assertOk(self.run_plugin("DEL", conf, netns=path))

    # --- 6. a retried ADD ---
    def test_a_retried_add_is_code_105_through_exec_and_through_cni_command_and_changes_nothing(self):
        pod, path = self.make_pod()
        conf = self.conf()
        first = self.run_plugin("ADD", conf, container_id="r1", netns=path)
        self.assertOk(first)
        files = self.files()
        again = self.run_plugin("ADD", conf, container_id="r1", netns=path)
        self.assertError(again, 105, "interface 'eth0'", path, "DEL it before adding it again")
        self.assertFilesUnchanged(files, "a retried ADD")
        other = self.run_plugin("ADD", conf, container_id="r2", netns=path)
        self.assertError(other, 105, "eth0", "not an attachment of container 'r2'")
        self.assertOk(self.run_plugin("DEL", conf, container_id="r1", netns=path))
        f = self.write("net.conf", conf)
        a = cli("exec", "add", "--config", f, "--netns", path, "--ifname", "net1", ns=self.node)
        self.assertEqual(a.returncode, 0, a.stdout + a.stderr)
        files = self.files()
        b = cli("exec", "add", "--config", f, "--netns", path, "--ifname", "net1", ns=self.node)
        self.assertEqual(b.returncode, 1, b.stdout + b.stderr)
        self.assertEqual(json.loads(b.stdout)["code"], 105)
        self.assertIn("interface 'net1'", json.loads(b.stdout)["msg"])
        self.assertFilesUnchanged(files, "a retried exec add")
        self.assertEqual(cli("exec", "del", "--config", f, "--netns", path, "--ifname", "net1",
                             ns=self.node).returncode, 0)
        self.assertEqual(self.ipam_files(conf["name"]), [])

    # --- 7. messages that point the right way ---
    def test_check_after_del_says_there_is_no_add_record(self):
        pod, path = self.make_pod()
        conf = self.conf()
        f = self.write("net.conf", conf)
        self.assertEqual(cli("exec", "add", "--config", f, "--netns", path, ns=self.node).returncode, 0)
        self.assertEqual(cli("exec", "del", "--config", f, "--netns", path, ns=self.node).returncode, 0)
        chk = cli("exec", "check", "--config", f, "--netns", path, ns=self.node)
        self.assertEqual(chk.returncode, 1)
        self.assertIn("no ADD record", json.loads(chk.stdout)["msg"])
        plugin = self.run_plugin("CHECK", conf, netns=path)
        self.assertError(plugin, 7, "prevResult", "no ADD record", "deleted since")

    def test_gc_and_status_on_1_0_0_say_which_cni_version_to_set(self):
        for verb in ["GC", "STATUS"]:
            with self.subTest(verb=verb):
                out = self.run_plugin(verb, self.conf(version="1.0.0", **{"cni.dev/valid-attachments": []}))
                self.assertError(out, 1, verb, '"cniVersion": "1.1.0"')

    def test_explain_speaks_of_its_flags_and_names_a_missing_master_first(self):
        labels = self.write("labels", '{"zone": "a"}')
        conf = self.conf(attachment="macvlan", master="nosuch9", bandwidth={"egressRate": 1000000},
                         topology={"numaPolicy": "restricted", "maxAttachmentsPerMaster": 3})
        p = cli("explain", "--config", self.write("m.conf", conf), ns=self.node)
        lines = p.stdout.splitlines()
        self.assertEqual(p.returncode, 1, p.stdout + p.stderr)
        self.assertTrue(lines[1].startswith("FAIL  master: interface 'nosuch9' not found"), p.stdout)
        self.assertNotIn("PASS  bandwidth", p.stdout)
        self.assertIn("no --pod-uid given", p.stdout)
        self.assertNotIn("K8S_POD_UID", p.stdout)
        sel = cli("explain", "--config", self.write("s.conf", self.conf(nodeSelector={"zone": "a"}, kubeconfig="")))
        self.assertIn("--node-labels", sel.stdout)
        one = cli("explain", "--config", self.write("s.conf", self.conf(nodeSelector={"zone": "b"})),
                  "--node-labels", labels)
        self.assertIn("1 of 1 constraint not met", one.stdout)
        ok = cli("explain", "--config", self.write("s.conf", self.conf(nodeSelector={"zone": "a"})),
                 "--node-labels", labels)
        self.assertEqual(ok.returncode, 0, ok.stdout + ok.stderr)
        self.assertEqual(ok.stdout.count("zone=a"), 1, "a matching selector names its label once: " + ok.stdout)

    def test_exec_netns_errors_name_the_flag_and_an_ip_netns_name_works(self):
        pod, path = self.make_pod()
        f = self.write("net.conf", self.conf())
        bad = cli("exec", "add", "--config", f, "--netns", "nwpod5", ns=self.node)
        self.assertEqual(bad.returncode, 2)
        self.assertIn("--netns", bad.stderr)
        self.assertNotIn("CNI_NETNS", bad.stdout + bad.stderr)
        gone = cli("exec", "add", "--config", f, "--netns", "/run/netns/nwpod5", ns=self.node)
        self.assertEqual(gone.returncode, 2)
        self.assertIn("--netns", gone.stderr)
        self.assertNotIn("CNI_NETNS", gone.stdout + gone.stderr)
        add = cli("exec", "add", "--config", f, "--netns", pod, ns=self.node)
        self.assertEqual(add.returncode, 0, add.stdout + add.stderr)
        self.assertEqual(json.loads(add.stdout)["interfaces"][1]["sandbox"], path)
        self.assertEqual(cli("exec", "del", "--config", f, "--netns", pod, ns=self.node).returncode, 0)
        missing = cli("exec", "add", "--config", os.path.join(self.tmp, "nope.conf"), "--netns", path)
        self.assertIn("No such file or directory", missing.stdout + missing.stderr)

    # --- 8. a conflist is a chain ---
    def test_exec_runs_the_whole_chain_of_a_conflist(self):
        pod, path = self.make_pod()
        conf = self.conf()
        entry = {k: v for k, v in conf.items() if k not in ("cniVersion", "name")}
        chain = {"cniVersion": "1.0.0", "name": conf["name"],
                 "plugins": [entry, {"type": "tuning", "mac": "02:00:00:00:23:42",
                                     "dataDir": os.path.join(self.tmp, "tuning")}]}
        f = self.write("net.conflist", chain)
        add = cli("exec", "add", "--config", f, "--netns", path, env={"CNI_PATH": "/usr/lib/cni"}, ns=self.node)
        self.assertEqual(add.returncode, 0, add.stdout + add.stderr)
        self.assertIn("02:00:00:00:23:42", sh("ip", "link", "show", "eth0", ns=pod), "tuning ran after topocni")
        self.assertIn("02:00:00:00:23:42", add.stdout, "the printed result is the chain's last")
        dele = cli("exec", "del", "--config", f, "--netns", path, env={"CNI_PATH": "/usr/lib/cni"}, ns=self.node)
        self.assertEqual(dele.returncode, 0, dele.stdout + dele.stderr)
        self.assertEqual(set(self.links(pod)), {"lo"})
        # A plugin's refusal stops the chain; Go plugins print their error object without a
        # final newline, which exec adds for the terminal.
        newer = dict(chain, cniVersion="1.1.0")
        pod2, path2 = self.make_pod()
        refused = cli("exec", "add", "--config", self.write("newer.conflist", newer), "--netns", path2,
                      "--container-id", "newer", env={"CNI_PATH": "/usr/lib/cni"}, ns=self.node)
        self.assertEqual(refused.returncode, 1)
        self.assertEqual(json.loads(refused.stdout)["code"], 1, "tuning speaks CNI up to 1.0.0")
        self.assertTrue(refused.stdout.endswith("}\n"), repr(refused.stdout))
        self.assertIn("plugin 2 of 2 ('tuning')", refused.stderr)
        self.assertOk(self.run_plugin("DEL", dict(conf, cniVersion="1.1.0"), container_id="newer", netns=path2))
        chain["plugins"].append({"type": "no-such-plugin"})
        f = self.write("broken.conflist", chain)
        bad = cli("exec", "add", "--config", f, "--netns", path, env={"CNI_PATH": "/usr/lib/cni"}, ns=self.node)
        self.assertNotEqual(bad.returncode, 0)
        self.assertIn("no-such-plugin", bad.stdout + bad.stderr)
        self.assertEqual(set(self.links(pod)), {"lo"}, "a plugin missing from CNI_PATH stops the chain before it starts")

    # --- 9. CLI consistency ---
    def test_the_cli_is_consistent_with_itself_and_the_readme(self):
        v = cli("--version")
        self.assertEqual(v.returncode, 0, v.stderr)
        self.assertEqual(v.stdout, cli("version").stdout)
        h = cli("version", "--help")
        self.assertNotIn("exec add", h.stdout, "version --help shows its own example")
        self.assertIn("topocni version", h.stdout)
        f = self.write("net.conf", self.conf())
        self.assertEqual(cli("exec", "add", "--config", f).returncode, 2, "a missing --netns is a usage error")
        validate_help = cli("validate", "--help")
        self.assertEqual(validate_help.returncode, 0)
        self.assertIn("Examples:\n  topocni validate", validate_help.stdout)
        exec_help = cli("exec", "--help").stdout
        self.assertIn("YAML", exec_help)
        collect_help = cli("collect", "--help").stdout
        self.assertIn("/opt/cni/bin:/usr/lib/cni", collect_help)
        with open(README) as r:
            self.assertIn("defaulting to `/opt/cni/bin:/usr/lib/cni` (as for `collect`)", r.read())
        err = cli("exec", "del", "--config", self.write("bad.conf", "{,}"))
        self.assertTrue(err.stdout.endswith("}\n"), repr(err.stdout))

    # --- 10. machine-readable output ---
    def test_ipam_list_explain_and_node_report_speak_json(self):
        pod, path = self.make_pod()
        conf = self.conf()
        self.assertOk(self.run_plugin("ADD", conf, container_id="j1", netns=path,
                                      args="K8S_POD_NAMESPACE=ns1;K8S_POD_NAME=p1"))
        lst = cli("ipam", "list", "--network", conf["name"], *self.dirs(), "-o", "json")
        self.assertEqual(lst.returncode, 0, lst.stderr)
        rows = json.loads(lst.stdout)
        self.assertEqual([(r["containerID"], r["ifname"], r["pod"], r["netnsExists"]) for r in rows],
                         [("j1", "eth0", "ns1/p1", "yes")])
        self.assertOk(self.run_plugin("DEL", conf, container_id="j1", netns=path))
        labels = self.write("labels", '{"zone": "a"}')
        sconf = self.conf(nodeSelector={"zone": "a"})
        ex = cli("explain", "--config", self.write("s.conf", sconf), "--node-labels", labels,
                 "--node-name", "worker-7", "-o", "json")
        self.assertEqual(ex.returncode, 0, ex.stdout + ex.stderr)
        j = json.loads(ex.stdout)
        self.assertEqual(j["node"], "worker-7")
        self.assertEqual([(c["constraint"], c["result"]) for c in j["constraints"]], [("nodeSelector", "pass")])
        vf = cli("explain", "--config", self.write("v.conf", self.conf(ipam=False, attachment="sriov",
                                                                       topology={"numaNode": 0})),
                 "--device-id", "0000:af:06.0", "-o", "json")
        self.assertIn("0000:af:06.0", vf.stdout, vf.stdout + vf.stderr)
        sysfs = os.path.join(self.tmp, "sys")
        os.makedirs(os.path.join(sysfs, "devices/system/node/node0"))
        nr = cli("node-report", "--sysfs-root", sysfs, "--state-dir", self.state_dir, "--format", "json")
        self.assertEqual(nr.returncode, 0, nr.stderr)
        self.assertEqual(json.loads(nr.stdout)["numaNodes"], 1)


if __name__ == "__main__":
    main()
