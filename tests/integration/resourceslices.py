"""ResourceSlices (resource.k8s.io/v1) in the stand-in API server: the collection's REST
verbs as the API server serves them, and its validation of a slice, written here from
k8s.io/api resource/v1 types.go and the API server's validation (not from topocni's code,
so that a field or a limit topocni gets wrong is refused here as a cluster would):

  GET    /apis/resource.k8s.io/v1/resourceslices[?fieldSelector=spec.nodeName=N,spec.driver=D]
  POST   /apis/resource.k8s.io/v1/resourceslices            201; 409 when the name exists
  GET    /apis/resource.k8s.io/v1/resourceslices/<name>
  PUT    /apis/resource.k8s.io/v1/resourceslices/<name>     404 when missing (no create on
         update); 409 on a stale metadata.resourceVersion; 422 when driver, pool.name or
         nodeName change (immutable); metadata.generation + 1 when the spec changes
  DELETE /apis/resource.k8s.io/v1/resourceslices/<name>

Stricter than the API server in one way: an unknown field in a spec or a device is refused
(422) instead of dropped with a warning, so that a misspelt field fails a test.
"""
import re

PATH = "/apis/resource.k8s.io/v1/resourceslices"

DNS_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")
C_IDENT = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
QUANTITY = re.compile(r"^[+-]?([0-9]+(\.[0-9]*)?|\.[0-9]+)([eE][+-]?[0-9]+|[kMGTPE]i?|[numk]|)$")

SPEC_FIELDS = {"driver", "pool", "nodeName", "nodeSelector", "allNodes", "perDeviceNodeSelection", "devices",
               "sharedCounters"}
DEVICE_FIELDS = {"name", "attributes", "capacity", "consumesCounters", "nodeName", "nodeSelector", "allNodes",
                 "taints", "bindsToNode", "bindingConditions", "bindingFailureConditions", "allowMultipleAllocations"}


def dns_subdomain(s, limit=253):
    return isinstance(s, str) and 0 < len(s) <= limit and all(DNS_LABEL.match(p) and len(p) <= 63 for p in s.split("."))


def qualified_name(s):
    domain, slash, ident = s.rpartition("/")
    if not slash:
        return bool(C_IDENT.match(s)) and len(s) <= 32
    return "/" not in domain and dns_subdomain(domain, 63) and bool(C_IDENT.match(ident)) and len(ident) <= 32


def quantity(v):
    """The value of a quantity of whole units (what topocni publishes), or None."""
    if not isinstance(v, str) or not QUANTITY.match(v):
        return None
    suffixes = {"k": 10**3, "M": 10**6, "G": 10**9, "T": 10**12, "P": 10**15, "E": 10**18,
                "Ki": 2**10, "Mi": 2**20, "Gi": 2**30, "Ti": 2**40, "Pi": 2**50, "Ei": 2**60}
    for s, m in sorted(suffixes.items(), key=lambda kv: -len(kv[0])):
        if v.endswith(s):
            return float(v[:-len(s)]) * m
    return float(v)


def uses_consumable_capacity(obj):
    """Whether a slice uses what the DRAConsumableCapacity gate guards."""
    for d in ((obj or {}).get("spec") or {}).get("devices") or []:
        if isinstance(d, dict) and ("allowMultipleAllocations" in d or any(
                isinstance(c, dict) and "requestPolicy" in c for c in (d.get("capacity") or {}).values())):
            return True
    return False


def drop_disabled_fields(obj, old):
    """What an API server with DRAConsumableCapacity off does to a slice before it validates
    it (pkg/registry/resource/resourceslice/strategy.go, dropDisabledDRAConsumableCapacityFields):
    devices lose allowMultipleAllocations and every capacity its requestPolicy, silently,
    unless the stored object already used them (an update after a downgrade)."""
    if old is not None and uses_consumable_capacity(old):
        return
    for d in ((obj or {}).get("spec") or {}).get("devices") or []:
        if not isinstance(d, dict):
            continue
        d.pop("allowMultipleAllocations", None)
        for c in (d.get("capacity") or {}).values():
            if isinstance(c, dict):
                c.pop("requestPolicy", None)


