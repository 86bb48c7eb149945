"""A server's memory as the kernel counts it, and the hostile bodies that test it: the
scheduler extender's and the admission webhook's tests send both the same."""


def proc_status(pid, key):
    """A byte count of /proc/<pid>/status (VmRSS, VmHWM)."""
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith(key + ":"):
                return int(line.split()[1]) * 1024
    raise KeyError(key)


def reset_peak(pid):
    """VmHWM back to the current RSS (proc(5): 5 to clear_refs), so that it shows this request's peak."""
    with open(f"/proc/{pid}/clear_refs", "w") as f:
        f.write("5")


MiB = 1 << 20


def sanitized(binary):
    """Whether `binary` is the AddressSanitizer build (make test-sanitize): its allocator keeps
    freed memory in a quarantine and its own shadow, so RSS measures ASan, not topocni."""
    marker, tail = b"__asan_init", b""
    with open(binary, "rb") as f:
        while chunk := f.read(8 << 20):
            if marker in tail + chunk:
                return True
            tail = chunk[-len(marker):]
    return False


def nested_bodies(size, wrap):
    """Two hostile bodies of about `size` bytes, each `wrap(value)` with `value` nested JSON
    objects: one nested as deep as the size allows, one wide (many small nested objects)."""
    depth = size // 6
    deep = '{"a":' * depth + "{}" + "}" * depth
    unit = '{"a":{"b":{}}},'
    wide = "[" + unit * (size // len(unit)) + "{}]"
    return {"deep": wrap(deep).encode(), "wide": wrap(wide).encode()}
