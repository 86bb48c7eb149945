"""Real runtimes end to end: podman (CNI backend) and containerd's `ctr run --cni`.

Both run inside a test node netns, with every config, image, state and storage dir in a
temp dir, so nothing on the machine changes. The container must see its topocni
interface and address; removing it must release everything.
"""
import hashlib
import io
import json
import os
import shutil
import subprocess
import tarfile
import unittest

from cnitest import BIN, NetnsTestCase, main, sh

BUSYBOX = shutil.which("busybox") or "/bin/busybox"
ULIMITS = ["--ulimit", "nofile=20000:20000", "--ulimit", "nproc=4096:4096"]


def make_rootfs(root):
    for d in ["bin", "etc", "proc", "sys", "dev", "tmp", "run"]:
        os.makedirs(os.path.join(root, d), exist_ok=True)
    shutil.copy(BUSYBOX, os.path.join(root, "bin/busybox"))
    for applet in subprocess.run([BUSYBOX, "--list"], capture_output=True, text=True).stdout.split():
        if applet != "busybox":
            os.symlink("busybox", os.path.join(root, "bin", applet))
    with open(os.path.join(root, "etc/passwd"), "w") as f:
        f.write("root:x:0:0:root:/:/bin/sh\n")
    with open(os.path.join(root, "etc/group"), "w") as f:
        f.write("root:x:0:\n")


def make_oci_tar(rootfs, out, name):
    """An OCI image layout with one uncompressed layer, built without a registry."""
    def blob(data):
        return "sha256:" + hashlib.sha256(data).hexdigest(), data

    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w") as t:
        t.add(rootfs, arcname=".")
    layer_digest, layer = blob(buf.getvalue())
    config = json.dumps({"architecture": "amd64", "os": "linux",
                         "config": {"Cmd": ["/bin/sh"], "Env": ["PATH=/bin"]},
                         "rootfs": {"type": "layers", "diff_ids": [layer_digest]}}).encode()
    config_digest, _ = blob(config)
    manifest = json.dumps({"schemaVersion": 2, "mediaType": "application/vnd.oci.image.manifest.v1+json",
                           "config": {"mediaType": "application/vnd.oci.image.config.v1+json",
                                      "digest": config_digest, "size": len(config)},
                           "layers": [{"mediaType": "application/vnd.oci.image.layer.v1.tar",
                                       "digest": layer_digest, "size": len(layer)}]}).encode()
    manifest_digest, _ = blob(manifest)
    index = json.dumps({"schemaVersion": 2, "manifests": [
        {"mediaType": "application/vnd.oci.image.manifest.v1+json", "digest": manifest_digest,
         "size": len(manifest), "annotations": {"io.containerd.image.name": name,
                                                "org.opencontainers.image.ref.name": "1"}}]}).encode()
    with tarfile.open(out, "w") as t:
        def add(path, data):
            info = tarfile.TarInfo(path)
            info.size = len(data)
            t.addfile(info, io.BytesIO(data))
        add("oci-layout", b'{"imageLayoutVersion":"1.0.0"}')
        add("index.json", index)
        for d, data in [(layer_digest, layer), (config_digest, config), (manifest_digest, manifest)]:
            add("blobs/sha256/" + d.split(":")[1], data)


def cgroup_dirs(name):
    root = "/sys/fs/cgroup"
    return {os.path.join(root, c, name) for c in os.listdir(root) if os.path.isdir(os.path.join(root, c, name))}


