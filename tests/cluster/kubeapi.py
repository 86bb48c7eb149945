"""A small client of a real kube-apiserver for the cluster tests (no kubectl is built).

It speaks HTTPS with a client certificate or a bearer token, maps a manifest's kind to its
resource through the server's own discovery (as kubectl does), and applies objects by
create-or-replace. Answers are JSON except /readyz and /healthz, which are text.
"""
import http.client
import json
import ssl


# The tests' own requests, told apart in the audit log from those of topocni's agents (which
# use the same service account in test_manifests.py's policy probes).
TEST_AGENT = "topocni-cluster-tests"


class ApiError(Exception):
    def __init__(self, status, body, method, path):
        self.status, self.body = status, body
        try:
            self.obj = json.loads(body)
        except ValueError:
            self.obj = None
        msg = self.obj.get("message") if isinstance(self.obj, dict) else body[:300]
        super().__init__(f"{method} {path}: {status} {msg}")


class Client:
    def __init__(self, host, port, ca_file, cert=None, key=None, token=None, timeout=30):
        self.host, self.port, self.token, self.timeout, self.ca_file = host, port, token, timeout, ca_file
        self.ctx = ssl.create_default_context(cafile=ca_file)
        if cert:
            self.ctx.load_cert_chain(cert, key)
        self._kinds = None

    def with_token(self, token):
        """The same server, as the holder of `token`."""
        return Client(self.host, self.port, self.ca_file, token=token, timeout=self.timeout)

    def raw(self, method, path, body=None, content_type="application/json", timeout=None):
        """(status, body text) of one request."""
        conn = http.client.HTTPSConnection(self.host, self.port, context=self.ctx, timeout=timeout or self.timeout)
        try:
            headers = {"Accept": "application/json", "User-Agent": TEST_AGENT}
            if self.token:
                headers["Authorization"] = "Bearer " + self.token
            data = None
            if body is not None:
                data = body if isinstance(body, (bytes, str)) else json.dumps(body)
                headers["Content-Type"] = content_type
            conn.request(method, path, body=data, headers=headers)
            r = conn.getresponse()
            return r.status, r.read().decode()
        finally:
            conn.close()

    def request(self, method, path, body=None, content_type="application/json", ok=(200, 201, 202)):
        status, text = self.raw(method, path, body, content_type)
        if status not in ok:
            raise ApiError(status, text, method, path)
        return json.loads(text) if text else None

    def get(self, path):
        return self.request("GET", path)

    def post(self, path, body):
        return self.request("POST", path, body)

    def put(self, path, body):
        return self.request("PUT", path, body)

    def delete(self, path, body=None):
        return self.request("DELETE", path, body)

    def patch(self, path, body, kind="merge"):
        ct = {"merge": "application/merge-patch+json", "json": "application/json-patch+json",
              "strategic": "application/strategic-merge-patch+json"}[kind]
        return self.request("PATCH", path, body, content_type=ct)

    def ready(self):
        try:
            return self.raw("GET", "/readyz", timeout=2)[0] == 200
        except OSError:
            return False

    # --- kinds, as discovery says ---
    def kinds(self, refresh=False):
        """{(apiVersion, kind): (path prefix, resource, namespaced)} from discovery."""
        if self._kinds is None or refresh:
            kinds = {}
            groups = [("v1", "/api/v1")]
            for g in self.get("/apis")["groups"]:
                for v in g["versions"]:
                    groups.append((v["groupVersion"], "/apis/" + v["groupVersion"]))
            for gv, prefix in groups:
                for r in self.get(prefix)["resources"]:
                    if "/" not in r["name"]:
                        kinds[(gv, r["kind"])] = (prefix, r["name"], r["namespaced"])
            self._kinds = kinds
        return self._kinds

    def path_of(self, obj, name=True):
        key = (obj["apiVersion"], obj["kind"])
        if key not in self.kinds():
            self.kinds(refresh=True)   # a CRD applied a moment ago
        prefix, resource, namespaced = self.kinds()[key]
        ns = obj["metadata"].get("namespace", "default") if namespaced else None
        p = prefix + (f"/namespaces/{ns}" if ns else "") + "/" + resource
        return p + "/" + obj["metadata"]["name"] if name else p

    @staticmethod
    def _query(dry_run):
        return "?fieldValidation=Strict" + ("&dryRun=All" if dry_run else "")

    def create(self, obj, dry_run=False):
        return self.post(self.path_of(obj, name=False) + self._query(dry_run), obj)

    def apply(self, obj, dry_run=False):
        """Creates `obj`, or replaces the object of its name (strict field validation: an
        unknown or duplicated field is an error, not silently dropped)."""
        try:
            return self.create(obj, dry_run)
        except ApiError as e:
            if e.status != 409:
                raise
        cur = self.get(self.path_of(obj))
        obj = json.loads(json.dumps(obj))
        obj["metadata"]["resourceVersion"] = cur["metadata"]["resourceVersion"]
        return self.put(self.path_of(obj) + self._query(dry_run), obj)
