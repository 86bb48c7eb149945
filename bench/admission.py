#!/usr/bin/python3
"""The admission webhook at the speed issue 20 names: one AdmissionReview for a pod with 3 topocni
NADs (NADs cached) over loopback TLS, on one kept-alive connection as the API server calls it;
a pod with no topocni network (the fast path); requests per second with 4 concurrent clients,
each on its own kept-alive TLS connection; a burst (issue 29): 500 reviews at once, each on a new
TLS connection, at the default --max-connections, as a Deployment scaled to 500 makes the API
server call (answered, p50/p99 from the starting gun, the wall time against the example's
timeoutSeconds of 5 s); the server's memory.

    bench/admission.py --topocni build-release/topocni [--requests 2000] [--seconds 10] [--burst 500] [--out bench/results]
    bench/admission.py --quick ...      a few requests, a burst of 100 (the ctest smoke test)

A stand-in API (the tests' fakenode.ClusterApi, plain HTTP on loopback) serves 3 NADs: macvlan with bandwidth, host-local IPAM
and a nodeSelector; SR-IOV (resourceName intel.com/sriov) with bandwidth; a conflist whose
topocni macvlan plugin has a matchExpressions nodeSelector. Its WATCH requests stay open
quietly. The webhook serves TLS with a throw-away certificate for 127.0.0.1. Only latencies and
rates are reported; nothing is asserted but that every answer is well formed: allowed, the
request's uid, and a non-empty JSONPatch for the 3-NAD pod (none for the fast path).
"""
import asyncio
import base64
import http.client
import json
import multiprocessing
import os
import shutil
import ssl
import subprocess
import tempfile
import time

from standin import bench_main, free_port, memory, percentile, start_api, stop

NAD_PATH = "/apis/k8s.cni.cncf.io/v1/network-attachment-definitions"


def nads(data_dir):
    def nad(name, config, resource=None):
        md = {"name": name, "namespace": "default", "uid": f"nad-{name}", "resourceVersion": "1"}
        if resource:
            md["annotations"] = {"k8s.v1.cni.cncf.io/resourceName": resource}
        return {"apiVersion": "k8s.cni.cncf.io/v1", "kind": "NetworkAttachmentDefinition", "metadata": md,
                "spec": {"config": json.dumps(config)}}
    bw = {"egressRate": 100_000_000, "ingressRate": 100_000_000}
    ipam = lambda subnet: {"type": "host-local", "subnet": subnet, "dataDir": data_dir}
    macvlan = {"cniVersion": "1.0.0", "name": "mv", "type": "topocni", "attachment": "macvlan", "master": "eth1",
               "bandwidth": bw, "ipam": ipam("10.10.0.0/16"),
               "nodeSelector": {"topology.kubernetes.io/zone": "a"}}
    sriov = {"cniVersion": "1.0.0", "name": "vf", "type": "topocni", "attachment": "sriov", "bandwidth": bw,
             "ipam": ipam("10.11.0.0/16")}
    conflist = {"cniVersion": "1.0.0", "name": "mvl", "plugins": [
        {"type": "topocni", "attachment": "macvlan", "master": "eth2", "ipam": ipam("10.12.0.0/16"),
         "nodeSelector": {"matchExpressions": [{"key": "topocni.io/eth2", "operator": "Exists"}]}},
        {"type": "tuning", "sysctl": {"net.ipv4.conf.all.log_martians": "0"}}]}
    return [nad("mv", macvlan), nad("vf", sriov, "intel.com/sriov"), nad("mvl", conflist)]


def make_cert(d):
    """A self-signed P-256 certificate for IP 127.0.0.1; the clients trust exactly it."""
    subprocess.run(["openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes",
                    "-keyout", "tls.key", "-out", "tls.crt", "-days", "2", "-subj", "/CN=127.0.0.1",
                    "-addext", "subjectAltName=IP:127.0.0.1", "-addext", "extendedKeyUsage=serverAuth"],
                   cwd=d, check=True, capture_output=True)
    return os.path.join(d, "tls.crt"), os.path.join(d, "tls.key")