class RuntimeCase(NetnsTestCase):
    # Runtimes leave empty cgroup parents behind (podman: libpod_parent, ctr: default);
    # remove the ones this test created, and only those.
    CGROUP_PARENTS = ["libpod_parent", "default"]

    def setUp(self):
        super().setUp()
        self.cgroups_before = set().union(*(cgroup_dirs(n) for n in self.CGROUP_PARENTS))
        self.bin_dir = os.path.join(self.tmp, "bin")
        os.makedirs(self.bin_dir)
        shutil.copy(BIN, os.path.join(self.bin_dir, "topocni"))
        self.master = f"tr{self.tag}m"[:15]
        sh("ip", "link", "add", self.master, "type", "veth", "peer", "name", f"tr{self.tag}p"[:15], ns=self.node)
        sh("ip", "link", "set", self.master, "up", ns=self.node)
        sh("ip", "link", "set", f"tr{self.tag}p"[:15], "up", ns=self.node)
        self.rootfs = os.path.join(self.tmp, "rootfs")
        make_rootfs(self.rootfs)

    def tearDown(self):
        for name in self.CGROUP_PARENTS:
            for d in cgroup_dirs(name) - self.cgroups_before:
                subprocess.run(["find", d, "-depth", "-type", "d", "-exec", "rmdir", "{}", ";"], capture_output=True)
        super().tearDown()

    def networks(self):
        ipam = lambda subnet: {"type": "host-local", "ranges": [[{"subnet": subnet}]],
                               "routes": [{"dst": "0.0.0.0/0"}], "dataDir": self.data_dir}
        veth = {"cniVersion": "1.0.0", "name": f"tv{self.tag}", "plugins": [
            {"type": "topocni", "attachment": "veth", "stateDir": self.state_dir, "ipam": ipam("10.81.0.0/24")}]}
        mv = {"cniVersion": "1.0.0", "name": f"tm{self.tag}", "plugins": [
            {"type": "topocni", "attachment": "macvlan", "master": self.master, "stateDir": self.state_dir,
             "ipam": ipam("10.82.0.0/24")}]}
        return veth, mv

    def assert_released(self, network):
        self.assertEqual(self.ipam_files(network), [], f"{network}: reservations left")
        links = set(self.links(self.node))
        self.assertEqual(links, {"lo", self.master, f"tr{self.tag}p"[:15]}, "links left on the node")
        recs = os.path.join(self.state_dir, "attachments", network)
        left = [f for f in os.listdir(recs) if not f.startswith(".")] if os.path.isdir(recs) else []
        self.assertEqual(left, [], "attachment records left")


@unittest.skipUnless(shutil.which("podman") and shutil.which("runc"), "podman/runc not installed")
class Podman(RuntimeCase):
    def podman(self, *args, check=True):
        env = dict(os.environ, CONTAINERS_CONF=self.conf_path, CONTAINERS_STORAGE_CONF=self.storage_path)
        env.pop("CNI_COMMAND", None)
        # libcni keeps its result cache in /var/lib/cni/results: give podman a private, empty /var/lib.
        script = 'mount --make-rprivate / && mount -t tmpfs none /var/lib && exec podman "$@"'
        p = subprocess.run(["nsenter", f"--net=/run/netns/{self.node}", "unshare", "-m", "sh", "-c", script, "podman"]
                           + list(args), capture_output=True, text=True, env=env, timeout=180)
        if check and p.returncode != 0:
            raise AssertionError(f"podman {' '.join(args)} failed ({p.returncode}): {p.stderr}")
        return p

    def setUp(self):
        super().setUp()
        w = self.tmp
        self.net_dir = os.path.join(w, "net.d")
        os.makedirs(self.net_dir)
        self.conf_path = os.path.join(w, "containers.conf")
        self.storage_path = os.path.join(w, "storage.conf")
        with open(self.conf_path, "w") as f:
            f.write(f"""[network]
network_backend = "cni"
cni_plugin_dirs = ["{self.bin_dir}", "/usr/lib/cni"]
network_config_dir = "{self.net_dir}"
default_network = "topocni-no-default"
[engine]
cgroup_manager = "cgroupfs"
events_logger = "file"
runtime = "runc"
tmp_dir = "{w}/podman-tmp"
""")
        with open(self.storage_path, "w") as f:
            f.write(f"""[storage]
driver = "vfs"
graphroot = "{w}/podman-root"
runroot = "{w}/podman-run"
""")

    def tearDown(self):
        subprocess.run(["nsenter", f"--net=/run/netns/{self.node}", "podman", "rm", "-af"],
                       capture_output=True, env=dict(os.environ, CONTAINERS_CONF=self.conf_path,
                                                     CONTAINERS_STORAGE_CONF=self.storage_path))
        super().tearDown()

    def test_podman_runs_containers_on_topocni_veth_and_macvlan_networks(self):
        for conflist in self.networks():
            with self.subTest(network=conflist["name"]):
                with open(os.path.join(self.net_dir, "topo.conflist"), "w") as f:
                    json.dump(conflist, f)
                ls = self.podman("network", "ls", "--format", "{{.Name}} {{.Driver}}")
                self.assertIn(f"{conflist['name']} topocni", ls.stdout, "podman rejected the conflist")
                run = self.podman("run", "--rm", "--runtime", "runc", *ULIMITS, "--network", conflist["name"],
                                  "--name", f"c{self.tag}", "--rootfs", self.rootfs,
                                  "/bin/sh", "-c", "ip -o addr show eth0; ip route")
                subnet = "10.81.0." if "tv" in conflist["name"] else "10.82.0."
                self.assertIn("inet " + subnet, run.stdout)
                self.assertIn("default via " + subnet + "1", run.stdout)
                self.assert_released(conflist["name"])


