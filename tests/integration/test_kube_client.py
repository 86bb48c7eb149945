"""topocni's own Kubernetes client (kube/client, kube/https, kube/reflector) through
`topocni api get|list|watch`, against fakenode.FakeApiServer over HTTPS in the test's node
netns: GET of one object and a refusal, LIST in pages over one kept-open connection, a
continue token that expires, a connection the server drops, WATCH streams (events,
bookmarks, events split across chunks or sharing one) and an expired resource version,
plain and with --reflect (LIST, WATCH, LIST again).

The server logs every request with the client's source port ("peer"), so the number of TCP
connections a command used is the number of distinct peers. Its files, the PKI and the
kubeconfigs live in a temp dir of the test's own.
"""
import json
import os
import shutil
import signal
import subprocess
import tempfile
import time

from cnitest import BIN, NetnsTestCase, main
from fakenode import (FakeApiServer, b64file, expired_continue, k8s_status, make_pki, node_object,
                      too_large_status, write_kubeconfig)

NODES = "/api/v1/nodes"
NAMES = [f"node-{c}" for c in "abcdefg"]   # 7 Nodes, in name order
FORBIDDEN = 'nodes "node-c" is forbidden: User "system:serviceaccount:kube-system:topocni" cannot get resource "nodes"'


class KubeClientCase(NetnsTestCase):
    def setUp(self):
        super().setUp()
        self.servers = []
        self.fixture = tempfile.mkdtemp(prefix="topocni-kc-")
        try:
            self.pki = make_pki(os.path.join(self.fixture, "pki"))
            self.api = self.start_api()
            self.kc = self.kubeconfig(self.api)
        except BaseException:
            self.tearDown()   # unittest skips tearDown when setUp fails; the namespaces must go
            raise

    def tearDown(self):
        try:
            for api in self.servers:
                api.stop()
        finally:
            super().tearDown()
            shutil.rmtree(self.fixture, ignore_errors=True)

    def start_api(self, **kw):
        d = os.path.join(self.fixture, f"api{len(self.servers)}")
        os.makedirs(d)
        nodes = {n: {"example.com/index": str(i)} for i, n in enumerate(NAMES)}
        api = FakeApiServer(self.node, self.pki, nodes, d, annotations={"node-c": {"example.com/note": "c"}}, **kw)
        self.servers.append(api)
        return api

    def kubeconfig(self, api, name="kubeconfig", **kw):
        if not any(k in kw for k in ("token", "token_file")):
            kw.update(cert_data=b64file(f"{self.pki}/client.crt"), key_data=b64file(f"{self.pki}/client.key"))
        return write_kubeconfig(os.path.join(self.fixture, name), api.url(), ca_data=b64file(f"{self.pki}/ca.crt"),
                                user="topocni", **kw)

    def topocni_api(self, *args, kubeconfig=None, timeout=30):
        """`topocni api ARGS --kubeconfig K` inside the node netns: (rc, stdout lines as JSON, stderr)."""
        p = subprocess.run(["nsenter", f"--net=/run/netns/{self.node}", BIN, "api", *args,
                            "--kubeconfig", kubeconfig or self.kc], capture_output=True, text=True, timeout=timeout)
        lines = []
        for l in p.stdout.splitlines():
            try:
                lines.append(json.loads(l))
            except json.JSONDecodeError:
                self.fail(f"a line of stdout is not JSON: {l!r} (stderr: {p.stderr})")
        return p.returncode, lines, p.stderr

    def list_requests(self):
        return [r for r in self.api.requests() if r["path"].startswith(NODES + "?") and not r.get("watch")]


