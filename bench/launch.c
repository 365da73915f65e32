/*
 * bench/launch.c — what the launch hook adds to a kernel launch
 * (interpose/internal.h, launch.c): finding the kernel's parameter layout, scanning its
 * parameters for pointers into lms's range, and making the allocations they
 * point to resident on the launch's stream, when nothing has to move.
 *
 * The kernel has 8 pointer parameters, each to its own resident allocation
 * (4 KiB). Its launch goes through liblms.so's cuLaunchKernel to a stand-in
 * CUDA (tests/interpose/fake_cuda.h) whose launch only counts it; the same
 * stand-in launch called directly is the baseline, in batches alternating
 * with the hooked ones. One JSON line per case:
 *   {"bench":"launch","case":"scan8","ns_p50":N,...}
 * and the same with case "scan8_swapping" once more than the device limit
 * is allocated and written elsewhere, so that chunks are on the host (with
 * LMS_DEVICE_LIMIT at most 1 GiB; else that line says it was skipped).
 * ns_p50 is the hooked launch's median less the direct one's (target: under
 * 500 ns). Run as LD_PRELOAD=build/liblms.so build/bench/launch [--quick]:
 * the preload puts lms's hook before the stand-in, as before a real
 * libcuda. --quick: BATCHES / 10 batches of each (CTest's bench.launch).
 * The backend is lms's (LMS_BACKEND); the real launch on a GPU, with and
 * without the hook, is bench/launch_gpu.cu's (tools/gpu-session.sh).
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdint.h>
#include <string.h>
#include <time.h>

#include <cuda.h>

#define BENCH_NAME "launch"
#include "bench/bench.h"
#include "tests/interpose/fake_cuda.h"

#define BATCHES 400
#define PER_BATCH 256

static int batches = BATCHES; /* --quick: BATCHES / 10 */

typedef CUresult (*launch_fn)(CUfunction, unsigned, unsigned, unsigned, unsigned, unsigned,
                              unsigned, unsigned, CUstream, void **, void **);

static double now_ns(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec * 1e9 + (double)t.tv_nsec;
}

static void host_cpu(char *out, size_t size)
{
    snprintf(out, size, "unknown");
    FILE *f = fopen("/proc/cpuinfo", "r");
    char line[256];
    while (f != NULL && fgets(line, sizeof line, f) != NULL)
        if (strncmp(line, "model name", 10) == 0 && strchr(line, ':') != NULL) {
            snprintf(out, size, "%s", strchr(line, ':') + 2);
            out[strcspn(out, "\n")] = '\0';
            break;
        }
    if (f != NULL)
        fclose(f);
}

/* ns per launch of one batch. */
static double batch(launch_fn launch, const fake_fn_t *fn, void **params)
{
    double t0 = now_ns();
    for (int i = 0; i < PER_BATCH; i++)
        if (launch((CUfunction)(uintptr_t)fn, 1, 1, 1, 128, 1, 1, 0, NULL, params, NULL) !=
            CUDA_SUCCESS)
            bench_die("a launch");
    return (now_ns() - t0) / PER_BATCH;
}

#define MAX_COLD ((uint64_t)1 << 30) /* the swapping case fills the device limit and more */

/* `batches` alternating batches of each; prints the case's line. *reached
 * counts the launches the stand-in must have seen so far. */