@unittest.skipUnless(shutil.which("ctr") and shutil.which("containerd") and shutil.which("runc"),
                     "containerd not installed")
class Containerd(RuntimeCase):
    def test_ctr_run_with_cni_attaches_and_releases(self):
        w = self.tmp
        sock = os.path.join(w, "containerd.sock")
        cfg = os.path.join(w, "containerd.toml")
        with open(cfg, "w") as f:
            f.write(f"""version = 2
root = "{w}/ctd-root"
state = "{w}/ctd-state"
disabled_plugins = ["io.containerd.grpc.v1.cri", "io.containerd.snapshotter.v1.aufs",
  "io.containerd.snapshotter.v1.btrfs", "io.containerd.snapshotter.v1.zfs",
  "io.containerd.snapshotter.v1.devmapper"]
[grpc]
  address = "{sock}"
[ttrpc]
  address = "{sock}.ttrpc"
[plugins."io.containerd.runtime.v1.linux"]
  runtime_root = "{w}/runc"
[plugins."io.containerd.internal.v1.opt"]
  path = "{w}/opt"
""")
        image = os.path.join(w, "image.tar")
        make_oci_tar(self.rootfs, image, "localhost/topocni-test:1")
        cni_bin = os.path.join(w, "cni-bin")
        os.makedirs(cni_bin)
        for p in os.listdir("/usr/lib/cni"):
            os.symlink(os.path.join("/usr/lib/cni", p), os.path.join(cni_bin, p))
        os.symlink(os.path.join(self.bin_dir, "topocni"), os.path.join(cni_bin, "topocni"))
        for conflist in self.networks():
            with self.subTest(network=conflist["name"]):
                net_d = os.path.join(w, "net.d-" + conflist["name"])
                os.makedirs(net_d)
                # What the container saw goes to a file: ctr's copy of a short-lived task's
                # stdout was seen empty once (the container ran and exited 0).
                out = os.path.join(w, "out-" + conflist["name"])
                os.makedirs(out)
                with open(os.path.join(net_d, "10-topo.conflist"), "w") as f:
                    json.dump(conflist, f)
                script = f"""set -e
mount --make-rprivate /
# containerd's shim sockets and runc state go to /run/containerd: keep them private.
mount -t tmpfs none /run
# libcni keeps its result cache in /var/lib/cni/results: private, empty /var/lib.
mount -t tmpfs none /var/lib
mkdir -p /etc/cni/net.d   # podman's package ships it; /opt/cni/bin is made inside a tmpfs below
mount --bind {net_d} /etc/cni/net.d
mount -t tmpfs none /opt
mkdir -p /opt/cni/bin && mount --bind {cni_bin} /opt/cni/bin
containerd --config {cfg} >{w}/containerd.log 2>&1 &
CTD=$!
trap 'kill $CTD; wait $CTD 2>/dev/null || true' EXIT
for i in $(seq 50); do [ -S {sock} ] && break; sleep 0.1; done
ctr -a {sock} images import --no-unpack=false {image} >/dev/null
ctr -a {sock} run --rm --cni --mount type=bind,src={out},dst=/out,options=rbind:rw localhost/topocni-test:1 c{self.tag} \
  /bin/sh -c 'ip -o addr show eth0 >/out/seen 2>&1; ip route >>/out/seen 2>&1'
"""
                p = subprocess.run(["nsenter", f"--net=/run/netns/{self.node}", "unshare", "-m", "bash", "-c", script],
                                   capture_output=True, text=True, timeout=180)
                if p.returncode != 0:
                    with open(f"{w}/containerd.log") as f:
                        self.fail(p.stdout + p.stderr + f.read()[-2000:])
                subnet = "10.81.0." if "tv" in conflist["name"] else "10.82.0."
                with open(os.path.join(out, "seen")) as f:
                    seen = f.read()
                self.assertIn("inet " + subnet, seen, f"the container saw: {seen!r}; ctr: {p.stdout!r} {p.stderr!r}")
                self.assert_released(conflist["name"])


if __name__ == "__main__":
    main()
