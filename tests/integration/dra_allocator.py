"""A test-only DRA allocator: what kube-scheduler's structured allocator
(k8s.io/dynamic-resource-allocation/structured) decides for the subset of
resource.k8s.io/v1 that topocni's slices and our example claims use.

It reads ONLY what a scheduler reads: ResourceSlice objects as the API serves them,
DeviceClass objects and ResourceClaims. It imports nothing of topocni, so a slice topocni
publishes wrong shows up as a claim that does not allocate, the way it would in a cluster.

    alloc = Allocator(slices, classes, cel)          # cel: dra_cel.Cel()
    allocation = alloc.allocate(claim, "node-a")     # status.allocation dict, or None
    alloc.release(claim["metadata"]["uid"])

Covered:
  - pools: per (driver, pool name), only the slices of the highest generation, and only a
    complete pool (as many slices as resourceSliceCount; device names unique); slices of
    other nodes are ignored (nodeName must be the node, or allNodes);
  - requests[].exactly: deviceClassName, selectors (class's first, then the request's, in
    order, stopping at the first false; a CEL error aborts the allocation, as in
    kube-scheduler), allocationMode ExactCount (count, default 1) or All, capacity.requests,
    tolerations against device taints (NoSchedule/NoExecute);
  - constraints[].matchAttribute over the listed requests (all when empty);
  - consumable capacity (KEP-5075): allowMultipleAllocations devices shared by many claims,
    each taking per capacity its request rounded up by requestPolicy (or the default / the
    whole value when it names none), the sum staying within the capacity's value;
  - a search with backtracking over devices in a fixed order (pools by driver and name,
    slices by name, devices as listed).
Left out: firstAvailable, distinctAttribute, adminAccess, partitionable devices
(sharedCounters / consumesCounters), nodeSelector slices and per-device node selection,
binding conditions, the DRAFractionalCapacityRange milli arithmetic (exact fractions are
used throughout instead).
"""
import re
import uuid
from fractions import Fraction

# resource.Quantity's grammar: <signedNumber><suffix>, suffix binary SI, decimal SI or an
# exponent. Written here (not imported from the stand-in API) to keep this file standalone.
_QUANTITY = re.compile(r"^([+-]?)([0-9]*)(?:\.([0-9]*))?(Ki|Mi|Gi|Ti|Pi|Ei|[numkMGTPE]|[eE][+-]?[0-9]+)?$")
_BINARY = {"Ki": 10, "Mi": 20, "Gi": 30, "Ti": 40, "Pi": 50, "Ei": 60}
_DECIMAL = {"n": -9, "u": -6, "m": -3, "": 0, "k": 3, "M": 6, "G": 9, "T": 12, "P": 15, "E": 18}


def parse_quantity(s):
    """The exact value of a Kubernetes quantity string, as a Fraction (ValueError if bad)."""
    m = _QUANTITY.match(str(s))
    if not m or not (m.group(2) or m.group(3)):
        raise ValueError(f"quantity {s!r} is malformed")
    sign, whole, frac, suffix = m.group(1), m.group(2) or "0", m.group(3) or "", m.group(4) or ""
    v = Fraction(int(whole + frac), 10 ** len(frac))
    if suffix in _BINARY:
        v *= 2 ** _BINARY[suffix]
    else:
        v *= Fraction(10) ** (_DECIMAL[suffix] if suffix in _DECIMAL else int(suffix[1:]))
    return -v if sign == "-" else v


def format_quantity(v):
    """A Fraction as a quantity string (whole units, else milli, else nano rounded up)."""
    for scale, suffix in ((1, ""), (1000, "m")):
        if (v * scale).denominator == 1:
            return f"{v * scale}{suffix}"
    n = v * 10 ** 9
    return f"{-((-n.numerator) // n.denominator)}n"


def lookup_attribute(device, driver, name):
    """kube-scheduler's lookupAttribute: a fully qualified name, or the bare id when its
    domain is the driver's (unqualified attributes belong to the driver's domain)."""
    attrs = device.get("attributes") or {}
    if name in attrs:
        return attrs[name]
    domain, slash, ident = name.partition("/")
    if slash and domain == driver:
        return attrs.get(ident)
    return None


def _tolerates(tolerations, taint):
    for t in tolerations or []:
        if t.get("effect") and t["effect"] != taint.get("effect"):
            continue
        if t.get("key") and t["key"] != taint.get("key"):
            continue
        if t.get("operator", "Equal") == "Exists":
            return True
        if t.get("key") and t.get("value", "") == taint.get("value", ""):
            return True
    return False


class _Device:
    """One device of a usable pool, with what the allocator needs at hand."""

    def __init__(self, driver, pool, raw, node_local):
        self.driver, self.pool, self.raw = driver, pool, raw
        self.node_local = node_local   # from a nodeName slice (not allNodes)
        self.name = raw["name"]
        self.key = (driver, pool, self.name)
        self.shared = raw.get("allowMultipleAllocations") is True
        self.capacity = {n: c for n, c in (raw.get("capacity") or {}).items()}
        # What the CEL evaluator gets: the Device as served, plus the slice's driver.
        self.cel_input = dict(raw, driver=driver)