def review(uid, pod):
    """An AdmissionReview shaped like the API server's for a pod CREATE."""
    return json.dumps({"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "request": {
        "uid": uid, "kind": {"group": "", "version": "v1", "kind": "Pod"},
        "resource": {"group": "", "version": "v1", "resource": "pods"},
        "requestKind": {"group": "", "version": "v1", "kind": "Pod"},
        "requestResource": {"group": "", "version": "v1", "resource": "pods"},
        "namespace": "default", "operation": "CREATE",
        "userInfo": {"username": "system:serviceaccount:kube-system:replicaset-controller",
                     "uid": "0d3b6a1e-7a57-4a41-a3c5-9ab8f0d0b0f1",
                     "groups": ["system:serviceaccounts", "system:serviceaccounts:kube-system", "system:authenticated"]},
        "object": pod, "oldObject": None, "dryRun": False,
        "options": {"apiVersion": "meta.k8s.io/v1", "kind": "CreateOptions"}}}).encode()


def pod(networks):
    annotations = {"kubectl.kubernetes.io/default-container": "app"}
    if networks:
        annotations["k8s.v1.cni.cncf.io/networks"] = networks
    return {"apiVersion": "v1", "kind": "Pod",
            "metadata": {"generateName": "web-7c9d8f6b5-", "namespace": "default",
                         "labels": {"app": "web", "pod-template-hash": "7c9d8f6b5"}, "annotations": annotations,
                         "ownerReferences": [{"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "web-7c9d8f6b5",
                                              "uid": "5e0a1c7e-2b0f-4a55-9d0e-3f1f1e2d3c4b", "controller": True,
                                              "blockOwnerDeletion": True}]},
            "spec": {"containers": [{"name": "app", "image": "registry.example/web:1.4.2",
                                     "ports": [{"containerPort": 8080, "protocol": "TCP"}],
                                     "resources": {"requests": {"cpu": "250m", "memory": "256Mi"},
                                                   "limits": {"memory": "256Mi"}},
                                     "terminationMessagePath": "/dev/termination-log",
                                     "terminationMessagePolicy": "File", "imagePullPolicy": "IfNotPresent"}],
                     "restartPolicy": "Always", "terminationGracePeriodSeconds": 30, "dnsPolicy": "ClusterFirst",
                     "serviceAccountName": "default", "schedulerName": "default-scheduler",
                     "tolerations": [{"key": "node.kubernetes.io/not-ready", "operator": "Exists",
                                      "effect": "NoExecute", "tolerationSeconds": 300}]}}


PODS = {"3 topocni NADs": "mv,vf@net2,mvl", "no topocni network": ""}


def problem(data, uid, want_patch):
    """What is wrong with an answer, or None."""
    try:
        r = json.loads(data)
        res = r["response"]
        if r.get("apiVersion") != "admission.k8s.io/v1" or r.get("kind") != "AdmissionReview":
            return "not an admission.k8s.io/v1 AdmissionReview"
        if res.get("uid") != uid:
            return f"uid {res.get('uid')!r}, asked {uid!r}"
        if res.get("allowed") is not True:
            return f"not allowed: {res.get('status')}"
        if want_patch:
            if res.get("patchType") != "JSONPatch":
                return f"patchType {res.get('patchType')!r}"
            patch = json.loads(base64.b64decode(res["patch"], validate=True))
            if not isinstance(patch, list) or not patch or not all("op" in p and "path" in p for p in patch):
                return f"patch not a non-empty JSONPatch: {patch!r}"[:300]
        elif "patch" in res:
            return "a patch for a pod with no topocni network"
    except (ValueError, KeyError, TypeError) as e:
        return f"malformed answer ({e}): {data[:200]!r}"
    return None


def connect(port, cafile):
    ctx = ssl.create_default_context(cafile=cafile)
    c = http.client.HTTPSConnection("127.0.0.1", port, timeout=30, context=ctx)
    c.connect()
    return c


def post(c, body):
    c.request("POST", "/mutate", body, {"Content-Type": "application/json", "Accept": "application/json"})
    r = c.getresponse()
    data = r.read()
    if r.status != 200:
        return None, f"HTTP {r.status}: {data[:200]!r}"
    return data, None


