"""The CNI protocol as a runtime sees it: environment, stdin, stdout, codes, versions."""
import json
import os
import time

from cnitest import ALL_VERSIONS, REF_DIR, NetnsTestCase, main, sh


class Protocol(NetnsTestCase):
    def test_version_lists_exactly_the_spec_versions(self):
        out = self.run_plugin("VERSION", None, raw_stdin='{"cniVersion":"0.4.0"}')
        self.assertOk(out)
        self.assertEqual(out.json["supportedVersions"], ALL_VERSIONS)
        self.assertEqual(out.json["cniVersion"], "0.4.0")

    def test_missing_or_invalid_variables_are_code_4_and_named(self):
        pod, path = self.make_pod()
        conf = self.conf()
        cases = [
            ({"CNI_CONTAINERID": ""}, "CNI_CONTAINERID"),
            ({"CNI_IFNAME": ""}, "CNI_IFNAME"),
            ({"CNI_NETNS": ""}, "CNI_NETNS"),
            ({"CNI_COMMAND": "FROB"}, "FROB"),
            ({"CNI_CONTAINERID": "bad/id"}, "CNI_CONTAINERID"),
            ({"CNI_IFNAME": "a" * 16}, "CNI_IFNAME"),
            ({"CNI_IFNAME": "et/h0"}, "CNI_IFNAME"),
            ({"CNI_IFNAME": ".."}, "CNI_IFNAME"),
            ({"CNI_PATH": "relative/dir"}, "CNI_PATH"),
            ({"CNI_ARGS": "garbage"}, "CNI_ARGS"),
            ({"CNI_ARGS": "IP=300.1.1.1"}, "CNI_ARGS"),
        ]
        for env, word in cases:
            with self.subTest(env=env):
                base = {"PATH": "/usr/bin:/bin", "CNI_COMMAND": "ADD", "CNI_CONTAINERID": "c1",
                        "CNI_NETNS": path, "CNI_IFNAME": "eth0", "CNI_PATH": REF_DIR}
                base.update(env)
                out = self.run_plugin("ADD", conf, env_override=base)
                self.assertError(out, 4, word)
        self.assertEqual(set(self.links(pod)), {"lo"})
        self.assertEqual(self.ipam_files(conf["name"]), [])

    def test_bad_json_is_code_6_and_bad_config_is_code_7_naming_the_key(self):
        pod, path = self.make_pod()
        self.assertError(self.run_plugin("ADD", None, netns=path, raw_stdin="{not json"), 6)
        self.assertError(self.run_plugin("ADD", None, netns=path, raw_stdin="[" * 100000), 6)
        bad = self.conf()
        bad["ipam"]["ranges"][0][0]["subnet"] = "10.0.0.1/24"
        self.assertError(self.run_plugin("ADD", bad, netns=path), 7, "ipam.ranges[0][0].subnet")
        bad = self.conf(mtu=-5)
        self.assertError(self.run_plugin("ADD", bad, netns=path), 7, "mtu")
        bad = self.conf(name="../escape")
        self.assertError(self.run_plugin("ADD", bad, netns=path), 7, "name")
        bad = self.conf()
        bad["ipam"]["type"] = "../x"
        self.assertError(self.run_plugin("ADD", bad, netns=path), 7, "ipam.type")
        bad = self.conf(mac="zz:11:22:33:44:55")
        self.assertError(self.run_plugin("ADD", bad, netns=path), 7, "mac")
        self.assertEqual(set(self.links(pod)), {"lo"})
        self.assertEqual(set(self.links(self.node)), {"lo"})

    def test_unknown_version_is_code_1_with_the_supported_list(self):
        pod, path = self.make_pod()
        out = self.run_plugin("ADD", self.conf("0.5.0"), netns=path)
        self.assertError(out, 1)
        self.assertIn("1.1.0", out.json["details"])

    def test_gc_and_status_need_1_1_0(self):
        for verb in ["GC", "STATUS"]:
            out = self.run_plugin(verb, self.conf("1.0.0"))
            self.assertError(out, 1, verb)

    def test_errors_are_json_on_stdout_with_cni_version(self):
        pod, path = self.make_pod()
        out = self.run_plugin("ADD", self.conf("0.4.0", mtu="big"), netns=path)
        self.assertError(out, 7, "mtu")
        self.assertEqual(out.json["cniVersion"], "0.4.0")

    def test_netns_that_is_a_file_a_directory_or_the_node_itself_is_refused(self):
        conf = self.conf()
        for path, word in [("/etc/hostname", "namespace"), ("/tmp", "namespace"),
                           (f"/run/netns/{self.node}", "own network namespace")]:
            with self.subTest(path=path):
                self.assertError(self.run_plugin("ADD", conf, netns=path), 8, word)
        self.assertEqual(self.ipam_files(conf["name"]), [])
        self.assertEqual(set(self.links(self.node)), {"lo"})

    def test_cni_args_order_repeats_and_equals_signs_are_accepted(self):
        pod, path = self.make_pod()
        conf = self.conf()
        args = "K8S_POD_NAME=a=b;IP=10.77.0.42;IgnoreUnknown=1;K8S_POD_NAMESPACE=ns;Foo=1;Foo=2;MAC=02:00:00:00:00:42"
        out = self.run_plugin("ADD", conf, netns=path, args=args)
        self.assertOk(out)
        self.assertEqual(out.json["ips"][0]["address"], "10.77.0.42/24")
        self.assertEqual(out.json["interfaces"][1]["mac"], "02:00:00:00:00:42")
        self.assertOk(self.run_plugin("DEL", conf, netns=path))

    def test_runtime_config_keys_match_case_insensitively_and_win_over_cni_args(self):
        pod, path = self.make_pod()
        conf = self.conf(runtimeConfig={"MAC": "02:00:00:00:00:99", "IPs": ["10.77.0.99/24"]},
                         capabilities={"mac": True, "ips": True})
        out = self.run_plugin("ADD", conf, netns=path, args="MAC=02:00:00:00:00:01")
        self.assertOk(out)
        self.assertEqual(out.json["interfaces"][1]["mac"], "02:00:00:00:00:99")
        self.assertEqual(out.json["ips"][0]["address"], "10.77.0.99/24")
        self.assertOk(self.run_plugin("DEL", conf, netns=path))

    def test_a_retried_add_whose_interface_is_there_is_code_105_and_the_first_attachment_keeps_working(self):
        # CNI spec, ADD: "If an interface of the requested name already exists in the
        # container, the CNI plugin MUST return with an error", a retry included.
        pod, path = self.make_pod()
        conf = self.conf()
        before = self.files()
        first = self.run_plugin("ADD", conf, netns=path)
        self.assertOk(first)
        ip = first.json["ips"][0]["address"].split("/")[0]
        files, links = self.files(), (self.link_setup(self.node), self.link_setup(pod))
        for cid, why in (("c1", "an earlier ADD of container 'c1'"), ("c2", "not an attachment of container 'c2'")):
            with self.subTest(container=cid):
                retry = self.run_plugin("ADD", conf, container_id=cid, netns=path)
                self.assertError(retry, 105, f"interface 'eth0' already exists in the pod netns '{path}'", why)
                self.assertFilesUnchanged(files, f"ADD of {cid} again")
                self.assertEqual((self.link_setup(self.node), self.link_setup(pod)), links)
        self.assertTrue(self.ping(self.node, ip), "the first attachment still works")
        self.assertOk(self.run_plugin("CHECK", dict(conf, prevResult=first.json), netns=path))
        self.assertOk(self.run_plugin("DEL", conf, netns=path))
        self.assertEqual(self.ipam_files(conf["name"]), [])
        self.assertEqual((set(self.links(self.node)), set(self.links(pod))), ({"lo"}, {"lo"}))
        self.assertOnlyBookkeepingLeft(before, "DEL after the refused retry")

    def test_a_retried_add_whose_interface_is_gone_keeps_the_same_address(self):
        # The first ADD's link is removed behind our back, as when a runtime restarts mid-ADD.
        pod, path = self.make_pod()
        conf = self.conf()
        first = self.run_plugin("ADD", conf, netns=path)
        self.assertOk(first)
        sh("ip", "link", "del", "eth0", ns=pod)
        second = self.run_plugin("ADD", conf, netns=path)
        self.assertOk(second)
        self.assertEqual(first.json["ips"], second.json["ips"])
        self.assertOk(self.run_plugin("DEL", conf, netns=path))

    def test_gc_releases_stale_attachments_and_keeps_valid_ones(self):
        conf = self.conf()
        pods = [self.make_pod() for _ in range(3)]
        for i, (ns, path) in enumerate(pods):
            self.assertOk(self.run_plugin("ADD", conf, container_id=f"gc{i}", netns=path))
        self.assertEqual(len(self.ipam_files(conf["name"])), 3)
        # GC keeps an attachment whose ADD finished after GC started (it was in flight when
        # the runtime took its list); a start-up slower than 20 ms is dated by the fork's
        # 10 ms tick, so an ADD that ended within that tick counts as in flight. A runtime's
        # GC follows its last ADD by far more; so does this one.
        time.sleep(0.05)
        gc = dict(conf)
        gc["cni.dev/valid-attachments"] = [{"containerID": "gc1", "ifname": "eth0"}]
        self.assertOk(self.run_plugin("GC", gc))
        self.assertEqual(len(self.ipam_files(conf["name"])), 1)
        self.assertEqual(len(self.links(self.node)), 2, "host ends of stale attachments removed")
        self.assertEqual(set(self.links(pods[1][0])), {"lo", "eth0"})
        gc["cni.dev/valid-attachments"] = []
        self.assertOk(self.run_plugin("GC", gc))
        self.assertEqual(self.ipam_files(conf["name"]), [])
        self.assertEqual(set(self.links(self.node)), {"lo"})
        self.assertError(self.run_plugin("GC", conf), 7, "valid-attachments")

    def test_gc_keeps_an_unlisted_attachment_whose_add_completed_after_gc_started_and_releases_the_rest(self):
        # README, behaviour differences: an unlisted record whose completedBoottimeNs is at or
        # after GC's start raced the runtime's list and is kept; one before it is released.
        conf = self.conf()
        pods = {cid: self.make_pod() for cid in ("before", "after")}
        for cid, (ns, path) in pods.items():
            self.assertOk(self.run_plugin("ADD", conf, container_id=cid, netns=path))
        records = os.path.join(self.state_dir, "attachments", conf["name"])
        now = time.clock_gettime_ns(time.CLOCK_BOOTTIME)
        for cid, completed in (("before", now - 1_000_000_000), ("after", now + 3600 * 1_000_000_000)):
            p = os.path.join(records, f"{cid}_eth0.json")
            with open(p) as f:
                rec = json.load(f)
            rec["completedBoottimeNs"] = completed
            with open(p, "w") as f:
                json.dump(rec, f)
        self.assertOk(self.run_plugin("GC", dict(conf, **{"cni.dev/valid-attachments": []})))
        self.assertEqual(sorted(os.listdir(records)), ["after_eth0.json"])
        self.assertEqual(len(self.ipam_files(conf["name"])), 1)
        self.assertEqual(set(self.links(pods["after"][0])), {"lo", "eth0"})
        self.assertEqual(len(self.links(self.node)), 2, "lo and the kept attachment's host end")
        self.assertOk(self.run_plugin("DEL", conf, container_id="after", netns=pods["after"][1]))

    def test_status_reports_an_exhausted_pool_as_code_50(self):
        conf = self.conf()
        conf["ipam"]["ranges"] = [[{"subnet": "10.77.0.0/24", "rangeStart": "10.77.0.10", "rangeEnd": "10.77.0.10"}]]
        self.assertOk(self.run_plugin("STATUS", conf))
        pod, path = self.make_pod()
        self.assertOk(self.run_plugin("ADD", conf, netns=path))
        self.assertError(self.run_plugin("STATUS", conf), 50)
        self.assertOk(self.run_plugin("DEL", conf, netns=path))
        self.assertOk(self.run_plugin("STATUS", conf))


