/*
 * bench/host_numa.cu — what an evicted chunk whose addresses stay mapped to
 * its host copy would cost on a card (issue 27; DESIGN.md, "The one hard
 * rule"): host-located VMM blocks (CUDA 13: cuMemCreate with
 * CU_MEM_LOCATION_TYPE_HOST_NUMA) made, mapped, set accessible and copied
 * into the way such a mode would, beside the same for device blocks.
 *
 * Under the preload, on the device of lms's primary context, in this order
 * (the steps whose kernels touch host mappings last: a fault there ends the
 * context), one JSON line each, printed as it is measured:
 *  device    CU_DEVICE_ATTRIBUTE_HOST_NUMA_VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED,
 *            the device's host NUMA node (-1, no NUMA: node 0, as cuMemCreate
 *            wants it), the minimum and recommended allocation granularity of
 *            a HOST_NUMA, a HOST and a device block, lms's chunk (the
 *            device's minimum granularity, as device/cuda.c takes it) and
 *            whether the host minimum divides it. "block" is the larger of
 *            the chunk and the host minimum: every block below is that size.
 *  handles   HANDLES host blocks made one at a time (cuMemCreate's time:
 *            median, p90, max, and the median of the last 256); a failure
 *            ends the making and is an answer (how many can be), not a
 *            failure. Each mapped at the next slot of a window of its own
 *            reservation, set read-write for the device and the host (a
 *            second descriptor, HOST_NUMA; the device's alone, said, if the
 *            driver refuses it) PIECE_BLOCKS slots a call (256 MiB of 2 MiB
 *            blocks, the growth piece of issue 27's design); then the CPU
 *            writes and reads slot 0 through the window (a fault is caught).
 *  vmm       cuMemMap, cuMemSetAccess and cuMemUnmap of one block at an
 *            address near the top of lms's range (lms_reserved_range), REPEATS
 *            rounds, medians in microseconds, for a host block with both
 *            descriptors, a host block with the device's alone and a device
 *            block, each idle, beside D2H copies and beside H2D copies
 *            (BUF_BYTES each between a device buffer and pinned memory, on
 *            another stream, queued four at a time; a round counts only if
 *            the copies ran from before it to after it, else it is
 *            "discarded").
 *  copy      D2H and H2D copy rates between a device buffer and host memory,
 *            medians of COPY_REPS, with the calls lms's device layer makes
 *            (cuMemcpyDtoHAsync / cuMemcpyHtoDAsync: "typed") and with
 *            cuMemcpyAsync ("generic"), of one block and of COPY_BYTES, into
 *            pinned memory (cuMemAllocHost) and into the window's host blocks
 *            (COPY_BYTES spans COPY_BYTES / block adjacent handles).
 *  across_handles  one block's copy, typed, into the window at half a block:
 *            across two adjacent handles; whether the call succeeded, the
 *            bytes arrived (read by the CPU through the window where it can)
 *            and a typed copy back out of the same span returns them.
 *  evict_cycle  an eviction and a fetch as host-mapped mode would make
 *            them, on one chunk at lms's address: a device block mapped there
 *            and filled; copied out (typed) into a host block through the
 *            window; the address unmapped and mapped to that host block
 *            (mapped at two addresses at once), set for device and host; a
 *            kernel that finds the chunk through a pointer stored in device
 *            memory reads and writes it; then unmapped, the device block
 *            mapped back and the host copy copied in (typed), the kernel run
 *            again and the chunk checked. It answers the mechanism, not
 *            swap/'s use of it (tests/swap with LMS_EVICTED=host does that).
 *  kernel    a kernel's read and write rates through host mappings of 1, 8,
 *            64 and 512 adjacent host blocks of the window (GB/s, 5 passes
 *            or more, at least 1 GiB), and over 64 blocks of device memory.
 *  teardown  cuMemUnmap and cuMemRelease of the window's blocks, medians.
 *  summary   failures (failed calls) and illegal_address (how many of them
 *            were CUDA_ERROR_ILLEGAL_ADDRESS).
 * Every line is {"bench":"host_numa","case":"<name>",...}; what a step could
 * not measure is null, and the failed call is named on stderr.
 *   LD_PRELOAD=B/liblms.so LMS_BACKEND=cuda B/bench/host_numa
 * The driver's functions come from cudaGetDriverEntryPointByVersion (no
 * libcuda linked: without a driver the program starts, and skips); under the
 * preload the copies are lms's hooks, which pass addresses in no lms
 * allocation on to CUDA. Nothing is allocated through lms. It holds HANDLES
 * host blocks (8 GiB at 2 MiB) and BUF_BYTES of pinned and of device memory.
 * Exit: 0 every call succeeded (an unsupported device and the handle count
 * are answers), 1 a call failed or liblms.so is not preloaded, 77 no device.
 */
#include <dlfcn.h>
#include <setjmp.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <cuda.h>
#include <cudaTypedefs.h>
#include <cuda_runtime.h>

#include "bench/bench.h" /* medians and JSON strings (no BENCH_NAME: no lms link) */
#include "lms.h"         /* types only: lms_reserved_range comes from the preload */
#include "tests/gpu/gpu_program.h"

#define REPEATS 50                    /* rounds of each vmm line */
#define HANDLES 4096                  /* host blocks made, mapped in the window */
#define PIECE_BLOCKS 128              /* blocks per set_access in the window */
#define BUF_BYTES ((size_t)256 << 20) /* each copy beside the vmm rounds */
#define COPY_BYTES ((size_t)64 << 20) /* the large copies of the copy lines */
#define COPY_REPS 7
#define KERNEL_MIN_BYTES ((size_t)1 << 30) /* bytes a kernel line moves at least */

