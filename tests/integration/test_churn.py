"""Churn and concurrency: thousands of ADD/DEL cycles leave nothing behind (no link, no
route, and of the files under the test's temp dir nothing but named bookkeeping), and GC
interleaved with ADDs and DELs of one network never releases a live attachment."""
import concurrent.futures
import json
import subprocess
import os
import random
import threading
import time

from cnitest import BIN, NetnsTestCase, main, sh

CYCLES = int(os.environ.get("TOPOCNI_CHURN_CYCLES", "5000"))


class Churn(NetnsTestCase):
    def setUp(self):
        super().setUp()
        self.master = f"tc{self.tag}m"[:15]
        self.bridge = f"tc{self.tag}b"[:15]
        sh("ip", "link", "add", self.master, "type", "veth", "peer", "name", f"tc{self.tag}p"[:15], ns=self.node)
        sh("ip", "link", "set", self.master, "up", ns=self.node)
        self.pods = [self.make_pod() for _ in range(16)]

    def node_state(self):
        links = sorted(self.links(self.node))
        # Route flags such as "linkdown" follow the bridge's carrier, which the kernel
        # updates on its own schedule: compare what a plugin could have changed.
        routes = sorted(str({k: r.get(k) for k in ("type", "dst", "gateway", "dev", "protocol", "scope", "table")})
                        for fam in ("-4", "-6") for r in self.routes(self.node, fam)
                        if not r.get("dst", "").startswith(("fe80", "ff00")))
        return links, routes

    def test_thousands_of_add_del_cycles_leave_nothing(self):
        confs = {
            "veth": self.conf(name=f"cv{self.tag}", subnet="10.90.0.0/16", v6="fd90::/64"),
            "bridge": self.conf(name=f"cb{self.tag}", subnet="10.91.0.0/16", bridge=self.bridge, isGateway=True),
            "macvlan": self.conf(name=f"cm{self.tag}", subnet="10.92.0.0/16", attachment="macvlan",
                                 master=self.master),
        }
        at_start = self.files()
        # The bridge is shared state that outlives attachments: make it exist in the baseline.
        warm_ns, warm = self.pods[0]
        self.assertOk(self.run_plugin("ADD", confs["bridge"], container_id="warm", netns=warm))
        self.assertOk(self.run_plugin("DEL", confs["bridge"], container_id="warm", netns=warm))
        before = self.node_state()
        kinds = list(confs)
        failures = []
        lock = threading.Lock()

        def cycle(i):
            kind = kinds[i % len(kinds)]
            ns, path = self.pods[i % len(self.pods)]
            cid = f"churn{i}"
            # Pods are shared by several workers only through distinct ifnames.
            ifname = f"e{i % 97}"
            add = self.run_plugin("ADD", confs[kind], container_id=cid, netns=path, ifname=ifname)
            dele = self.run_plugin("DEL", confs[kind], container_id=cid, netns=path, ifname=ifname)
            if add.rc != 0 or dele.rc != 0:
                with lock:
                    failures.append((i, kind, add.stdout[-300:], dele.stdout[-300:]))

        # Workers never share an (ifname, pod) pair at the same time: i and i+k differ in
        # ifname unless k is a multiple of 97*16.
        with concurrent.futures.ThreadPoolExecutor(max_workers=4) as ex:
            list(ex.map(cycle, range(CYCLES)))
        self.assertEqual(failures[:5], [], f"{len(failures)} cycles failed")
        self.assertEqual(self.node_state(), before, "the node netns changed")
        for ns, _ in self.pods:
            self.assertEqual(set(self.links(ns)), {"lo"}, f"links left in {ns}")
        self.assertOnlyBookkeepingLeft(at_start, f"{CYCLES} ADD/DEL cycles of {', '.join(confs)}")

    def test_gc_interleaved_with_adds_and_dels_never_releases_a_live_attachment(self):
        conf = self.conf(subnet="10.93.0.0/16")
        at_start = self.files()
        started = {}           # cid -> (pod path, ifname) for every ADD begun and not yet fully DEL'd
        done = set()           # ADD completed successfully, not DEL'd
        mu = threading.Lock()
        stop = threading.Event()
        errors = []

        # A pod holds at most one live attachment of this network (as in real life):
        # attachments that stay get a pod of their own, the others share a scratch pod.
        plans = []
        for w in range(3):
            rnd = random.Random(w)
            keep = [rnd.random() >= 0.7 for _ in range(60)]
            scratch = self.make_pod()
            plans.append([(n, keep[n], self.make_pod() if keep[n] else scratch) for n in range(60)])

        def worker(w):
            for n, keep, (ns, path) in plans[w]:
                cid = f"w{w}n{n}"
                ifname = "net1"
                with mu:
                    started[cid] = (path, ifname)
                out = self.run_plugin("ADD", conf, container_id=cid, netns=path, ifname=ifname)
                if out.rc != 0:
                    errors.append(("ADD", cid, out.stdout[-300:]))
                    continue
                with mu:
                    done.add(cid)
                if not keep:
                    with mu:
                        done.discard(cid)
                    d = self.run_plugin("DEL", conf, container_id=cid, netns=path, ifname=ifname)
                    if d.rc != 0:
                        errors.append(("DEL", cid, d.stdout[-300:]))
                    with mu:
                        del started[cid]

        def collector():
            env = {"PATH": os.environ.get("PATH", ""), "CNI_COMMAND": "GC", "CNI_PATH": "/usr/lib/cni"}
            while not stop.is_set():
                # The valid list and the start of GC happen while no new ADD can begin, as
                # in a runtime that asks GC with the attachments it knows of at that moment.
                with mu:
                    gc = dict(conf)
                    gc["cni.dev/valid-attachments"] = [{"containerID": c, "ifname": i}
                                                       for c, (p, i) in started.items()]
                    proc = subprocess.Popen(["nsenter", f"--net=/run/netns/{self.node}", BIN], env=env,
                                            stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
                    time.sleep(0.02)   # let GC start before new ADDs may begin
                out, _ = proc.communicate(json.dumps(gc))
                if proc.returncode != 0:
                    errors.append(("GC", out[-300:]))

        gc_thread = threading.Thread(target=collector)
        gc_thread.start()
        with concurrent.futures.ThreadPoolExecutor(max_workers=3) as ex:
            list(ex.map(worker, range(3)))
        stop.set()
        gc_thread.join()
        self.assertEqual(errors[:5], [], "\n".join(str(e) for e in errors[:3]))
        # Every attachment still live has its address and its host link.
        files = set(self.ipam_files(conf["name"]))
        self.assertEqual(len(files), len(done), "GC released a live attachment (or leaked one)")
        for cid in done:
            path, ifname = started[cid]
            self.assertOk(self.run_plugin("DEL", conf, container_id=cid, netns=path, ifname=ifname))
        self.assertEqual(self.ipam_files(conf["name"]), [])
        self.assertEqual(set(self.links(self.node)), {"lo", self.master, f"tc{self.tag}p"[:15]})
        self.assertOnlyBookkeepingLeft(at_start, "ADDs, DELs and GCs, then DEL of every live attachment")


if __name__ == "__main__":
    main()