def serial(port, cafile, label, count):
    """`count` reviews one after another on one kept-alive connection (as the API server does)."""
    c = connect(port, cafile)
    bodies = [(f"{label[:2]}-{i:08d}", None) for i in range(count)]
    bodies = [(uid, review(uid, pod(PODS[label]))) for uid, _ in bodies]
    times, errors = [], []
    for uid, body in bodies:
        t = time.perf_counter()
        data, err = post(c, body)
        times.append(time.perf_counter() - t)
        err = err or problem(data, uid, bool(PODS[label]))
        if err:
            errors.append(err)
    c.close()
    return times, errors, len(bodies[0][1])


def client_process(port, cafile, seconds, idx, barrier, q):
    """One concurrent client: its own kept-alive TLS connection, as many reviews as fit in `seconds`
    after the starting gun (all clients connected)."""
    try:
        c = connect(port, cafile)
        body_of = lambda uid: review(uid, pod(PODS["3 topocni NADs"]))
        times, errors, n = [], [], 0
        uid = f"c{idx}-{n:08d}"
        body = body_of(uid)
        barrier.wait(timeout=120)
        end = time.monotonic() + seconds
        while time.monotonic() < end:
            t = time.perf_counter()
            data, err = post(c, body)
            times.append(time.perf_counter() - t)
            err = err or problem(data, uid, True)
            if err:
                errors.append(err)
            n += 1
            uid = f"c{idx}-{n:08d}"
            body = body_of(uid)
        q.put((times, errors, time.monotonic()))
        c.close()
    except Exception as e:   # noqa: BLE001 (reported, not lost in a child)
        q.put(([], [f"client {idx}: {e!r}"], time.monotonic()))


def concurrent(port, cafile, clients, seconds):
    """Requests per second: wall time from the starting gun to the last client done
    (CLOCK_MONOTONIC is the same clock in every process)."""
    ctx = multiprocessing.get_context("spawn")   # no fork of a process with the stand-in API's threads
    q, barrier = ctx.Queue(), ctx.Barrier(clients + 1)
    ps = [ctx.Process(target=client_process, args=(port, cafile, seconds, i, barrier, q)) for i in range(clients)]
    for p in ps:
        p.start()
    barrier.wait(timeout=120)
    start = time.monotonic()
    results = [q.get(timeout=seconds + 120) for _ in ps]
    for p in ps:
        p.join()
    times = [t for ts, _, _ in results for t in ts]
    errors = [e for _, es, _ in results for e in es]
    return times, errors, max(end for _, _, end in results) - start


async def burst_call(port, ctx, body, start):
    """One review on a new TLS connection: (seconds from the gun to the answer read, status, data)."""
    try:
        reader, writer = await asyncio.open_connection("127.0.0.1", port, ssl=ctx, server_hostname="127.0.0.1")
        try:
            writer.write(b"POST /mutate HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
                         b"Content-Length: %d\r\n\r\n" % len(body) + body)
            await writer.drain()
            status = int((await reader.readline()).split()[1])
            length = 0
            while (line := await reader.readline()) not in (b"\r\n", b""):
                if line.lower().startswith(b"content-length:"):
                    length = int(line.split(b":")[1])
            data = await reader.readexactly(length)
        finally:
            writer.close()
        return time.monotonic() - start, status, data
    except (OSError, ValueError, IndexError, asyncio.IncompleteReadError, ssl.SSLError) as e:
        return time.monotonic() - start, None, repr(e)


def burst_process(port, cafile, count, idx, barrier, q):
    """`count` reviews at once from one process (asyncio), after the starting gun."""
    ctx = ssl.create_default_context(cafile=cafile)
    bodies = [(f"b{idx}-{i:05d}", review(f"b{idx}-{i:05d}", pod(PODS["3 topocni NADs"]))) for i in range(count)]

    async def all_at_once():
        start = time.monotonic()
        return await asyncio.gather(*(burst_call(port, ctx, body, start) for _, body in bodies))

    barrier.wait(timeout=120)
    results = asyncio.run(all_at_once())
    out = []
    for (uid, _), (t, status, data) in zip(bodies, results):
        if status is None:
            out.append((t, f"closed: {data}"))
        elif status != 200:
            out.append((t, f"HTTP {status}: {data[:200]!r}"))
        else:
            out.append((t, problem(data, uid, True)))
    q.put(out)


