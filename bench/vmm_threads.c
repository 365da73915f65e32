/*
 * bench/vmm_threads — can the CUDA driver remap on several threads at once?
 * bench/remap goes through lms's device layer, whose check layer holds one
 * lock across each map, unmap and set_access; this asks the driver alone,
 * to say whether spreading lms's remaps over threads could pay. Built only
 * where the CUDA toolkit is (it links libcuda, which liblms never does).
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
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/base.h"
#include "bench/bench.h"

#define MAX_THREADS 8
#define RUNS 3

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
        cuGetErrorName(r, &name);
        fprintf(stderr, "bench/vmm_threads: %s: %s\n", what, name);
        exit(1);
    }
}

static void *mover_main(void *arg)
{
    mover_t *m = arg;
    check(cuCtxSetCurrent(ctx), "cuCtxSetCurrent");
    pthread_barrier_wait(&start);
    for (int r = 0; r < reps; r++) {
        int to = !m->cur;
        check(cuMemUnmap(m->at[m->cur], gran), "cuMemUnmap");
        check(cuMemMap(m->at[to], gran, 0, m->block, 0), "cuMemMap");
        check(cuMemSetAccess(m->at[to], gran, &access_desc, 1), "cuMemSetAccess");
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
    check(cuInit(0), "cuInit");
    CUdevice dev;
    check(cuDeviceGet(&dev, 0), "cuDeviceGet");
    check(cuDevicePrimaryCtxRetain(&ctx, dev), "cuDevicePrimaryCtxRetain");
    check(cuCtxSetCurrent(ctx), "cuCtxSetCurrent");
    char name[96];
    int driver = 0;
    check(cuDeviceGetName(name, sizeof name, dev), "cuDeviceGetName");
    check(cuDriverGetVersion(&driver), "cuDriverGetVersion");
    CUmemAllocationProp prop = {.type = CU_MEM_ALLOCATION_TYPE_PINNED,
                                .location = {.type = CU_MEM_LOCATION_TYPE_DEVICE, .id = dev}};
    check(cuMemGetAllocationGranularity(&gran, &prop, CU_MEM_ALLOC_GRANULARITY_MINIMUM),
          "cuMemGetAllocationGranularity");
    access_desc.location = prop.location;
    access_desc.flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
    CUdeviceptr base;
    check(cuMemAddressReserve(&base, 2 * MAX_THREADS * gran, gran, 0, 0), "cuMemAddressReserve");
    mover_t movers[MAX_THREADS];
    for (int i = 0; i < MAX_THREADS; i++) {
        mover_t *m = &movers[i];
        check(cuMemCreate(&m->block, gran, &prop, 0), "cuMemCreate");
        m->at[0] = base + (CUdeviceptr)(2 * i) * gran;
        m->at[1] = m->at[0] + gran;
        m->cur = 0;
        check(cuMemMap(m->at[0], gran, 0, m->block, 0), "cuMemMap");
        check(cuMemSetAccess(m->at[0], gran, &access_desc, 1), "cuMemSetAccess");
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
        check(cuMemUnmap(movers[i].at[movers[i].cur], gran), "cuMemUnmap");
        check(cuMemRelease(movers[i].block), "cuMemRelease");
    }
    check(cuMemAddressFree(base, 2 * MAX_THREADS * gran), "cuMemAddressFree");
    check(cuDevicePrimaryCtxRelease(dev), "cuDevicePrimaryCtxRelease");
    return 0;
}