class Allocator:
    def __init__(self, slices, classes, cel, driver=None):
        """slices: ResourceSlice objects; classes: DeviceClass objects; cel: a dra_cel.Cel;
        driver: when set, slices of every other driver are ignored."""
        self.slices = list(slices)
        self.classes = {c["metadata"]["name"]: c for c in classes}
        self.cel = cel
        self.driver = driver
        self.exclusive = {}   # device key -> claim uid holding it
        self.consumed = {}    # device key -> {capacity name: Fraction} summed over claims
        self.claims = {}      # claim uid -> [(device key, {capacity name: Fraction} or None)]
        self.why = ""         # why the last allocate() returned None

    # ---- pools -------------------------------------------------------------------------

    def pools(self, node):
        """Devices usable on `node`, in the allocator's order; incomplete pools left out."""
        groups = {}
        for s in self.slices:
            spec = s.get("spec") or {}
            if self.driver and spec.get("driver") != self.driver:
                continue
            if spec.get("nodeName") != node and spec.get("allNodes") is not True:
                continue
            pool = spec.get("pool") or {}
            groups.setdefault((spec["driver"], pool["name"]), []).append(s)
        devices = []
        for (driver, pool), slices in sorted(groups.items()):
            # Consumers "should only consider resources from the pool with the highest
            # generation number"; a pool missing one of its slices is incomplete and skipped.
            top = max(s["spec"]["pool"]["generation"] for s in slices)
            current = [s for s in slices if s["spec"]["pool"]["generation"] == top]
            if len(current) != current[0]["spec"]["pool"]["resourceSliceCount"]:
                continue
            current.sort(key=lambda s: s.get("metadata", {}).get("name", ""))
            found = [_Device(driver, pool, d, s["spec"].get("nodeName") == node)
                     for s in current for d in s["spec"].get("devices") or []]
            if len({d.name for d in found}) != len(found):
                continue   # duplicate device names: the allocator refuses an invalid pool
            devices += found
        return devices

    # ---- one request's device filter ----------------------------------------------------

    def _selected(self, device, cls, request):
        """All of the class's selectors, then the request's, true (in order, as upstream:
        the class's `type == "vf"` keeps a request's VF-only attribute off a link)."""
        for sel in (cls.get("spec", {}).get("selectors") or []) + (request.get("selectors") or []):
            expr = (sel.get("cel") or {}).get("expression")
            if expr is None:
                continue
            if not self.cel.evaluate(expr, device.cel_input):   # CelError aborts allocate()
                return False
        return True

    @staticmethod
    def _consumption(device, requests):
        """{capacity: amount} a request takes from a shared device, or None when it cannot
        use it (experimental.CmpRequestOverCapacity's per-request part)."""
        if any(name not in device.capacity for name in requests):
            return None   # "some requested capacity has not been defined"
        take = {}
        for name, cap in device.capacity.items():
            policy = cap.get("requestPolicy")
            if name not in requests:
                # Not named: the policy's default, else the whole capacity.
                amount = parse_quantity(policy["default"]) if policy and policy.get("default") is not None \
                    else parse_quantity(cap["value"])
                take[name] = amount
                continue
            amount = parse_quantity(requests[name])
            if policy:
                rng, values = policy.get("validRange"), policy.get("validValues")
                if rng and rng.get("min") is not None:
                    lo = parse_quantity(rng["min"])
                    if amount < lo:
                        amount = lo   # below min rounds up to min
                    elif rng.get("step") is not None:
                        step = parse_quantity(rng["step"])
                        n = -((lo - amount) // step)   # ceil((amount - min) / step)
                        amount = lo + n * step
                    if rng.get("max") is not None and amount > parse_quantity(rng["max"]):
                        return None   # above max: this device cannot serve it
                elif values:
                    bigger = [parse_quantity(v) for v in values if parse_quantity(v) >= amount]
                    if not bigger:
                        return None   # above the largest valid value
                    amount = min(bigger)
            take[name] = amount
        return take

    def _available(self, device, request, picked):
        """Not held by another claim (or by this one, earlier) unless shareable, and no taint
        the request does not tolerate: checked before the selectors, as upstream does."""
        for taint in device.raw.get("taints") or []:
            if taint.get("effect") in ("NoSchedule", "NoExecute") and not _tolerates(request.get("tolerations"), taint):
                return False
        return device.shared or (device.key not in self.exclusive and not any(p[1] is device for p in picked))

    def _fits(self, device, request, picked):
        """Whether the request's capacity fits `device` given what other claims and this
        claim's earlier picks consume; returns (ok, consumption or None if exclusive)."""
        requests = (request.get("capacity") or {}).get("requests") or {}
        if not device.shared:
            # On an exclusive device capacity.requests act as a `>=` selector.
            for name, q in requests.items():
                if name not in device.capacity or parse_quantity(device.capacity[name]["value"]) < parse_quantity(q):
                    return False, None
            return True, None
        take = self._consumption(device, requests)
        if take is None:
            return False, None
        for name, amount in take.items():
            used = self.consumed.get(device.key, {}).get(name, 0)
            used += sum(p[2][name] for p in picked if p[1] is device)   # this claim, earlier picks
            if used + amount > parse_quantity(device.capacity[name]["value"]):
                return False, None
        return True, take

    # ---- the search -----------------------------------------------------------------------

    def allocate(self, claim, node):
        """Allocate `claim` on `node`: the claim's status.allocation ({"devices": {"results":
        [...]}, "nodeSelector": ...}) recorded as in use, or None (reason in self.why).
        Raises dra_cel.CelError when a selector fails to evaluate, as kube-scheduler aborts."""
        uid = claim["metadata"]["uid"]
        if uid in self.claims:
            raise ValueError(f"claim {uid} is allocated already")
        spec = (claim.get("spec") or {}).get("devices") or {}
        devices = self.pools(node)
        self.why = ""

        # One slot per device wanted: (request name, exactly, class, candidate devices).
        # ExactCount candidates are every device, their selectors evaluated only when the
        # search reaches them (as upstream, so a CEL error on a device never tried does not
        # abort); All needs every matching device, so it evaluates them all up front.
        slots = []
        for req in spec.get("requests") or []:
            if "exactly" not in req:
                raise NotImplementedError(f"request {req.get('name')}: only `exactly` is supported")
            ex = req["exactly"]
            cls = self.classes.get(ex.get("deviceClassName"))
            if cls is None:
                self.why = f"request {req['name']}: device class {ex.get('deviceClassName')!r} not found"
                return None
            mode = ex.get("allocationMode", "ExactCount")
            if mode == "All":
                candidates = [d for d in devices if self._selected(d, cls, ex)]
                if not candidates:
                    self.why = f"request {req['name']}: no device matches (allocationMode All)"
                    return None
                slots += [(req["name"], ex, cls, [d]) for d in candidates]   # each one, no choice
            elif mode == "ExactCount":
                slots += [(req["name"], ex, cls, devices)] * int(ex.get("count", 1))
            else:
                raise ValueError(f"request {req['name']}: allocationMode {mode!r}")

        constraints = []
        all_requests = [r["name"] for r in spec.get("requests") or []]
        for c in spec.get("constraints") or []:
            if "matchAttribute" not in c:
                raise NotImplementedError(f"constraint {c}: only matchAttribute is supported")
            constraints.append((set(c.get("requests") or all_requests), c["matchAttribute"]))

        picked = []   # (request name, device, consumption or None)

        def matches(req_name, device):
            # Every matchAttribute over this request: the device has the attribute, equal
            # (same type and value) to that of the devices picked so far for its requests.
            for names, attr in constraints:
                if req_name not in names:
                    continue
                mine = lookup_attribute(device.raw, device.driver, attr)
                if mine is None:
                    return False
                for other_req, other, _ in picked:
                    if other_req in names and lookup_attribute(other.raw, other.driver, attr) != mine:
                        return False
            return True

        def search(i):
            if i == len(slots):
                return True
            req_name, ex, cls, candidates = slots[i]
            for d in candidates:
                if not self._available(d, ex, picked) or not self._selected(d, cls, ex):
                    continue
                ok, take = self._fits(d, ex, picked)
                if not ok or not matches(req_name, d):
                    continue
                picked.append((req_name, d, take))
                if search(i + 1):
                    return True
                picked.pop()   # backtrack: the next candidate for this slot
            return False

        if not search(0):
            self.why = "no combination of devices satisfies the requests and constraints"
            return None

        results, record = [], []
        for req_name, d, take in picked:
            r = {"request": req_name, "driver": d.driver, "pool": d.pool, "device": d.name}
            if d.shared:
                # "populated only for devices that allow multiple allocations. All capacity
                # entries are included, even if the consumed amount is zero".
                r["shareID"] = str(uuid.uuid4())
                r["consumedCapacity"] = {n: format_quantity(v) for n, v in take.items()}
                used = self.consumed.setdefault(d.key, {})
                for n, v in take.items():
                    used[n] = used.get(n, 0) + v
            else:
                self.exclusive[d.key] = uid
            record.append((d.key, take))
            results.append(r)
        self.claims[uid] = record
        allocation = {"devices": {"results": results}}
        if any(d.node_local for _, d, _ in picked):
            # Node-local devices tie the claim to the node (allNodes ones alone do not).
            allocation["nodeSelector"] = {"nodeSelectorTerms": [{"matchFields": [
                {"key": "metadata.name", "operator": "In", "values": [node]}]}]}
        return allocation

    def release(self, claim_uid):
        """Give back what the claim holds (deallocation). Unknown uids are ignored."""
        for key, take in self.claims.pop(claim_uid, []):
            if take is None:
                self.exclusive.pop(key, None)
            else:
                for n, v in take.items():
                    self.consumed[key][n] -= v
