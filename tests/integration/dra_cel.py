"""Python side of the test-only DRA CEL evaluator (dra_cel/cel_eval.mjs, on @bufbuild/cel).

    cel = Cel()                        # starts `node cel_eval.mjs` once
    cel.evaluate(expr, device)         # -> bool; CelError on an evaluation error
    cel.close()

`device` is a resource.k8s.io/v1 Device as a ResourceSlice serves it, plus the slice's
driver: {"driver", "name", "attributes", "capacity", "allowMultipleAllocations"}. The
evaluator shapes the CEL `device` variable from it as kube-scheduler does.
"""
import json
import os
import shutil
import subprocess
import threading

HERE = os.path.dirname(os.path.abspath(__file__))
CEL_DIR = os.path.join(HERE, "dra_cel")
SCRIPT = os.path.join(CEL_DIR, "cel_eval.mjs")


class CelError(Exception):
    """An expression failed to compile or evaluate (kube-scheduler aborts allocation then)."""


class CelUnavailable(RuntimeError):
    """node or the evaluator's npm dependencies are missing."""


def node_binary():
    return shutil.which("node")


class Cel:
    def __init__(self, node=None):
        node = node or node_binary()
        if not node:
            raise CelUnavailable("node is not installed (the DRA CEL evaluator runs on Node.js)")
        if not os.path.isdir(os.path.join(CEL_DIR, "node_modules", "@bufbuild", "cel")):
            raise CelUnavailable(f"{CEL_DIR}/node_modules is missing: run `make dra-cel-deps` "
                                 f"(npm ci in tests/integration/dra_cel)")
        self._proc = subprocess.Popen([node, SCRIPT], cwd=CEL_DIR, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                      stderr=subprocess.PIPE, text=True, bufsize=1)
        self._lock = threading.Lock()   # one request/answer pair at a time on the pipe
        # The same selector is asked about the same device many times while an allocator
        # backtracks: the answer depends only on the two, so keep it.
        self._cache = {}

    def evaluate(self, expr, device):
        key = (expr, json.dumps(device, sort_keys=True))
        if key not in self._cache:
            self._cache[key] = self._ask(expr, device)
        value, error = self._cache[key]
        if error is not None:
            raise CelError(f"{expr!r} on device {device.get('name')!r}: {error}")
        return value

    def _ask(self, expr, device):
        with self._lock:
            if self._proc.poll() is not None:
                raise CelUnavailable(f"cel_eval.mjs exited ({self._proc.returncode}): {self._proc.stderr.read()}")
            self._proc.stdin.write(json.dumps({"expr": expr, "device": device}) + "\n")
            self._proc.stdin.flush()
            line = self._proc.stdout.readline()
        if not line:
            raise CelUnavailable(f"cel_eval.mjs exited: {self._proc.stderr.read()}")
        answer = json.loads(line)
        return answer.get("value"), answer.get("error")

    def close(self):
        if self._proc.poll() is None:
            self._proc.stdin.close()
            try:
                self._proc.wait(timeout=5)
            except subprocess.TimeoutExpired:
                self._proc.kill()
                self._proc.wait()
        self._proc.stdout.close()
        self._proc.stderr.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()
