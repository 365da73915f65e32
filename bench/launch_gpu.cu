/*
 * bench/launch_gpu.cu — what lms's launch hook costs a real kernel launch
 * on a card: host nanoseconds per launch of an empty kernel whose 8
 * pointer parameters point to 8 lms allocations (cudaMalloc, 4 KiB each),
 * launched five ways in alternating batches, in one process:
 *   chevron     <<<>>> (nvcc 13: __cudaLaunchKernel), as the program has it
 *   rt_real     libcudart's own cudaLaunchKernel, found with dlvsym (lms
 *               interposes dlsym on library handles, not dlvsym)
 *   rt_hooked   cudaLaunchKernel as the program finds it: liblms.so's
 *   drv_hooked  cuLaunchKernel as the program finds it: liblms.so's
 *   drv_real    libcuda's cuLaunchKernel, found with glibc's own dlsym
 * The runtime reaches the driver through entry points it looks up by name,
 * which lms answers with its wrappers (Note [Lookups by name] in
 * interpose/interpose.c): so rt_real may well pass through lms's
 * driver-level hook, and only drv_real is sure to be free of lms. The
 * hook's own cost is drv_added = drv_hooked - drv_real; added = chevron -
 * rt_real is what a <<<>>> launch pays beyond libcudart's own path.
 * Each batch is PER_BATCH launches, timed on the host; the stream is
 * synchronized after each batch (not timed). Cases, one JSON line each:
 *   resident   {"bench":"launch_gpu","case":"resident","hooked_ns_p50":...,
 *              "real_ns_p50":...,"added_ns_p50":...,"drv_added_ns_p50":...,
 *              "device":"NVIDIA H100 80GB HBM3",...}  (hooked_*: chevron,
 *              real_*: rt_real; then rt_hooked_*, drv_hooked_*, drv_real_*)
 *   hook_seen  {"case":"hook_seen","chevron":true,"rt_real":true,...}: per
 *              way, whether lms fetched the evicted buffers for one launch
 *              (whether its hooks saw it; drv_real must be false)
 *   swapping   as resident, with more than LMS_DEVICE_LIMIT allocated and
 *              written elsewhere, so that chunks sit on the host (the 8
 *              buffers stay resident)
 * hook_seen and swapping need LMS_DEVICE_LIMIT at most 4 GiB (else a line
 * says they were skipped). Run it on a card under the preload:
 *   LD_PRELOAD=B/liblms.so LMS_BACKEND=cuda LMS_DEVICE_LIMIT=1GiB \
 *       LMS_HOST_LIMIT=4GiB B/bench/launch_gpu
 * Exit 77 with a reason line where there is no CUDA device; 1 when
 * liblms.so is not preloaded or a call fails.
 */
#include <dlfcn.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <cuda.h>
#include <cuda_runtime.h>

#include "bench/bench.h" /* quantiles and JSON strings (no BENCH_NAME: no lms link) */
#include "lms.h"         /* types only: lms_stats comes from the preload */
#include "tests/gpu/gpu_program.h"

#define BATCHES 300
#define PER_BATCH 256
#define MAX_SWAP_LIMIT ((uint64_t)4 << 30) /* the swapping case writes the limit and more */

typedef cudaError_t (*rt_launch_t)(const void *, dim3, dim3, void **, size_t, cudaStream_t);
typedef CUresult (*drv_launch_t)(CUfunction, unsigned, unsigned, unsigned, unsigned, unsigned,
                                 unsigned, unsigned, CUstream, void **, void **);

enum { CHEVRON, RT_REAL, RT_HOOKED, DRV_HOOKED, DRV_REAL, NWAYS };
static const char *const way_name[NWAYS] = {"chevron", "rt_real", "rt_hooked", "drv_hooked",
                                            "drv_real"};

static struct {
    rt_launch_t rt_real, rt_hooked;
    drv_launch_t drv_real, drv_hooked;
    CUfunction fn;
    cudaStream_t stream;
    void *p[8];
    void *args[8];
} L;

