"""What Multus does with DRA devices, re-implemented step by step from its Go code, so that
a test can follow a pod from its ResourceClaim to the deviceID Multus hands a delegate
(no tests here; `python3 multus_dra.py` runs a self-check against fakenode.ClusterApi).

Written from k8snetworkplumbingwg/multus-cni at 95a0932350f0060cd232096876e24672a1de83fa
(master, 2026-08-20). The DRA part came with PR #1492 (merge 7235e831cb6fedf857d3969d38ce1a1e9751d85d,
"feat: DRA resource.k8s.io/v1 integration via draclient"); pkg/draclient/draclient.go is
byte-identical at both commits, and the lines cited below of the two other files are the
same code at both (line numbers at 95a0932, at 7235e83 where they differ). Multus builds
against k8s.io/api v0.36.2 (go.mod).

pkg/draclient/draclient.go (dra_device_ids, DraClient):
  33-34    attributes read: "k8s.cni.cncf.io/deviceID", "k8s.cni.cncf.io/resourceName", each
           by its .string (DeviceAttribute.StringValue, json "string"); another type: unset
  128      nodeName := pod.Spec.NodeName
  130-135  for each pod.Status.ResourceClaimStatuses: ResourceClaimName nil -> skipped (logged)
  141,77-91  GET the claim (namespace of the pod), cached per client under "ns/name";
           an error (e.g. the 404) fails the whole call
  147-150  Status.Allocation nil or Allocation.Devices.Results nil -> error
           "claim <name> has no device allocation" (an empty but present results list is
           not nil: no error, nothing mapped)
  154-186  per result: getDeviceInfo; errDeviceNotInAnySlice -> skip (warning); another
           error -> fail; info.ResourceName "" -> skip (warning); else
           resourceMap[resourceName].DeviceIDs += deviceID (a new entry when none)
  187-193  a claim that mapped nothing: warning only
  197-201  pod.Status.ExtendedResourceClaimStatus set -> processExtendedResourceClaimStatus
  203      types.SortDeviceIDs(resourceMap): every entry's DeviceIDs sorted as strings
           (pkg/types/types.go 184-190), device-plugin entries included
  212-273  extended: GET (cached) claim, same allocation check; results grouped by
           .request; per requestMappings[]: no result -> error "request <r> not found in
           claim <c>"; every getDeviceInfo error is fatal here; resourceName "" or other
           than mapping.resourceName -> error; else appended under mapping.resourceName
  279-325  ensureDriverCachePopulated, once per "nodeName/driver" per client: LIST
           resourceslices with fieldSelector "spec.driver=<d>", or
           "spec.nodeName=<n>,spec.driver=<d>" when the pod has a node; index every
           device under the key (driverPool="<spec.driver>/<spec.pool.name>", deviceName=
           <device.name>) -- a struct key; written here as the string
           "<driver>/<pool>/<device>" -- with the two attributes, only when deviceID != ""
  335-362  getDeviceInfo: key (result.driver + "/" + result.pool, result.device); absent ->
           errDeviceNotInAnySlice ("device <d> not found for claim resource <driver>/<pool>
           in any matching resource slice")
pkg/k8sclient/k8sclient.go (device_id_for, device_ids_for_networks, delegates_for):
  52       resourceNameAnnot = "k8s.v1.cni.cncf.io/resourceName"
  311-312  only a NAD carrying that annotation (any value, "" too), and a pod with name and
           namespace, gets a device
  316-333  the resource map is built once, at the first such NAD: kubelet device plugins
           (PodResources API or checkpoint, kubeletclient.go 126-145, sorted too), then
           draclient.NewClient(...).GetPodResourceMap on top of it; its error fails the ADD
  335-342  entry := resourceMap[resourceName]; deviceID = DeviceIDs[entry.Index] while
           Index < len; entry.Index++ -- the n-th NAD of a resource gets DeviceIDs[n]
  345-350  netutils.GetCNIConfig (network-attachment-definition-client pkg/utils/cniconfig.go,
           GetCNIConfigFromSpec, read at acf33653625749f61b5bea6f7a740078be742f9c; that it is
           v1.7.6's, which go.mod names, is not checked: spec.config, with "name" set to the
           NAD's name when missing or "" -- re-marshalled then; an empty spec: a file) then
           types.LoadDelegateNetConf(configBytes, net, deviceID, resourceName)
pkg/types/conf.go (delegate_conf, delegate_bytes):
  246-291 (7235e83: 173-218)  LoadDelegateNetConf: "type" "" -> a conflist
           (LoadDelegateNetConfList 47-64: plugins required, plugins[0].type required);
           deviceID != "" -> conflist: addDeviceIDInConfList, else delegateAddDeviceID;
           then the pod's cni-args (addCNIArgsInConfList / addCNIArgsInConfig)
  612-629 (539-556)  delegateAddDeviceID: rawConfig["deviceID"] = rawConfig["pciBusID"] = id
  632-667 (559-594)  addDeviceIDInConfList: the same two keys in every element of "plugins"
           (the list level untouched)
           Both re-marshal a map[string]interface{}: keys sorted, numbers through float64,
           <>& escaped (delegate_bytes reproduces those bytes).
  368-370, 445-447 (295-297, 372-374)  the deviceID also goes as CapabilityArgs["deviceID"]
           (runtimeConfig.deviceID, which libcni passes only to a plugin declaring the
           "deviceID" capability) -- not modelled here.

`get` everywhere is a callable get(path) -> (status, parsed JSON body), path with its query
string, as client-go sends it; getter(api) makes one for a fakenode.ClusterApi.
"""
import decimal
import http.client
import json
import ssl
import urllib.parse

