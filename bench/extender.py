#!/usr/bin/python3
"""The scheduler extender at the scale the issue names: filter for one pod with 3 topocni NADs
over 5,000 candidate nodes, names only (nodeCacheCapable: true) and full Node objects, over
loopback; prioritize too; requests per second with 2 concurrent clients; the server's peak
memory with 5,000 nodes' facts cached.

    bench/extender.py --topocni build-release/topocni [--nodes 5000] [--requests 200] [--out bench/results]
    bench/extender.py --quick ...      a few requests over 200 nodes (the ctest smoke test)

A stand-in API (the tests' fakenode.ClusterApi, plain HTTP on loopback) serves the nodes, each with a facts document of 2 PFs
of 16 VFs and a macvlan master, 3 NADs (SR-IOV, SR-IOV, macvlan) and no pending pods; its
WATCH requests stay open quietly. Only latency percentiles are reported; nothing is asserted
but that every answer is well formed and every node fits. The Node-objects filter is also
timed from curl (where installed): Python's client spends its own CPU on 11 MB each way, on
the same cores as the server.
"""
import http.client
import json
import os
import shutil
import socket
import subprocess
import tempfile
import threading
import time

from standin import bench_main, free_port, memory, percentile, start_api, stop


def facts(name, i):
    pfs = []
    for p in range(2):
        vfs = [f"0000:{0x3b + p:02x}:{2 + v // 8:02x}.{v % 8}" for v in range(16)]
        in_use = {vfs[k]: f"{i:08x}-0000-4000-8000-{k:012x}" for k in range(i % 8)}
        pfs.append({"pci": f"0000:{0x3b + p:02x}:00.0", "netdev": f"ens{p}f0", "numaNode": p, "speedMbps": 25000,
                    "resourceName": f"intel.com/sriov_{p}", "totalVFs": 64, "usageKnown": True,
                    "configuredVFs": 16, "inUseVFs": len(in_use), "freeVFs": 16 - len(in_use), "vfs": vfs,
                    "vfNumaNodes": {}, "vfsInUse": in_use})
    return {"version": 1, "node": name, "takenAt": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
            "numaNodes": [{"id": 0, "cpus": "0-31"}, {"id": 1, "cpus": "32-63"}], "pfs": pfs,
            "links": [{"name": "eth1", "exists": True, "pci": "0000:18:00.0", "pf": "", "hasDevice": True, "numaNode": 0,
                       "speedMbps": 25000, "linksKind": "macvlan", "linkCount": i % 5, "linkSample": []}],
            "ledgers": [], "networks": [], "attachments": []}


def node(i):
    name = f"worker-{i:05d}"
    return {"apiVersion": "v1", "kind": "Node",
            "metadata": {"name": name, "resourceVersion": str(i + 1),
                         "labels": {"kubernetes.io/hostname": name, "topology.kubernetes.io/zone": "a"},
                         "annotations": {"topocni.io/facts": json.dumps(facts(name, i))}},
            "status": {"capacity": {"cpu": "64", "memory": "256Gi"}}}


def nads():
    def nad(name, conf, resource=None):
        md = {"name": name, "namespace": "default", "resourceVersion": "1"}
        if resource:
            md["annotations"] = {"k8s.v1.cni.cncf.io/resourceName": resource}
        return {"apiVersion": "k8s.cni.cncf.io/v1", "kind": "NetworkAttachmentDefinition", "metadata": md,
                "spec": {"config": json.dumps(conf)}}
    # The two PFs sit on NUMA nodes 0 and 1: a pod asking single-numa-node of both could go
    # nowhere (kubelet's Topology Manager would refuse it), so the second asks restricted.
    def topo(p):
        return {"numaPolicy": "single-numa-node" if p == 0 else "restricted", "minLinkSpeedMbps": 10000,
                "maxAttachmentsPerMaster": 16}
    return [nad(f"sriov-{p}", {"cniVersion": "1.0.0", "name": f"sriov-{p}", "type": "topocni", "attachment": "sriov",
                               "nodeSelector": {"topology.kubernetes.io/zone": "a"}, "topology": topo(p)},
                f"intel.com/sriov_{p}") for p in range(2)] + [
        nad("mv", {"cniVersion": "1.0.0", "name": "mv", "type": "topocni", "attachment": "macvlan", "master": "eth1",
                   "topology": {"maxAttachmentsPerMaster": 8, "minLinkSpeedMbps": 10000},
                   "ipam": {"type": "host-local", "subnet": "10.56.0.0/16"}})]