static lms_status_t (*lms_stats_fn)(lms_stats_t *);
static const char *(*lms_last_error_fn)(void);

__global__ void empty8(void *p0, void *p1, void *p2, void *p3, void *p4, void *p5, void *p6, void *p7)
{
}

static void die(const char *what, const char *detail)
{
    fprintf(stderr, "bench/launch_gpu: %s: %s\n", what, detail);
    exit(1);
}

static void check(cudaError_t e, const char *what)
{
    if (e != cudaSuccess)
        die(what, cudaGetErrorName(e));
}

static double now_ns(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec * 1e9 + (double)t.tv_nsec;
}

/* glibc's dlsym, which liblms.so's does not stand in front of. */
static void *glibc_dlsym(void *handle, const char *name)
{
    typedef void *(*dlsym_t)(void *, const char *);
    static const char *const versions[] = {"GLIBC_2.34", "GLIBC_2.2.5", "GLIBC_2.17"};
    void *libc = dlopen("libc.so.6", RTLD_NOW | RTLD_NOLOAD);
    dlsym_t real = NULL;
    for (int v = 0; libc != NULL && real == NULL && v < 3; v++)
        real = (dlsym_t)dlvsym(libc, "dlsym", versions[v]);
    return real != NULL ? real(handle, name) : NULL;
}

static void find_entry_points(void)
{
    lms_stats_fn = (lms_status_t(*)(lms_stats_t *))dlsym(RTLD_DEFAULT, "lms_stats");
    lms_last_error_fn = (const char *(*)(void))dlsym(RTLD_DEFAULT, "lms_last_error");
    L.rt_hooked = (rt_launch_t)dlsym(RTLD_DEFAULT, "cudaLaunchKernel");
    L.drv_hooked = (drv_launch_t)dlsym(RTLD_DEFAULT, "cuLaunchKernel");
    if (lms_stats_fn == NULL || lms_last_error_fn == NULL ||
        strstr(gpu_object_of((const void *)L.rt_hooked), "liblms") == NULL ||
        strstr(gpu_object_of((const void *)L.drv_hooked), "liblms") == NULL)
        die("liblms.so is not preloaded",
            "run it as LD_PRELOAD=B/liblms.so LMS_BACKEND=cuda B/bench/launch_gpu");
    void *rt = dlopen("libcudart.so.13", RTLD_NOW | RTLD_NOLOAD);
    L.rt_real = rt != NULL ? (rt_launch_t)dlvsym(rt, "cudaLaunchKernel", "libcudart.so.13") : NULL;
    if (L.rt_real == NULL || strstr(gpu_object_of((const void *)L.rt_real), "libcudart") == NULL)
        die("libcudart's cudaLaunchKernel", "not found with dlvsym(\"libcudart.so.13\")");
    void *drv = dlopen("libcuda.so.1", RTLD_NOW | RTLD_NOLOAD); /* the runtime loaded it */
    L.drv_real = drv != NULL ? (drv_launch_t)glibc_dlsym(drv, "cuLaunchKernel") : NULL;
    if (L.drv_real == NULL || strstr(gpu_object_of((const void *)L.drv_real), "libcuda.so") == NULL)
        die("libcuda's cuLaunchKernel", "not found with glibc's dlsym on libcuda.so.1");
}

static cudaError_t launch(int way)
{
    dim3 grid(1), block(32);
    switch (way) {
    case CHEVRON:
        empty8<<<grid, block, 0, L.stream>>>(L.p[0], L.p[1], L.p[2], L.p[3], L.p[4], L.p[5],
                                             L.p[6], L.p[7]);
        return cudaSuccess; /* its result: cudaGetLastError after the batch */
    case RT_REAL:
        return L.rt_real((const void *)empty8, grid, block, L.args, 0, L.stream);
    case RT_HOOKED:
        return L.rt_hooked((const void *)empty8, grid, block, L.args, 0, L.stream);
    case DRV_HOOKED:
    case DRV_REAL: {
        drv_launch_t f = way == DRV_REAL ? L.drv_real : L.drv_hooked;
        CUresult r = f(L.fn, 1, 1, 1, 32, 1, 1, 0, (CUstream)L.stream, L.args, NULL);
        return r == CUDA_SUCCESS ? cudaSuccess : cudaErrorLaunchFailure;
    }
    }
    return cudaErrorInvalidValue;
}

