"""The Python package lms (python/lms) against the real liblms.so on sim.

Run by CTest (tests/python/python.cmake) with LMS_LIBRARY set to the build's
liblms.so, PYTHONPATH to python/, LMS_SOURCE_DIR and LMS_BUILD_DIR, and a sim
of 64 MiB with an 8 MiB device limit and a 64 MiB host limit. What needs a
fresh lms (a setting, where the library is found, a timeline) runs in a
child process of its own (run()).
"""
import os
import re
import shutil
import subprocess
import sys
import tempfile
import unittest

import lms

SOURCE = os.environ["LMS_SOURCE_DIR"]
LIBRARY = os.environ["LMS_LIBRARY"]
MiB = 1 << 20


def header():
    with open(os.path.join(SOURCE, "include", "lms.h")) as f:
        return f.read()


def run(code, env=None, unset=(), check=True):
    """`code` in a new python (this one), with the test's environment plus
    env, less the names in unset; its CompletedProcess (text)."""
    e = dict(os.environ)
    e.update(env or {})
    for name in unset:
        e.pop(name, None)
    p = subprocess.run([sys.executable, "-c", code], env=e, capture_output=True, text=True,
                       timeout=120)
    if check and p.returncode != 0:
        raise AssertionError("child failed (%d):\n%s%s" % (p.returncode, p.stdout, p.stderr))
    return p


class Api(unittest.TestCase):
    def test_version_is_the_headers_and_the_packages(self):
        parts = [re.search(r"#define LMS_VERSION_%s (\d+)" % p, header()).group(1)
                 for p in ("MAJOR", "MINOR", "PATCH")]
        self.assertEqual(lms.version(), ".".join(parts))
        with open(os.path.join(SOURCE, "python", "pyproject.toml")) as f:
            pyproject = re.search(r'^version = "([^"]*)"', f.read(), re.M).group(1)
        self.assertEqual(pyproject, lms.version(), "python/pyproject.toml's version")

    def test_status_names_are_the_headers(self):
        enum = re.search(r"typedef enum lms_status \{(.*?)\} lms_status_t;", header(), re.S)
        names = re.findall(r"^\s*(LMS_\w+)", enum.group(1), re.M)
        self.assertEqual(list(lms.STATUS_NAMES), names)

    def test_stats_are_lms_stats_t_in_order(self):
        block = re.search(r"#define LMS_STATS_FIELDS\(X\)(.*?)\n\n", header(), re.S).group(1)
        s = lms.stats()
        self.assertEqual(list(s), re.findall(r"X\((\w+)\)", block))
        self.assertEqual(s["device_limit"], 8 * MiB)
        self.assertEqual(s["host_limit"], 64 * MiB)

    def test_stats_and_memory_info_see_an_allocation(self):
        # without swapping (LMS_SWAP=0) free is what the device limit has
        # left; with it, the host's room too, capped at the limit
        p = run("""
import ctypes, lms
lib = lms._library.library().cdll
lib.lms_malloc.argtypes = [ctypes.POINTER(ctypes.c_void_p), ctypes.c_size_t, ctypes.c_void_p]
lib.lms_free.argtypes = [ctypes.c_void_p, ctypes.c_void_p]
before = lms.memory_info()
p = ctypes.c_void_p()
assert lib.lms_malloc(ctypes.byref(p), 4 << 20, None) == 0  # two whole chunks
print(before.free, before.total, lms.memory_info().free, lms.stats()["allocated_bytes"])
assert lib.lms_free(p, None) == 0
""", {"LMS_SWAP": "0"})
        free, total, free_after, allocated = map(int, p.stdout.split())
        self.assertEqual((free, total), (8 * MiB, 8 * MiB))
        self.assertEqual(free_after, 4 * MiB)
        self.assertEqual(allocated, 4 * MiB)

    def test_a_failure_is_an_lms_error_with_lms_message(self):
        with self.assertRaises(lms.LmsError) as cm:
            with lms.limit(2):
                pass
        e = cm.exception
        self.assertEqual((e.status, e.name), (2, "LMS_ERR_INVALID"))
        self.assertIn("lms_set_device_fraction: 2 is not in [0, 1]", e.message)
        self.assertIn("LMS_ERR_INVALID (invalid argument)", str(e))

    def test_mark_iteration_marks_the_timeline(self):
        with tempfile.TemporaryDirectory() as tmp:
            timeline = os.path.join(tmp, "timeline.json")
            run("import lms\nfor _ in range(3): lms.mark_iteration()", {"LMS_TRACE": timeline})
            self.assertEqual(iterations(timeline), 3)


def iterations(timeline):
    """The iteration marks in an LMS_TRACE timeline."""
    import json

    with open(timeline) as f:
        events = json.load(f)["traceEvents"]
    return sum(1 for e in events if e.get("name") == "iteration")