static struct {
    PFN_cuGetErrorName_v6000 GetErrorName;
    PFN_cuDeviceGet_v2000 DeviceGet;
    PFN_cuDeviceGetAttribute_v2000 DeviceGetAttribute;
    PFN_cuMemGetAllocationGranularity_v10020 MemGetAllocationGranularity;
    PFN_cuMemCreate_v10020 MemCreate;
    PFN_cuMemRelease_v10020 MemRelease;
    PFN_cuMemAddressReserve_v10020 MemAddressReserve;
    PFN_cuMemAddressFree_v10020 MemAddressFree;
    PFN_cuMemMap_v10020 MemMap;
    PFN_cuMemUnmap_v10020 MemUnmap;
    PFN_cuMemSetAccess_v10020 MemSetAccess;
    PFN_cuMemAllocHost_v3020 MemAllocHost;
    PFN_cuMemFreeHost_v2000 MemFreeHost;
    PFN_cuMemcpyHtoD_v3020 MemcpyHtoD;
    PFN_cuMemcpyDtoH_v3020 MemcpyDtoH;
    PFN_cuMemcpyHtoDAsync_v3020 MemcpyHtoDAsync;
    PFN_cuMemcpyDtoHAsync_v3020 MemcpyDtoHAsync;
    PFN_cuMemcpyAsync_v4000 MemcpyAsync;
    PFN_cuStreamQuery_v2000 StreamQuery;
} cu;

static int failures, illegal; /* failed calls; those that were an illegal address */

static const char *error_name(CUresult r)
{
    const char *name = NULL;
    if (cu.GetErrorName == NULL || cu.GetErrorName(r, &name) != CUDA_SUCCESS || name == NULL)
        name = "an unknown CUresult";
    return name;
}

/* True if r is CUDA_SUCCESS; else the call and its error said on stderr, and
 * the error's name in *name where name is not NULL. */
static bool answered(CUresult r, const char *call, const char **name)
{
    if (r == CUDA_SUCCESS)
        return true;
    fprintf(stderr, "host_numa: %s: %s (%d)\n", call, error_name(r), (int)r);
    if (name != NULL)
        *name = error_name(r);
    return false;
}

/* answered, and a failure of the program unless r is CUDA_SUCCESS. */
static bool ok(CUresult r, const char *call)
{
    if (answered(r, call, NULL))
        return true;
    failures++;
    illegal += r == CUDA_ERROR_ILLEGAL_ADDRESS;
    return false;
}

static bool rt_ok(cudaError_t e, const char *call)
{
    if (e == cudaSuccess)
        return true;
    fprintf(stderr, "host_numa: %s: %s\n", call, cudaGetErrorName(e));
    failures++;
    illegal += e == cudaErrorIllegalAddress;
    return false;
}

static bool find_driver(void)
{
    static const struct { const char *name; void **slot; } fns[] = {
        {"cuGetErrorName", (void **)&cu.GetErrorName},
        {"cuDeviceGet", (void **)&cu.DeviceGet},
        {"cuDeviceGetAttribute", (void **)&cu.DeviceGetAttribute},
        {"cuMemGetAllocationGranularity", (void **)&cu.MemGetAllocationGranularity},
        {"cuMemCreate", (void **)&cu.MemCreate},
        {"cuMemRelease", (void **)&cu.MemRelease},
        {"cuMemAddressReserve", (void **)&cu.MemAddressReserve},
        {"cuMemAddressFree", (void **)&cu.MemAddressFree},
        {"cuMemMap", (void **)&cu.MemMap},
        {"cuMemUnmap", (void **)&cu.MemUnmap},
        {"cuMemSetAccess", (void **)&cu.MemSetAccess},
        {"cuMemAllocHost", (void **)&cu.MemAllocHost}, /* _v2, for 3.2 and later */
        {"cuMemFreeHost", (void **)&cu.MemFreeHost},
        {"cuMemcpyHtoD", (void **)&cu.MemcpyHtoD},
        {"cuMemcpyDtoH", (void **)&cu.MemcpyDtoH},
        {"cuMemcpyHtoDAsync", (void **)&cu.MemcpyHtoDAsync},
        {"cuMemcpyDtoHAsync", (void **)&cu.MemcpyDtoHAsync},
        {"cuMemcpyAsync", (void **)&cu.MemcpyAsync},
        {"cuStreamQuery", (void **)&cu.StreamQuery},
    };
    for (size_t i = 0; i < sizeof fns / sizeof fns[0]; i++) {
        cudaDriverEntryPointQueryResult q;
        cudaError_t e = cudaGetDriverEntryPointByVersion(fns[i].name, fns[i].slot, 12000,
                                                         cudaEnableDefault, &q);
        if (e != cudaSuccess || q != cudaDriverEntryPointSuccess || *fns[i].slot == NULL) {
            fprintf(stderr, "host_numa: cudaGetDriverEntryPointByVersion(%s): %s, query %d\n",
                    fns[i].name, cudaGetErrorName(e), (int)q);
            return false;
        }
    }
    return true;
}

static double now_us(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec * 1e6 + (double)t.tv_nsec / 1e3;
}

/* ---- JSON lines ------------------------------------------------------------------------ */

static void row(const char *name)
{
    printf("{\"bench\":\"host_numa\",\"case\":\"%s\"", name);
}

static void row_end(void)
{
    printf("}\n");
    fflush(stdout); /* each line out as it is measured: a fault later loses none */
}

static void json_number(const char *key, double v) /* negative: null */
{
    if (v < 0)
        printf(",\"%s\":null", key);
    else
        printf(",\"%s\":%.2f", key, v);
}

static void json_size(const char *key, size_t v)
{
    printf(",\"%s\":%zu", key, v);
}

