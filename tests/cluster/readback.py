"""What an agent sent against what the API server kept: the audit log's requestObject of
each write against the object read back afterwards.

A field the server changed or dropped is a difference; a quantity it wrote canonically
("25000" kept as "25k") is the same value and is not. Fields the server adds are checked
against `SERVER_ADDS`, the list of what it defaults or owns (anything else added is a
difference too: a field we did not send, we did not expect).
"""
import fnmatch
import os
import sys

sys.path.append(os.path.join(os.path.dirname(os.path.abspath(__file__)), "../integration"))
from fakenode import parse_quantity  # noqa: E402
from kubeapi import TEST_AGENT  # noqa: E402

# Paths (fnmatch patterns over "a.b[0].c") the server fills in on every object it stores.
SERVER_ADDS = ["metadata.uid", "metadata.resourceVersion", "metadata.creationTimestamp", "metadata.generation",
               "metadata.managedFields", "metadata.managedFields*"]


def same_scalar(a, b):
    if a == b:
        return True
    qa, qb = parse_quantity(a), parse_quantity(b)
    return isinstance(a, str) and isinstance(b, str) and qa is not None and qa == qb


def differences(sent, stored, path="", adds=SERVER_ADDS):
    """[(path, sent, stored)] where `stored` does not keep what `sent` says, or adds what
    neither `sent` nor `adds` explains."""
    out = []
    if isinstance(sent, dict) and isinstance(stored, dict):
        for k, v in sent.items():
            p = f"{path}.{k}" if path else k
            if k not in stored:
                if v not in (None, {}, []):   # omitempty: an empty value is not kept, and not lost
                    out.append((p, v, "<dropped>"))
                continue
            out += differences(v, stored[k], p, adds)
        for k, v in stored.items():
            p = f"{path}.{k}" if path else k
            if k not in sent and not any(fnmatch.fnmatchcase(p, a) for a in adds):
                out.append((p, "<not sent>", v))
        return out
    if isinstance(sent, list) and isinstance(stored, list):
        if len(sent) != len(stored):
            return [(path, f"{len(sent)} items", f"{len(stored)} items")]
        for i, (a, b) in enumerate(zip(sent, stored)):
            out += differences(a, b, f"{path}[{i}]", adds)
        return out
    return [] if same_scalar(sent, stored) else [(path, sent, stored)]


def canonicalized(sent, stored, path=""):
    """[(path, sent, stored)]: quantities the server rewrote in canonical form."""
    out = []
    if isinstance(sent, dict) and isinstance(stored, dict):
        for k in sent.keys() & stored.keys():
            out += canonicalized(sent[k], stored[k], f"{path}.{k}" if path else k)
    elif isinstance(sent, list) and isinstance(stored, list):
        for i, (a, b) in enumerate(zip(sent, stored)):
            out += canonicalized(a, b, f"{path}[{i}]")
    elif sent != stored and same_scalar(sent, stored):
        out.append((path, sent, stored))
    return out


def writes(audit, user, resource, name=None, verbs=("create", "update", "patch", "delete")):
    """The audit events (ResponseComplete) of `user`'s writes of `resource` (and subresource)."""
    out = []
    for e in audit:
        ref = e.get("objectRef") or {}
        got = ref.get("resource", "") + ("/" + ref["subresource"] if ref.get("subresource") else "")
        if (e.get("stage") == "ResponseComplete" and e["user"]["username"] == user and e.get("userAgent") != TEST_AGENT and got == resource
                and e["verb"] in verbs and (name is None or ref.get("name") == name)):
            out.append(e)
    return out

