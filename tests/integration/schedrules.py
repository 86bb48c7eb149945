"""kube-scheduler's rules about extenders, transcribed from its Go source, so that tests judge
the shipped configuration and the webhook's pods the way the scheduler will.

- is_interested: pkg/scheduler/extender.go (kubernetes/kubernetes), HTTPExtender.IsInterested
  and hasManagedResources: an extender with no managedResources is sent every pod; with
  some, only a pod whose containers or init containers name one of them in requests or
  limits.
- the extender's config fields: config/v1/types.go (kubernetes/kube-scheduler), Extender
  and ExtenderManagedResource{Name, IgnoredByScheduler}.
"""

EXTENDER_FIELDS = {"urlPrefix", "filterVerb", "preemptVerb", "prioritizeVerb", "weight", "bindVerb", "enableHTTPS",
                   "tlsConfig", "httpTimeout", "nodeCacheCapable", "managedResources", "ignorable"}
MANAGED_RESOURCE_FIELDS = {"name", "ignoredByScheduler"}


def managed_resources(extender):
    """NewHTTPExtender: the set of config.ManagedResources[].Name."""
    return {r["name"] for r in extender.get("managedResources") or []}


def _has_managed_resources(managed, containers):
    for c in containers or []:
        res = c.get("resources") or {}
        for kind in ("requests", "limits"):
            if any(name in managed for name in res.get(kind) or {}):
                return True
    return False


def is_interested(extender, pod):
    """Whether kube-scheduler sends `pod` to `extender` (filter, prioritize, bind): true for
    every pod when the extender manages no resource."""
    managed = managed_resources(extender)
    if not managed:
        return True
    spec = pod.get("spec") or {}
    return _has_managed_resources(managed, spec.get("containers")) or \
        _has_managed_resources(managed, spec.get("initContainers"))


def ignored_by_scheduler(extender):
    """The resources NodeResourcesFit leaves out of its predicate (ignoredByScheduler)."""
    return {r["name"] for r in extender.get("managedResources") or [] if r.get("ignoredByScheduler")}