MULTUS_COMMIT = "95a0932350f0060cd232096876e24672a1de83fa"
MULTUS_PR_1492_MERGE = "7235e831cb6fedf857d3969d38ce1a1e9751d85d"

DEVICE_ID_ATTR = "k8s.cni.cncf.io/deviceID"            # draclient.go 33
RESOURCE_NAME_ATTR = "k8s.cni.cncf.io/resourceName"    # draclient.go 34
NAD_RESOURCE_ANNOT = "k8s.v1.cni.cncf.io/resourceName"  # k8sclient.go 52
SLICES_PATH = "/apis/resource.k8s.io/v1/resourceslices"


class MultusError(Exception):
    """An error Multus would return (and so fail the CNI ADD with)."""


class ApiError(MultusError):
    """A non-2xx answer; str() is the Status message, as client-go's StatusError.Error()."""

    def __init__(self, status, body):
        self.status, self.body = status, body
        msg = body.get("message") if isinstance(body, dict) else None
        super().__init__(msg or f"the server answered {status}")


def getter(api, token=None, cafile=None, timeout=10):
    """get(path) -> (status, body) against a fakenode.ClusterApi, with its bearer token
    (fakenode.DEFAULT_TOKEN unless told); https (api.scheme) needs the pki's ca.crt."""
    if token is None:
        from fakenode import DEFAULT_TOKEN
        token = DEFAULT_TOKEN

    def get(path):
        if api.scheme == "https":
            ctx = ssl.create_default_context(cafile=cafile)
            c = http.client.HTTPSConnection(api.host, api.port, context=ctx, timeout=timeout)
        else:
            c = http.client.HTTPConnection(api.host, api.port, timeout=timeout)
        try:
            c.request("GET", path, headers={"Authorization": f"Bearer {token}", "Accept": "application/json"})
            r = c.getresponse()
            data = r.read()
        finally:
            c.close()
        try:
            body = json.loads(data) if data else None
        except ValueError:
            body = data.decode("utf-8", "replace")
        return r.status, body
    return get


def _ok(status, body):
    if not 200 <= status < 300:
        raise ApiError(status, body)
    return body


def device_key(driver, pool, device):
    """The device index key of draclient.go 307-309 / 336-343: the struct
    {driverPool: "<driver>/<pool>", deviceName: <device>}, written as one string."""
    return f"{driver}/{pool}/{device}"