static void json_bool(const char *key, int v) /* -1: null */
{
    printf(",\"%s\":%s", key, v < 0 ? "null" : v ? "true" : "false");
}

static void json_str(const char *key, const char *s) /* NULL: null */
{
    printf(",\"%s\":", key);
    if (s == NULL)
        printf("null");
    else
        bench_json_string(s);
}

/* The median of v[0..n), negative (null) for none; sorts v. */
static double median_or_none(double *v, int n)
{
    return n > 0 ? bench_median(v, n) : -1;
}

/* ---- what the steps share -------------------------------------------------------------- */

typedef struct setup {
    CUdevice dev;
    int supported;              /* the attribute: 1, 0, -1 unknown */
    size_t block;               /* every block's size: the chunk, or the host minimum if larger */
    CUmemAllocationProp hprop;  /* a HOST_NUMA block on the device's node */
    CUmemAllocationProp dprop;  /* a device block */
    CUmemAccessDesc access[2];  /* device read-write, then the host's (HOST_NUMA) */
    CUdeviceptr va;             /* one block near the top of lms's range */
    cudaStream_t stream;        /* the timed work's */
    cudaStream_t copy_stream;   /* the copies beside the vmm rounds */
    cudaEvent_t e0, e1;
    int grid;                   /* blocks per kernel: 4 per SM */
} setup_t;

typedef struct buffers {
    CUmemGenericAllocationHandle dev_h;
    CUdeviceptr dev;  /* BUF_BYTES + one block of device memory, read-write; the last
                         block holds the evict cycle's pointer and the kernels' scratch */
    uint8_t *pin;     /* BUF_BYTES of pinned host memory (cuMemAllocHost) */
} buffers_t;

typedef struct window {
    CUdeviceptr base;                /* reserved: HANDLES blocks */
    CUmemGenericAllocationHandle h[HANDLES]; /* the host blocks made, h[0..made) */
    size_t made, mapped;             /* h[i] is mapped at base + i * block for i < mapped */
    size_t naccess;                  /* 2: mapped slots are device and host read-write; 1:
                                        the device's alone; 0: not accessible */
    int cpu_rw;                      /* the CPU wrote and read slot 0: 1, 0 no, -1 not tried */
} window_t;

/* lms's device layer copies with the typed calls (dev_copy_d2h, dev_copy_h2d);
 * "generic" lets the driver tell the sides apart by their addresses. */
typedef enum { D2H, H2D } direction_t;

static CUresult copy_async(direction_t dir, bool generic, CUdeviceptr host_side,
                           CUdeviceptr dev_side, size_t n, cudaStream_t s)
{
    CUstream st = (CUstream)s;
    if (generic)
        return dir == D2H ? cu.MemcpyAsync(host_side, dev_side, n, st)
                          : cu.MemcpyAsync(dev_side, host_side, n, st);
    return dir == D2H ? cu.MemcpyDtoHAsync((void *)host_side, dev_side, n, st)
                      : cu.MemcpyHtoDAsync(dev_side, (const void *)host_side, n, st);
}

/* Maps h at va and sets the first naccess of access; false (said) if not. */
static bool map_rw(CUmemGenericAllocationHandle h, CUdeviceptr va, size_t bytes,
                   const CUmemAccessDesc *access, size_t naccess)
{
    if (!ok(cu.MemMap(va, bytes, 0, h, 0), "cuMemMap"))
        return false;
    if (ok(cu.MemSetAccess(va, bytes, access, naccess), "cuMemSetAccess"))
        return true;
    (void)ok(cu.MemUnmap(va, bytes), "cuMemUnmap");
    return false;
}

/* ---- the CPU through a mapping --------------------------------------------------------- */

static sigjmp_buf cpu_probe_jump;

static void cpu_probe_fault(int sig)
{
    siglongjmp(cpu_probe_jump, sig);
}

/* 1 if the CPU can write p and read the word back, 0 if that faults (SIGSEGV or
 * SIGBUS, caught for the probe alone) or reads another value. */
static int cpu_rw(volatile uint32_t *p)
{
    struct sigaction probe, old_segv, old_bus;
    memset(&probe, 0, sizeof probe);
    probe.sa_handler = cpu_probe_fault;
    sigemptyset(&probe.sa_mask);
    sigaction(SIGSEGV, &probe, &old_segv);
    sigaction(SIGBUS, &probe, &old_bus);
    volatile int result = 0;
    if (sigsetjmp(cpu_probe_jump, 1) == 0) {
        p[0] = 0x5a5a1234u;
        result = p[0] == 0x5a5a1234u;
    }
    sigaction(SIGSEGV, &old_segv, NULL);
    sigaction(SIGBUS, &old_bus, NULL);
    return result;
}

/* ---- handles: making, mapping and setting HANDLES host blocks -------------------------- */

static double t[HANDLES]; /* the times of the window's calls, one per block */

