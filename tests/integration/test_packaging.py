"""make install and make deb put the binaries at /opt/cni/bin/topocni and topocni-dra (checked
in temp dirs); both are static, and only topocni-dra carries gRPC."""
import os
import struct
import subprocess
import tempfile
import unittest

SRC = os.path.abspath(os.path.join(os.path.dirname(__file__), "../.."))


class Packaging(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.mkdtemp(prefix="topocni-pkg-")
        # The release tree `make test` already built (make test depends on make release).
        self.build = os.environ.get("TOPOCNI_RELEASE_BUILD", os.path.join(SRC, "build-release"))

    def tearDown(self):
        subprocess.run(["rm", "-rf", self.tmp])

    def make(self, *args):
        p = subprocess.run(["make", "-C", SRC, f"RELEASE_BUILD={self.build}", "JOBS=2"] + list(args),
                           capture_output=True, text=True, timeout=900)
        self.assertEqual(p.returncode, 0, p.stdout[-3000:] + p.stderr[-3000:])
        return p

    def test_make_install_and_make_deb_install_to_opt_cni_bin(self):
        dest = os.path.join(self.tmp, "root")
        self.make("install", f"DESTDIR={dest}")
        binary = os.path.join(dest, "opt/cni/bin/topocni")
        self.assertTrue(os.access(binary, os.X_OK))
        v = subprocess.run([binary, "version"], capture_output=True, text=True)
        self.assertIn("1.1.0", v.stdout)
        self.make("deb")
        debs = [f for f in os.listdir(self.build) if f.endswith(".deb")]
        self.assertEqual(len(debs), 1)
        contents = subprocess.run(["dpkg-deb", "-c", os.path.join(self.build, debs[0])],
                                  capture_output=True, text=True).stdout
        self.assertIn("./opt/cni/bin/topocni\n", contents)
        self.assertIn("./opt/cni/bin/topocni-dra\n", contents)
        info = subprocess.run(["dpkg-deb", "-f", os.path.join(self.build, debs[0]), "Package", "Depends",
                               "Recommends"], capture_output=True, text=True).stdout
        self.assertIn("Package: topocni", info)
        # Static, TLS and the resolver included: nothing to depend on or recommend.
        self.assertNotIn("Depends:", info)
        self.assertNotIn("Recommends:", info)
        self.assertFalse(program_header(binary, 3), "the installed binary asks for a dynamic loader (PT_INTERP)")
        self.assertFalse(program_header(binary, 2), "the installed binary has a dynamic section (NEEDED)")
        dra = os.path.join(dest, "opt/cni/bin/topocni-dra")
        self.assertFalse(program_header(dra, 3), "topocni-dra asks for a dynamic loader (PT_INTERP)")
        self.assertFalse(program_header(dra, 2), "topocni-dra has a dynamic section (NEEDED)")

    def test_the_plugin_binary_carries_no_grpc_and_topocni_dra_does(self):
        """gRPC's static initialisers would cost every ADD (a process per call) ~0.6 ms."""
        def symbols(name):
            return subprocess.run(["nm", "-C", os.path.join(self.build, name)], capture_output=True, text=True,
                                  check=True).stdout
        plugin = symbols("topocni")
        self.assertNotIn("grpc", plugin)
        self.assertNotIn("google::protobuf", plugin)
        self.assertIn("grpc::Server", symbols("topocni-dra"))

    def test_the_release_binary_runs_in_a_root_with_nothing_but_itself(self):
        root = os.path.join(self.tmp, "chroot")
        os.makedirs(root)
        subprocess.run(["cp", os.path.join(self.build, "topocni"), root], check=True)
        v = subprocess.run(["/usr/sbin/chroot", root, "/topocni", "version"], capture_output=True, text=True)
        self.assertEqual(v.returncode, 0, v.stderr)
        self.assertIn("1.1.0", v.stdout)
        out = subprocess.run(["/usr/sbin/chroot", root, "/topocni"], input='{"cniVersion": "1.0.0"}', capture_output=True,
                             text=True, env={"CNI_COMMAND": "VERSION"})
        self.assertEqual(out.returncode, 0, out.stderr)
        self.assertIn('"supportedVersions"', out.stdout)
        subprocess.run(["cp", os.path.join(self.build, "topocni-dra"), root], check=True)
        h = subprocess.run(["/usr/sbin/chroot", root, "/topocni-dra", "dra-driver", "--help"], capture_output=True,
                           text=True)
        self.assertEqual(h.returncode, 0, h.stderr)
        self.assertIn("--plugin-registration-dir", h.stdout)


def program_header(path, kind):
    """Whether an ELF64 file has a program header of `kind`: 3 is PT_INTERP (it needs ld.so
    to start), 2 is PT_DYNAMIC (where NEEDED entries would be)."""
    with open(path, "rb") as f:
        head = f.read(1 << 16)
    phoff = struct.unpack_from("<Q", head, 0x20)[0]
    phentsize, phnum = struct.unpack_from("<HH", head, 0x36)
    return any(struct.unpack_from("<I", head, phoff + i * phentsize)[0] == kind for i in range(phnum))


if __name__ == "__main__":
    unittest.main(verbosity=2)