class Limit(unittest.TestCase):
    """lms.limit: a start of lms at a share of the device (64 MiB here)."""

    def test_a_region_has_its_limit_and_the_next_start_the_settings(self):
        run("""
import ctypes, lms
lib = lms._library.library().cdll
lib.lms_malloc.argtypes = [ctypes.POINTER(ctypes.c_void_p), ctypes.c_size_t, ctypes.c_void_p]
lib.lms_free.argtypes = [ctypes.c_void_p, ctypes.c_void_p]
with lms.limit(0.5):
    assert lms.stats()["device_limit"] == 32 << 20, lms.stats()
    p = ctypes.c_void_p()
    assert lib.lms_malloc(ctypes.byref(p), 20 << 20, None) == 0   # over LMS_DEVICE_LIMIT
    assert lib.lms_free(p, None) == 0
with lms.limit(0.25):                          # never started inside: nothing to shut down
    pass
assert lms.memory_info().total == 8 << 20, lms.memory_info()
""")

    def test_entering_while_lms_runs_is_refused(self):
        lms.stats()  # lms runs
        with self.assertRaises(lms.LmsError) as cm:
            with lms.limit(0.5):
                self.fail("entered")
        self.assertEqual(cm.exception.name, "LMS_ERR_UNSUPPORTED")
        self.assertIn("lms is running, with a device limit of 8388608 bytes",
                      cm.exception.message)

    def test_memory_left_allocated_keeps_lms_running_at_the_regions_limit(self):
        p = """
import ctypes, lms
lib = lms._library.library().cdll
lib.lms_malloc.argtypes = [ctypes.POINTER(ctypes.c_void_p), ctypes.c_size_t, ctypes.c_void_p]
p = ctypes.c_void_p()
try:
    with lms.limit(0.5):
        assert lib.lms_malloc(ctypes.byref(p), 1 << 20, None) == 0
        if %r:
            raise KeyError("the region's own")
except (lms.LmsError, KeyError) as e:
    print(type(e).__name__, e)
assert lms.stats()["device_limit"] == 32 << 20, lms.stats()
"""
        self.assertRegex(run(p % False).stdout,
                         r"LmsError lms.limit: LMS_ERR_INVALID \(invalid argument\): \d+ bytes "
                         r"are still allocated at the end of the region: lms keeps running")
        self.assertEqual(run(p % True).stdout, "KeyError \"the region's own\"\n")


class Finding(unittest.TestCase):
    """Note [Which liblms.so] in python/lms/_library.py."""

    PATH = "import lms; print(lms.library_path(), lms.is_preloaded(), lms.version())"

    def found(self, p):
        path, preloaded, _ = p.stdout.split()
        self.assertTrue(os.path.samefile(path, LIBRARY), path)
        return preloaded == "True"

    def test_lms_library(self):
        self.assertFalse(self.found(run(self.PATH)))

    def test_the_soname_through_ld_library_path(self):
        self.assertFalse(self.found(run(self.PATH, {"LD_LIBRARY_PATH": os.path.dirname(LIBRARY)},
                                        unset=["LMS_LIBRARY"])))

    def test_the_preload_is_used_and_known(self):
        self.assertTrue(self.found(run(self.PATH, {"LD_PRELOAD": LIBRARY},
                                       unset=["LMS_LIBRARY"])))
        self.assertTrue(self.found(run(self.PATH, {"LD_PRELOAD": LIBRARY})))

    def test_a_second_copy_beside_the_preload_is_refused(self):
        with tempfile.TemporaryDirectory() as tmp:
            copy = shutil.copy(LIBRARY, tmp)
            p = run(self.PATH, {"LD_PRELOAD": LIBRARY, "LMS_LIBRARY": copy}, check=False)
        self.assertNotEqual(p.returncode, 0)
        self.assertIn("a second copy would be a second allocator", p.stderr)

    def test_not_found_says_what_was_tried(self):
        p = run(self.PATH, {"LD_LIBRARY_PATH": ""}, unset=["LMS_LIBRARY"], check=False)
        self.assertNotEqual(p.returncode, 0)
        self.assertIn("LibraryNotFoundError: lms: liblms.so not found. Tried, in order:", p.stderr)
        self.assertIn("ctypes.util.find_library('lms')", p.stderr)
        self.assertIn("liblms.so.0: cannot open shared object file", p.stderr)

    def test_a_wrong_lms_library_is_an_error_not_a_hint(self):
        p = run(self.PATH, {"LMS_LIBRARY": "/nonexistent/liblms.so",
                            "LD_LIBRARY_PATH": os.path.dirname(LIBRARY)}, check=False)
        self.assertNotEqual(p.returncode, 0)
        self.assertIn("LMS_LIBRARY: /nonexistent/liblms.so: cannot open shared object file",
                      p.stderr)


if __name__ == "__main__":
    unittest.main(verbosity=2)
