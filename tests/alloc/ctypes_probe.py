"""tests/alloc/ctypes_probe.py LIB — Python's ctypes (as PyTorch's
CUDAPluggableAllocator does, with dlopen) loads liblms.so, and lms allocates
in the Python process (LMS_BACKEND=sim)."""
import ctypes
import sys

lib = ctypes.CDLL(sys.argv[1])
lib.lms_last_error.restype = ctypes.c_char_p
lib.lms_malloc.argtypes = [ctypes.POINTER(ctypes.c_void_p), ctypes.c_size_t, ctypes.c_void_p]
lib.lms_free.argtypes = [ctypes.c_void_p, ctypes.c_void_p]


def ok(name, status):
    if status != 0:
        sys.exit("FAIL: %s -> %d: %s" % (name, status, lib.lms_last_error().decode()))


ok("lms_init", lib.lms_init())
ptr = ctypes.c_void_p()
ok("lms_malloc(1 MiB)", lib.lms_malloc(ctypes.byref(ptr), 1 << 20, None))
if not ptr.value:
    sys.exit("FAIL: lms_malloc gave NULL")
ok("lms_free", lib.lms_free(ptr, None))
ok("lms_shutdown", lib.lms_shutdown())
print("ctypes_probe: ctypes loaded %s; lms_init, lms_malloc, lms_free, lms_shutdown work"
      % sys.argv[1])