class DraClient:
    """draclient.go's draClient: its caches live as long as the client, and Multus makes a
    new one per getKubernetesDelegate call that builds the resource map (k8sclient.go 326).

    driver_filter (not in Multus): a driver name or a collection of them; allocation results
    of other drivers are passed over before any lookup (no LIST for them). None: Multus.
    log: a list that gets (level, message) for each line Multus logs at Warning or Error."""

    def __init__(self, get, driver_filter=None, log=None):
        self.get = get
        self.device_info = {}       # device_key(...) -> {"DeviceID", "ResourceName"}
        self.populated = set()      # "nodeName/driver"
        self.claims = {}            # "namespace/name" -> ResourceClaim
        self.log = log if log is not None else []
        if isinstance(driver_filter, str):
            driver_filter = {driver_filter}
        self.drivers = set(driver_filter) if driver_filter is not None else None

    def claim(self, namespace, name):
        """getOrFetchResourceClaim (77-91)."""
        key = f"{namespace}/{name}"
        if key in self.claims:
            return self.claims[key]
        if name == "":   # client-go's request builder, before any request is sent
            raise MultusError("resource name may not be empty")
        path = (f"/apis/resource.k8s.io/v1/namespaces/{urllib.parse.quote(namespace, safe='')}/resourceclaims/"
                f"{urllib.parse.quote(name, safe='')}")
        rc = _ok(*self.get(path))
        self.claims[key] = rc
        return rc

    @staticmethod
    def results_of(claim, name):
        """147-150 / 223-226: Allocation nil or Devices.Results nil is an error."""
        allocation = (claim.get("status") or {}).get("allocation")
        results = ((allocation or {}).get("devices") or {}).get("results")
        if results is None:
            raise MultusError(f"claim {name} has no device allocation")
        return results

    def ensure_driver(self, node, driver):
        """ensureDriverCachePopulated (279-325)."""
        populated = f"{node}/{driver}"
        if populated in self.populated:
            return
        sel = f"spec.driver={driver}"
        if node != "":
            sel = f"spec.nodeName={node},spec.driver={driver}"
        body = _ok(*self.get(SLICES_PATH + "?" + urllib.parse.urlencode({"fieldSelector": sel})))
        for s in body.get("items") or []:
            spec = s.get("spec") or {}
            for d in spec.get("devices") or []:
                attrs = d.get("attributes") or {}
                info = {"DeviceID": (attrs.get(DEVICE_ID_ATTR) or {}).get("string") or "",
                        "ResourceName": (attrs.get(RESOURCE_NAME_ATTR) or {}).get("string") or ""}
                if info["DeviceID"] != "":
                    self.device_info[device_key(spec.get("driver", ""), (spec.get("pool") or {}).get("name", ""),
                                                d.get("name", ""))] = info
        self.populated.add(populated)

    def device(self, node, result):
        """getDeviceInfo (335-362): (info, None), or (None, the errDeviceNotInAnySlice text)."""
        driver, pool, device = result.get("driver", ""), result.get("pool", ""), result.get("device", "")
        self.ensure_driver(node, driver)
        info = self.device_info.get(device_key(driver, pool, device))
        if info is None:
            msg = (f"device not in any matching resource slice: device {device} not found for claim resource "
                   f"{driver}/{pool} in any matching resource slice")
            self.log.append(("error", f"getDeviceInfo: {msg}"))
            return None, msg
        return info, None

    def pod_resource_map(self, pod, resource_map):
        """GetPodResourceMap (122-207): fills resource_map {resourceName: [deviceIDs]} in place."""
        ns = (pod.get("metadata") or {}).get("namespace", "")
        node = (pod.get("spec") or {}).get("nodeName") or ""
        status = pod.get("status") or {}
        for cs in status.get("resourceClaimStatuses") or []:
            name = cs.get("resourceClaimName")
            if name is None:
                self.log.append(("error", "GetPodResourceMap: resource claim status has nil ResourceClaimName"))
                continue
            results = self.results_of(self.claim(ns, name), name)
            resolved = 0
            for r in results:
                if self.drivers is not None and r.get("driver") not in self.drivers:
                    continue
                info, missing = self.device(node, r)
                if missing:
                    self.log.append(("warning", f"GetPodResourceMap: skipping allocation result for claim {name} "
                                                f"(driver={r.get('driver')} pool={r.get('pool')} "
                                                f"device={r.get('device')}): {missing}"))
                    continue
                if info["ResourceName"] == "":
                    self.log.append(("warning", f"GetPodResourceMap: skipping allocation result for claim {name}: "
                                                f"no {RESOURCE_NAME_ATTR!r}"))
                    continue
                resource_map.setdefault(info["ResourceName"], []).append(info["DeviceID"])
                resolved += 1
            if resolved == 0 and results:
                self.log.append(("warning", f"GetPodResourceMap: claim {name} had no allocation results mapped "
                                            f"for Multus"))
        if status.get("extendedResourceClaimStatus") is not None:
            self.extended(node, ns, status["extendedResourceClaimStatus"], resource_map)
        for ids in resource_map.values():   # types.SortDeviceIDs
            ids.sort()
        return resource_map

    def extended(self, node, ns, ext, resource_map):
        """processExtendedResourceClaimStatus (212-273): strict."""
        name = ext.get("resourceClaimName", "")
        by_request = {}
        for r in self.results_of(self.claim(ns, name), name):
            by_request.setdefault(r.get("request"), []).append(r)
        for m in ext.get("requestMappings") or []:
            results = by_request.get(m.get("requestName"))
            if not results:
                raise MultusError(f"request {m.get('requestName')} not found in claim {name}")
            key = m.get("resourceName", "")
            for r in results:
                info, missing = self.device(node, r)
                if missing:
                    raise MultusError(missing)
                if info["ResourceName"] == "":
                    raise MultusError(f"device {r.get('device')} missing required attribute {RESOURCE_NAME_ATTR} (must "
                                      f"match NAD {NAD_RESOURCE_ANNOT} and extended mapping {json.dumps(key)})")
                if info["ResourceName"] != key:
                    raise MultusError(f"device {r.get('device')}: {RESOURCE_NAME_ATTR} is "
                                      f"{json.dumps(info['ResourceName'])} but extended resource mapping for request "
                                      f"{json.dumps(m.get('requestName'))} is {json.dumps(key)}")
                resource_map.setdefault(key, []).append(info["DeviceID"])


