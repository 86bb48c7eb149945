#!/usr/bin/env python3
"""Builds the upstream binaries the cluster tests run (kube-apiserver, kube-controller-manager,
kube-scheduler, kubelet from ./kube; etcd from ./etcd) into a cache outside the repository,
and prints the directory that holds them.

The cache entry's key is a hash of everything that shapes the binaries: Go's version and
target, both modules' go.mod and go.sum (every module version), the wrapper's source, the
build tags and the ldflags. An entry is built in a temporary directory beside it, its
checksums written (SHA256SUMS), and renamed into place: a reader never sees half an entry.
A hit is checked against its checksums before it is used; a bad entry is removed and built
again. A second run with nothing changed builds nothing.

usage: build.py [--cache DIR]   (default $TOPOCNI_TOOLS_CACHE, else ~/.cache/topocni/cluster-tools)
"""
import argparse
import hashlib
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
KUBE_CMDS = ["kube-apiserver", "kube-controller-manager", "kube-scheduler", "kubelet"]
TAGS = ""   # none: the Kubernetes and etcd defaults
ENV = {"CGO_ENABLED": "0", "GOFLAGS": "-buildvcs=false"}


def go():
    return shutil.which("go") or ("/usr/local/go/bin/go" if os.access("/usr/local/go/bin/go", os.X_OK) else None)


def kubernetes_version():
    with open(os.path.join(HERE, "kube", "go.mod")) as f:
        m = re.search(r"^\s*(?:require\s+)?k8s\.io/kubernetes (v\d+\.\d+\.\d+)\b", f.read(), re.M)
    if not m:
        raise SystemExit("tests/cluster_tools/kube/go.mod: no 'require k8s.io/kubernetes vX.Y.Z' line")
    return m.group(1)


def kube_ldflags(version):
    major, minor = version[1:].split(".")[:2]
    x = "k8s.io/component-base/version"
    return (f"-s -w -X {x}.gitVersion={version} -X {x}.gitMajor={major} -X {x}.gitMinor={minor} "
            f"-X {x}.gitTreeState=clean")


def key(gobin, version):
    h = hashlib.sha256()
    out = subprocess.run([gobin, "env", "GOVERSION", "GOOS", "GOARCH"], capture_output=True, text=True, check=True)
    parts = [out.stdout, TAGS, kube_ldflags(version), "-s -w", repr(sorted(ENV.items())), "-trimpath"]
    for rel in ("kube/go.mod", "kube/go.sum", "etcd/go.mod", "etcd/go.sum", "etcd/main.go"):
        with open(os.path.join(HERE, rel), "rb") as f:
            parts.append(rel + "\0" + hashlib.sha256(f.read()).hexdigest())
    for p in parts:
        h.update(p.encode() + b"\0")
    return h.hexdigest()[:24], "\n".join(parts)


def sums(bindir):
    lines = []
    for name in sorted(os.listdir(bindir)):
        with open(os.path.join(bindir, name), "rb") as f:
            lines.append(f"{hashlib.file_digest(f, 'sha256').hexdigest()}  {name}")
    return "\n".join(lines) + "\n"


def good(entry):
    try:
        with open(os.path.join(entry, "SHA256SUMS")) as f:
            want = f.read()
        names = {line.split("  ", 1)[1] for line in want.splitlines()}
        return names == set(KUBE_CMDS + ["etcd"]) and sums(os.path.join(entry, "bin")) == want
    except (OSError, IndexError):
        return False


def build(gobin, version, tmp):
    bindir = os.path.join(tmp, "bin")
    os.makedirs(bindir)
    env = dict(os.environ, **ENV)
    t0 = time.monotonic()
    subprocess.run([gobin, "build", "-trimpath", "-ldflags", kube_ldflags(version), "-o", bindir + "/",
                    *[f"k8s.io/kubernetes/cmd/{c}" for c in KUBE_CMDS]], cwd=os.path.join(HERE, "kube"), env=env, check=True)
    t1 = time.monotonic()
    subprocess.run([gobin, "build", "-trimpath", "-ldflags", "-s -w", "-o", os.path.join(bindir, "etcd"), "."],
                   cwd=os.path.join(HERE, "etcd"), env=env, check=True)
    t2 = time.monotonic()
    print(f"cluster-tools: built the Kubernetes binaries in {t1 - t0:.0f} s, etcd in {t2 - t1:.0f} s", file=sys.stderr)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--cache", default=os.environ.get("TOPOCNI_TOOLS_CACHE")
                    or os.path.join(os.path.expanduser("~"), ".cache", "topocni", "cluster-tools"))
    args = ap.parse_args()
    gobin = go()
    if not gobin:
        raise SystemExit("cluster-tools: Go is not installed (the cluster tests need it)")
    version = kubernetes_version()
    k, text = key(gobin, version)
    os.makedirs(args.cache, exist_ok=True)
    for name in os.listdir(args.cache):   # a build killed half-way, hours ago
        p = os.path.join(args.cache, name)
        if name.startswith((".build-", ".bad-")) and time.time() - os.path.getmtime(p) > 6 * 3600:
            shutil.rmtree(p, ignore_errors=True)
    entry = os.path.join(args.cache, k)
    if os.path.isdir(entry):
        if good(entry):
            print(f"cluster-tools: cached ({k})", file=sys.stderr)
            print(os.path.join(entry, "bin"))
            return
        print(f"cluster-tools: entry {k} fails its checksums: built again", file=sys.stderr)
        bad = tempfile.mkdtemp(prefix=".bad-", dir=args.cache)
        os.rename(entry, os.path.join(bad, "entry"))
        shutil.rmtree(bad, ignore_errors=True)
    tmp = tempfile.mkdtemp(prefix=".build-", dir=args.cache)
    try:
        build(gobin, version, tmp)
        with open(os.path.join(tmp, "SHA256SUMS"), "w") as f:
            f.write(sums(os.path.join(tmp, "bin")))
        with open(os.path.join(tmp, "KEY"), "w") as f:
            f.write(text + "\n")
        try:
            os.rename(tmp, entry)
        except OSError:   # another build put the same entry in place first: use it
            if not good(entry):
                raise
            shutil.rmtree(tmp, ignore_errors=True)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    print(os.path.join(entry, "bin"))


if __name__ == "__main__":
    main()