/* ns per launch of one batch of `way`. */
static double batch(int way)
{
    double t0 = now_ns();
    for (int i = 0; i < PER_BATCH; i++)
        if (launch(way) != cudaSuccess)
            die(way_name[way], "a launch failed");
    double t = (now_ns() - t0) / PER_BATCH;
    check(cudaGetLastError(), way_name[way]);
    check(cudaStreamSynchronize(L.stream), "cudaStreamSynchronize");
    return t;
}

static void measure(const char *name, const char *device, const char *chevron_entry)
{
    static double ns[NWAYS][BATCHES];
    double p50[NWAYS], p90[NWAYS];
    lms_stats_t before, after;
    if (lms_stats_fn(&before) != LMS_OK)
        die("lms_stats", lms_last_error_fn());
    for (int b = 0; b < BATCHES; b++)
        for (int w = 0; w < NWAYS; w++) {
            int way = (w + b) % NWAYS; /* rotated, so that no way always comes first */
            ns[way][b] = batch(way);
        }
    if (lms_stats_fn(&after) != LMS_OK)
        die("lms_stats", lms_last_error_fn());
    for (int w = 0; w < NWAYS; w++) {
        p50[w] = bench_quantile(ns[w], BATCHES, 0.5);
        p90[w] = bench_quantile(ns[w], BATCHES, 0.9);
    }
    printf("{\"bench\":\"launch_gpu\",\"case\":\"%s\",\"hooked_ns_p50\":%.1f,\"hooked_ns_p90\":%.1f,"
           "\"real_ns_p50\":%.1f,\"real_ns_p90\":%.1f,\"added_ns_p50\":%.1f,",
           name, p50[CHEVRON], p90[CHEVRON], p50[RT_REAL], p90[RT_REAL],
           p50[CHEVRON] - p50[RT_REAL]);
    for (int w = RT_HOOKED; w < NWAYS; w++)
        printf("\"%s_ns_p50\":%.1f,\"%s_ns_p90\":%.1f,", way_name[w], p50[w], way_name[w], p90[w]);
    printf("\"drv_added_ns_p50\":%.1f,\"launches\":%d,\"fetches\":%llu,\"host_bytes\":%llu,"
           "\"device_limit\":%llu,\"chevron_entry\":",
           p50[DRV_HOOKED] - p50[DRV_REAL], BATCHES * PER_BATCH * NWAYS,
           (unsigned long long)(after.fetches - before.fetches),
           (unsigned long long)after.host_bytes, (unsigned long long)after.device_limit);
    bench_json_string(chevron_entry);
    printf(",\"device\":");
    bench_json_string(device);
    printf("}\n");
    fflush(stdout);
}

static void warm(void)
{
    for (int i = 0; i < 8; i++)
        for (int w = 0; w < NWAYS; w++)
            (void)batch(w);
}

/* Writes all of cold (more than the device limit): the 8 buffers go to the host. */
static void write_cold(void **cold, int ncold, size_t piece)
{
    for (int i = 0; i < ncold; i++)
        check(cudaMemsetAsync(cold[i], 1, piece, L.stream), "cudaMemsetAsync (cold)");
    check(cudaStreamSynchronize(L.stream), "cudaStreamSynchronize");
}

/* For each way, whether lms's hooks saw its launch: the 8 buffers evicted,
 * one launch (the kernel touches nothing, so it cannot fault), and whether
 * lms fetched anything for it. drv_real must say false (the baseline is
 * free of lms); rt_real says whether libcudart's own path reaches lms's
 * driver-level hook. A prefetch of lms's own (LMS_POLICY=schedule) could
 * make a false "true": LMS_POLICY=lru makes the answer exact. */
