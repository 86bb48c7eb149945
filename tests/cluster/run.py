"""make test-cluster: every test of tests/cluster in one process, against one control plane
(cluster.session()), in this order: the ones that restart or stop a component come last."""
import os
import sys
import time
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.append(os.path.join(HERE, "../integration"))

ORDER = ["test_manifests", "test_node_agents", "test_scheduling", "test_after_refusal", "test_faults",
         "test_consumable_capacity"]


def main():
    names = sys.argv[1:] or [m for m in ORDER if os.path.exists(os.path.join(HERE, m + ".py"))]
    missing = [f[:-3] for f in os.listdir(HERE) if f.startswith("test_") and f.endswith(".py") and f[:-3] not in ORDER]
    if missing:
        sys.exit(f"tests/cluster/run.py: add {missing} to ORDER")
    suite = unittest.TestSuite(unittest.defaultTestLoader.loadTestsFromName(n) for n in names)
    t0 = time.monotonic()
    result = unittest.TextTestRunner(verbosity=2).run(suite)
    print(f"tests/cluster: {result.testsRun} tests, {len(result.skipped)} skipped, "
          f"{len(result.failures) + len(result.errors)} failed, {time.monotonic() - t0:.0f} s")
    for test, reason in result.skipped:
        print(f"  skipped: {test.id()}: {reason}")
    sys.exit(0 if result.wasSuccessful() else 1)


if __name__ == "__main__":
    main()
