"""tests/alloc/ctypes_probe.py LIB — Python's ctypes (as PyTorch's
CUDAPluggableAllocator does, with dlopen) loads liblms.so, and lms allocates
in the Python process (LMS_BACKEND=sim), through lms.h and through the
PyTorch plugin's entry points (lms_torch.h), found by name as
CUDAPluggableAllocator finds them."""
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

torch_malloc = lib.lms_torch_malloc
torch_malloc.restype = ctypes.c_void_p
torch_malloc.argtypes = [ctypes.c_size_t, ctypes.c_int, ctypes.c_void_p]
lib.lms_torch_free.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int, ctypes.c_void_p]
stream = ctypes.c_void_p(0x5000)  # a cudaStream_t: only a name on sim
p = torch_malloc(4096, 0, stream)
if not p:
    sys.exit("FAIL: lms_torch_malloc gave NULL: %s" % lib.lms_last_error().decode())
if torch_malloc(4096, 1, stream):
    sys.exit("FAIL: lms_torch_malloc on device 1 (lms runs on device 0) did not fail")
# lms_stats_t's fields, in order, each a uint64_t, as the library says
# (lms_stats_fields: the struct grows, so no count is kept here)
names = ctypes.POINTER(ctypes.c_char_p)()
count = ctypes.c_size_t()
ok("lms_stats_fields", lib.lms_stats_fields(ctypes.byref(names), ctypes.byref(count)))
fields = [names[i].decode() for i in range(count.value)]
if "host_limit" not in fields:
    sys.exit("FAIL: no host_limit among lms_stats_t's fields: %s" % fields)
stats = (ctypes.c_uint64 * len(fields))()
ok("lms_stats", lib.lms_stats(stats))
host_limit = stats[fields.index("host_limit")]
if host_limit != 0:
    sys.exit("FAIL: loaded as a plugin alone, lms swaps (host limit %d): it cannot see kernels"
             % host_limit)
lib.lms_torch_free(p, 4096, 0, stream)
print("ctypes_probe: ctypes loaded %s; lms_init, lms_malloc, lms_free, lms_shutdown, "
      "lms_torch_malloc and lms_torch_free work" % sys.argv[1])
