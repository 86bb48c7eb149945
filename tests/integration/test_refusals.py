"""After a refusal: the pod's refusal record a refused ADD leaves (and nothing else), and
`topocni refusal-agent`, which turns the records into Events on the pods and, for networks
with "onRefusal": "evict", evicts the pod through the Eviction API.

Each test has a node netns with the stand-in API server (fakenode.FakeApiServer) serving
Node "worker-1" and the test's Pods (with their ownerReferences), and a veth network whose
nodeSelector the node's labels file never matches, so that every ADD is refused with code
100. The network has "kubeconfig": "", so ADD never talks to the API: only the agent does.
The agent runs in the background inside the node netns, by pid, with a short --resync, and
is always stopped with SIGTERM (it must exit 0).
"""
import json
import os
import shutil
import signal
import subprocess
import tempfile
import time

from cnitest import BIN, REFUSAL_COUNTER, NetnsTestCase, main
from fakenode import (FakeApiServer, MULTIPLE_PDBS, b64file, make_pki, owner_ref, pdb_blocked_status,
                      write_kubeconfig)

NS = "shop"
RS = owner_ref("ReplicaSet", "web-5d4f", "rs-uid-1")
DS = owner_ref("DaemonSet", "agent", "ds-uid-1")
EVENT_KEYS = {"kind", "apiVersion", "metadata", "involvedObject", "reason", "message", "source", "firstTimestamp",
              "lastTimestamp", "count", "type", "eventTime", "reportingComponent", "reportingInstance"}


def uid_of(name):
    return f"5e1d0c3f-0000-4000-8000-{abs(hash(name)) % 10**12:012d}"