class Client:
    """HTTP/1.1 over one kept-alive socket, as a load generator does it: the request's bytes
    are sent as they are and the answer is read into one buffer reused from request to
    request. http.client allocates a fresh 11 MB bytes object per answer, and this VM pays
    ~10 us per page fault: ~30 ms of the client's own time that would be charged to the
    server."""

    def __init__(self, port):
        self.sock = socket.create_connection(("127.0.0.1", port))
        self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.buf = bytearray(1 << 20)

    def post(self, path, body):
        self.sock.sendall(b"POST %s HTTP/1.1\r\nHost: bench\r\nContent-Type: application/json\r\n"
                          b"Content-Length: %d\r\n\r\n" % (path.encode(), len(body)))
        self.sock.sendall(body)
        head = b""
        while b"\r\n\r\n" not in head:
            chunk = self.sock.recv(65536)
            if not chunk:
                raise OSError("the server closed the connection")
            head += chunk
        head, _, rest = head.partition(b"\r\n\r\n")
        status = head.split(b" ", 2)[1]
        length = next(int(line.split(b":", 1)[1]) for line in head.split(b"\r\n")[1:]
                      if line.lower().startswith(b"content-length:"))
        if len(self.buf) < length:
            self.buf = bytearray(length)
        view = memoryview(self.buf)
        view[:len(rest)] = rest
        got = len(rest)
        while got < length:
            n = self.sock.recv_into(view[got:length])
            if not n:
                raise OSError("the server closed the connection")
            got += n
        if status != b"200":
            raise OSError(f"HTTP {status.decode()}: {bytes(view[:200])!r}")
        return view[:length]