def burst(port, cafile, count, processes=4):
    """`count` reviews at once, each on its own new TLS connection, from `processes` client
    processes (one Python process cannot make 500 TLS handshakes quickly enough itself)."""
    ctx = multiprocessing.get_context("spawn")
    q, barrier = ctx.Queue(), ctx.Barrier(processes + 1)
    shares = [count // processes + (1 if i < count % processes else 0) for i in range(processes)]
    ps = [ctx.Process(target=burst_process, args=(port, cafile, n, i, barrier, q)) for i, n in enumerate(shares)]
    for p in ps:
        p.start()
    barrier.wait(timeout=120)
    results = [r for _ in ps for r in q.get(timeout=300)]
    for p in ps:
        p.join()
    times = [t for t, err in results if err is None]
    errors = [err for _, err in results if err is not None]
    out = stats(times, errors)
    out.update({"sent": count, "answered": len(times), "wall_s": max(t for t, _ in results)})
    return out


def stats(times, errors, wall=None, body=None):
    out = {"requests": len(times), "errors": len(errors)}
    if times:
        out.update({"p50_ms": 1000 * percentile(times, 50), "p90_ms": 1000 * percentile(times, 90),
                    "p99_ms": 1000 * percentile(times, 99), "max_ms": 1000 * max(times)})
    if wall:
        out["rps"] = len(times) / wall
    if body:
        out["body_bytes"] = body
    if errors:
        out["first_errors"] = errors[:3]
    return out


def run(args):
    tmp = tempfile.mkdtemp(prefix="topocni-bench-adm-")
    api, kc = start_api(tmp, nads=nads(os.path.join(tmp, "ipam")))
    cert, key = make_cert(tmp)
    port = free_port()
    log_path = os.path.join(tmp, "webhook.log")
    proc = subprocess.Popen([args.topocni, "admission-webhook", "--listen", f"127.0.0.1:{port}", "--tls-cert", cert,
                             "--tls-key", key, "--kubeconfig", kc, "--max-connections", "8"],
                            stderr=open(log_path, "w"))
    out = {"quick": args.quick, "nads": 3, "clients": args.clients, "tls": "loopback, P-256 certificate", "cpus": os.cpu_count(),
           "loadavg_at_start": os.getloadavg()[0]}
    try:
        # Ready: the NADs listed and a WATCH open after the LIST, and the port answering.
        deadline = time.time() + 60
        while not api.watching(NAD_PATH):
            if proc.poll() is not None or time.time() > deadline:
                raise SystemExit(f"the webhook never watched the NADs (exit {proc.poll()}): {open(log_path).read()}")
            time.sleep(0.05)
        while True:
            try:
                c = connect(port, cert)
                c.request("GET", "/healthz")
                c.getresponse().read()
                c.close()
                break
            except OSError:
                if proc.poll() is not None or time.time() > deadline:
                    raise SystemExit(f"the webhook never answered (exit {proc.poll()}): {open(log_path).read()}")
                time.sleep(0.05)
        out["memory_idle"] = memory(proc.pid)

        # The first review of all: a new connection's handshake, then each NAD parsed once.
        t = time.perf_counter()
        c = connect(port, cert)
        out["tls_handshake_ms"] = 1000 * (time.perf_counter() - t)
        body = review("first", pod(PODS["3 topocni NADs"]))
        t = time.perf_counter()
        data, err = post(c, body)
        out["first_review_ms"] = 1000 * (time.perf_counter() - t)
        c.close()
        err = err or problem(data, "first", True)
        if err:
            raise SystemExit(f"first review: {err}")
        out["sample_patch"] = json.loads(base64.b64decode(json.loads(data)["response"]["patch"]))

        for label in PODS:   # warm-up, then the timed run, one kept-alive connection each
            serial(port, cert, label, args.warmup)
            times, errors, size = serial(port, cert, label, args.requests)
            out[f"{label}, 1 connection"] = stats(times, errors, body=size)
        times, errors, wall = concurrent(port, cert, args.clients, args.seconds)
        out[f"3 topocni NADs, {args.clients} clients"] = stats(times, errors, wall=wall)
        out["memory_before_burst"] = memory(proc.pid)
        out["burst"] = burst(port, cert, args.burst)
        out["memory_end"] = memory(proc.pid)
        out["api_requests"] = len(api.logged())   # LIST + WATCH only: every NAD came from the cache
        return out
    finally:
        out["exit_status"] = stop(proc)
        api.stop()
        with open(log_path) as f:
            lines = f.read().splitlines()
        out["server_log_lines"] = len(lines)
        odd = [l for l in lines if "warn" in l.lower() or "error" in l.lower()]
        if odd:
            out["server_log_warnings"] = odd[:10]
        shutil.rmtree(tmp, ignore_errors=True)


def markdown(res):
    one = res["3 topocni NADs, 1 connection"]
    fast = res["no topocni network, 1 connection"]
    conc = next(v for k, v in res.items() if k.startswith("3 topocni NADs,") and "clients" in k)
    b = res["burst"]
    met = "met" if one.get("p99_ms", 1e9) < 2 else "not met"
    lines = [
        "# Admission webhook (issue 20)",
        "",
        f"`bench/admission.py`: the webhook over loopback TLS, {res['cpus']} CPUs, load average "
        f"{res['loadavg_at_start']:.2f} at the start. NADs cached (the stand-in API saw {res['api_requests']} requests: "
        "LIST and WATCH). Latency is client-side, request written to answer read, on one kept-alive connection.",
        "",
        "| pod | requests | p50 ms | p90 ms | p99 ms | max ms |",
        "|---|---|---|---|---|---|",
    ]
    for label, s in (("3 topocni NADs", one), ("no topocni network (fast path)", fast)):
        lines.append(f"| {label} | {s['requests']} | {s['p50_ms']:.3f} | {s['p90_ms']:.3f} | {s['p99_ms']:.3f} | "
                     f"{s['max_ms']:.3f} |")
    lines += [
        "",
        f"Target: p99 under 2 ms for 3 NADs: **{met}** ({one['p99_ms']:.3f} ms"
        + (", --quick: too few requests to say)." if res.get("quick") else ")."),
        "",
        f"Concurrent: {conc['requests']} reviews (3 NADs) from {res['clients']} client processes, each on its own kept-alive "
        f"connection: **{conc['rps']:.0f} requests/s**, p50 {conc['p50_ms']:.3f} ms, p99 {conc['p99_ms']:.3f} ms "
        "(clients and server share the CPUs; Python clients are part of what limits the rate).",
        "",
        f"First review on a fresh connection: TLS handshake {res['tls_handshake_ms']:.2f} ms, then the review "
        f"{res['first_review_ms']:.2f} ms (each NAD parsed once).",
        "",
        f"Burst: {b['sent']} reviews (3 NADs) at once, each on a new TLS connection, at the default 8 connections "
        f"(4 client processes): **{b['answered']} answered**, {b['errors']} not; from the starting gun p50 "
        f"{b.get('p50_ms', 0):.0f} ms, p99 {b.get('p99_ms', 0):.0f} ms, all within {b['wall_s']:.2f} s "
        f"(the example's timeoutSeconds: 5 s). Peak RSS (VmHWM) {res['memory_before_burst'].get('VmHWM')} before the "
        f"burst, {res['memory_end'].get('VmHWM')} after.",
        "",
        f"Memory: idle RSS {res['memory_idle'].get('VmRSS')}; after the run RSS {res['memory_end'].get('VmRSS')}, "
        f"peak (VmHWM) {res['memory_end'].get('VmHWM')}, {res['memory_end'].get('Threads')} threads.",
        "",
    ]
    return "\n".join(lines)


def main():
    def quick(args):
        args.requests, args.warmup, args.seconds, args.burst = 20, 3, 1, 100
    bench_main("admission", {"--requests": 2000, "--warmup": 200, "--clients": 4, "--seconds": 10.0, "--burst": 500},
               quick, run, markdown)


if __name__ == "__main__":
    main()
