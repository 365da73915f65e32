/*
 * bench/vmm_threads — can the CUDA driver remap on several threads at once?
 * bench/remap goes through lms's device layer, whose check layer holds one
 * lock across each map, unmap and set_access; this asks the driver alone,
 * to say whether spreading lms's remaps over threads could pay. Built only
 * where the CUDA toolkit is (for cuda.h); libcuda.so.1 is opened at run
 * time, so that without a driver or a device the program starts, says why
 * on stderr and exits 77 (skipped), as CTest's bench.vmm_threads expects.
 *
 *   build/bench/vmm_threads [--quick]
 *
 *   {"bench":"vmm_threads","threads":T,"chunk_bytes":G,"remaps":R,
 *    "wall_ms":..,"gbps":..,"speedup":..,"device":..,"driver":..}
 *
 * T = 1, 2, 4, 8 threads, each with one block of its own (cuMemCreate, the
 * minimum granularity G) that it moves R times between two addresses of one
 * shared reservation: cuMemUnmap, cuMemMap, cuMemSetAccess. All start at a
 * barrier; wall_ms is the median of 3 runs from the barrier until the last
 * thread ends; gbps is T x R x G bytes over it (decimal GB/s), speedup its
 * ratio to one thread's.
 */
#include <cuda.h>
#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/base.h"
#include "bench/bench.h"

#define MAX_THREADS 8
#define RUNS 3
#define SKIP 77 /* no driver or no device: CTest's "skipped" */

/* The driver functions called, one list: each is looked up in libcuda.so.1
 * under the name cuda.h gives it (cuda.h maps some to a _v2 symbol, and
 * the field's name follows the same macro). */
#define DRIVER_FUNCTIONS(X)                                                                  \
    X(cuInit) X(cuGetErrorName) X(cuDeviceGet) X(cuDeviceGetName) X(cuDriverGetVersion)      \
    X(cuDevicePrimaryCtxRetain) X(cuDevicePrimaryCtxRelease) X(cuCtxSetCurrent)              \
    X(cuMemGetAllocationGranularity) X(cuMemAddressReserve) X(cuMemAddressFree)              \
    X(cuMemCreate) X(cuMemRelease) X(cuMemMap) X(cuMemUnmap) X(cuMemSetAccess)

#define STRINGIFY_(name) #name
#define STRINGIFY(name) STRINGIFY_(name)
static struct {
#define DRIVER_FIELD_(f) __typeof__(&f) f;
    DRIVER_FUNCTIONS(DRIVER_FIELD_)
#undef DRIVER_FIELD_
} drv;

/* Loads the driver's functions into drv; false (and why on stderr) where
 * there is no libcuda.so.1 or it lacks one. */
static bool driver_load(void)
{
    void *lib = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
    if (lib == NULL) {
        fprintf(stderr, "bench/vmm_threads: skipped: no CUDA driver (%s)\n", dlerror());
        return false;
    }
#define DRIVER_LOAD_(f)                                                                      \
    if ((*(void **)&drv.f = dlsym(lib, STRINGIFY(f))) == NULL) {                             \
        fprintf(stderr, "bench/vmm_threads: skipped: the driver has no %s\n", STRINGIFY(f)); \
        return false;                                                                        \
    }
    DRIVER_FUNCTIONS(DRIVER_LOAD_)
#undef DRIVER_LOAD_
    return true;
}

static CUcontext ctx;
static size_t gran;
static CUmemAccessDesc access_desc;
static pthread_barrier_t start;
static int reps = 400;

typedef struct mover {
    CUmemGenericAllocationHandle block;
    CUdeviceptr at[2];
    int cur;
} mover_t;

static void check(CUresult r, const char *what)
{
    if (r != CUDA_SUCCESS) {
        const char *name = "?";
        drv.cuGetErrorName(r, &name);
        fprintf(stderr, "bench/vmm_threads: %s: %s (%d)\n", what, name, (int)r);
        exit(1);
    }
}

static void *mover_main(void *arg)
{
    mover_t *m = arg;
    check(drv.cuCtxSetCurrent(ctx), "cuCtxSetCurrent");
    pthread_barrier_wait(&start);
    for (int r = 0; r < reps; r++) {
        int to = !m->cur;
        check(drv.cuMemUnmap(m->at[m->cur], gran), "cuMemUnmap");
        check(drv.cuMemMap(m->at[to], gran, 0, m->block, 0), "cuMemMap");
        check(drv.cuMemSetAccess(m->at[to], gran, &access_desc, 1), "cuMemSetAccess");
        m->cur = to;
    }
    return NULL;
}