static void make_window(const setup_t *s, window_t *w)
{
    double last[256], map_us = -1, piece_us = -1;
    const char *create_error = NULL;
    for (; w->made < HANDLES; w->made++) {
        double t0 = now_us();
        if (!answered(cu.MemCreate(&w->h[w->made], s->block, &s->hprop, 0),
                      "cuMemCreate (host block of the window)", &create_error))
            break; /* how many can be made: an answer */
        t[w->made] = now_us() - t0;
    }
    int n = (int)w->made, nlast = n < 256 ? n : 256;
    memcpy(last, t + n - nlast, (size_t)nlast * sizeof *t);
    double last_us = median_or_none(last, nlast);
    double p50 = median_or_none(t, n); /* sorted now */
    double p90 = n > 0 ? t[(int)(0.9 * (n - 1))] : -1, max = n > 0 ? t[n - 1] : -1;

    if (n > 0 && ok(cu.MemAddressReserve(&w->base, HANDLES * s->block, s->block, 0, 0),
                    "cuMemAddressReserve (the window)")) {
        for (; w->mapped < w->made; w->mapped++) {
            double t0 = now_us();
            if (!ok(cu.MemMap(w->base + w->mapped * s->block, s->block, 0, w->h[w->mapped], 0),
                    "cuMemMap (window slot)"))
                break;
            t[w->mapped] = now_us() - t0;
        }
        map_us = median_or_none(t, (int)w->mapped);
        /* a piece at a time, as a growing pool would set them; both descriptors, or the
         * device's alone, said, if the driver refuses the host's */
        int pieces = 0;
        w->naccess = 2;
        for (size_t p = 0; w->naccess > 0 && p < w->mapped; p += PIECE_BLOCKS) {
            size_t nb = w->mapped - p < PIECE_BLOCKS ? w->mapped - p : PIECE_BLOCKS;
            CUdeviceptr at = w->base + p * s->block;
            double t0 = now_us();
            CUresult r = cu.MemSetAccess(at, nb * s->block, s->access, w->naccess);
            double took = now_us() - t0;
            if (r != CUDA_SUCCESS && p == 0 && w->naccess == 2) {
                (void)answered(r, "cuMemSetAccess (the window, device + host)", NULL);
                w->naccess = 1;
                r = cu.MemSetAccess(at, nb * s->block, s->access, w->naccess);
                took = -1; /* not the first try's time */
            }
            if (!ok(r, "cuMemSetAccess (a piece of the window)"))
                w->naccess = 0;
            else if (nb == PIECE_BLOCKS && took >= 0)
                t[pieces++] = took;
        }
        piece_us = median_or_none(t, pieces);
        if (w->naccess == 2)
            w->cpu_rw = cpu_rw((volatile uint32_t *)w->base);
    }
    row("handles");
    json_size("wanted", HANDLES);
    json_size("made", w->made);
    json_str("create_error", create_error);
    json_size("block_bytes", s->block);
    json_number("create_us_p50", p50);
    json_number("create_us_p90", p90);
    json_number("create_us_max", max);
    json_number("create_us_p50_last256", last_us);
    json_size("mapped", w->mapped);
    json_number("map_us_p50", map_us);
    json_str("window_access", w->naccess == 2 ? "device+host" : w->naccess ? "device" : NULL);
    json_size("piece_blocks", PIECE_BLOCKS);
    json_number("set_access_us_per_piece_p50", piece_us);
    json_bool("cpu_rw", w->cpu_rw);
    row_end();
}

static void drop_window(const setup_t *s, window_t *w)
{
    int n = 0, m = 0;
    for (size_t i = 0; i < w->mapped; i++) {
        double t0 = now_us();
        if (ok(cu.MemUnmap(w->base + i * s->block, s->block), "cuMemUnmap (window slot)"))
            t[n++] = now_us() - t0;
    }
    double unmap_us = median_or_none(t, n);
    for (size_t i = 0; i < w->made; i++) {
        double t0 = now_us();
        if (ok(cu.MemRelease(w->h[i]), "cuMemRelease (host block)"))
            t[m++] = now_us() - t0;
    }
    double release_us = median_or_none(t, m); /* sorted now */
    if (w->base != 0)
        (void)ok(cu.MemAddressFree(w->base, HANDLES * s->block), "cuMemAddressFree (the window)");
    row("teardown");
    json_size("blocks", w->made);
    json_number("unmap_us_p50", unmap_us);
    json_number("release_us_p50", release_us);
    json_number("release_us_max", m > 0 ? t[m - 1] : -1);
    row_end();
}

/* ---- vmm: map, set_access, unmap, idle and beside copies ------------------------------- */

typedef enum { IDLE, BESIDE_D2H, BESIDE_H2D } beside_t;

static void spin_us(double us)
{
    for (double t0 = now_us(); now_us() - t0 < us;)
        ;
}

static void vmm_line(const setup_t *s, const buffers_t *b, const char *block,
                     CUmemGenericAllocationHandle h, size_t naccess, beside_t beside)
{
    static const char *const beside_name[] = {"idle", "d2h", "h2d"};
    double m[REPEATS], a[REPEATS], u[REPEATS];
    int got = 0, discarded = 0, copies = 0;
    bool failed = false;
    for (int tries = 0; got < REPEATS && tries < 4 * REPEATS && !failed; tries++) {
        if (beside != IDLE && cu.StreamQuery((CUstream)s->copy_stream) == CUDA_SUCCESS) {
            for (int k = 0; k < 4 && !failed; k++, copies++)
                failed = !ok(copy_async(beside == BESIDE_D2H ? D2H : H2D, false,
                                        (CUdeviceptr)b->pin, b->dev, BUF_BYTES, s->copy_stream),
                             "the copies beside");
            spin_us(200); /* the first under way */
        }
        double t0 = now_us();
        if (failed || !ok(cu.MemMap(s->va, s->block, 0, h, 0), "cuMemMap"))
            break;
        double t1 = now_us();
        bool set = ok(cu.MemSetAccess(s->va, s->block, s->access, naccess), "cuMemSetAccess");
        double t2 = now_us();
        failed = !ok(cu.MemUnmap(s->va, s->block), "cuMemUnmap") || !set;
        double t3 = now_us();
        if (beside != IDLE && cu.StreamQuery((CUstream)s->copy_stream) != CUDA_ERROR_NOT_READY) {
            discarded++; /* the copies ended within the round */
            continue;
        }
        m[got] = t1 - t0, a[got] = t2 - t1, u[got] = t3 - t2;
        got += !failed;
    }
    (void)rt_ok(cudaStreamSynchronize(s->copy_stream), "cudaStreamSynchronize (the copies beside)");
    row("vmm");
    json_str("block", block);
    json_str("access", naccess == 2 ? "device+host" : "device");
    json_str("beside", beside_name[beside]);
    json_number("map_us", median_or_none(m, got));
    json_number("set_access_us", median_or_none(a, got));
    json_number("unmap_us", median_or_none(u, got));
    printf(",\"rounds\":%d,\"discarded\":%d,\"copies\":%d", got, discarded, copies);
    json_size("copy_bytes", beside == IDLE ? 0 : BUF_BYTES);
    row_end();
}

