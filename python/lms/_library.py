"""Finding liblms.so and binding it with ctypes.

Note [Which liblms.so]
~~~~~~~~~~~~~~~~~~~~~~
A process must hold one copy of lms: two copies are two allocators, each
with its own device limit and its own view of the memory, and the one that
the preload made (LD_PRELOAD=liblms.so) is the one that sees kernels. So a
copy already mapped in the process when lms first needs the library (the
preload, or one another module opened) is the one used, and LMS_LIBRARY, if
set, must name that same file. Otherwise, in order:
  1. $LMS_LIBRARY, a path (nothing else is tried when it is set: a setting
     that does not work is an error, not a hint);
  2. the library `make install` put beside this package (lms/_installed.py,
     written at install time with the installed library's path);
  3. the dynamic linker's search for the soname liblms.so.0
     (ctypes.util.find_library, LD_LIBRARY_PATH, ld.so.cache).
When none loads, LibraryNotFoundError says what was tried and why each
failed. The path found is the file mapped (read back from /proc/self/maps),
so that PyTorch's CUDAPluggableAllocator, given it, opens the same copy.
"""
import ctypes
import ctypes.util
import os
import re
import threading

SONAME = "liblms.so.0"
_LMS_FILE = re.compile(r"liblms\.so(\.[0-9]+)*$")


class LibraryNotFoundError(OSError):
    """liblms.so could not be loaded; the message lists every place tried."""


def _mapped_copies():
    """The files named liblms.so[.N...] mapped in this process, with the
    address ranges they occupy: {path: [(start, end), ...]}."""
    copies = {}
    try:
        with open("/proc/self/maps") as maps:
            for line in maps:
                fields = line.split(None, 5)
                if len(fields) < 6:
                    continue
                path = fields[5].strip()
                if not _LMS_FILE.search(os.path.basename(path)):
                    continue
                start, end = (int(x, 16) for x in fields[0].split("-"))
                copies.setdefault(path, []).append((start, end))
    except OSError:
        pass  # no procfs: nothing is known to be mapped
    return copies


def _preload_entries():
    """The files LD_PRELOAD names (separated by spaces or colons, as ld.so reads it)."""
    return [p for p in re.split(r"[ :]", os.environ.get("LD_PRELOAD", "")) if p]


def _same_file(a, b):
    try:
        return os.path.samefile(a, b)
    except OSError:
        return False


def _installed_path():
    try:
        from ._installed import LIBRARY  # written by `make install` (CMakeLists.txt)
    except ImportError:
        return None
    return LIBRARY


class _Library:
    """The loaded liblms.so: its ctypes handle, the file it came from, and
    whether it is the process's preload (see Note [Which liblms.so])."""

    def __init__(self):
        before = _mapped_copies()
        env = os.environ.get("LMS_LIBRARY")
        if len(before) > 1:
            raise LibraryNotFoundError(
                "lms: more than one liblms.so is mapped in this process (%s): each is an "
                "allocator of its own; load one" % ", ".join(sorted(before)))
        if before:
            (mapped,) = before
            if env and not _same_file(env, mapped):
                raise LibraryNotFoundError(
                    "lms: LMS_LIBRARY=%s, but this process already holds %s (its preload, or "
                    "a module that opened it), and a second copy would be a second allocator: "
                    "unset LMS_LIBRARY or name that file" % (env, mapped))
            self.cdll = ctypes.CDLL(mapped)
        else:
            self.cdll = self._load(env)
        self.path = self._path_of(self.cdll)
        # The preload is what lets lms see kernels (lms_torch.h): a copy that
        # was there before lms loaded one, and that LD_PRELOAD names.
        self.preloaded = bool(before) and any(_same_file(p, self.path) for p in _preload_entries())

    @staticmethod
    def _load(env):
        if env:  # nothing else when it is set
            candidates = [("LMS_LIBRARY", env, None)]
        else:
            candidates = [
                ("the install prefix (lms/_installed.py)", _installed_path(),
                 "this package was not installed by `make install`"),
                ("ctypes.util.find_library('lms')", ctypes.util.find_library("lms"), "nothing"),
                ("the soname, through LD_LIBRARY_PATH and ld.so.cache", SONAME, None),
            ]
        tried = []
        for where, name, why_none in candidates:
            if name is None:
                tried.append("%s: %s" % (where, why_none))
                continue
            try:
                return ctypes.CDLL(name)
            except OSError as e:
                tried.append("%s: %s" % (where, e))
        raise LibraryNotFoundError(
            "lms: liblms.so not found. Tried, in order:\n  " + "\n  ".join(tried) +
            "\nSet LMS_LIBRARY to its path (build/liblms.so in a build tree), or install lms "
            "(make install PREFIX=...) and this package with it.")

    @staticmethod
    def _path_of(cdll):
        """The file the handle's code came from, as /proc/self/maps names it."""
        addr = ctypes.cast(cdll.lms_status_str, ctypes.c_void_p).value
        for path, ranges in _mapped_copies().items():
            if any(start <= addr < end for start, end in ranges):
                return path
        return cdll._name  # no procfs: the name it was opened by


_lock = threading.Lock()
_library = None


def library():
    """The loaded library (loaded on first use, then the same one)."""
    global _library
    with _lock:
        if _library is None:
            _library = _Library()
        return _library