class RefusalCase(NetnsTestCase):
    def setUp(self):
        super().setUp()
        self.agents, self.servers = [], []
        self.fixture = tempfile.mkdtemp(prefix="topocni-refusal-")
        try:
            self.labels = os.path.join(self.tmp, "labels.json")
            with open(self.labels, "w") as f:
                json.dump({"zone": "b"}, f)
            self.pki = make_pki(os.path.join(self.fixture, "pki"))
        except BaseException:
            self.tearDown()
            raise

    def tearDown(self):
        try:
            for p in self.agents:
                if p.poll() is None:   # a failed test left it running: only this process, by its pid
                    p.kill()
                    p.wait()
            for api in self.servers:
                api.stop()
        finally:
            super().tearDown()
            shutil.rmtree(self.fixture, ignore_errors=True)

    # --- the network and its refusals ---
    def net(self, **extra):
        return self.conf(name=f"rf{self.tag}", nodeSelector={"zone": "a"}, nodeLabelsFile=self.labels,
                         kubeconfig="", nodeName="worker-1", **extra)

    def evict_net(self, after=3, window=300):
        return self.net(onRefusal="evict", evictAfterRefusals=after, evictWindowSeconds=window)

    def refuse(self, conf, pod="web-1", uid=None, ns=NS):
        _, path = self.make_pod()
        args = f"K8S_POD_NAMESPACE={ns};K8S_POD_NAME={pod};K8S_POD_INFRA_CONTAINER_ID=x;K8S_POD_UID={uid or uid_of(pod)}"
        out = self.run_plugin("ADD", conf, container_id=f"c{time.monotonic_ns()}", netns=path, ifname="net1", args=args)
        self.assertError(out, 100, "nodeSelector")
        return out

    def record(self, pod="web-1", ns=NS):
        p = os.path.join(self.state_dir, "refused", f"{ns}_{pod}.json")
        if not os.path.exists(p):
            return None
        with open(p) as f:
            return json.load(f)

    # --- the API and the agent ---
    def start_api(self, pods, **kw):
        d = os.path.join(self.fixture, f"api{len(self.servers)}")
        os.makedirs(d)
        api = FakeApiServer(self.node, self.pki, {"worker-1": {"zone": "b"}}, d, pods=pods, **kw)
        self.servers.append(api)
        self.api = api
        self.kubeconfig = write_kubeconfig(os.path.join(self.fixture, "kubeconfig"), api.url(),
                                           ca_data=b64file(f"{self.pki}/ca.crt"),
                                           cert_data=b64file(f"{self.pki}/client.crt"),
                                           key_data=b64file(f"{self.pki}/client.key"), user="topocni-node")
        return api

    def pod(self, name, owners=(), ns=NS):
        return {f"{ns}/{name}": {"nodeName": "worker-1", "uid": uid_of(name), "ownerReferences": list(owners)}}

    def start_agent(self, *extra):
        log = os.path.join(self.fixture, f"agent{len(self.agents)}.log")
        with open(log, "w") as f:
            p = subprocess.Popen(["nsenter", f"--net=/run/netns/{self.node}", BIN, "refusal-agent",
                                  "--kubeconfig", self.kubeconfig, "--state-dir", self.state_dir, "--node", "worker-1",
                                  "--resync", "1", "--api-timeout", "3", *extra],
                                 stdout=f, stderr=subprocess.STDOUT)
        p.log = log
        self.agents.append(p)
        return p

    def stop_agent(self, p):
        self.assertIsNone(p.poll(), f"the agent exited on its own ({p.returncode}): {self.log_of(p)}")
        start = time.monotonic()
        p.send_signal(signal.SIGTERM)
        try:
            rc = p.wait(timeout=5)
        except subprocess.TimeoutExpired:
            self.fail(f"the agent did not stop within 5 s of SIGTERM: {self.log_of(p)}")
        self.assertEqual(rc, 0, self.log_of(p))
        self.assertLess(time.monotonic() - start, 4.0)
        if os.environ.get("TOPOCNI_TEST_DEBUG"):
            print(f"--- {p.log} ---\n{self.log_of(p)}")

    @staticmethod
    def log_of(p):
        with open(p.log) as f:
            return f.read()

    def wait_for(self, what, condition, seconds=10):
        end = time.monotonic() + seconds
        while True:
            value = condition()
            if value:
                return value
            if time.monotonic() > end:
                self.fail(f"{what}: not within {seconds} s")
            time.sleep(0.05)

    def events(self, reason=None, pod=None):
        return [e for e in self.api.events().values()
                if (reason is None or e["reason"] == reason) and (pod is None or e["involvedObject"]["name"] == pod)]

    def eviction_counts(self):
        p = os.path.join(self.state_dir, "metrics", "evictions.json")
        if not os.path.exists(p):
            return {}
        with open(p) as f:
            return json.load(f)