/* ---- copy: rates into pinned memory and into host blocks ------------------------------- */

/* GB/s of one copy of n bytes, the median of COPY_REPS after one untimed;
 * negative if a call failed. */
static double copy_gbps(const setup_t *s, direction_t dir, bool generic, CUdeviceptr host_side,
                        CUdeviceptr dev_side, size_t n)
{
    double ms[COPY_REPS];
    if (!ok(copy_async(dir, generic, host_side, dev_side, n, s->stream), "the copy (warm-up)"))
        return -1;
    for (int r = 0; r < COPY_REPS; r++) {
        float t = 0;
        if (!rt_ok(cudaEventRecord(s->e0, s->stream), "cudaEventRecord") ||
            !ok(copy_async(dir, generic, host_side, dev_side, n, s->stream), "the timed copy") ||
            !rt_ok(cudaEventRecord(s->e1, s->stream), "cudaEventRecord") ||
            !rt_ok(cudaEventSynchronize(s->e1), "cudaEventSynchronize after the copy") ||
            !rt_ok(cudaEventElapsedTime(&t, s->e0, s->e1), "cudaEventElapsedTime") || t <= 0)
            return -1;
        ms[r] = t;
    }
    return (double)n / (bench_median(ms, COPY_REPS) * 1e-3) / 1e9;
}

static void copy_lines(const setup_t *s, const buffers_t *b, const window_t *w)
{
    static const char *const dir_name[] = {"d2h", "h2d"};
    const size_t sizes[] = {s->block, COPY_BYTES};
    for (int target = 0; target < 2; target++) {
        CUdeviceptr host_side = target == 0 ? (CUdeviceptr)b->pin : w->base;
        size_t room = target == 0 ? BUF_BYTES : (w->naccess > 0 ? w->mapped * s->block : 0);
        for (int generic = 0; generic < 2; generic++)
            for (int dir = D2H; dir <= H2D; dir++)
                for (int k = 0; k < 2; k++) {
                    if (sizes[k] > room)
                        continue;
                    row("copy");
                    json_str("target", target == 0 ? "pinned" : "host_blocks");
                    json_str("api", generic ? "generic" : "typed");
                    json_str("direction", dir_name[dir]);
                    json_size("bytes", sizes[k]);
                    json_size("handles", target == 0 ? 0 : sizes[k] / s->block);
                    json_number("gbps", copy_gbps(s, (direction_t)dir, generic, host_side, b->dev,
                                                  sizes[k]));
                    row_end();
                }
    }
}

/* n words of seed's pattern at p. */
static void pattern(uint32_t *p, size_t n, uint32_t seed)
{
    for (size_t i = 0; i < n; i++)
        p[i] = ((uint32_t)i ^ seed) * 2654435761u;
}

/* 1 if n words at p are seed's pattern, else 0 (the first wrong one said). */
static int is_pattern(const uint32_t *p, size_t n, uint32_t seed, const char *what)
{
    for (size_t i = 0; i < n; i++)
        if (p[i] != (((uint32_t)i ^ seed) * 2654435761u)) {
            fprintf(stderr, "host_numa: %s: wrong at word %zu\n", what, i);
            return 0;
        }
    return 1;
}

static void across_handles_line(const setup_t *s, const buffers_t *b, const window_t *w)
{
    size_t n = s->block, words = n / sizeof(uint32_t), off = n / 2;
    uint32_t *src = (uint32_t *)b->pin, *back = (uint32_t *)(b->pin + n);
    CUdeviceptr span = w->base + off;
    int arrived = -1, cpu_sees = -1, round_trip = -1;
    if (w->naccess > 0 && w->mapped >= 2) {
        pattern(src, words, 7);
        memset(back, 0, n);
        if (ok(cu.MemcpyHtoD(b->dev, src, n), "cuMemcpyHtoD (the source block)") &&
            ok(copy_async(D2H, false, span, b->dev, n, s->stream),
               "cuMemcpyDtoHAsync (across two host handles)") &&
            rt_ok(cudaStreamSynchronize(s->stream), "cudaStreamSynchronize")) {
            arrived = 1;
            if (w->cpu_rw == 1)
                cpu_sees = is_pattern((const uint32_t *)span, words, 7, "the CPU's read across handles");
            if (ok(copy_async(H2D, false, span, b->dev + n, n, s->stream),
                   "cuMemcpyHtoDAsync (out of two host handles)") &&
                ok(cu.MemcpyDtoH(back, b->dev + n, n), "cuMemcpyDtoH (the copy back)"))
                round_trip = is_pattern(back, words, 7, "the round trip across handles");
        } else {
            arrived = 0;
        }
    }
    row("across_handles");
    json_size("bytes", n);
    json_size("offset", off);
    json_bool("copy_call_ok", arrived);
    json_bool("cpu_sees_copy", cpu_sees);
    json_bool("round_trip_ok", round_trip);
    row_end();
}

/* ---- kernels --------------------------------------------------------------------------- */

/* p[i] = 2 p[i] + i over the n words at *where: a pointer stored in device memory */
__global__ void twice_plus_i_at(uint32_t *const *where, size_t n)
{
    uint32_t *p = *where;
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n;
         i += (size_t)gridDim.x * blockDim.x)
        p[i] = 2u * p[i] + (uint32_t)i;
}