def dra_device_ids(get, pod, driver_filter=None, resource_map=None, log=None):
    """{resourceName: [deviceIDs]} as draclient's GetPodResourceMap leaves it for `pod` (a Pod
    object): resource_map, the kubelet's device-plugin entries it starts from (not changed;
    they are merged in and sorted with the rest), None for none. Raises MultusError (ApiError
    for an API answer) where Multus fails."""
    rmap = {k: list(v) for k, v in (resource_map or {}).items()}
    return DraClient(get, driver_filter, log).pod_resource_map(pod, rmap)


def device_id_for(nad_annotations, resource_map, index):
    """The deviceID getKubernetesDelegate (k8sclient.go 309-343) gives a NAD: "" unless the NAD
    has the k8s.v1.cni.cncf.io/resourceName annotation; then DeviceIDs[index] of that
    resource, `index` being how many earlier networks of the pod used it (entry.Index), or
    "" when there are no more."""
    annotations = nad_annotations or {}
    if NAD_RESOURCE_ANNOT not in annotations:
        return ""
    ids = (resource_map or {}).get(annotations[NAD_RESOURCE_ANNOT])
    if ids is not None and 0 <= index < len(ids):
        return ids[index]
    return ""


def device_ids_for_networks(nads, resource_map):
    """The deviceIDs, in order, of the pod's networks (NAD objects or their annotations), each
    resource's entry.Index going up once per NAD that got one of its IDs (k8sclient.go 340)."""
    index, out = {}, []
    for nad in nads:
        ann = ((nad.get("metadata") or {}).get("annotations") or {}) if "metadata" in nad else nad
        dev = device_id_for(ann, resource_map, index.get(ann.get(NAD_RESOURCE_ANNOT), 0))
        if dev:
            index[ann[NAD_RESOURCE_ANNOT]] = index.get(ann[NAD_RESOURCE_ANNOT], 0) + 1
        out.append(dev)
    return out


# --- encoding/json, as Multus's re-marshalling writes a config ---

def _go_number(v):
    f = float(v)   # json.Unmarshal into interface{}: every number is a float64
    if f != f or f in (float("inf"), float("-inf")):
        raise MultusError(f"json: unsupported value: {v!r}")
    a = abs(f)
    r = repr(f)
    if a != 0 and (a < 1e-6 or a >= 1e21):   # encoding/json floatEncoder: 'e' format, "e-07" -> "e-7"
        mant, _, exp = r.partition("e")
        sign, digits = exp[0], exp[1:].lstrip("0") or "0"
        if sign == "+" and len(digits) < 2:
            digits = digits.rjust(2, "0")
        return f"{mant}e{sign}{digits}"
    s = format(decimal.Decimal(r), "f")
    if "." in s:
        s = s.rstrip("0").rstrip(".")
    return s


