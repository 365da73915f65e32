"""The Python package installed as a user installs it, with the environment
test_lms.py has (tests/python/python.cmake), plus LMS_BUILD_DIR, CMAKE and
LMS_INSTALL_PYTHONDIR:
- `pip install ./python` (offline: --no-build-isolation, with the
  setuptools this python has), into a folder of its own;
- `make install` (cmake --install of the build) into a temporary prefix,
  whose lms finds the liblms.so installed with it, with no LMS_LIBRARY.
"""
import importlib.util
import os
import shutil
import subprocess
import sys
import tempfile
import unittest

from test_lms import LIBRARY, SOURCE, run

PROBE = "import lms; print(lms.__file__, lms.library_path(), lms.version())"


def copy_of_the_package(tmp):
    """python/ as a fresh clone has it, in tmp (pip builds in the folder it
    is given, and the source tree is left alone)."""
    dest = os.path.join(tmp, "python")
    shutil.copytree(os.path.join(SOURCE, "python"), dest,
                    ignore=shutil.ignore_patterns("__pycache__", "build", "*.egg-info",
                                                  "_installed.py"))
    return dest


class Install(unittest.TestCase):
    def test_pip_install(self):
        missing = [m for m in ("pip", "setuptools", "wheel") if not importlib.util.find_spec(m)]
        if missing:  # what an offline build with setuptools needs
            self.skipTest("no %s for %s (Debian: %s)" % (", ".join(missing), sys.executable,
                                                         " ".join("python3-" + m for m in missing)))
        with tempfile.TemporaryDirectory() as tmp:
            target = os.path.join(tmp, "site")
            p = subprocess.run([sys.executable, "-m", "pip", "install", "--no-deps", "--no-index",
                                "--no-build-isolation", "--target", target,
                                copy_of_the_package(tmp)],
                               capture_output=True, text=True, timeout=300)
            self.assertEqual(p.returncode, 0, p.stdout + p.stderr)
            out = run(PROBE, {"PYTHONPATH": target}).stdout.split()
        self.assertEqual(out[0], os.path.join(target, "lms", "__init__.py"))
        self.assertTrue(os.path.samefile(out[1], LIBRARY), out[1])

    def test_make_install(self):
        with tempfile.TemporaryDirectory() as prefix:
            p = subprocess.run([os.environ["CMAKE"], "--install", os.environ["LMS_BUILD_DIR"],
                                "--prefix", prefix], capture_output=True, text=True, timeout=300)
            self.assertEqual(p.returncode, 0, p.stdout + p.stderr)
            site = os.path.join(prefix, os.environ["LMS_INSTALL_PYTHONDIR"])
            out = run(PROBE, {"PYTHONPATH": site, "LD_LIBRARY_PATH": ""},
                      unset=["LMS_LIBRARY"]).stdout.split()
            self.assertEqual(out[0], os.path.join(site, "lms", "__init__.py"))
            # the library installed with it, not the build's
            self.assertTrue(out[1].startswith(os.path.realpath(prefix) + os.sep), out[1])
            self.assertFalse(os.path.samefile(out[1], LIBRARY))


if __name__ == "__main__":
    unittest.main(verbosity=2)