class TheRecord(RefusalCase):
    def test_a_refused_add_leaves_one_record_per_pod_and_changes_nothing_else(self):
        conf = self.evict_net(after=3, window=120)
        before = self.files()
        out = self.refuse(conf)
        self.assertOnlyRefusalCounted(before, out, conf["name"])
        rec = self.record()
        self.assertEqual({k: rec[k] for k in ("version", "namespace", "name", "uid", "network", "node", "constraints",
                                              "count", "onRefusal", "evictAfterRefusals", "evictWindowSeconds")},
                         {"version": 1, "namespace": NS, "name": "web-1", "uid": uid_of("web-1"),
                          "network": conf["name"], "node": "worker-1", "constraints": ["nodeSelector"], "count": 1,
                          "onRefusal": "evict", "evictAfterRefusals": 3, "evictWindowSeconds": 120})
        self.assertIn("zone", rec["evidence"])
        self.assertEqual(rec["first"], rec["last"])
        for _ in range(4):
            self.refuse(conf)
        rec = self.record()
        self.assertEqual(rec["count"], 5)
        self.assertEqual(len(rec["recent"]), 3, "only the last evictAfterRefusals times")
        self.assertEqual(os.listdir(os.path.join(self.state_dir, "refused")), [f"{NS}_web-1.json"])
        # A new pod of the same name starts again.
        self.refuse(conf, uid="5e1d0c3f-0000-4000-8000-0000000000ff")
        self.assertEqual(self.record()["count"], 1)

    def test_the_record_pattern_is_named_bookkeeping(self):
        self.assertIn(r"state/refused/[a-z0-9-]+_[a-z0-9.-]+\.json", REFUSAL_COUNTER)

    def test_explain_pod_prints_the_last_refusal_on_this_node(self):
        conf = self.evict_net()
        self.refuse(conf)
        self.refuse(conf)
        p = subprocess.run([BIN, "explain", "--pod", f"{NS}/web-1", "--state-dir", self.state_dir],
                           capture_output=True, text=True, timeout=30)
        self.assertEqual(p.returncode, 1, p)
        self.assertIn(f"pod {NS}/web-1 (uid {uid_of('web-1')}): refused 2 times on node 'worker-1'", p.stdout)
        self.assertIn(f"network '{conf['name']}': placement constraint not met: nodeSelector", p.stdout)
        self.assertRegex(p.stdout, r"FAIL  nodeSelector: .*zone")
        self.assertIn("onRefusal: evict after 3 refusals within 300s (2 within the last 300s now)", p.stdout)
        p = subprocess.run([BIN, "explain", "--pod", f"{NS}/other", "--state-dir", self.state_dir],
                           capture_output=True, text=True, timeout=30)
        self.assertEqual((p.returncode, p.stdout.strip()),
                         (0, f"pod {NS}/other: no placement refusal recorded on this node ({self.state_dir}/refused)"))
        p = subprocess.run([BIN, "explain", "--pod", "no-slash", "--state-dir", self.state_dir],
                           capture_output=True, text=True, timeout=30)
        self.assertEqual(p.returncode, 2, p)


    def test_past_4096_records_a_new_pod_is_logged_not_recorded_and_pods_with_records_still_count(self):
        # README: "Past 4096 records on a node (the agent not running) a refusal is logged and not recorded."
        conf = self.net(logLevel="warning")
        self.refuse(conf, pod="web-1")
        d = os.path.join(self.state_dir, "refused")
        with open(os.path.join(d, f"{NS}_web-1.json")) as f:
            text = f.read()
        for i in range(4094):   # 4095 records in all
            with open(os.path.join(d, f"{NS}_filler-{i}.json"), "w") as f:
                f.write(text)
        self.refuse(conf, pod="web-2")
        self.assertIsNotNone(self.record("web-2"), "the 4096th record is written")
        before = self.files()
        out = self.refuse(conf, pod="web-3")
        self.assertIsNone(self.record("web-3"), "a 4097th is not")
        self.assertIn(f"placement refusal not recorded: 4096 pods have records in '{d}' (is the refusal agent running?)",
                      out.stderr)
        self.assertOnlyRefusalCounted(before, out, conf["name"])
        now = self.files()
        changed = [p for p in set(now) | set(before) if now.get(p) != before.get(p)]
        self.assertEqual(changed, [os.path.join(self.state_dir, "metrics", "refusals.json")], "only counted")
        self.refuse(conf, pod="web-1")
        self.assertEqual(self.record("web-1")["count"], 2, "a pod that has a record is still counted")
        os.unlink(os.path.join(d, f"{NS}_filler-0.json"))
        self.refuse(conf, pod="web-3")
        self.assertEqual(self.record("web-3")["count"], 1, "room again: recorded")