static double run(mover_t *movers, int threads)
{
    pthread_t t[MAX_THREADS];
    if (pthread_barrier_init(&start, NULL, (unsigned)threads + 1) != 0)
        exit(1);
    for (int i = 0; i < threads; i++)
        if (pthread_create(&t[i], NULL, mover_main, &movers[i]) != 0)
            exit(1);
    pthread_barrier_wait(&start);
    uint64_t t0 = base_now_ns();
    for (int i = 0; i < threads; i++)
        pthread_join(t[i], NULL);
    double ms = (double)(base_now_ns() - t0) / 1e6;
    pthread_barrier_destroy(&start);
    return ms;
}

int main(int argc, char **argv)
{
    if (argc > 1 && strcmp(argv[1], "--quick") == 0)
        reps = 50;
    else if (argc > 1) {
        fprintf(stderr, "usage: %s [--quick]\n", argv[0]);
        return 2;
    }
    if (!driver_load())
        return SKIP;
    CUresult init = drv.cuInit(0);
    if (init == CUDA_ERROR_NO_DEVICE || init == CUDA_ERROR_STUB_LIBRARY) {
        fprintf(stderr, "bench/vmm_threads: skipped: %s\n",
                init == CUDA_ERROR_NO_DEVICE ? "the driver sees no CUDA device"
                                             : "libcuda.so.1 is the toolkit's stub");
        return SKIP;
    }
    check(init, "cuInit");
    CUdevice dev;
    check(drv.cuDeviceGet(&dev, 0), "cuDeviceGet");
    check(drv.cuDevicePrimaryCtxRetain(&ctx, dev), "cuDevicePrimaryCtxRetain");
    check(drv.cuCtxSetCurrent(ctx), "cuCtxSetCurrent");
    char name[96];
    int driver = 0;
    check(drv.cuDeviceGetName(name, sizeof name, dev), "cuDeviceGetName");
    check(drv.cuDriverGetVersion(&driver), "cuDriverGetVersion");
    CUmemAllocationProp prop = {.type = CU_MEM_ALLOCATION_TYPE_PINNED,
                                .location = {.type = CU_MEM_LOCATION_TYPE_DEVICE, .id = dev}};
    check(drv.cuMemGetAllocationGranularity(&gran, &prop, CU_MEM_ALLOC_GRANULARITY_MINIMUM),
          "cuMemGetAllocationGranularity");
    access_desc.location = prop.location;
    access_desc.flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
    CUdeviceptr base;
    check(drv.cuMemAddressReserve(&base, 2 * MAX_THREADS * gran, gran, 0, 0), "cuMemAddressReserve");
    mover_t movers[MAX_THREADS];
    for (int i = 0; i < MAX_THREADS; i++) {
        mover_t *m = &movers[i];
        check(drv.cuMemCreate(&m->block, gran, &prop, 0), "cuMemCreate");
        m->at[0] = base + (CUdeviceptr)(2 * i) * gran;
        m->at[1] = m->at[0] + gran;
        m->cur = 0;
        check(drv.cuMemMap(m->at[0], gran, 0, m->block, 0), "cuMemMap");
        check(drv.cuMemSetAccess(m->at[0], gran, &access_desc, 1), "cuMemSetAccess");
    }
    char cpu[128];
    base_host_cpu(cpu, sizeof cpu);
    double one = 0;
    for (int threads = 1; threads <= MAX_THREADS; threads *= 2) {
        double ms[RUNS];
        for (int r = 0; r < RUNS; r++)
            ms[r] = run(movers, threads);
        double wall = bench_median(ms, RUNS);
        double gbps = (double)threads * reps * (double)gran / (wall * 1e6);
        if (threads == 1)
            one = gbps;
        printf("{\"bench\":\"vmm_threads\",\"threads\":%d,\"chunk_bytes\":%zu,\"remaps\":%d,"
               "\"wall_ms\":%.2f,\"gbps\":%.2f,\"speedup\":%.2f,\"device\":\"%s\",\"driver\":%d,"
               "\"host_cpu\":\"%s\"}\n",
               threads, gran, reps, wall, gbps, gbps / one, name, driver, cpu);
        fflush(stdout);
    }
    for (int i = 0; i < MAX_THREADS; i++) {
        check(drv.cuMemUnmap(movers[i].at[movers[i].cur], gran), "cuMemUnmap");
        check(drv.cuMemRelease(movers[i].block), "cuMemRelease");
    }
    check(drv.cuMemAddressFree(base, 2 * MAX_THREADS * gran), "cuMemAddressFree");
    check(drv.cuDevicePrimaryCtxRelease(dev), "cuDevicePrimaryCtxRelease");
    return 0;
}
