"""lms from Python: liblms.so's API (include/lms.h) through ctypes.

    import lms
    lms.version()          # "0.1.0"
    lms.stats()            # {"bytes_h2d": ..., "evictions": ..., ...}: lms_stats_t
    lms.memory_info()      # MemoryInfo(free=..., total=...)
    lms.mark_iteration()   # the end of a training step
    lms.torch.use()        # lms as PyTorch's allocator (lms/torch.py)

Every call that fails raises LmsError, carrying lms's status and the message
of lms_last_error(). The library is found on first use (Note [Which
liblms.so] in lms/_library.py): LMS_LIBRARY, else the install prefix, else
the dynamic linker's search; lms.library_path() says which file it is.
"""
import collections
import ctypes

from . import torch  # lms.torch, which imports PyTorch only when called
from ._library import LibraryNotFoundError, library

__all__ = ["torch", "LmsError", "LibraryNotFoundError", "MemoryInfo", "version", "stats",
           "memory_info", "mark_iteration", "limit", "library_path", "is_preloaded"]

# lms_status_t's names, in the order of its values (include/lms.h; the test
# tests/python/test_lms.py reads the header and compares).
STATUS_NAMES = ("LMS_OK", "LMS_NOT_READY", "LMS_ERR_INVALID", "LMS_ERR_OUT_OF_MEMORY",
                "LMS_ERR_NO_DEVICE", "LMS_ERR_UNSUPPORTED", "LMS_ERR_DEVICE", "LMS_ERR_SYSTEM")


class LmsError(RuntimeError):
    """A call into lms failed. status is the lms_status_t value, name its
    enumerator (LMS_ERR_OUT_OF_MEMORY), message lms_last_error()'s text (the
    call and its arguments, and what to change)."""

    def __init__(self, call, status, message):
        self.call = call
        self.status = status
        self.name = STATUS_NAMES[status] if 0 <= status < len(STATUS_NAMES) else str(status)
        self.message = message
        super().__init__("%s: %s (%s)%s" % (call, self.name, _describe(status),
                                             ": " + message if message else ""))


MemoryInfo = collections.namedtuple("MemoryInfo", "free total")
MemoryInfo.__doc__ = """lms_memory_info: total is lms's device limit; free is what can still be
allocated (device plus host room not yet taken), at most total. Bytes."""

_SIZE_P = ctypes.POINTER(ctypes.c_size_t)
# The functions of lms.h this module calls: (restype, argtypes).
_SIGNATURES = {
    "lms_status_str": (ctypes.c_char_p, [ctypes.c_int]),
    "lms_last_error": (ctypes.c_char_p, []),
    "lms_version": (ctypes.c_char_p, []),
    "lms_stats_fields": (ctypes.c_int, [ctypes.POINTER(ctypes.POINTER(ctypes.c_char_p)),
                                        _SIZE_P]),
    "lms_stats": (ctypes.c_int, [ctypes.c_void_p]),
    "lms_memory_info": (ctypes.c_int, [_SIZE_P, _SIZE_P]),
    "lms_mark_iteration": (ctypes.c_int, []),
    "lms_set_device_fraction": (ctypes.c_int, [ctypes.c_double]),
    "lms_shutdown": (ctypes.c_int, []),
}
_bound = {}


def _fn(name):
    """liblms.so's function `name`, with its signature declared (on first use,
    so that a library older than one function fails only where it is called)."""
    fn = _bound.get(name)
    if fn is None:
        lib = library()
        try:
            fn = getattr(lib.cdll, name)
        except AttributeError:
            raise LibraryNotFoundError("lms: %s has no %s: a liblms.so older than this package"
                                       % (lib.path, name)) from None
        fn.restype, fn.argtypes = _SIGNATURES[name]
        _bound[name] = fn
    return fn


def _describe(status):
    return _fn("lms_status_str")(status).decode()


def _check(call, status):
    """Raises LmsError for a failed status, with the calling thread's
    lms_last_error() (read at once: the next lms call replaces it)."""
    if status != 0:
        raise LmsError(call, status, _fn("lms_last_error")().decode())


def library_path():
    """The liblms.so file this process uses (the one PyTorch is given too)."""
    return library().path


def is_preloaded():
    """Whether liblms.so is this process's preload (LD_PRELOAD), which lets it
    see what kernels touch, and so swap."""
    return library().preloaded


