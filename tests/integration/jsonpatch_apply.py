"""RFC 6902 JSON Patch, applied strictly (the way the API server's evanphx/json-patch does):
every operation of add, remove, replace, move, copy and test; JSON Pointers (RFC 6901) with
~0 and ~1; "-" for the end of an array. An operation that cannot apply raises PatchError,
and nothing of the document given is changed (the patch works on a copy).

The python3-jsonpatch package would do as well, but it is not one of the test
dependencies; when it happens to be installed, `apply_checked` applies the patch with it
too and requires the same result.
"""
import copy
import json


class PatchError(Exception):
    pass


def parse_pointer(pointer):
    """The reference tokens of a JSON Pointer ("" is the whole document)."""
    if not isinstance(pointer, str):
        raise PatchError(f"path {pointer!r} is not a string")
    if pointer == "":
        return []
    if not pointer.startswith("/"):
        raise PatchError(f"path {pointer!r} does not start with '/'")
    out = []
    for token in pointer[1:].split("/"):
        i = 0
        while True:   # "~" must be followed by 0 or 1
            i = token.find("~", i)
            if i < 0:
                break
            if i + 1 >= len(token) or token[i + 1] not in "01":
                raise PatchError(f"path {pointer!r}: bad escape in {token!r}")
            i += 2
        out.append(token.replace("~1", "/").replace("~0", "~"))
    return out


def array_index(token, arr, allow_end):
    if allow_end and token == "-":
        return len(arr)
    if not token.isdigit() or (len(token) > 1 and token[0] == "0"):
        raise PatchError(f"{token!r} is no array index")
    i = int(token)
    if i > len(arr) or (i == len(arr) and not allow_end):
        raise PatchError(f"array index {i} out of range ({len(arr)} elements)")
    return i


def resolve_parent(doc, tokens, pointer):
    """The container holding the last token's target."""
    node = doc
    for t in tokens[:-1]:
        if isinstance(node, dict):
            if t not in node:
                raise PatchError(f"{pointer}: member {t!r} does not exist")
            node = node[t]
        elif isinstance(node, list):
            node = node[array_index(t, node, False)]
        else:
            raise PatchError(f"{pointer}: {t!r} inside a scalar")
    return node


def get(doc, pointer):
    tokens = parse_pointer(pointer)
    if not tokens:
        return doc
    parent = resolve_parent(doc, tokens, pointer)
    last = tokens[-1]
    if isinstance(parent, dict):
        if last not in parent:
            raise PatchError(f"{pointer}: member {last!r} does not exist")
        return parent[last]
    if isinstance(parent, list):
        return parent[array_index(last, parent, False)]
    raise PatchError(f"{pointer}: the parent is a scalar")


def _add(doc, pointer, value):
    tokens = parse_pointer(pointer)
    if not tokens:
        return value
    parent = resolve_parent(doc, tokens, pointer)
    last = tokens[-1]
    if isinstance(parent, dict):
        parent[last] = value          # adds, or replaces a member that is there
    elif isinstance(parent, list):
        parent.insert(array_index(last, parent, True), value)
    else:
        raise PatchError(f"{pointer}: the parent is a scalar")
    return doc


def _remove(doc, pointer):
    tokens = parse_pointer(pointer)
    if not tokens:
        raise PatchError("remove of the whole document")
    parent = resolve_parent(doc, tokens, pointer)
    last = tokens[-1]
    if isinstance(parent, dict):
        if last not in parent:
            raise PatchError(f"remove {pointer}: no such member")
        return parent.pop(last)
    if isinstance(parent, list):
        return parent.pop(array_index(last, parent, False))
    raise PatchError(f"{pointer}: the parent is a scalar")


def apply_patch(doc, patch):
    """The document `patch` (a list of operations) makes of `doc`; `doc` is left as it is."""
    if not isinstance(patch, list):
        raise PatchError("a JSON patch is an array of operations")
    doc = copy.deepcopy(doc)
    for op in patch:
        if not isinstance(op, dict) or "op" not in op or "path" not in op:
            raise PatchError(f"operation {op!r} lacks op or path")
        kind, path = op["op"], op["path"]
        if kind in ("add", "replace", "test") and "value" not in op:
            raise PatchError(f"{kind} {path}: no value")
        if kind == "add":
            doc = _add(doc, path, copy.deepcopy(op["value"]))
        elif kind == "remove":
            _remove(doc, path)
        elif kind == "replace":
            if not parse_pointer(path):
                doc = copy.deepcopy(op["value"])
                continue
            get(doc, path)   # must exist
            _remove(doc, path)
            doc = _add(doc, path, copy.deepcopy(op["value"]))
        elif kind in ("move", "copy"):
            src = op.get("from")
            if src is None:
                raise PatchError(f"{kind} {path}: no from")
            if kind == "move" and (path + "/").startswith(src + "/") and path != src:
                raise PatchError(f"move {src} into its own child {path}")
            value = copy.deepcopy(get(doc, src))
            if kind == "move":
                _remove(doc, src)
            doc = _add(doc, path, value)
        elif kind == "test":
            if json.dumps(get(doc, path), sort_keys=True) != json.dumps(op["value"], sort_keys=True):
                raise PatchError(f"test {path}: the value differs")
        else:
            raise PatchError(f"unknown operation {kind!r}")
    return doc


def apply_checked(doc, patch):
    """apply_patch, cross-checked with python3-jsonpatch when it is installed."""
    out = apply_patch(doc, patch)
    try:
        import jsonpatch
    except ImportError:
        return out
    other = jsonpatch.JsonPatch(patch).apply(copy.deepcopy(doc))
    if other != out:
        raise PatchError(f"python3-jsonpatch applies the patch differently: {other} != {out}")
    return out