class Get(KubeClientCase):
    def test_get_prints_the_node_object_with_its_labels_annotations_and_resource_version(self):
        for auth, kc in (("cert", self.kc), ("token", None)):
            with self.subTest(auth=auth):
                if kc is None:
                    api = self.start_api(token="t0ken")
                    kc = self.kubeconfig(api, name="token.kubeconfig", token="t0ken")
                else:
                    api = self.api
                rc, lines, err = self.topocni_api("get", NODES + "/node-c", kubeconfig=kc)
                self.assertEqual(rc, 0, err)
                self.assertEqual(len(lines), 1)
                node = lines[0]
                want = api.node("node-c")
                self.assertEqual((node["kind"], node["apiVersion"]), ("Node", "v1"))
                self.assertEqual(node["metadata"], want["metadata"])
                self.assertEqual(node["metadata"]["labels"], {"example.com/index": "2"})
                self.assertEqual(node["metadata"]["annotations"], {"example.com/note": "c"})
                self.assertEqual(len(node["status"]["images"]), 50)
                reqs = api.requests()
                self.assertEqual([(r["method"], r["path"], r["auth"], r["status"]) for r in reqs],
                                 [("GET", NODES + "/node-c", auth, 200)])
                self.assertEqual(reqs[0]["accept"], "application/json")

    def test_a_403_exits_1_naming_the_verb_the_object_the_servers_message_and_examples_rbac_yaml(self):
        self.api.set_overrides([{"path": NODES + "/", "status": 403, "body": k8s_status(403, FORBIDDEN, "Forbidden")}])
        rc, lines, err = self.topocni_api("get", NODES + "/node-c")
        self.assertEqual(rc, 1, err)
        self.assertEqual(lines, [])
        for words in ("not allowed to get", "/api/v1/nodes/node-c", "HTTP 403", FORBIDDEN, 'needs "get"',
                      "examples/rbac.yaml", f"kubeconfig '{self.kc}'", "user 'topocni'"):
            self.assertIn(words, err)
        self.assertEqual(len(err.strip().splitlines()), 1, err)

    def test_a_403_names_the_rbac_resource_not_the_path(self):
        self.api.set_overrides([{"path": NODES, "status": 403, "body": k8s_status(403, FORBIDDEN, "Forbidden")}])
        for verb, path in (("get", NODES + "/node-c"), ("list", NODES), ("watch", NODES)):
            with self.subTest(verb=verb):
                rc, _, err = self.topocni_api(verb, path)
                self.assertEqual(rc, 1, err)
                self.assertIn(f'topocni needs "{verb}" on "nodes"', err)


class List(KubeClientCase):
    def test_seven_nodes_in_pages_of_3_come_in_order_in_3_requests_over_one_connection(self):
        rc, lines, err = self.topocni_api("list", NODES, "--page-size", "3")
        self.assertEqual(rc, 0, err)
        self.assertEqual([l["metadata"]["name"] for l in lines[:-1]], NAMES)
        rv = self.api.state()["resourceVersion"]
        self.assertEqual(lines[-1], {"resourceVersion": rv, "items": 7, "connections": 1})
        reqs = self.list_requests()
        self.assertEqual([r["items"] for r in reqs], [NAMES[0:3], NAMES[3:6], NAMES[6:7]])
        self.assertEqual([r["query"].get("limit") for r in reqs], ["3"] * 3)
        # The first page has no continue token; the next ones carry the one before them,
        # and no resourceVersion (the API server refuses both together).
        self.assertNotIn("continue", reqs[0]["query"])
        self.assertTrue(all(r["query"].get("continue") for r in reqs[1:]))
        self.assertTrue(all("resourceVersion" not in r["query"] for r in reqs))
        self.assertEqual(len(self.api.peers()), 1, "the pages went over more than one TCP connection")

    def test_an_expired_continue_token_starts_the_list_over_and_every_node_comes_once(self):
        self.api.set_overrides([expired_continue(times=1)])
        rc, lines, err = self.topocni_api("list", NODES, "--page-size", "3")
        self.assertEqual(rc, 0, err)
        self.assertEqual([l["metadata"]["name"] for l in lines[:-1]], NAMES)
        self.assertEqual(lines[-1]["items"], 7)
        reqs = self.list_requests()
        self.assertEqual([(r["status"], r["items"] if r["status"] == 200 else None) for r in reqs],
                         [(200, NAMES[0:3]), (410, None), (200, NAMES[0:3]), (200, NAMES[3:6]), (200, NAMES[6:7])])
        self.assertNotIn("continue", reqs[2]["query"], "the list did not start over")

    def test_a_continue_token_that_expires_again_after_the_restart_is_an_error_naming_the_410(self):
        self.api.set_overrides([expired_continue(times=2)])
        rc, lines, err = self.topocni_api("list", NODES, "--page-size", "3")
        self.assertEqual(rc, 1, err)
        self.assertEqual(lines, [], "a partial list was printed")
        self.assertIn("HTTP 410", err)
        self.assertIn("continue parameter is too old", err)
        self.assertEqual(len(self.list_requests()), 4)

    def test_a_connection_dropped_between_pages_is_survived_on_a_new_connection(self):
        self.api.set_overrides([{"path": NODES, "query": ["continue"], "drop": 1}])
        rc, lines, err = self.topocni_api("list", NODES, "--page-size", "3")
        self.assertEqual(rc, 0, err)
        self.assertEqual([l["metadata"]["name"] for l in lines[:-1]], NAMES)
        self.assertEqual(lines[-1]["connections"], 2)
        reqs = self.list_requests()
        self.assertEqual([r["status"] for r in reqs], [200, None, 200, 200])
        self.assertEqual(reqs[1]["path"], reqs[2]["path"], "the dropped page was not asked for again")
        self.assertEqual(len(self.api.peers()), 2)