def version():
    """lms's version (lms_version(): the LMS_VERSION it was built with)."""
    return _fn("lms_version")().decode()


_stats_type = None


def _stats_struct():
    """lms_stats_t as a ctypes structure, from the field list the library
    gives (lms_stats_fields: LMS_STATS_FIELDS's names, in order, each a
    uint64_t), so that this package never has a list of its own."""
    global _stats_type
    if _stats_type is None:
        names = ctypes.POINTER(ctypes.c_char_p)()
        count = ctypes.c_size_t()
        _check("lms_stats_fields", _fn("lms_stats_fields")(ctypes.byref(names),
                                                           ctypes.byref(count)))
        fields = [(names[i].decode(), ctypes.c_uint64) for i in range(count.value)]
        _stats_type = type("lms_stats_t", (ctypes.Structure,), {"_fields_": fields})
    return _stats_type


def stats():
    """lms_stats(): counters since lms started and the current residency, as a
    dict of lms_stats_t's fields in their order (`lms-info --options` and
    include/lms.h say what each is). Starts lms if it is not running."""
    s = _stats_struct()()
    _check("lms_stats", _fn("lms_stats")(ctypes.addressof(s)))
    return {name: getattr(s, name) for name, _ in s._fields_}


def memory_info():
    """lms_memory_info(): MemoryInfo(free, total) in bytes, as
    torch.cuda.mem_get_info gives (free, total). Starts lms if it is not running."""
    free, total = ctypes.c_size_t(), ctypes.c_size_t()
    _check("lms_memory_info", _fn("lms_memory_info")(ctypes.byref(free), ctypes.byref(total)))
    return MemoryInfo(free.value, total.value)


def mark_iteration():
    """lms_mark_iteration(): the end of a training step. lms learns a step's
    order of accesses and, from the next step on, evicts what is needed
    furthest ahead and fetches what is needed next. Optional: lms finds steps
    itself when nothing marks them. lms.torch.mark_iterations(optimizer)
    calls it after every optimizer step."""
    _check("lms_mark_iteration", _fn("lms_mark_iteration")())


class limit:
    """A region of the program in which lms's device limit is `fraction` of
    the device's memory (in [0, 1]), in place of LMS_DEVICE_LIMIT: for a
    stress test that wants a small GPU for one part of a run.

        with lms.limit(0.25):
            run_the_test()

    lms's limit is fixed while it runs (lms_set_device_fraction works only
    before lms starts), so the region is a whole start of lms:
    - on entry lms must not be running yet (or have been shut down):
      otherwise LmsError LMS_ERR_UNSUPPORTED, whose message names the limit
      it runs with, and nothing changes;
    - lms starts at its first use inside the region, with that limit;
    - on exit, if lms started, it is shut down (lms_shutdown), which needs
      every allocation made in the region freed: with memory still allocated
      LmsError LMS_ERR_INVALID is raised (unless the region is left by an
      exception, which then goes on alone), and lms goes on running, at the
      region's limit. PyTorch's allocator (lms.torch.use()) keeps memory of
      its own, cuBLAS's workspace among it, so a region rarely fits there;
    - after it the next start uses LMS_DEVICE_LIMIT again.
    lms offers no limit in bytes that can be set from here: a share of the
    device, as torch.cuda.set_per_process_memory_fraction takes, is what
    lms_set_device_fraction takes; LMS_DEVICE_LIMIT sets one for a whole run.
    """

    def __init__(self, fraction):
        self.fraction = fraction

    def __enter__(self):
        _check("lms_set_device_fraction(%g)" % self.fraction,
               _fn("lms_set_device_fraction")(self.fraction))
        return self

    def __exit__(self, exc_type, exc, tb):
        if _fn("lms_set_device_fraction")(0) == 0:
            return False  # lms never started in the region
        allocated = stats()["allocated_bytes"]
        if allocated:
            if exc_type is None:
                raise LmsError("lms.limit", STATUS_NAMES.index("LMS_ERR_INVALID"),
                               "%d bytes are still allocated at the end of the region: lms "
                               "keeps running, with the region's limit, until they are freed "
                               "and lms is shut down" % allocated)
            return False
        _check("lms_shutdown", _fn("lms_shutdown")())
        _check("lms_set_device_fraction(0)", _fn("lms_set_device_fraction")(0))
        return False
