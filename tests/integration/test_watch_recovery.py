"""The scheduler extender's LIST+WATCH loops (kube/reflector, base/backoff) against
fakenode.ClusterApi when the API misbehaves, seen from both sides: the requests the API
server gets (its request log, with the server's own times) and the extender's answers.

  - the first LIST asks for resourceVersion=0 (the API server's watch cache), and every
    WATCH asks for a time-out of 300 to 600 s, at random;
  - after an outage long enough to grow the back-off, a single dropped connection is
    watched again within a few seconds, not after the outage's back-off;
  - a WATCH that loses its version (410) lists again once, at once, at the last version;
  - an API that answers every WATCH with 410 is not listed back to back: it backs off;
  - a LIST at a version newer than the server has (504 "Too large resource version")
    lists again at once without a version.
"""
import http.client
import json
import os
import signal
import subprocess
import tempfile
import time
import unittest

from cnitest import BIN, main
from fakenode import NAD_PATH, ClusterApi, free_port, make_pki, write_kubeconfig
from test_extender import facts, macvlan_nad, node, pod, sriov_nad

# Loopback only: no namespaces, so these run as any user (cnitest.main).
NEEDS_ROOT = False

PATHS = ("/api/v1/nodes", NAD_PATH, "/api/v1/pods")


class WatchRecovery(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.mkdtemp(prefix="topocni-wr-")
        self.addCleanup(subprocess.run, ["rm", "-rf", self.tmp])
        self.pki = make_pki(os.path.join(self.tmp, "pki"))
        self.api = ClusterApi(self.pki)
        self.addCleanup(self.api.stop)
        self.api.replace([node("w1", doc=facts("w1"))], [sriov_nad()])
        kubeconfig = write_kubeconfig(os.path.join(self.tmp, "kubeconfig"), self.api.url(),
                                      ca_file=os.path.join(self.pki, "ca.crt"), token="t")
        self.port = free_port()
        self.log = os.path.join(self.tmp, "extender.log")
        with open(self.log, "w") as err:
            self.proc = subprocess.Popen([BIN, "scheduler-extender", "--listen", f"127.0.0.1:{self.port}",
                                          "--kubeconfig", kubeconfig, "--url-prefix", "/scheduler",
                                          "--max-facts-age", "600"], stderr=err)
        self.addCleanup(self.stop)
        self.wait_for("the three LIST+WATCH loops", lambda: all(self.api.watches(p) for p in PATHS), 20)

    def stop(self):
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            self.assertEqual(self.proc.wait(timeout=20), 0, "SIGTERM ends the extender cleanly")

    def wait_for(self, what, cond, seconds):
        deadline = time.time() + seconds
        while time.time() < deadline:
            got = cond()
            if got:
                return got
            time.sleep(0.05)
        with open(self.log) as f:
            self.fail(f"{what}: not within {seconds} s; extender log:\n{f.read()[-3000:]}")

    def filter_names(self, p, names):
        for _ in range(100):   # the server may not listen yet
            try:
                c = http.client.HTTPConnection("127.0.0.1", self.port, timeout=30)
                c.request("POST", "/scheduler/filter", json.dumps({"Pod": p, "NodeNames": names}).encode(),
                          {"Content-Type": "application/json"})
                r = c.getresponse()
                data = r.read()
                c.close()
                self.assertEqual(r.status, 200, data)
                return json.loads(data)["NodeNames"]
            except ConnectionRefusedError:
                time.sleep(0.1)
        self.fail("the extender does not listen")

    def after(self, requests, t):
        return [r for r in requests if r["at"] >= t]

    def sees_a_new_nad(self, name):
        """A NAD made now reaches the extender's cache (through its WATCH) within 5 s."""
        self.api.put_nad(macvlan_nad(name))
        self.wait_for(f"the extender seeing NAD {name}",
                      lambda: self.filter_names(pod("p", name), ["w1"]) == ["w1"], 5)

    # --- the tests ---

    def test_the_first_list_asks_the_watch_cache_and_watch_time_outs_are_spread(self):
        for path in PATHS:
            first = self.api.lists(path)[0]
            self.assertEqual(first["query"].get("resourceVersion"), "0", first)
            self.assertEqual(first["query"].get("limit"), "500", "at version 0 the watch cache ignores the limit")
            for w in self.api.watches(path):
                self.assertTrue(300 <= int(w["query"]["timeoutSeconds"]) < 600, w["query"])
        self.assertEqual(self.filter_names(pod("p", "sriov-a"), ["w1"]), ["w1"])

    def test_after_an_outage_a_single_dropped_connection_is_watched_again_within_seconds(self):
        # 8 s of outage: every attempt fails, and the back-off grows past 6 s.
        self.api.outage(True)
        time.sleep(8)
        self.assertTrue(all(len(self.after(self.api.logged(path=p), time.time() - 8)) >= 2 for p in PATHS),
                        "the loops did not try again during the outage")
        back = time.time()
        self.api.outage(False)
        self.wait_for("a WATCH of each path after the outage",
                      lambda: all(self.after(self.api.watches(p), back) for p in PATHS), 70)
        time.sleep(2)   # the watches run well for a while: the API is healthy again
        dropped = time.time()
        self.api.drop_watches()
        self.wait_for("a WATCH of each path after the dropped connection",
                      lambda: all(self.after(self.api.watches(p), dropped) for p in PATHS), 40)
        for path in PATHS:
            again = self.after(self.api.watches(path), dropped)[0]
            self.assertLess(again["at"] - dropped, 5, f"{path}: the outage's back-off was not reset")
            self.assertEqual(self.after(self.api.lists(path), dropped), [], "a dropped WATCH needs no LIST")
        self.sees_a_new_nad("after-drop")

    def test_a_watch_that_loses_its_version_lists_again_once_at_once_at_the_last_version(self):
        self.api.put_nad(macvlan_nad("moved"))   # the NAD watch's last version is past the list's
        self.wait_for("the extender seeing NAD moved",
                      lambda: self.filter_names(pod("p", "moved"), ["w1"]) == ["w1"], 5)
        last_nad_version = self.api.rv
        expired = time.time()
        self.api.expire_watches()
        self.wait_for("a WATCH of each path after the LIST again",
                      lambda: all(self.after(self.api.watches(p), expired) for p in PATHS), 10)
        time.sleep(2)
        for path in PATHS:
            lists = self.after(self.api.lists(path), expired)
            self.assertEqual(len(lists), 1, f"{path}: {[r['query'] for r in lists]}")
            self.assertLess(lists[0]["at"] - expired, 1.0, f"{path}: the LIST again waited")
            rv = lists[0]["query"].get("resourceVersion")
            self.assertNotIn(rv, (None, "", "0"), f"{path}: not at the last version seen")
            self.assertNotIn("limit", lists[0]["query"], "a LIST at a version in pages skips the watch cache")
        self.assertEqual(self.after(self.api.lists(NAD_PATH), expired)[0]["query"]["resourceVersion"],
                         str(last_nad_version))
        self.sees_a_new_nad("after-410")

    def test_an_api_answering_every_watch_with_410_is_listed_again_with_back_off(self):
        storm = time.time()
        self.api.expire_watches(every=True)
        time.sleep(20)
        self.api.expire_watches(every=False)
        calm = time.time()
        timeouts = set()
        for path in PATHS:
            lists = [r for r in self.api.lists(path) if storm <= r["at"] < calm]
            # At once after the first 410, then 0.8-1.6 s, 1.6-3.2 s, 3.2-6.4 s, 6.4-12.8 s ...
            self.assertGreaterEqual(len(lists), 3, f"{path}: the loop gave up")
            self.assertLessEqual(len(lists), 8, f"{path}: {len(lists)} LISTs in 20 s")
            timeouts |= {w["query"]["timeoutSeconds"] for w in self.api.watches(path)}
        self.assertGreater(len(timeouts), 1, "every WATCH asked for the same time-out")
        # After the storm the loops recover (at most the back-off's 60 s later).
        self.wait_for("a WATCH of each path that is not expired",
                      lambda: all(self.after(self.api.watches(p), calm) for p in PATHS), 70)
        self.sees_a_new_nad("after-storm")

    def test_a_list_at_a_version_newer_than_the_server_has_lists_again_at_once_without_one(self):
        for kind in ("nads", "nodes", "pods"):
            self.api.too_large_lists(kind, times=1)
        expired = time.time()
        self.api.expire_watches()
        self.wait_for("a WATCH of each path after the LISTs again",
                      lambda: all(self.after(self.api.watches(p), expired) for p in PATHS), 10)
        for path in PATHS:
            lists = self.after(self.api.lists(path), expired)
            self.assertEqual([(r["status"], "resourceVersion" in r["query"]) for r in lists],
                             [(504, True), (200, False)], f"{path}: {[r['query'] for r in lists]}")
            self.assertLess(lists[1]["at"] - lists[0]["at"], 1.0, f"{path}: the LIST without a version waited")
        self.sees_a_new_nad("after-504")


if __name__ == "__main__":
    main()