def _go_string(s):
    out = ['"']
    for ch in s:
        o = ord(ch)
        if ch in '"\\':
            out.append("\\" + ch)
        elif ch in "\n\r\t\b\f":
            out.append({"\n": "\\n", "\r": "\\r", "\t": "\\t", "\b": "\\b", "\f": "\\f"}[ch])
        elif o < 0x20 or ch in "<>&\u2028\u2029":
            out.append(f"\\u{o:04x}")
        else:
            out.append(ch)
    return "".join(out) + '"'


def go_marshal(v):
    """json.Marshal of what json.Unmarshal into interface{} made of a document: maps with
    sorted keys, compact, HTML-escaped, numbers as float64."""
    if v is None:
        return "null"
    if v is True:
        return "true"
    if v is False:
        return "false"
    if isinstance(v, (int, float)):
        return _go_number(v)
    if isinstance(v, str):
        return _go_string(v)
    if isinstance(v, list):
        return "[" + ",".join(go_marshal(x) for x in v) + "]"
    if isinstance(v, dict):
        return "{" + ",".join(_go_string(k) + ":" + go_marshal(v[k]) for k in sorted(v)) + "}"
    raise TypeError(f"not a JSON value: {v!r}")


def _parse(raw):
    def refuse(c):
        raise MultusError(f"invalid character {c!r} looking for beginning of value")
    return json.loads(raw, parse_constant=refuse)


def _inject_cni_args(conf, args):
    """injectCNIArgs (conf.go 670-688, 7235e83: 597-615): merged into args.cni."""
    if "args" not in conf:
        conf["args"] = {"cni": dict(args)}
        return
    a = conf["args"]
    if not isinstance(a, dict) or ("cni" in a and not isinstance(a["cni"], dict)):
        raise MultusError("panic: interface conversion: interface {} is not map[string]interface {}")
    if "cni" in a:
        a["cni"].update(args)
    else:
        a["cni"] = dict(args)


def delegate_bytes(nad_config, device_id, pci=True, cni_args=None, nad_name=None):
    """The delegate's config bytes (DelegateNetConf.Bytes) LoadDelegateNetConf makes of a
    NAD's spec.config (a str/bytes exactly as stored, or a dict) and a deviceID ("" or None:
    none). nad_name: first apply GetCNIConfigFromSpec's "name" injection, as for a NAD.
    cni_args: the pod's network selection element's "cni-args". pci=False leaves pciBusID
    out -- NOT what Multus does (it always sets both); for a meta-plugin that sets deviceID only."""
    raw = nad_config if isinstance(nad_config, (str, bytes)) else json.dumps(nad_config, separators=(",", ":"))
    raw = raw.decode() if isinstance(raw, bytes) else raw
    try:
        conf = _parse(raw)
    except ValueError as e:
        raise MultusError(f"failed to unmarshal Spec.Config: {e}") from e
    if not isinstance(conf, dict):
        raise MultusError("LoadDelegateNetConf: error unmarshalling delegate config: not an object")
    if nad_name is not None and conf.get("name", "") == "":
        conf["name"] = nad_name
        raw = go_marshal(conf)
    typ = conf.get("type", "")
    if not isinstance(typ, str):
        raise MultusError("LoadDelegateNetConf: error unmarshalling delegate config: json: cannot unmarshal "
                          "into Go struct field NetConf.type of type string")
    if not device_id and not cni_args:
        if typ == "":
            _check_conflist(conf)
        return raw.encode()
    if typ == "":
        _check_conflist(conf)
        plugins = conf["plugins"]
        if device_id:
            for i, p in enumerate(plugins):
                if not isinstance(p, dict):
                    raise MultusError(f"addDeviceIDInConfList: unable to typecast plugin #{i}")
                p["deviceID"] = device_id
                if pci:
                    p["pciBusID"] = device_id
        if cni_args:
            for p in plugins:
                _inject_cni_args(p, cni_args)
    else:
        if device_id:
            conf["deviceID"] = device_id
            if pci:
                conf["pciBusID"] = device_id
        if cni_args:
            _inject_cni_args(conf, cni_args)
    return go_marshal(conf).encode()