__global__ void read_sum(const uint4 *p, size_t n, uint32_t *out)
{
    uint32_t s = 0;
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n;
         i += (size_t)gridDim.x * blockDim.x)
        s += p[i].x ^ p[i].y ^ p[i].z ^ p[i].w;
    if (s == 0x12345678u) /* never, in practice: keeps the reads */
        *out = s;
}

__global__ void write_words(uint4 *p, size_t n, uint32_t v)
{
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n;
         i += (size_t)gridDim.x * blockDim.x)
        p[i] = make_uint4(v, (uint32_t)i, v, (uint32_t)i);
}

/* The word twice_plus_i_at leaves at i after `times` runs over seed's pattern. */
static uint32_t after_twice_plus_i(size_t i, uint32_t seed, int times)
{
    uint32_t v = ((uint32_t)i ^ seed) * 2654435761u;
    for (int k = 0; k < times; k++)
        v = 2u * v + (uint32_t)i;
    return v;
}

/* 1 if the block at va (read by a copy) is what `times` runs left, else 0. */
static int check_runs(CUdeviceptr va, size_t bytes, uint32_t *buf, uint32_t seed, int times)
{
    if (!ok(cu.MemcpyDtoH(buf, va, bytes), "cuMemcpyDtoH (the chunk)"))
        return -1;
    for (size_t i = 0; i < bytes / sizeof(uint32_t); i++)
        if (buf[i] != after_twice_plus_i(i, seed, times)) {
            fprintf(stderr, "host_numa: after %d kernel runs, word %zu is wrong\n", times, i);
            return 0;
        }
    return 1;
}

static bool run_indirect(const setup_t *s, uint32_t *const *where, size_t words)
{
    twice_plus_i_at<<<s->grid, 256, 0, s->stream>>>(where, words);
    return rt_ok(cudaGetLastError(), "twice_plus_i_at<<<>>>") &&
           rt_ok(cudaStreamSynchronize(s->stream), "cudaStreamSynchronize after twice_plus_i_at");
}

/* The header's evict_cycle: the chunk at s->va, device block dh, host block
 * w->h[0] (mapped at w->base all along). */
static void evict_cycle_line(const setup_t *s, const buffers_t *b, const window_t *w,
                             CUmemGenericAllocationHandle dh)
{
    size_t n = s->block, words = n / sizeof(uint32_t);
    uint32_t *buf = (uint32_t *)b->pin;
    CUdeviceptr where = b->dev + BUF_BYTES; /* the pointer, in device memory */
    int illegal_before = illegal, evicted_ok = -1, fetched_ok = -1, host_mapped = -1;
    uint64_t chunk_address = (uint64_t)s->va;
    pattern(buf, words, 11);
    if (w->naccess > 0 && w->mapped >= 1 && map_rw(dh, s->va, n, s->access, 1)) {
        bool filled = ok(cu.MemcpyHtoD(s->va, buf, n), "cuMemcpyHtoD (the chunk)") &&
                      ok(cu.MemcpyHtoD(where, &chunk_address, sizeof chunk_address),
                         "cuMemcpyHtoD (the pointer)");
        /* evict: copy out through the window, unmap, map the host block */
        bool out = filled && ok(copy_async(D2H, false, w->base, s->va, n, s->stream),
                                "cuMemcpyDtoHAsync (evicting)") &&
                   rt_ok(cudaStreamSynchronize(s->stream), "cudaStreamSynchronize (evicting)");
        bool unmapped = ok(cu.MemUnmap(s->va, n), "cuMemUnmap (evicting)");
        host_mapped = out && unmapped && map_rw(w->h[0], s->va, n, s->access, w->naccess);
        if (host_mapped) {
            if (run_indirect(s, (uint32_t *const *)where, words))
                evicted_ok = check_runs(s->va, n, buf, 11, 1);
            /* fetch: unmap the host block, map the device block, copy in from the window */
            if (ok(cu.MemUnmap(s->va, n), "cuMemUnmap (fetching)") &&
                map_rw(dh, s->va, n, s->access, 1)) {
                if (ok(copy_async(H2D, false, w->base, s->va, n, s->stream),
                       "cuMemcpyHtoDAsync (fetching)") &&
                    run_indirect(s, (uint32_t *const *)where, words))
                    fetched_ok = check_runs(s->va, n, buf, 11, 2);
                (void)ok(cu.MemUnmap(s->va, n), "cuMemUnmap");
            }
        }
    }
    row("evict_cycle");
    json_size("bytes", n);
    json_bool("host_block_mapped_at_two_addresses", host_mapped);
    json_bool("evicted_kernel_ok", evicted_ok);
    json_bool("fetched_kernel_ok", fetched_ok);
    printf(",\"illegal_address\":%d", illegal - illegal_before);
    row_end();
}

/* GB/s of op ("read" or "write") over bytes at p; negative if a call failed. */
static double kernel_gbps(const setup_t *s, bool write, CUdeviceptr p, size_t bytes, int passes,
                          uint32_t *scratch)
{
    size_t n = bytes / sizeof(uint4);
    float ms = 0;
    for (int r = 0; r <= passes; r++) { /* the first untimed */
        if (r == 1 && !rt_ok(cudaEventRecord(s->e0, s->stream), "cudaEventRecord"))
            return -1;
        if (write)
            write_words<<<s->grid, 512, 0, s->stream>>>((uint4 *)p, n, (uint32_t)r);
        else
            read_sum<<<s->grid, 512, 0, s->stream>>>((const uint4 *)p, n, scratch);
    }
    if (!rt_ok(cudaEventRecord(s->e1, s->stream), "cudaEventRecord") ||
        !rt_ok(cudaGetLastError(), write ? "write_words<<<>>>" : "read_sum<<<>>>") ||
        !rt_ok(cudaEventSynchronize(s->e1), "cudaEventSynchronize after the kernels") ||
        !rt_ok(cudaEventElapsedTime(&ms, s->e0, s->e1), "cudaEventElapsedTime") || ms <= 0)
        return -1;
    return (double)passes * (double)bytes / (ms * 1e-3) / 1e9;
}

