#!/usr/bin/env python3
"""Prints the replace block a module depending on k8s.io/kubernetes needs: that module's
go.mod maps every staging module (k8s.io/api, k8s.io/client-go, ...) to ./staging/src,
which only resolves inside its own repository; outside it each maps to its release.

usage: gen_replace.py v1.37.2   (staging modules at v0.37.2)
"""
import json
import re
import subprocess
import sys


def main(version):
    info = json.loads(subprocess.run(["go", "mod", "download", "-json", f"k8s.io/kubernetes@{version}"],
                                     check=True, capture_output=True, text=True).stdout)
    with open(info["GoMod"]) as f:
        mod = f.read()
    staging = "v0." + version.split(".", 1)[1]
    names = re.findall(r"^\s*(k8s\.io/[\w.-]+) => \./staging/src/k8s\.io/[\w.-]+\s*$", mod, re.M)
    print("replace (")
    for n in names:
        print(f"\t{n} => {n} {staging}")
    print(")")


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else "v1.37.2")