class Ipam(NetnsTestCase):
    def ref_conf(self, name):
        return {"cniVersion": "0.4.0", "name": name, "type": "ptp",
                "ipam": {"type": "host-local", "subnet": "10.77.0.0/24", "dataDir": self.data_dir}}

    def test_one_data_dir_shared_with_the_reference_host_local_both_ways(self):
        conf = self.conf()
        name = conf["name"]
        ref_pods = [self.make_pod() for _ in range(3)]
        ref_ips = set()
        for i, (ns, path) in enumerate(ref_pods):
            out = self.run_plugin("ADD", self.ref_conf(name), container_id=f"ref{i}", netns=path,
                                  binary=f"{REF_DIR}/ptp")
            self.assertOk(out)
            ref_ips.add(out.json["ips"][0]["address"])
        ours = []
        for i in range(3):
            ns, path = self.make_pod()
            out = self.run_plugin("ADD", conf, container_id=f"ours{i}", netns=path)
            self.assertOk(out)
            ours.append((out.json["ips"][0]["address"], path))
        self.assertFalse(ref_ips & {a for a, _ in ours}, "same address handed out twice")
        # Each releases the other's reservation.
        self.assertOk(self.run_plugin("DEL", conf, container_id="ref0", netns=ref_pods[0][1]))
        self.assertOk(self.run_plugin("DEL", self.ref_conf(name), container_id="ours0", netns=ours[0][1],
                                      binary=f"{REF_DIR}/ptp"))
        left = self.ipam_files(name)
        self.assertEqual(len(left), 4)
        self.assertNotIn(ours[0][0].split("/")[0], left)

    def test_other_ipam_types_run_from_cni_path(self):
        pod, path = self.make_pod()
        # Debian's static plugin (1.1.1) speaks up to 1.0.0.
        conf = self.conf("1.0.0", ipam=False)
        conf["ipam"] = {"type": "static", "addresses": [{"address": "10.79.0.5/24", "gateway": "10.79.0.1"}]}
        out = self.run_plugin("ADD", conf, netns=path)
        self.assertOk(out)
        self.assertEqual(out.json["ips"][0]["address"], "10.79.0.5/24")
        self.assertTrue(self.ping(pod, "10.79.0.1"))
        self.assertOk(self.run_plugin("CHECK", dict(conf, prevResult=out.json), netns=path))
        self.assertOk(self.run_plugin("DEL", conf, netns=path))
        self.assertEqual(set(self.links(self.node)), {"lo"})
        conf["ipam"]["type"] = "no-such-ipam"
        self.assertError(self.run_plugin("ADD", conf, netns=path), 7, "no-such-ipam")


if __name__ == "__main__":
    main()