def _check_conflist(conf):
    """LoadDelegateNetConfList (conf.go 47-64)."""
    plugins = conf.get("plugins")
    if plugins is None:
        raise MultusError("LoadDelegateNetConf: failed with: LoadDelegateNetConfList: delegate must have the 'type' "
                          "or 'plugin' field")
    if not isinstance(plugins, list):
        raise MultusError("LoadDelegateNetConf: failed with: LoadDelegateNetConfList: error unmarshalling delegate "
                          "conflist")
    if not plugins or not isinstance(plugins[0], dict):
        raise MultusError("panic: runtime error: index out of range [0] with length 0" if not plugins
                          else "panic: runtime error: invalid memory address or nil pointer dereference")
    if (plugins[0].get("type") or "") == "":
        raise MultusError("LoadDelegateNetConf: failed with: LoadDelegateNetConfList: a plugin delegate must have "
                          "the 'type' field")


def delegate_conf(nad_config, device_id, pci=True, cni_args=None, nad_name=None):
    """delegate_bytes(...) parsed: deviceID (and pciBusID) at the top of a single plugin's
    config, or in every element of a conflist's "plugins"."""
    return json.loads(delegate_bytes(nad_config, device_id, pci, cni_args, nad_name))


def delegates_for(get, pod, nads, device_plugin_map=None, log=None):
    """The walk of GetNetworkDelegates/getKubernetesDelegate for the pod's networks `nads`
    (NAD objects in the order of the pod's networks annotation): the resource map built at
    the first NAD with a resourceName annotation (device plugins, then DRA), then each
    NAD's (deviceID, delegate config bytes). MultusError when Multus fails the ADD."""
    rmap, index, out = None, {}, []
    md = pod.get("metadata") or {}
    for nad in nads:
        nmd = nad.get("metadata") or {}
        ann = nmd.get("annotations") or {}
        dev = ""
        if NAD_RESOURCE_ANNOT in ann and md.get("name") and md.get("namespace"):
            if rmap is None:
                try:
                    rmap = dra_device_ids(get, pod, resource_map=device_plugin_map, log=log)
                except MultusError as e:
                    raise MultusError(f"getKubernetesDelegate: failed to get resourceMap from DRA client: {e}") from e
            res = ann[NAD_RESOURCE_ANNOT]
            dev = device_id_for(ann, rmap, index.get(res, 0))
            if dev:
                index[res] = index.get(res, 0) + 1
        config = (nad.get("spec") or {}).get("config", "")
        out.append((dev, delegate_bytes(config, dev, nad_name=nmd.get("name"))))
    return out


