/*
 * bench/remap_uvm.c — bench/remap's "uvm" rows: how fast the driver moves
 * unified memory (cuMemAllocManaged) when asked to with cuMemPrefetchAsync,
 * host to device, device to host, and both at once. That is the best the
 * peer in bench/gpt2.py's uvm rows can do (issue 26); bench/swap's raw rows
 * are the same link under plain copies, and lms.
 *
 *   {"bench":"remap","case":"uvm","direction":"h2d|d2h|both","bytes":N,
 *    "reps":R,"ms":..,"gbps":..,"gbps_min":..,"gbps_max":..,...}
 *
 * Two managed buffers of N bytes (1 GiB, 256 MiB with --quick; halved
 * until twice N fits in the device's free memory with 256 MiB to spare),
 * each filled on the host first, so that every page exists and lives in
 * host memory. h2d: one buffer prefetched to the device; d2h: back to the
 * host; both: one buffer to the device while the other, on the device
 * since the rep before, goes to the host, on two streams (2 x N bytes
 * moved; gbps counts both). Each time runs from the first enqueue until
 * both streams are synchronized, as bench/swap's raw copies; medians of R
 * reps (7, 3 with --quick) after an untimed one; GB/s decimal.
 *
 * Driver entry points come from libcuda.so.1, which the cuda backend has
 * opened already, by the names cuda.h gives them (cuMemFree is
 * cuMemFree_v2: the field follows the same #define); the context is the
 * one the device layer made current on this thread.
 */
#include "bench/remap_uvm.h"

#include <cuda.h>
#include <dlfcn.h>
#include <stdlib.h>
#include <string.h>

#include "base/base.h"
#include "bench/bench.h"

#if CUDA_VERSION < 12020
#error "bench/remap_uvm.c needs CUDA 12.2 headers or later (cuMemPrefetchAsync_v2)"
#endif

#define UVM_DRIVER(X)                                                                        \
    X(cuGetErrorName) X(cuCtxGetDevice) X(cuMemGetInfo) X(cuMemAllocManaged) X(cuMemFree)    \
    X(cuMemPrefetchAsync_v2) X(cuStreamCreate) X(cuStreamDestroy) X(cuStreamSynchronize)

#define STRINGIFY_(name) #name
#define STRINGIFY(name) STRINGIFY_(name)
static struct {
#define UVM_FIELD_(f) __typeof__(&f) f;
    UVM_DRIVER(UVM_FIELD_)
#undef UVM_FIELD_
} drv;

static void check(CUresult r, const char *what)
{
    if (r != CUDA_SUCCESS) {
        const char *name = "?";
        drv.cuGetErrorName(r, &name);
        fprintf(stderr, "bench/remap: uvm: %s: %s (%d)\n", what, name, (int)r);
        exit(1);
    }
}

static void driver_load(void)
{
    void *lib = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
    if (lib == NULL) {
        fprintf(stderr, "bench/remap: uvm: %s\n", dlerror());
        exit(1);
    }
#define UVM_LOAD_(f)                                                                         \
    if ((*(void **)&drv.f = dlsym(lib, STRINGIFY(f))) == NULL) {                             \
        fprintf(stderr, "bench/remap: uvm: the driver has no %s\n", STRINGIFY(f));           \
        exit(1);                                                                             \
    }
    UVM_DRIVER(UVM_LOAD_)
#undef UVM_LOAD_
}

static CUdevice device;
static CUstream streams[2];

/* Prefetches `in` (if not 0) to the device on one stream and `out` (if not
 * 0) to the host on the other, n bytes each; the time in ms from the first
 * enqueue until both are done. */
static double migrate(CUdeviceptr in, CUdeviceptr out, size_t n)
{
    CUmemLocation dev = {.type = CU_MEM_LOCATION_TYPE_DEVICE, .id = device};
    CUmemLocation host = {.type = CU_MEM_LOCATION_TYPE_HOST};
    uint64_t t0 = base_now_ns();
    if (in != 0)
        check(drv.cuMemPrefetchAsync_v2(in, n, dev, 0, streams[0]), "cuMemPrefetchAsync to device");
    if (out != 0)
        check(drv.cuMemPrefetchAsync_v2(out, n, host, 0, streams[1]), "cuMemPrefetchAsync to host");
    for (int i = 0; i < 2; i++)
        check(drv.cuStreamSynchronize(streams[i]), "cuStreamSynchronize");
    return (double)(base_now_ns() - t0) / 1e6;
}

static void print_row(const char *direction, size_t n, double *ms, int reps, size_t moved,
                      const char *machine)
{
    double med = bench_median(ms, reps); /* sorts: ms[0] is the fastest */
    printf("{\"bench\":\"remap\",\"case\":\"uvm\",\"direction\":\"%s\",\"bytes\":%zu,\"reps\":%d,"
           "\"ms\":%.3f,\"gbps\":%.2f,\"gbps_min\":%.2f,\"gbps_max\":%.2f,%s}\n",
           direction, n, reps, med, (double)moved / (med * 1e6),
           (double)moved / (ms[reps - 1] * 1e6), (double)moved / (ms[0] * 1e6), machine);
    fflush(stdout);
}

void remap_uvm_rows(const char *machine, bool quick)
{
    enum { MAX_REPS = 7 };
    driver_load();
    check(drv.cuCtxGetDevice(&device), "cuCtxGetDevice (no current context?)");
    size_t free_bytes, total;
    check(drv.cuMemGetInfo(&free_bytes, &total), "cuMemGetInfo");
    size_t n = quick ? 256 * BASE_MiB : BASE_GiB;
    while (n > BASE_MiB && 2 * n + 256 * BASE_MiB > free_bytes)
        n /= 2;
    int reps = quick ? 3 : MAX_REPS;
    CUdeviceptr a, b;
    check(drv.cuMemAllocManaged(&a, n, CU_MEM_ATTACH_GLOBAL), "cuMemAllocManaged");
    check(drv.cuMemAllocManaged(&b, n, CU_MEM_ATTACH_GLOBAL), "cuMemAllocManaged");
    memset((void *)(uintptr_t)a, 1, n); /* every page made, on the host */
    memset((void *)(uintptr_t)b, 2, n);
    for (int i = 0; i < 2; i++)
        check(drv.cuStreamCreate(&streams[i], CU_STREAM_NON_BLOCKING), "cuStreamCreate");

    double h2d[MAX_REPS], d2h[MAX_REPS], both[MAX_REPS];
    migrate(a, 0, n); /* untimed, one each way: as bench/swap's warm-up rep */
    migrate(0, a, n);
    for (int r = 0; r < reps; r++) {
        h2d[r] = migrate(a, 0, n);
        d2h[r] = migrate(0, a, n);
    }
    print_row("h2d", n, h2d, reps, n, machine);
    print_row("d2h", n, d2h, reps, n, machine);
    /* a on the host, b on the device; they trade places each rep */
    migrate(b, 0, n);
    for (int r = 0; r <= reps; r++) {
        CUdeviceptr in = r % 2 ? b : a, out = r % 2 ? a : b;
        double ms = migrate(in, out, n);
        if (r > 0) /* the first is untimed */
            both[r - 1] = ms;
    }
    print_row("both", n, both, reps, 2 * n, machine);

    for (int i = 0; i < 2; i++)
        check(drv.cuStreamDestroy(streams[i]), "cuStreamDestroy");
    check(drv.cuMemFree(a), "cuMemFree");
    check(drv.cuMemFree(b), "cuMemFree");
}
