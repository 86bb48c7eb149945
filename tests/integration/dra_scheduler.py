"""kube-scheduler's DRA allocator, as a test oracle: a client of tests/dra_allocator (a Go
program on k8s.io/dynamic-resource-allocation v0.37.2 with kube-scheduler v1.37.2's own
feature mapping), run once per test class and spoken to in JSON lines.

    s = Scheduler()                                   # None of it when the program is missing
    s.about()          # {"implementation": Go package, "features": {...}, "celFeatures": {...}}
    s.allocate(node, slices, classes, claims, allocated=())
        # per claim, in order, on top of `allocated` and the claims before it:
        # {"claim", "outcome": "allocated" | "unfit" | "error", "allocation"?, "error"?}
    s.cel(expressions, devices)  # devices: [(driver, device)], per expression:
        # {"expression", "compileError"?, "matches": [bool | None], "errors": [str]}

The program's path is $TOPOCNI_DRA_ALLOCATOR (make test builds it; see the Makefile).
"""
import json
import os
import subprocess

ENV = "TOPOCNI_DRA_ALLOCATOR"
INCUBATING = "k8s.io/dynamic-resource-allocation/structured/internal/incubating"


def program():
    """The allocator program's path, or None (with the reason) when it is not built."""
    path = os.environ.get(ENV)
    if not path:
        return None, f"${ENV} is not set (make test builds tests/dra_allocator when Go is installed)"
    if not os.access(path, os.X_OK):
        return None, f"${ENV}={path} is not an executable"
    return path, ""


class Scheduler:
    def __init__(self, path=None):
        path = path or program()[0]
        if not path:
            raise RuntimeError(program()[1])
        self.proc = subprocess.Popen([path], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, bufsize=1)

    def ask(self, request):
        self.proc.stdin.write(json.dumps(request, separators=(",", ":")) + "\n")
        self.proc.stdin.flush()
        line = self.proc.stdout.readline()
        if not line:
            raise RuntimeError(f"the allocator program exited ({self.proc.wait()})")
        answer = json.loads(line)
        if "error" in answer:
            raise RuntimeError(f"the allocator program: {answer['error']}")
        return answer

    def about(self):
        return self.ask({"op": "about"})

    def allocate(self, node, slices, classes, claims, allocated=()):
        return self.ask({"op": "allocate", "node": node, "slices": list(slices), "classes": list(classes),
                         "allocated": list(allocated), "claims": list(claims)})["results"]

    def cel(self, expressions, devices):
        return self.ask({"op": "cel", "expressions": list(expressions),
                         "devices": [{"driver": d, "device": dev} for d, dev in devices]})["results"]

    def close(self):
        if self.proc.poll() is None:
            self.proc.stdin.close()
            self.proc.wait(timeout=10)