def slice_errors(obj):
    """What the API server would say is invalid in this ResourceSlice (empty: none)."""
    errs = []
    md, spec = obj.get("metadata") or {}, obj.get("spec")
    if not dns_subdomain(md.get("name")):
        errs.append("metadata.name: a lowercase RFC 1123 subdomain is required")
    if not isinstance(spec, dict):
        return errs + ["spec: Required value"]
    errs += [f"spec.{k}: unknown field" for k in spec if k not in SPEC_FIELDS]
    if not dns_subdomain(spec.get("driver"), 63):
        errs.append("spec.driver: must be a DNS subdomain of at most 63 characters")
    pool = spec.get("pool") or {}
    name = pool.get("name")
    if not isinstance(name, str) or not name or len(name) > 253 or not all(dns_subdomain(p) for p in name.split("/")):
        errs.append("spec.pool.name: must be DNS subdomains separated by slashes, at most 253")
    if not isinstance(pool.get("generation"), int) or pool["generation"] < 0:
        errs.append("spec.pool.generation: must be an integer >= 0")
    if not isinstance(pool.get("resourceSliceCount"), int) or pool["resourceSliceCount"] <= 0:
        errs.append("spec.pool.resourceSliceCount: must be greater than zero")
    where = [k for k in ("nodeName", "nodeSelector", "allNodes", "perDeviceNodeSelection") if spec.get(k) not in (None, "")]
    if len(where) != 1:
        errs.append("spec: exactly one of nodeName, nodeSelector, allNodes, perDeviceNodeSelection is required")
    devices = spec.get("devices") or []
    if devices and spec.get("sharedCounters"):
        errs.append("spec: only one of devices and sharedCounters may be set")
    advanced = any(d.get("consumesCounters") or d.get("taints") for d in devices if isinstance(d, dict))
    limit = 64 if advanced else 128
    if len(devices) > limit:
        errs.append(f"spec.devices: must have at most {limit} items")
    seen = set()
    for i, d in enumerate(devices):
        at = f"spec.devices[{i}]"
        if not isinstance(d, dict):
            errs.append(f"{at}: must be an object")
            continue
        errs += [f"{at}.{k}: unknown field" for k in d if k not in DEVICE_FIELDS]
        n = d.get("name")
        if not isinstance(n, str) or not DNS_LABEL.match(n) or len(n) > 63:
            errs.append(f"{at}.name: a lowercase RFC 1123 label is required")
        elif n in seen:
            errs.append(f"{at}.name: Duplicate value: {n!r}")
        seen.add(n)
        attrs, caps = d.get("attributes") or {}, d.get("capacity") or {}
        if len(attrs) + len(caps) > 32:
            errs.append(f"{at}: the total number of attributes and capacities must not exceed 32")
        for k, v in attrs.items():
            if not qualified_name(k):
                errs.append(f"{at}.attributes[{k}]: invalid qualified name")
            kinds = [t for t in ("int", "bool", "string", "version") if isinstance(v, dict) and t in v]
            if len(kinds) != 1 or len(v) != 1:
                errs.append(f"{at}.attributes[{k}]: exactly one value must be specified")
                continue
            t, val = kinds[0], v[kinds[0]]
            if (t == "int" and (not isinstance(val, int) or isinstance(val, bool))) or \
               (t == "bool" and not isinstance(val, bool)) or (t in ("string", "version") and not isinstance(val, str)):
                errs.append(f"{at}.attributes[{k}].{t}: wrong type")
            elif t in ("string", "version") and len(val) > 64:
                errs.append(f"{at}.attributes[{k}].{t}: must not be longer than 64")
        multi = d.get("allowMultipleAllocations") is True
        for k, c in caps.items():
            if not qualified_name(k):
                errs.append(f"{at}.capacity[{k}]: invalid qualified name")
            value = quantity((c or {}).get("value"))
            if value is None:
                errs.append(f"{at}.capacity[{k}].value: a quantity is required")
                continue
            policy = c.get("requestPolicy")
            if policy is None:
                continue
            if not multi:
                errs.append(f"{at}.capacity[{k}].requestPolicy: allowMultipleAllocations must be true")
                continue
            default = quantity(policy.get("default"))
            rng, values = policy.get("validRange"), policy.get("validValues")
            if rng is not None and values is not None:
                errs.append(f"{at}.capacity[{k}].requestPolicy: exactly one policy can be specified")
            if rng is not None:
                lo, hi, step = quantity(rng.get("min")), rng.get("max"), rng.get("step")
                hi = quantity(hi) if hi is not None else None
                step = quantity(step) if step is not None else None
                if lo is None or not 0 <= lo <= value:
                    errs.append(f"{at}.capacity[{k}].requestPolicy.validRange.min: must be between 0 and the value")
                elif default is None or default < lo:
                    errs.append(f"{at}.capacity[{k}].requestPolicy.default: must be at least min")
                if hi is not None and lo is not None and not lo <= hi <= value:
                    errs.append(f"{at}.capacity[{k}].requestPolicy.validRange.max: must be between min and the value")
                if hi is not None and default is not None and default > hi:
                    errs.append(f"{at}.capacity[{k}].requestPolicy.default: must not exceed max")
                if step is not None and lo is not None and lo + step > value:
                    errs.append(f"{at}.capacity[{k}].requestPolicy.validRange.step: min + step must not exceed the value")
    return errs


def field_selector(query):
    """The keep() of a list or watch: spec.nodeName, spec.driver and metadata.name, as served."""
    sel = query.get("fieldSelector", "")
    want = {}
    for term in filter(None, sel.split(",")):
        k, eq, v = term.partition("=")
        if not eq or k not in ("spec.nodeName", "spec.driver", "metadata.name"):
            return None
        want[k] = v

    def keep(obj):
        spec = obj.get("spec") or {}
        got = {"spec.nodeName": spec.get("nodeName") or "", "spec.driver": spec.get("driver"),
               "metadata.name": obj["metadata"]["name"]}
        return all(got[k] == v for k, v in want.items())
    return keep