static void kernel_line(const setup_t *s, const char *memory, bool write, CUdeviceptr p,
                        size_t chunks, uint32_t *scratch)
{
    size_t bytes = chunks * s->block;
    int passes = bytes >= KERNEL_MIN_BYTES / 5 ? 5 : (int)(KERNEL_MIN_BYTES / bytes);
    row("kernel");
    json_str("memory", memory);
    json_str("op", write ? "write" : "read");
    json_size("chunks", chunks);
    json_size("bytes", bytes);
    printf(",\"passes\":%d", passes);
    json_number("gbps", kernel_gbps(s, write, p, bytes, passes, scratch));
    row_end();
}

static void kernel_lines(const setup_t *s, const buffers_t *b, const window_t *w)
{
    static const size_t chunks[] = {1, 8, 64, 512};
    uint32_t *scratch = (uint32_t *)(b->dev + BUF_BYTES + 64);
    for (size_t k = 0; k < sizeof chunks / sizeof chunks[0]; k++)
        for (int write = 0; write < 2; write++)
            if (w->naccess > 0 && chunks[k] <= w->mapped)
                kernel_line(s, "host_blocks", write, w->base, chunks[k], scratch);
    for (int write = 0; write < 2; write++)
        if (64 * s->block <= BUF_BYTES)
            kernel_line(s, "device", write, b->dev, 64, scratch);
}

/* ---- main ------------------------------------------------------------------------------ */

static size_t granularity(const CUmemAllocationProp *prop, CUmemAllocationGranularity_flags f,
                          const char *call)
{
    size_t g = 0;
    return ok(cu.MemGetAllocationGranularity(&g, prop, f), call) ? g : 0;
}

/* The device line; fills s's device, block and props. */
static void device_line(setup_t *s, const cudaDeviceProp *dp)
{
    int numa = -1;
    s->supported = -1;
    if (ok(cu.DeviceGet(&s->dev, 0), "cuDeviceGet")) {
        if (ok(cu.DeviceGetAttribute(&s->supported,
                                     CU_DEVICE_ATTRIBUTE_HOST_NUMA_VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED,
                                     s->dev),
               "cuDeviceGetAttribute(HOST_NUMA_VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED)"))
            s->supported = s->supported != 0;
        (void)ok(cu.DeviceGetAttribute(&numa, CU_DEVICE_ATTRIBUTE_HOST_NUMA_ID, s->dev),
                 "cuDeviceGetAttribute(HOST_NUMA_ID)");
    }
    memset(&s->hprop, 0, sizeof s->hprop);
    s->hprop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
    s->hprop.location.type = CU_MEM_LOCATION_TYPE_HOST_NUMA;
    s->hprop.location.id = numa < 0 ? 0 : numa; /* no NUMA: node 0, as cuMemCreate asks */
    CUmemAllocationProp plain_host = s->hprop;  /* no node: CU_MEM_LOCATION_TYPE_HOST */
    plain_host.location.type = CU_MEM_LOCATION_TYPE_HOST;
    plain_host.location.id = 0;
    s->dprop = s->hprop;
    s->dprop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
    s->dprop.location.id = s->dev;
    size_t g[6] = {0}; /* host NUMA, host, device; minimum then recommended */
    if (s->supported == 1) {
        g[0] = granularity(&s->hprop, CU_MEM_ALLOC_GRANULARITY_MINIMUM, "granularity (host NUMA)");
        g[1] = granularity(&s->hprop, CU_MEM_ALLOC_GRANULARITY_RECOMMENDED,
                           "recommended granularity (host NUMA)");
        g[2] = granularity(&plain_host, CU_MEM_ALLOC_GRANULARITY_MINIMUM, "granularity (host)");
        g[3] = granularity(&plain_host, CU_MEM_ALLOC_GRANULARITY_RECOMMENDED,
                           "recommended granularity (host)");
    }
    g[4] = granularity(&s->dprop, CU_MEM_ALLOC_GRANULARITY_MINIMUM, "granularity (device)");
    g[5] = granularity(&s->dprop, CU_MEM_ALLOC_GRANULARITY_RECOMMENDED,
                       "recommended granularity (device)");
    size_t chunk = g[4] != 0 ? g[4] : (size_t)2 << 20;
    s->block = g[0] > chunk ? g[0] : chunk; /* powers of two: a multiple of both */

    memset(s->access, 0, sizeof s->access);
    s->access[0].location.type = CU_MEM_LOCATION_TYPE_DEVICE;
    s->access[0].location.id = s->dev;
    s->access[0].flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
    s->access[1].location.type = CU_MEM_LOCATION_TYPE_HOST_NUMA; /* id ignored (cuda.h) */
    s->access[1].location.id = s->hprop.location.id;
    s->access[1].flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;

    row("device");
    printf(",\"device\":");
    bench_json_string(dp->name);
    json_bool("supported", s->supported);
    printf(",\"host_numa_id\":%d", numa);
    static const char *const keys[6] = {
        "granularity_host_numa_min", "granularity_host_numa_recommended", "granularity_host_min",
        "granularity_host_recommended", "granularity_device_min", "granularity_device_recommended"};
    for (int i = 0; i < 6; i++)
        json_size(keys[i], g[i]);
    json_size("lms_chunk", chunk);
    json_bool("host_min_divides_chunk", g[0] == 0 ? -1 : chunk % g[0] == 0);
    json_size("block", s->block);
    row_end();
}