static void measure(const char *name, launch_fn hooked, launch_fn direct, const fake_fn_t *fn,
                    void **params, uint64_t *reached)
{
    lms_stats_t before, after;
    bench_check(lms_stats(&before), "lms_stats");
    double h[BATCHES], d[BATCHES];
    for (int b = 0; b < batches; b++) {
        h[b] = batch(hooked, fn, params);
        d[b] = batch(direct, fn, params);
    }
    bench_check(lms_stats(&after), "lms_stats");
    *reached += (uint64_t)batches * 2 * PER_BATCH;
    if (fake_counts().launches != *reached) /* every launch, hooked or not, got there */
        bench_die("launches went missing on the way to the stand-in");
    double h50 = bench_quantile(h, batches, 0.5), h90 = bench_quantile(h, batches, 0.9);
    double d50 = bench_quantile(d, batches, 0.5);
    char cpu[128];
    host_cpu(cpu, sizeof cpu);
    const char *backend = getenv("LMS_BACKEND");
    printf("{\"bench\":\"launch\",\"case\":\"%s\",\"ns_p50\":%.1f,\"hooked_ns_p50\":%.1f,"
           "\"hooked_ns_p90\":%.1f,\"direct_ns_p50\":%.1f,\"launches\":%d,\"fetches\":%llu,"
           "\"host_bytes\":%llu,\"target_ns\":500,\"backend\":",
           name, h50 - d50, h50, h90, d50, batches * PER_BATCH,
           (unsigned long long)(after.fetches - before.fetches),
           (unsigned long long)after.host_bytes);
    bench_json_string(backend != NULL ? backend : "auto");
    printf(",\"host_cpu\":");
    bench_json_string(cpu);
    printf("}\n");
}

int main(int argc, char **argv)
{
    if (argc > 1 && strcmp(argv[1], "--quick") == 0) {
        batches = BATCHES / 10;
    } else if (argc > 1) {
        fprintf(stderr, "usage: LD_PRELOAD=build/liblms.so %s [--quick]\n", argv[0]);
        return 2;
    }
    /* liblms.so's hook: dlsym answers it for the stand-in's (Note [dlsym]) */
    launch_fn hooked = (launch_fn)dlsym(dlopen(NULL, RTLD_NOW), "cuLaunchKernel");
    launch_fn direct = fake_launch_kernel();
    Dl_info where;
    if (hooked == NULL || direct == NULL || dladdr((void *)hooked, &where) == 0 ||
        where.dli_fname == NULL || strstr(where.dli_fname, "liblms") == NULL) {
        fprintf(stderr, "bench/launch: cuLaunchKernel is not liblms.so's hook (it is %s's): run "
                "it as LD_PRELOAD=build/liblms.so build/bench/launch\n",
                hooked != NULL && dladdr((void *)hooked, &where) && where.dli_fname ? where.dli_fname
                                                                               : "nobody");
        return 1;
    }
    void *p[8], *params[8];
    for (int i = 0; i < 8; i++) {
        bench_check(lms_malloc(&p[i], 4096, NULL), "lms_malloc");
        params[i] = &p[i];
    }
    static const fake_fn_t fn = {0, 8, {0, 8, 16, 24, 32, 40, 48, 56}, {8, 8, 8, 8, 8, 8, 8, 8}};
    for (int i = 0; i < 16; i++) /* warm: the layout, the stream, the chunks */
        (void)batch(hooked, &fn, params), (void)batch(direct, &fn, params);
    uint64_t reached = 16 * 2 * PER_BATCH;
    measure("scan8", hooked, direct, &fn, params, &reached);
    /* again while other memory is on the host: each access window then
     * records an event after its work (Note [Eviction fences]) */
    lms_stats_t st;
    bench_check(lms_stats(&st), "lms_stats");
    if (st.device_limit > MAX_COLD) {
        printf("{\"bench\":\"launch\",\"case\":\"scan8_swapping\",\"skipped\":\"the device "
               "limit is over %llu MiB: set LMS_DEVICE_LIMIT lower\"}\n",
               (unsigned long long)(MAX_COLD >> 20));
    } else {
        void *cold;
        size_t bytes = (size_t)st.device_limit + (16u << 20);
        bench_check(lms_malloc(&cold, bytes, NULL), "lms_malloc");
        for (size_t off = 0; off < bytes; off += 1u << 20)
            bench_check(lms_access((char *)cold + off, 1u << 20, LMS_OVERWRITE, NULL),
                        "lms_access");
        for (int i = 0; i < 16; i++) /* the hot chunk back, and warm again */
            (void)batch(hooked, &fn, params), (void)batch(direct, &fn, params);
        reached += 16 * 2 * PER_BATCH;
        measure("scan8_swapping", hooked, direct, &fn, params, &reached);
        bench_check(lms_free(cold, NULL), "lms_free");
    }
    for (int i = 0; i < 8; i++)
        bench_check(lms_free(p[i], NULL), "lms_free");
    return 0;
}