class Events(RefusalCase):
    def test_a_refused_add_yields_one_event_and_repeats_patch_its_count(self):
        self.start_api(self.pod("web-1", [RS]))
        agent = self.start_agent()
        conf = self.net()
        self.refuse(conf)
        ev = self.wait_for("the Event", lambda: self.events("TopocniPlacementRefused"))[0]
        self.assertEqual(set(ev), EVENT_KEYS | {"metadata"})
        self.assertRegex(ev["metadata"]["name"], r"^web-1\.[0-9a-f]{8,16}$")
        self.assertEqual(ev["metadata"]["namespace"], NS)
        self.assertEqual(ev["involvedObject"], {"kind": "Pod", "namespace": NS, "name": "web-1",
                                                "uid": uid_of("web-1"), "apiVersion": "v1"})
        self.assertEqual((ev["type"], ev["count"], ev["source"], ev["eventTime"], ev["reportingComponent"],
                          ev["reportingInstance"]),
                         ("Warning", 1, {"component": "topocni", "host": "worker-1"}, None, "topocni", "worker-1"))
        self.assertRegex(ev["firstTimestamp"], r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ$")
        self.assertEqual(ev["firstTimestamp"], ev["lastTimestamp"])
        self.assertIn(f"network '{conf['name']}' refused on node 'worker-1'", ev["message"])
        self.assertIn("nodeSelector", ev["message"])
        self.assertIn("zone", ev["message"])
        time.sleep(1.1)   # a later lastTimestamp
        self.refuse(conf)
        self.refuse(conf)
        ev = self.wait_for("count 3", lambda: [e for e in self.events("TopocniPlacementRefused") if e["count"] == 3])[0]
        self.assertGreater(ev["lastTimestamp"], ev["firstTimestamp"])
        self.assertEqual(len(self.events()), 1, "one Event, not one per retry")
        posts = [r for r in self.api.event_requests() if r["method"] == "POST"]
        patches = [r for r in self.api.event_requests() if r["method"] == "PATCH"]
        self.assertEqual(len(posts), 1)
        self.assertGreaterEqual(len(patches), 1)
        for p in patches:
            self.assertEqual(p["contentType"], "application/strategic-merge-patch+json")
            self.assertEqual(set(json.loads(p["body"])), {"count", "lastTimestamp", "message"})
            self.assertEqual(p["path"], f"/api/v1/namespaces/{NS}/events/{ev['metadata']['name']}")
        # Nothing to evict: "wait" is the default.
        self.assertEqual(self.api.eviction_requests(), [])
        self.stop_agent(agent)

    def test_an_event_deleted_meanwhile_is_created_again(self):
        self.start_api(self.pod("web-1", [RS]))
        agent = self.start_agent()
        conf = self.net()
        self.refuse(conf)
        name = self.wait_for("the Event", lambda: self.events())[0]["metadata"]["name"]
        self.api.set_overrides([{"path": f"/api/v1/namespaces/{NS}/events/{name}", "method": "PATCH", "status": 404,
                                 "body": {"kind": "Status", "code": 404, "reason": "NotFound"}}])
        self.refuse(conf)
        self.wait_for("a second Event", lambda: len(self.events()) == 2)
        self.assertEqual(sorted(e["count"] for e in self.events()), [1, 2])
        self.stop_agent(agent)

    def test_records_of_pods_that_are_gone_or_replaced_are_removed(self):
        pods = self.pod("web-1", [RS])
        pods.update({f"{NS}/web-2": {"nodeName": "worker-1", "uid": "another-uid"}})
        self.start_api(pods)
        conf = self.net()
        self.refuse(conf, pod="web-1")
        self.refuse(conf, pod="web-2")      # the API has another pod of this name
        self.refuse(conf, pod="gone-3")     # the API has no such pod
        agent = self.start_agent()
        self.wait_for("records of gone pods removed",
                      lambda: sorted(os.listdir(os.path.join(self.state_dir, "refused"))) == [f"{NS}_web-1.json"])
        time.sleep(1.5)
        self.assertIsNotNone(self.record("web-1"), "a pod that is there keeps its record")
        self.assertIn("the pod is gone", self.log_of(agent))
        self.stop_agent(agent)

    def test_api_outages_are_survived_and_the_event_arrives_afterwards(self):
        self.start_api(self.pod("web-1", [RS]), overrides=[
            {"path": f"/api/v1/namespaces/{NS}/events", "method": "POST", "status": 503,
             "body": {"kind": "Status", "code": 503, "message": "etcd is down"}, "times": 2},
            {"path": f"/api/v1/namespaces/{NS}/events", "method": "POST", "drop": 1}])
        agent = self.start_agent()
        self.refuse(self.net())
        self.wait_for("the Event after the outage", lambda: self.events(), seconds=20)
        log = self.log_of(agent)
        self.assertRegex(log, r"the API failed \(attempt 1, HTTP 503\)")
        self.assertIn("attempt 3", log)
        self.assertEqual(len(self.events()), 1)
        self.stop_agent(agent)


class Restart(RefusalCase):
    def test_after_a_restart_records_written_while_it_was_down_are_acted_on_once(self):
        pods = {}
        for p in ("web-1", "web-2", "web-3"):
            pods.update(self.pod(p, [RS]))
        self.start_api(pods)
        plain, evict = self.net(), self.evict_net(after=2)
        first = self.start_agent()
        self.refuse(plain, pod="web-1")
        self.wait_for("web-1's Event", lambda: self.events("TopocniPlacementRefused", pod="web-1"))
        self.stop_agent(first)
        # While no agent runs: web-1 refused again, web-2 refused once, web-3 refused often enough to be evicted.
        self.refuse(plain, pod="web-1")
        self.refuse(plain, pod="web-2")
        self.refuse(evict, pod="web-3")
        self.refuse(evict, pod="web-3")
        second = self.start_agent()
        self.wait_for("web-3 evicted", lambda: f"{NS}/web-3" in self.api.evicted())
        self.wait_for("web-2's Event", lambda: self.events("TopocniPlacementRefused", pod="web-2"))
        self.wait_for("web-1's count 2", lambda: [e for e in self.events("TopocniPlacementRefused", pod="web-1")
                                                  if e["count"] == 2])
        self.wait_for("web-3's record dropped", lambda: self.record("web-3") is None)
        time.sleep(3)   # three resyncs of --resync 1: nothing more may happen
        counts = lambda pod, reason="TopocniPlacementRefused": sorted(e["count"] for e in self.events(reason, pod=pod))
        # As kubelet's recorder after a restart: a new Event for each record, with the count so far.
        self.assertEqual(counts("web-1"), [1, 2])
        self.assertEqual(counts("web-2"), [1])
        self.assertEqual(counts("web-3"), [2])
        self.assertEqual(len(self.events("TopocniEvicted", pod="web-3")), 1)
        self.assertEqual(len(self.api.eviction_requests()), 1, self.api.eviction_requests())
        self.assertEqual(self.eviction_counts(), {evict["name"]: {"evicted": 1}})
        # Another restart with nothing new: one new Event per record still there (web-1, web-2) and
        # nothing else; no eviction.
        self.stop_agent(second)
        third = self.start_agent()
        self.wait_for("web-2's second Event", lambda: len(self.events("TopocniPlacementRefused", pod="web-2")) == 2)
        self.wait_for("web-1's third Event", lambda: len(self.events("TopocniPlacementRefused", pod="web-1")) == 3)
        time.sleep(3)
        self.assertEqual(counts("web-1"), [1, 2, 2])
        self.assertEqual(counts("web-2"), [1, 1])
        self.assertEqual(len(self.events("TopocniEvicted")), 1)
        self.assertEqual(len(self.api.eviction_requests()), 1)
        self.stop_agent(third)


def _empty_sysfs(tmp):
    """A sysfs tree with nothing in it: node-report refuses a directory that is no sysfs."""
    root = os.path.join(tmp, "emptysys")
    for d in ("class/net", "bus/pci/devices", "devices/system/node"):
        os.makedirs(os.path.join(root, d), exist_ok=True)
    return root


class Evictions(RefusalCase):
    def test_with_onrefusal_evict_and_a_replicaset_owner_the_nth_refusal_evicts_once(self):
        self.start_api(self.pod("web-1", [RS]))
        agent = self.start_agent()
        conf = self.evict_net(after=3)
        self.refuse(conf)
        self.refuse(conf)
        self.wait_for("count 2", lambda: [e for e in self.events("TopocniPlacementRefused") if e["count"] == 2])
        time.sleep(1.2)
        self.assertEqual(self.api.eviction_requests(), [], "not before the 3rd refusal")
        self.refuse(conf)
        self.wait_for("the eviction", lambda: self.api.eviction_requests())
        evicted = self.wait_for("the Event of the eviction", lambda: self.events("TopocniEvicted"))[0]
        time.sleep(2.5)   # resyncs: nothing more
        reqs = self.api.eviction_requests()
        self.assertEqual(len(reqs), 1, reqs)
        self.assertEqual(reqs[0]["path"], f"/api/v1/namespaces/{NS}/pods/web-1/eviction")
        self.assertEqual(json.loads(reqs[0]["body"]), {"apiVersion": "policy/v1", "kind": "Eviction",
                                                       "metadata": {"name": "web-1", "namespace": NS}})
        self.assertEqual(reqs[0]["status"], 201)
        self.assertEqual((evicted["type"], evicted["involvedObject"]["uid"]), ("Normal", uid_of("web-1")))
        self.assertIn("ReplicaSet 'web-5d4f'", evicted["message"])
        self.assertIn("3 times within 300s", evicted["message"])
        self.assertEqual(self.eviction_counts(), {conf["name"]: {"evicted": 1}})
        # The pod is gone now (404): its record goes.
        self.wait_for("the record dropped", lambda: self.record() is None)
        # node-report shows the counter.
        p = subprocess.run([BIN, "node-report", "--format", "prometheus", "--state-dir", self.state_dir,
                            "--sysfs-root", _empty_sysfs(self.tmp)], capture_output=True, text=True, timeout=30)
        self.assertEqual(p.returncode, 0, p)
        self.assertIn("# TYPE topocni_evictions_total counter", p.stdout)
        self.assertIn(f'topocni_evictions_total{{network="{conf["name"]}",outcome="evicted"}} 1', p.stdout)
        self.stop_agent(agent)

    def test_refusals_outside_the_window_do_not_evict(self):
        self.start_api(self.pod("web-1", [RS]))
        conf = self.evict_net(after=2, window=10)
        self.refuse(conf)
        # The first refusal was 11 s ago: move it back in the record, as time would.
        p = os.path.join(self.state_dir, "refused", f"{NS}_web-1.json")
        rec = self.record()
        rec["first"] -= 11
        rec["recent"] = [t - 11 for t in rec["recent"]]
        with open(p, "w") as f:
            json.dump(rec, f)
        self.refuse(conf)
        agent = self.start_agent()
        self.wait_for("the Event", lambda: self.events())
        time.sleep(1.5)
        self.assertEqual(self.api.eviction_requests(), [])
        self.stop_agent(agent)

    def test_a_bare_pod_a_daemonset_pod_and_a_static_pod_are_left_alone_and_logged(self):
        pods = self.pod("bare")
        pods.update(self.pod("ds-pod", [DS]))
        pods.update(self.pod("static", [owner_ref("Node", "worker-1", "node-uid", api_version="v1")]))
        self.start_api(pods)
        agent = self.start_agent()
        conf = self.evict_net(after=2)
        for pod in ("bare", "ds-pod", "static"):
            self.refuse(conf, pod=pod)
            self.refuse(conf, pod=pod)
        self.wait_for("three skipped", lambda: self.eviction_counts().get(conf["name"], {}).get("skipped") == 3)
        time.sleep(1.5)
        self.assertEqual(self.api.eviction_requests(), [])
        log = self.log_of(agent)
        self.assertIn(f"pod '{NS}/bare' refused 2 times by network '{conf['name']}' is not evicted: a bare pod", log)
        self.assertIn(f"pod '{NS}/ds-pod' refused 2 times by network '{conf['name']}' is not evicted: a DaemonSet pod", log)
        self.assertIn("is not evicted: a static pod", log)
        self.assertEqual(self.eviction_counts(), {conf["name"]: {"skipped": 3}}, "each counted once")
        self.assertEqual(len(self.events("TopocniPlacementRefused")), 3)
        self.stop_agent(agent)

    def test_an_eviction_a_disruption_budget_blocks_is_logged_and_asked_again_later(self):
        self.start_api(self.pod("web-1", [RS]), overrides=[
            {"path": f"/api/v1/namespaces/{NS}/pods/web-1/eviction", "method": "POST", "status": 429,
             "body": pdb_blocked_status(), "times": 2}])
        agent = self.start_agent("--blocked-retry", "1")
        conf = self.evict_net(after=1)
        self.refuse(conf)
        # The server logs a request after answering it: wait for the log, not the eviction.
        self.wait_for("the eviction after two 429s", lambda: len(self.api.eviction_requests()) == 3, seconds=15)
        statuses = [r["status"] for r in self.api.eviction_requests()]
        self.assertEqual(statuses, [429, 429, 201])
        self.assertIn("eviction refused by a PodDisruptionBudget (HTTP 429)", self.log_of(agent))
        self.assertIn("The disruption budget web-pdb needs 2 healthy pods", self.log_of(agent))
        self.wait_for("the counter", lambda: self.eviction_counts() == {conf["name"]: {"blocked": 2, "evicted": 1}})
        self.stop_agent(agent)

    def test_a_pod_with_several_budgets_500_is_logged_and_not_evicted(self):
        self.start_api(self.pod("web-1", [RS]), overrides=[
            {"path": f"/api/v1/namespaces/{NS}/pods/web-1/eviction", "method": "POST", "status": 500,
             "body": MULTIPLE_PDBS}])
        agent = self.start_agent()
        self.refuse(self.evict_net(after=1))
        self.wait_for("the eviction attempt", lambda: self.api.eviction_requests())
        time.sleep(1.5)
        self.assertEqual(len(self.api.eviction_requests()), 1, "the next attempt waits 10 s")
        self.assertIn("more than one PodDisruptionBudget", self.log_of(agent))
        self.assertEqual(self.api.evicted(), [])
        self.stop_agent(agent)

    def test_the_loop_guard_stops_after_k_evictions_of_one_owner_and_says_so(self):
        pods = {}
        for p in ("web-1", "web-2", "web-3", "web-4"):
            pods.update(self.pod(p, [RS]))
        pods.update(self.pod("other-1", [owner_ref("StatefulSet", "db", "sts-uid-1")]))
        self.start_api(pods)
        agent = self.start_agent("--max-evictions-per-owner", "2", "--owner-window", "600")
        conf = self.evict_net(after=1)
        for p in ("web-1", "web-2"):
            self.refuse(conf, pod=p)
            self.wait_for(f"{p} evicted", lambda: f"{NS}/{p}" in self.api.evicted())
        self.refuse(conf, pod="web-3")
        stopped = self.wait_for("the stop Event", lambda: self.events("TopocniEvictionStopped"))
        self.refuse(conf, pod="web-4")
        self.wait_for("web-4's Event", lambda: self.events("TopocniPlacementRefused", pod="web-4"))
        # Another owner is not held back.
        self.refuse(conf, pod="other-1")
        self.wait_for("other-1 evicted", lambda: f"{NS}/other-1" in self.api.evicted())
        time.sleep(1.5)
        self.assertEqual(self.api.evicted(), [f"{NS}/web-1", f"{NS}/web-2", f"{NS}/other-1"])
        self.assertEqual(len(self.events("TopocniEvictionStopped")), 1, "said once per owner and window")
        self.assertEqual(stopped[0]["involvedObject"]["name"], "web-3")
        self.assertIn("evicted 2 pods of ReplicaSet 'web-5d4f' from node 'worker-1' within 600s", stopped[0]["message"])
        self.assertEqual(self.eviction_counts(), {conf["name"]: {"evicted": 3, "skipped": 1}})
        self.stop_agent(agent)

    def test_an_outage_during_the_eviction_is_survived(self):
        self.start_api(self.pod("web-1", [RS]), overrides=[
            {"path": f"/api/v1/namespaces/{NS}/pods/web-1/eviction", "method": "POST", "drop": 1},
            {"path": f"/api/v1/namespaces/{NS}/pods/web-1", "method": "GET", "status": 503,
             "body": {"kind": "Status", "code": 503}, "times": 1}])
        agent = self.start_agent()
        self.refuse(self.evict_net(after=1))
        self.wait_for("the eviction after the outage", lambda: self.api.evicted(), seconds=20)
        self.assertIn("the API failed", self.log_of(agent))
        self.stop_agent(agent)


if __name__ == "__main__":
    main()