static bool make_buffers(const setup_t *s, buffers_t *b, CUdeviceptr *reserved)
{
    size_t bytes = BUF_BYTES + s->block;
    if (!ok(cu.MemCreate(&b->dev_h, bytes, &s->dprop, 0), "cuMemCreate (device buffer)") ||
        !ok(cu.MemAddressReserve(reserved, bytes, s->block, 0, 0),
            "cuMemAddressReserve (device buffer)") ||
        !map_rw(b->dev_h, *reserved, bytes, s->access, 1))
        return false;
    b->dev = *reserved;
    return ok(cu.MemAllocHost((void **)&b->pin, BUF_BYTES), "cuMemAllocHost");
}

int main(void)
{
    if (!gpu_present())
        return GPU_SKIP;
    lms_status_t (*reserved_range)(void **, size_t *) =
        (lms_status_t(*)(void **, size_t *))dlsym(RTLD_DEFAULT, "lms_reserved_range");
    if (reserved_range == NULL) {
        fprintf(stderr, "host_numa: lms_reserved_range not found: run it as "
                        "LD_PRELOAD=B/liblms.so LMS_BACKEND=cuda B/bench/host_numa\n");
        return 1;
    }
    cudaDeviceProp dp;
    if (!rt_ok(cudaSetDevice(0), "cudaSetDevice") ||
        !rt_ok(cudaGetDeviceProperties(&dp, 0), "cudaGetDeviceProperties") || !find_driver())
        return 1;
    void *base = NULL;
    size_t range = 0;
    if (reserved_range(&base, &range) != LMS_OK) {
        fprintf(stderr, "host_numa: lms_reserved_range failed (is LMS_BACKEND=cuda?)\n");
        return 1;
    }
    setup_t s;
    memset(&s, 0, sizeof s);
    s.grid = 4 * dp.multiProcessorCount;
    device_line(&s, &dp);

    /* lms places allocations from the bottom of its range (alloc/alloc.c:
     * take_chunks cuts the low end of the best-fitting free run), and this
     * program allocates nothing through lms: the top of the range (4 x
     * device and host limits by default) is reserved by lms but never
     * mapped by it. */
    uintptr_t lo = (uintptr_t)base, hi = lo + range;
    s.va = (CUdeviceptr)((hi - 2 * s.block) & ~(uintptr_t)(s.block - 1));
    if (range < 4 * s.block || s.va < lo) {
        fprintf(stderr, "host_numa: lms's range [%p, +%zu) is too small\n", base, range);
        return 1;
    }
    fprintf(stderr, "host_numa: mapping %zu bytes at 0x%llx, %zu bytes below the top of lms's "
            "range [%p, +%zu)\n", s.block, (unsigned long long)s.va, (size_t)(hi - s.va), base,
            range);
    buffers_t b;
    memset(&b, 0, sizeof b);
    CUdeviceptr buf_va = 0;
    if (!rt_ok(cudaStreamCreateWithFlags(&s.stream, cudaStreamNonBlocking), "cudaStreamCreate") ||
        !rt_ok(cudaStreamCreateWithFlags(&s.copy_stream, cudaStreamNonBlocking),
               "cudaStreamCreate") ||
        !rt_ok(cudaEventCreate(&s.e0), "cudaEventCreate") ||
        !rt_ok(cudaEventCreate(&s.e1), "cudaEventCreate") || !make_buffers(&s, &b, &buf_va))
        return 1;

    CUmemGenericAllocationHandle hh = 0, dh = 0; /* before the window, which may take all */
    bool have_host = s.supported == 1 &&
                     ok(cu.MemCreate(&hh, s.block, &s.hprop, 0), "cuMemCreate (host block)");
    bool have_dev = ok(cu.MemCreate(&dh, s.block, &s.dprop, 0), "cuMemCreate (device block)");
    static window_t w; /* HANDLES handles: not on the stack */
    w.cpu_rw = -1;
    if (s.supported == 1)
        make_window(&s, &w);
    for (int beside = IDLE; beside <= BESIDE_H2D; beside++) {
        if (have_host && w.naccess != 1) /* 1: the driver refused the host's descriptor */
            vmm_line(&s, &b, "host", hh, 2, (beside_t)beside);
        if (have_host)
            vmm_line(&s, &b, "host", hh, 1, (beside_t)beside);
        if (have_dev)
            vmm_line(&s, &b, "device", dh, 1, (beside_t)beside);
    }
    copy_lines(&s, &b, &w);
    across_handles_line(&s, &b, &w);
    /* last: kernels through host mappings, where a fault would end the context */
    if (have_dev)
        evict_cycle_line(&s, &b, &w, dh);
    kernel_lines(&s, &b, &w);

    drop_window(&s, &w);
    if (have_host)
        (void)ok(cu.MemRelease(hh), "cuMemRelease (host block)");
    if (have_dev)
        (void)ok(cu.MemRelease(dh), "cuMemRelease (device block)");
    (void)ok(cu.MemUnmap(buf_va, BUF_BYTES + s.block), "cuMemUnmap (device buffer)");
    (void)ok(cu.MemAddressFree(buf_va, BUF_BYTES + s.block), "cuMemAddressFree (device buffer)");
    (void)ok(cu.MemRelease(b.dev_h), "cuMemRelease (device buffer)");
    (void)ok(cu.MemFreeHost(b.pin), "cuMemFreeHost");
    row("summary");
    printf(",\"repeats\":%d,\"failures\":%d,\"illegal_address\":%d", REPEATS, failures, illegal);
    row_end();
    return failures == 0 ? 0 : 1;
}
