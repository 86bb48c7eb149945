"""Bounded lock waits (README, "What topocni guarantees", 2), for the locks no other test
holds: a link's bandwidth ledger (10 s, then code 11), the node label cache (10 s, then code
11) and the refusal records and counter (2 s each; a refusal it cannot record or count is
logged, not failed). The test holds each lock itself, as a stuck process on the node would:
a flock on the directory that is the lock. The plugin gives up after the bound, says which
lock, and changes nothing; once the lock is free, the same call works.

The bounds are checked from below only (the plugin waited at least the bound): how much
longer a loaded machine takes is no promise of the README."""
import fcntl
import json
import os
import time

import test_placement as tp
from cnitest import main
from fakenode import FakeApiServer, b64file, make_pki, write_kubeconfig

MBIT = 1_000_000


class HeldLock:
    """flock(LOCK_EX) on a directory, as topocni's base::DirLock takes it, until release()."""

    def __init__(self, path):
        self.fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
        fcntl.flock(self.fd, fcntl.LOCK_EX | fcntl.LOCK_NB)

    def release(self):
        if self.fd is not None:
            os.close(self.fd)
            self.fd = None


class Locks(tp.PlacementCase):
    def hold(self, path):
        lock = HeldLock(path)
        self.addCleanup(lock.release)
        return lock

    def timed_add(self, conf, uid=tp.POD0, container_id="held"):
        """ADD in a new pod; (outcome, seconds it took, pod name, pod path)."""
        pod, path = self.make_pod()
        start = time.monotonic()
        out = self.run_plugin("ADD", conf, container_id=container_id, netns=path, args=tp.pod_args(uid))
        return out, time.monotonic() - start, pod, path

    def assertGaveUpAfter(self, seconds, elapsed, out):
        self.assertGreaterEqual(elapsed, seconds - 0.1, f"gave up before the bound of {seconds} s: {out}")

    def test_a_held_bandwidth_ledger_lock_is_code_11_after_10_s_naming_it_and_changes_nothing(self):
        conf = self.pconf(bandwidth={"egressRate": 40 * MBIT, "egressBurst": MBIT},
                          topology={"linkCapacityMbps": 100})
        self.add_check_del(conf, container_id="first")   # the link's ledger directory now exists (bookkeeping)
        root = os.path.join(self.state_dir, "bandwidth")
        links = os.listdir(root)
        self.assertEqual(len(links), 1, links)
        ledger = os.path.join(root, links[0])
        lock = self.hold(ledger)
        before = self.snapshot()
        out, elapsed, pod, path = self.timed_add(conf)
        self.assertError(out, 11, "timed out after 10s", ledger, "another ADD is admitting bandwidth on this link")
        self.assertGaveUpAfter(10, elapsed, out)
        self.assertEqual(set(self.links(pod)), {"lo"})
        self.assertEqual(self.snapshot(), before, "the ADD that timed out changed something")
        self.assertOk(self.run_plugin("DEL", conf, container_id="held", netns=path, args=tp.pod_args(tp.POD0)))
        self.assertEqual(self.snapshot(), before, "the DEL after it changed something")
        lock.release()
        self.add_check_del(conf, container_id="after")

    def test_a_held_node_label_cache_lock_is_code_11_after_10_s_naming_it_and_changes_nothing(self):
        pki = make_pki(os.path.join(self.outside_dir(), "pki"))
        api = FakeApiServer(self.node, pki, {"worker-1": {"example.com/api": "yes"}}, self.outside_dir())
        self.addCleanup(api.stop)
        kc = write_kubeconfig(os.path.join(self.tmp, "kubeconfig"), f"https://127.0.0.1:{api.port}",
                              ca_data=b64file(f"{pki}/ca.crt"), cert_data=b64file(f"{pki}/client.crt"),
                              key_data=b64file(f"{pki}/client.key"))
        conf = self.pconf(kubeconfig=kc, nodeSelector={"example.com/api": "yes"})
        del conf["nodeLabelsFile"]
        cache = os.path.join(self.state_dir, "node-labels")
        os.makedirs(cache)   # what the first ADD that reads labels from the API makes (bookkeeping)
        lock = self.hold(cache)
        before = self.snapshot()
        out, elapsed, pod, path = self.timed_add(conf)
        self.assertError(out, 11, "timed out after 10s", "the node label cache", cache)
        self.assertGaveUpAfter(10, elapsed, out)
        self.assertEqual(api.requests(), [], "nothing is fetched without the cache's lock")
        self.assertEqual(set(self.links(pod)), {"lo"})
        self.assertEqual(self.snapshot(), before, "the ADD that timed out changed something")
        lock.release()
        self.add_check_del(conf, container_id="after")
        self.assertEqual(len(api.requests()), 1)

    def test_held_refusal_record_and_counter_locks_delay_a_refusal_2_s_each_and_it_is_logged_not_recorded(self):
        refused = self.pconf(nodeSelector={"example.com/zone": "b"}, logLevel="warning")
        self.assertRefused(refused, ["nodeSelector"])   # the record and the counter exist now
        records = os.path.join(self.state_dir, "refused")
        metrics = os.path.join(self.state_dir, "metrics")
        for held, words in ((records, "placement refusal not recorded: timed out after 2s waiting for the lock of "
                                      "the refusal records"),
                            (metrics, "timed out after 2s waiting for the lock of the refusal counter")):
            with self.subTest(lock=os.path.basename(held)):
                lock = self.hold(held)
                before = self.snapshot()
                out, elapsed, pod, path = self.timed_add(refused)
                self.assertError(out, 100, "nodeSelector")
                self.assertGaveUpAfter(2, elapsed, out)
                self.assertIn(words, out.stderr)
                self.assertIn(held, out.stderr)
                now = self.files()
                changed = sorted(p for p in set(now) | set(before["files"]) if now.get(p) != before["files"].get(p))
                self.assertTrue(all(not p.startswith(held + "/") and p != held for p in changed),
                                f"the locked directory changed: {changed}")
                self.assertEqual(self.node_links(), before["node links"])
                lock.release()
        # Both free again: the next refusal is recorded and counted (the record's count goes on).
        with open(os.path.join(records, "default_p.json")) as f:
            had = json.load(f)["count"]
        counts = self.refusal_counts().get(refused["name"], {}).get("nodeSelector", 0)
        self.assertRefused(refused, ["nodeSelector"])
        with open(os.path.join(records, "default_p.json")) as f:
            self.assertEqual(json.load(f)["count"], had + 1)
        self.assertEqual(self.refusal_counts()[refused["name"]]["nodeSelector"], counts + 1)


if __name__ == "__main__":
    main()