class Watch(KubeClientCase):
    def events(self, lines):
        return [(l["type"], l.get("name"), l["resourceVersion"]) for l in lines]

    def test_watch_prints_events_in_order_bookmarks_only_move_the_version_and_split_events_arrive_whole(self):
        long_labels = {f"example.com/l{i}": "v" * 60 for i in range(40)}   # a line of some KiB
        self.api.set_watch_script([
            [{"type": "ADDED", "object": node_object("node-h", 11)},
             {"bookmark": "12"},
             {"split": True}, {"type": "MODIFIED", "object": node_object("node-h", 13, labels=long_labels)},
             {"join": 2}, {"type": "MODIFIED", "object": node_object("node-a", 14)},
             {"type": "DELETED", "object": node_object("node-h", 15)},
             {"bookmark": "20"}],
            [{"type": "ADDED", "object": node_object("node-i", 21)}, {"bookmark": "22"},
             {"type": "DELETED", "object": node_object("node-i", 23)}]])
        rc, lines, err = self.topocni_api("watch", NODES, "--resource-version", "10")
        self.assertEqual(rc, 0, err)
        self.assertEqual(self.events(lines), [("ADDED", "node-h", "11"), ("MODIFIED", "node-h", "13"),
                                              ("MODIFIED", "node-a", "14"), ("DELETED", "node-h", "15"),
                                              ("END", None, "20")])
        self.assertEqual(lines[-1]["connections"], 1)
        # The stream ended on an event: END carries that event's version.
        rc, lines, err = self.topocni_api("watch", NODES, "--resource-version", "20")
        self.assertEqual(rc, 0, err)
        self.assertEqual(self.events(lines),
                         [("ADDED", "node-i", "21"), ("DELETED", "node-i", "23"), ("END", None, "23")])
        watches = self.api.watches()
        self.assertEqual([w["resourceVersion"] for w in watches], ["10", "20"])
        for w in watches:
            self.assertEqual(w["query"].get("allowWatchBookmarks"), "true")
            self.assertTrue(w["query"].get("timeoutSeconds", "").isdigit(), w["query"])

    def test_watch_stops_after_events_n_even_when_more_arrived_in_the_same_chunk(self):
        # Five events in one chunk, then a stream that stays open.
        self.api.set_watch_script([{"join": 5}] +
                                  [{"type": "ADDED", "object": node_object(f"node-{i}", 30 + i)} for i in range(5)] +
                                  [{"sleep": 5}])
        start = time.monotonic()
        rc, lines, err = self.topocni_api("watch", NODES, "--resource-version", "29", "--events", "2")
        self.assertEqual(rc, 0, err)
        self.assertEqual(self.events(lines),
                         [("ADDED", "node-0", "30"), ("ADDED", "node-1", "31"), ("END", None, "31")])
        self.assertLess(time.monotonic() - start, 4, "watch --events 2 waited for the stream to end")

    def test_an_expired_version_ends_a_plain_watch_with_an_error_naming_it(self):
        self.api.set_watch_script([{"type": "ADDED", "object": node_object("node-h", 11)}, {"bump": 5},
                                   {"expire": True}])
        rc, lines, err = self.topocni_api("watch", NODES, "--resource-version", "10")
        self.assertEqual(rc, 1, err)
        self.assertEqual(self.events(lines), [("ADDED", "node-h", "11")], "an END line after an expired version")
        self.assertIn("too old resource version: 10", err)   # the ERROR event's Status message

    def reflect_once_expired(self):
        """`watch --reflect --events 2` where the first WATCH gets one event, then an ERROR
        410 event (the server's version moved on by 5 in between), and the second one event."""
        self.api.set_watch_script([
            [{"type": "ADDED", "object": node_object("node-h", 11)}, {"bump": 5}, {"expire": True}],
            [{"type": "MODIFIED", "object": node_object("node-h", 30)}]])
        rv = int(self.api.state()["resourceVersion"])
        start = time.monotonic()
        rc, lines, err = self.topocni_api("watch", NODES, "--reflect", "--events", "2")
        return rv, rc, lines, err, time.monotonic() - start

    def test_watch_reflect_lists_again_after_an_expired_version_and_watches_from_the_new_list(self):
        rv, rc, lines, err, _ = self.reflect_once_expired()
        self.assertEqual(rc, 0, err)
        self.assertEqual(lines, [{"type": "LIST", "items": 7, "resourceVersion": str(rv)},
                                 {"type": "ADDED", "name": "node-h", "resourceVersion": "11"},
                                 {"type": "LIST", "items": 7, "resourceVersion": str(rv + 5)},
                                 {"type": "MODIFIED", "name": "node-h", "resourceVersion": "30"}])
        self.assertIn("resource version expired, listing again", err)
        # Each WATCH starts from the list before it.
        self.assertEqual([w["resourceVersion"] for w in self.api.watches()], [str(rv), str(rv + 5)])
        lists = [r["listResourceVersion"] for r in self.list_requests() if r["status"] == 200]
        self.assertEqual((lists[0], lists[-1]), (str(rv), str(rv + 5)))

    def test_watch_reflect_watches_again_from_the_last_version_when_a_stream_ends_without_listing(self):
        self.api.set_watch_script([[{"type": "ADDED", "object": node_object("node-h", 51)}, {"bookmark": "55"}],
                                   [{"type": "MODIFIED", "object": node_object("node-h", 56)}]])
        rv = self.api.state()["resourceVersion"]
        rc, lines, err = self.topocni_api("watch", NODES, "--reflect", "--events", "2")
        self.assertEqual(rc, 0, err)
        self.assertEqual([l["type"] for l in lines], ["LIST", "ADDED", "MODIFIED"])
        self.assertEqual([w["resourceVersion"] for w in self.api.watches()], [rv, "55"])
        self.assertEqual(len(self.list_requests()), 1)
        self.assertEqual(err, "")

    def test_after_an_error_event_the_next_list_is_answered_at_once_on_a_clean_connection(self):
        rv, rc, lines, err, took = self.reflect_once_expired()
        self.assertEqual(rc, 0, err)
        self.assertNotIn("unreachable", err)
        self.assertEqual(len(self.list_requests()), 2, "a LIST was sent again after the first relist failed")
        # No back-off between the expired WATCH and the LIST after it (timed by the server, so
        # that a slow client, a sanitizer build, does not count).
        first_watch = next(r for r in self.api.requests() if r.get("watch"))
        relist = [r for r in self.list_requests() if r["at"] >= first_watch["at"]]
        self.assertTrue(relist, "no LIST after the WATCH")
        self.assertLess(relist[0]["at"] - first_watch["at"], 0.9, "the relist waited for a back-off")

    def test_an_http_410_on_the_watch_request_itself_lists_again_too(self):
        self.api.set_overrides([{"path": NODES, "query": ["watch"], "status": 410, "times": 1,
                                 "body": k8s_status(410, "too old resource version: 1 (9)", "Expired")}])
        self.api.set_watch_script([{"type": "ADDED", "object": node_object("node-h", 40)}])
        rc, lines, err = self.topocni_api("watch", NODES, "--reflect", "--events", "1")
        self.assertEqual(rc, 0, err)
        self.assertEqual([l["type"] for l in lines], ["LIST", "LIST", "ADDED"])
        self.assertEqual([w["status"] for w in self.api.watches()], [410, 200])

    def test_watch_reflect_lists_first_from_the_watch_cache_and_again_at_the_last_version_seen(self):
        rv, rc, lines, err, _ = self.reflect_once_expired()
        self.assertEqual(rc, 0, err)
        first, again = [r["query"] for r in self.list_requests()]
        # client-go's relistResourceVersion: "0" first (any version: the watch cache, whose
        # answer ignores the limit), then the last version seen, in one page (a paged LIST at
        # a version would skip the watch cache).
        self.assertEqual((first.get("resourceVersion"), first.get("limit")), ("0", "500"))
        self.assertEqual(again.get("resourceVersion"), "11", "not the version of the last event")
        self.assertNotIn("limit", again)

    def test_a_list_again_at_a_version_too_large_for_the_server_lists_at_once_without_one(self):
        self.api.set_overrides([{"path": NODES + "?resourceVersion=", "status": 504, "times": 1,
                                 "body": too_large_status(11, 9)}])
        rv, rc, lines, err, _ = self.reflect_once_expired()
        self.assertEqual(rc, 0, err)
        self.assertEqual([l["type"] for l in lines], ["LIST", "ADDED", "LIST", "MODIFIED"])
        reqs = self.list_requests()
        self.assertEqual([(r["status"], r["query"].get("resourceVersion")) for r in reqs],
                         [(200, "0"), (504, "11"), (200, None)])
        self.assertLess(reqs[2]["at"] - reqs[1]["at"], 0.9, "the LIST without a version waited for a back-off")
        self.assertIn("Too large resource version", err)

    def test_watch_reflect_asks_each_watch_to_end_after_the_time_out_plus_up_to_as_much_again(self):
        self.api.set_watch_script([[{"type": "ADDED", "object": node_object("node-h", 51)}]] * 6)
        rc, lines, err = self.topocni_api("watch", NODES, "--reflect", "--events", "6", "--watch-timeout", "100")
        self.assertEqual(rc, 0, err)
        asked = [int(w["query"]["timeoutSeconds"]) for w in self.api.watches()]
        self.assertGreaterEqual(len(asked), 6)
        self.assertTrue(all(100 <= t < 200 for t in asked), asked)
        self.assertGreater(len(set(asked)), 1, "every WATCH asked for the same time-out")

    def test_a_watch_refused_with_403_exits_1_naming_the_refusal_and_examples_rbac_yaml(self):
        self.api.set_overrides([{"path": NODES, "query": ["watch"], "status": 403,
                                 "body": k8s_status(403, FORBIDDEN.replace("get", "watch"), "Forbidden")}])
        rc, lines, err = self.topocni_api("watch", NODES, "--resource-version", "5")
        self.assertEqual(rc, 1, err)
        self.assertEqual(lines, [])
        for words in ("not allowed to watch", "HTTP 403", FORBIDDEN.replace("get", "watch"), "examples/rbac.yaml"):
            self.assertIn(words, err)

    def test_sigterm_ends_a_quiet_watch_promptly_with_its_end_line(self):
        # No script: the server keeps the stream open and says nothing.
        p = subprocess.Popen(["nsenter", f"--net=/run/netns/{self.node}", BIN, "api", "watch", NODES,
                              "--resource-version", "42", "--kubeconfig", self.kc],
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        try:
            deadline = time.monotonic() + 5
            while not self.api.watches() and time.monotonic() < deadline:
                time.sleep(0.05)
            self.assertEqual(len(self.api.watches()), 1, "the WATCH never reached the server")
            time.sleep(0.3)
            self.assertIsNone(p.poll(), "the watch ended on its own")
            start = time.monotonic()
            p.send_signal(signal.SIGTERM)   # nsenter execs topocni: this pid is topocni's
            out, err = p.communicate(timeout=5)
        finally:
            if p.poll() is None:
                p.kill()
                p.communicate()
        self.assertLess(time.monotonic() - start, 1.0, "the watch took over a second to stop")
        self.assertEqual(p.returncode, 0, err)
        self.assertEqual([json.loads(l) for l in out.splitlines()],
                         [{"type": "END", "resourceVersion": "42", "connections": 1}])


if __name__ == "__main__":
    main()