def _self_check():
    import http.client as hc
    from fakenode import ClusterApi, DEFAULT_TOKEN, allocated_claim, nad_object

    api = ClusterApi(None)
    try:
        get = getter(api)

        def post(path, body):
            c = hc.HTTPConnection(api.host, api.port, timeout=10)
            c.request("POST", path, json.dumps(body), {"Authorization": f"Bearer {DEFAULT_TOKEN}",
                                                        "Content-Type": "application/json"})
            r = c.getresponse()
            data = json.loads(r.read())
            c.close()
            assert r.status == 201, (r.status, data)

        def text(s):
            return {"string": s}

        def vf(pci, resource="example.com/sriov_fast"):
            attrs = {"type": text("vf"), "resource.kubernetes.io/pciBusID": text(pci), DEVICE_ID_ATTR: text(pci)}
            if resource:
                attrs[RESOURCE_NAME_ATTR] = text(resource)
            return {"name": "vf-" + pci.replace(":", "-").replace(".", "-"), "attributes": attrs}

        def rslice(node, driver, devices, pool=None):
            return {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceSlice",
                    "metadata": {"name": f"{node}-{driver}-0"},
                    "spec": {"driver": driver, "nodeName": node, "pool": {"name": pool or node, "generation": 1,
                                                                          "resourceSliceCount": 1},
                             "devices": devices}}

        post(SLICES_PATH, rslice("w1", "topocni.io", [vf("0000:af:00.2"), vf("0000:af:00.3", resource=None),
                                                      {"name": "link-eth1", "attributes": {"type": text("link")}}]))
        # The same driver, pool name and device name on another node (the key has no node in
        # it): only the spec.nodeName field selector keeps it out.
        post(SLICES_PATH, rslice("w2", "topocni.io", [vf("0000:af:00.2", resource="example.com/other")], pool="w1"))
        post(SLICES_PATH, rslice("w1", "gpu.example.com", [{"name": "gpu-0", "attributes": {"type": text("gpu")}}]))

        pod = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p", "namespace": "ns1", "uid": "uid-p"},
               "spec": {"nodeName": "w1"},
               "status": {"resourceClaimStatuses": [{"name": "vf", "resourceClaimName": "p-vf-x7k2q"},
                                                    {"name": "unused", "resourceClaimName": None}]}}
        api.put_pod(pod)
        results = [{"request": "vf", "driver": "topocni.io", "pool": "w1", "device": "vf-0000-af-00-2"},
                   {"request": "vf2", "driver": "topocni.io", "pool": "w1", "device": "vf-0000-af-00-3"},
                   {"request": "link", "driver": "topocni.io", "pool": "w1", "device": "link-eth1"},
                   {"request": "gpu", "driver": "gpu.example.com", "pool": "w1", "device": "gpu-0"}]
        api.put_claim(allocated_claim("ns1", "p-vf-x7k2q", "w1", results, [pod],
                                      annotations={"resource.kubernetes.io/pod-claim-name": "vf"}))
        status, served = get("/api/v1/namespaces/ns1/pods/p")
        assert status == 200 and served["status"]["resourceClaimStatuses"] == pod["status"]["resourceClaimStatuses"]

        api.forget_requests()
        log = []
        got = dra_device_ids(get, served, log=log)
        assert got == {"example.com/sriov_fast": ["0000:af:00.2"]}, got
        paths = [(r["path"], r["query"]) for r in api.logged()]
        assert paths == [("/apis/resource.k8s.io/v1/namespaces/ns1/resourceclaims/p-vf-x7k2q", {}),
                         (SLICES_PATH, {"fieldSelector": "spec.nodeName=w1,spec.driver=topocni.io"}),
                         (SLICES_PATH, {"fieldSelector": "spec.nodeName=w1,spec.driver=gpu.example.com"})], paths
        assert [lvl for lvl, _ in log].count("warning") == 3, log   # vf2: no resourceName; link, gpu: no deviceID

        # Merged with the device plugins' entries, sorted; a driver filter (not Multus) skips gpu's LIST.
        api.forget_requests()
        got = dra_device_ids(get, served, driver_filter="topocni.io",
                             resource_map={"example.com/sriov_fast": ["0000:af:00.1"], "intel.com/x": ["b", "a"]})
        assert got == {"example.com/sriov_fast": ["0000:af:00.1", "0000:af:00.2"], "intel.com/x": ["a", "b"]}, got
        assert len(api.logged("GET", SLICES_PATH)) == 1

        # A pod without a node lists by driver alone, and sees the other node's device too
        # (the later slice wins in the index: w2's resourceName).
        api.forget_requests()
        nodeless = dict(served, spec={})
        got = dra_device_ids(get, nodeless, driver_filter="topocni.io")
        assert got == {"example.com/other": ["0000:af:00.2"]}, got
        assert [r["query"] for r in api.logged("GET", SLICES_PATH)] == [{"fieldSelector": "spec.driver=topocni.io"}]

        # The failures: a claim not there (the API server's 404 message), one not allocated.
        api.delete_claim("ns1", "p-vf-x7k2q")
        try:
            dra_device_ids(get, served)
            raise AssertionError("no error for a missing claim")
        except ApiError as e:
            assert e.status == 404 and str(e) == 'resourceclaims.resource.k8s.io "p-vf-x7k2q" not found', e
        unallocated = allocated_claim("ns1", "p-vf-x7k2q", "w1", results, [pod])
        unallocated["status"] = {}
        api.put_claim(unallocated)
        try:
            dra_device_ids(get, served)
            raise AssertionError("no error for an unallocated claim")
        except MultusError as e:
            assert str(e) == "claim p-vf-x7k2q has no device allocation", e

        # Extended resources: strict about resourceName.
        api.put_claim(allocated_claim("ns1", "p-ext", "w1", results[:2], [pod]))
        ext = dict(served, status={"extendedResourceClaimStatus": {
            "resourceClaimName": "p-ext",
            "requestMappings": [{"containerName": "c", "resourceName": "example.com/sriov_fast",
                                 "requestName": "vf"}]}})
        assert dra_device_ids(get, ext) == {"example.com/sriov_fast": ["0000:af:00.2"]}
        ext["status"]["extendedResourceClaimStatus"]["requestMappings"].append(
            {"containerName": "c", "resourceName": "example.com/sriov_fast", "requestName": "vf2"})
        try:
            dra_device_ids(get, ext)
            raise AssertionError("no error for a device without resourceName")
        except MultusError as e:
            assert "missing required attribute k8s.cni.cncf.io/resourceName" in str(e), e

        # From the map to the delegates.
        api.put_claim(allocated_claim("ns1", "p-vf-x7k2q", "w1", results, [pod]))
        rmap = dra_device_ids(get, served)
        annotated = {NAD_RESOURCE_ANNOT: "example.com/sriov_fast"}
        assert device_id_for({}, rmap, 0) == ""
        assert device_id_for(annotated, rmap, 0) == "0000:af:00.2"
        assert device_id_for(annotated, rmap, 1) == ""
        single = '{"cniVersion":"1.0.0","name":"fast","type":"topocni","attachment":"vf","mtu":9000,"x":"<a&b>"}'
        conf = delegate_conf(single, "0000:af:00.2")
        assert conf["deviceID"] == conf["pciBusID"] == "0000:af:00.2" and conf["mtu"] == 9000, conf
        assert delegate_bytes(single, "0000:af:00.2") == (
            b'{"attachment":"vf","cniVersion":"1.0.0","deviceID":"0000:af:00.2","mtu":9000,"name":"fast",'
            b'"pciBusID":"0000:af:00.2","type":"topocni","x":"\\u003ca\\u0026b\\u003e"}')
        assert delegate_bytes(single, "") == single.encode(), "no deviceID: the bytes as they were"
        assert "pciBusID" not in delegate_conf(single, "0000:af:00.2", pci=False)
        conflist = {"cniVersion": "1.0.0", "name": "chain", "plugins": [{"type": "topocni", "attachment": "vf"},
                                                                          {"type": "tuning", "sysctl": {}}]}
        conf = delegate_conf(conflist, "0000:af:00.2")
        assert "deviceID" not in conf and all(p["deviceID"] == p["pciBusID"] == "0000:af:00.2"
                                              for p in conf["plugins"]), conf
        assert _go_number(1e21) == "1e+21" and _go_number(1.5e-7) == "1.5e-7" and _go_number(1e16) == \
            "10000000000000000" and _go_number(0.000001) == "0.000001" and _go_number(-0.0) == "-0"

        nads = [nad_object("plain", {"cniVersion": "1.0.0", "type": "bridge"}, namespace="ns1"),
                nad_object("fast", single, namespace="ns1", resource="example.com/sriov_fast"),
                nad_object("fast2", {"type": "topocni"}, namespace="ns1", resource="example.com/sriov_fast")]
        api.forget_requests()
        walked = delegates_for(get, served, nads)
        assert [d for d, _ in walked] == ["", "0000:af:00.2", ""], walked
        assert json.loads(walked[0][1])["name"] == "plain", "GetCNIConfigFromSpec names a nameless config"
        assert json.loads(walked[1][1])["pciBusID"] == "0000:af:00.2"
        assert len(api.logged("GET", "/apis/resource.k8s.io/v1/namespaces/ns1/resourceclaims/p-vf-x7k2q")) == 1
        api.forget_requests()
        assert delegates_for(get, served, nads[:1]) == [("", b'{"cniVersion":"1.0.0","name":"plain","type":"bridge"}')]
        assert api.logged() == [], "no NAD with a resourceName annotation: no DRA traffic"
    finally:
        api.stop()
    print("multus_dra self-check: ok")


if __name__ == "__main__":
    _self_check()