static void print_hook_seen(void **cold, int ncold, size_t piece, const char *device)
{
    printf("{\"bench\":\"launch_gpu\",\"case\":\"hook_seen\"");
    for (int w = 0; w < NWAYS; w++) {
        lms_stats_t before, after;
        write_cold(cold, ncold, piece);
        if (lms_stats_fn(&before) != LMS_OK)
            die("lms_stats", lms_last_error_fn());
        if (launch(w) != cudaSuccess)
            die(way_name[w], "a launch failed");
        check(cudaGetLastError(), way_name[w]);
        check(cudaStreamSynchronize(L.stream), "cudaStreamSynchronize");
        if (lms_stats_fn(&after) != LMS_OK)
            die("lms_stats", lms_last_error_fn());
        printf(",\"%s\":%s", way_name[w], after.fetches > before.fetches ? "true" : "false");
    }
    printf(",\"device\":");
    bench_json_string(device);
    printf("}\n");
}

int main(void)
{
    if (!gpu_present())
        return GPU_SKIP;
    cudaDeviceProp prop;
    check(cudaGetDeviceProperties(&prop, 0), "cudaGetDeviceProperties");
    check(cudaSetDevice(0), "cudaSetDevice"); /* the primary context, current on this thread */
    find_entry_points();
    check(cudaStreamCreateWithFlags(&L.stream, cudaStreamNonBlocking), "cudaStreamCreate");
    cudaFunction_t fn;
    check(cudaGetFuncBySymbol(&fn, (const void *)empty8), "cudaGetFuncBySymbol");
    L.fn = (CUfunction)fn;
    for (int i = 0; i < 8; i++) {
        check(cudaMalloc(&L.p[i], 4096), "cudaMalloc");
        check(cudaMemset(L.p[i], 0, 4096), "cudaMemset");
        L.args[i] = &L.p[i];
    }
    /* <<<>>> goes to whoever defines __cudaLaunchKernel first: lms or libcudart */
    const char *chevron_entry = gpu_object_of(dlsym(RTLD_DEFAULT, "__cudaLaunchKernel"));
    warm();
    measure("resident", prop.name, chevron_entry);

    lms_stats_t st;
    if (lms_stats_fn(&st) != LMS_OK)
        die("lms_stats", lms_last_error_fn());
    if (st.device_limit > MAX_SWAP_LIMIT || st.host_limit == 0) {
        printf("{\"bench\":\"launch_gpu\",\"case\":\"swapping\",\"skipped\":\"(and hook_seen) device limit %llu MiB, "
               "host limit %llu MiB: set LMS_DEVICE_LIMIT to 4GiB or less and LMS_HOST_LIMIT\"}\n",
               (unsigned long long)(st.device_limit >> 20), (unsigned long long)(st.host_limit >> 20));
        return 0;
    }
    /* more than the limit, in 64 MiB allocations, each written whole */
    size_t piece = (size_t)64 << 20;
    int ncold = (int)((st.device_limit + ((uint64_t)128 << 20)) / piece);
    void **cold = (void **)calloc((size_t)ncold, sizeof *cold);
    if (cold == NULL)
        die("calloc", "no host memory");
    for (int i = 0; i < ncold; i++)
        check(cudaMalloc(&cold[i], piece), "cudaMalloc (cold)");
    print_hook_seen(cold, ncold, piece, prop.name);
    warm(); /* the 8 buffers back, if they went */
    if (lms_stats_fn(&st) != LMS_OK)
        die("lms_stats", lms_last_error_fn());
    if (st.host_bytes == 0)
        die("the swapping case", "nothing is on the host after writing more than the limit");
    measure("swapping", prop.name, chevron_entry);
    for (int i = 0; i < ncold; i++)
        check(cudaFree(cold[i]), "cudaFree");
    free(cold);
    return 0;
}