def run(args):
    tmp = tempfile.mkdtemp(prefix="topocni-bench-ext-")
    api, kc = start_api(tmp, nodes=[node(i) for i in range(args.nodes)], nads=nads())
    # The Node objects as the API holds them, resourceVersions and all: kube-scheduler's
    # informer and the extender's watch see the same objects.
    nodes = [api.nodes[n] for n in sorted(api.nodes)]
    port = free_port()
    proc = subprocess.Popen([args.topocni, "scheduler-extender", "--listen", f"127.0.0.1:{port}", "--kubeconfig", kc],
                            stderr=open(os.path.join(tmp, "extender.log"), "w"))
    try:
        pod = {"metadata": {"name": "bench", "namespace": "default", "uid": "b",
                            "annotations": {"k8s.v1.cni.cncf.io/networks": "sriov-0,sriov-1@net2,mv"}}}
        names = [n["metadata"]["name"] for n in nodes]
        by_names = json.dumps({"Pod": pod, "Nodes": None, "NodeNames": names}).encode()
        by_objects = json.dumps({"Pod": pod, "Nodes": {"items": nodes}, "NodeNames": None}).encode()
        # Wait until the node cache holds every node (every node then fits).
        deadline = time.time() + 120
        while True:
            try:
                c = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
                c.request("POST", "/filter", by_names)
                r = json.loads(c.getresponse().read())
                if len(r.get("NodeNames") or []) == len(names):
                    break
            except OSError:
                pass
            if time.time() > deadline:
                raise SystemExit(f"the extender never saw all nodes: {r if 'r' in dir() else 'no answer'}")
            time.sleep(0.5)

        def measure(verb, body, count, clients, check, warm=5):
            times, errors, start = [], [], []
            ready = threading.Barrier(clients, action=lambda: start.append(time.perf_counter()))

            def client(n):
                c = Client(port)
                for _ in range(warm):   # untimed: the server's heap grows to its high-water mark
                    c.post(verb, body)
                ready.wait()
                first, lengths = None, set()
                for _ in range(n):
                    t = time.perf_counter()
                    data = c.post(verb, body)
                    times.append(time.perf_counter() - t)
                    lengths.add(len(data))
                    if first is None:
                        first = bytes(data)
                # The same request gets the same answer: every one is as long as the first, and
                # the first and last are decoded and checked after the clock stops (decoding a
                # 10 MB answer in Python would hold the other client's thread, the GIL).
                done.append(time.perf_counter())
                answers = {first, bytes(data)}
                if len(lengths) != 1:
                    errors.append(f"answers of {len(lengths)} different lengths")
                for data in answers:
                    if not check(json.loads(data)):
                        errors.append(data[:200])
            done = []
            ts = [threading.Thread(target=client, args=(count // clients,)) for _ in range(clients)]
            for t in ts:
                t.start()
            for t in ts:
                t.join()
            wall = max(done) - start[0]
            return {"requests": len(times), "p50_ms": 1000 * percentile(times, 50), "p99_ms": 1000 * percentile(times, 99),
                    "max_ms": 1000 * max(times), "rps": len(times) / wall, "errors": len(errors), "body_bytes": len(body)}

        def measure_curl(verb, body, count, clients, check):
            # The same request from curl, a C client: its time_total excludes starting the
            # process, and it leaves the CPU to the server while Python would not.
            path = os.path.join(tmp, "body.json")
            with open(path, "wb") as f:
                f.write(body)
            times, errors = [], []

            def client(k):
                answer = os.path.join(tmp, f"answer-{k}.json")
                for _ in range(count // clients):
                    r = subprocess.run(["curl", "-s", "-H", "Expect:", "-o", answer, "-w", "%{time_total}",
                                        "--data-binary", "@" + path, f"http://127.0.0.1:{port}{verb}"],
                                       capture_output=True, text=True)
                    times.append(float(r.stdout or "nan"))
                with open(answer, "rb") as f:
                    data = f.read()
                if not check(json.loads(data)):
                    errors.append(data[:200])
            start = time.perf_counter()
            ts = [threading.Thread(target=client, args=(k,)) for k in range(clients)]
            for t in ts:
                t.start()
            for t in ts:
                t.join()
            return {"requests": len(times), "p50_ms": 1000 * percentile(times, 50), "p99_ms": 1000 * percentile(times, 99),
                    "errors": len(errors), "body_bytes": len(body)}

        all_fit = lambda r: len(r.get("NodeNames") or (r.get("Nodes") or {}).get("items") or []) == len(names)
        scored = lambda r: isinstance(r, list) and len(r) == len(names)
        out = {"nodes": args.nodes, "nads": 3}
        for label, verb, body, check in (("filter, node names", "/filter", by_names, all_fit),
                                         ("filter, Node objects", "/filter", by_objects, all_fit),
                                         ("prioritize, node names", "/prioritize", by_names, scored)):
            out[label + ", 1 client"] = measure(verb, body, args.requests, 1, check)
            out[label + ", 2 clients"] = measure(verb, body, args.requests, 2, check)
        if not args.quick and shutil.which("curl"):
            out["filter, Node objects, curl, 1 client"] = measure_curl("/filter", by_objects, args.requests, 1, all_fit)
            out["filter, Node objects, curl, 2 clients"] = measure_curl("/filter", by_objects, args.requests, 2, all_fit)
        out.update(memory(proc.pid))
        return out
    finally:
        stop(proc)
        api.stop()
        shutil.rmtree(tmp, ignore_errors=True)


def main():
    def quick(args):
        args.nodes, args.requests = 200, 6
    bench_main("extender", {"--nodes": 5000, "--requests": 200}, quick, run)


if __name__ == "__main__":
    main()
