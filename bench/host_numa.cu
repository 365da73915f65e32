/*
 * bench/host_numa.cu — answers a design question on a card (DESIGN.md, "The
 * one hard rule"): can an evicted chunk's addresses in lms's reservation
 * map to a host-located block (CUDA 13: cuMemCreate with
 * CU_MEM_LOCATION_TYPE_HOST_NUMA), so that a kernel that touches it
 * unannounced reads it over the link instead of faulting, and what do the
 * map, access and unmap calls cost beside the same for a device block?
 *
 * Under the preload, on the device of lms's primary context:
 *  1. CU_DEVICE_ATTRIBUTE_HOST_NUMA_VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED and
 *     the device's host NUMA node (CU_DEVICE_ATTRIBUTE_HOST_NUMA_ID; -1,
 *     no NUMA, means node 0 as cuMemCreate wants it);
 *  2. one block on that node and one on the device, each of the larger of
 *     the two minimum granularities (cuMemGetAllocationGranularity);
 *  3. cuMemMap, cuMemSetAccess (device, read-write) and cuMemUnmap of each
 *     at an address near the end of lms's range (lms_reserved_range), 50
 *     times: the medians, in microseconds;
 *  4. the host block mapped there once more, written from the host
 *     (cuMemcpyHtoD), read and written by a kernel, and checked from the
 *     host (cuMemcpyDtoH); then how fast a kernel reads a 64 MiB host block
 *     and a device block, mapped the same way.
 * The driver's functions come from cudaGetDriverEntryPointByVersion (no
 * libcuda linked: the program starts, and skips, without a driver); under
 * the preload, those lms hooks (the copies) are lms's, which pass
 * addresses in no lms allocation on to CUDA. A step that fails prints the
 * call and its CUresult name on stderr and the program goes on where it
 * can; the JSON then has null for what it could not measure. One line:
 *   {"bench":"host_numa","supported":true,"maps_into_lms_range":true,
 *    "kernel_rw_ok":true,"map_us":...,"set_access_us":...,"unmap_us":...,
 *    "device_map_us":...,...}
 *   LD_PRELOAD=B/liblms.so LMS_BACKEND=cuda B/bench/host_numa
 * Exit: 0 every call succeeded (an unsupported device is an answer, not a
 * failure), 1 a call failed or liblms.so is not preloaded, 77 no CUDA device.
 */
#include <dlfcn.h>
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

#define REPEATS 50
#define READ_BYTES ((size_t)64 << 20) /* the read-speed blocks */

static struct {
    PFN_cuGetErrorName_v6000 GetErrorName;
    PFN_cuDeviceGet_v2000 DeviceGet;
    PFN_cuDeviceGetAttribute_v2000 DeviceGetAttribute;
    PFN_cuMemGetAllocationGranularity_v10020 MemGetAllocationGranularity;
    PFN_cuMemCreate_v10020 MemCreate;
    PFN_cuMemRelease_v10020 MemRelease;
    PFN_cuMemMap_v10020 MemMap;
    PFN_cuMemUnmap_v10020 MemUnmap;
    PFN_cuMemSetAccess_v10020 MemSetAccess;
    PFN_cuMemcpyHtoD_v3020 MemcpyHtoD;
    PFN_cuMemcpyDtoH_v3020 MemcpyDtoH;
} cu;

static int failures;

/* False, and the call and its error said, unless r is CUDA_SUCCESS. */
static bool ok(CUresult r, const char *call)
{
    if (r == CUDA_SUCCESS)
        return true;
    const char *name = NULL;
    if (cu.GetErrorName == NULL || cu.GetErrorName(r, &name) != CUDA_SUCCESS || name == NULL)
        name = "an unknown CUresult";
    fprintf(stderr, "host_numa: %s: %s (%d)\n", call, name, (int)r);
    failures++;
    return false;
}

static bool rt_ok(cudaError_t e, const char *call)
{
    if (e == cudaSuccess)
        return true;
    fprintf(stderr, "host_numa: %s: %s\n", call, cudaGetErrorName(e));
    failures++;
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
        {"cuMemMap", (void **)&cu.MemMap},
        {"cuMemUnmap", (void **)&cu.MemUnmap},
        {"cuMemSetAccess", (void **)&cu.MemSetAccess},
        {"cuMemcpyHtoD", (void **)&cu.MemcpyHtoD}, /* _v2, for 3.2 and later */
        {"cuMemcpyDtoH", (void **)&cu.MemcpyDtoH},
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

/* Medians of REPEATS rounds of map, set access, unmap of h at va; false
 * (the medians left negative) if a call failed. */
static bool time_mapping(CUmemGenericAllocationHandle h, CUdeviceptr va, size_t bytes,
                         const CUmemAccessDesc *access, double *map_us, double *access_us,
                         double *unmap_us)
{
    double m[REPEATS], a[REPEATS], u[REPEATS];
    for (int r = 0; r < REPEATS; r++) {
        double t0 = now_us();
        if (!ok(cu.MemMap(va, bytes, 0, h, 0), "cuMemMap"))
            return false;
        double t1 = now_us();
        bool set = ok(cu.MemSetAccess(va, bytes, access, 1), "cuMemSetAccess");
        double t2 = now_us();
        if (!ok(cu.MemUnmap(va, bytes), "cuMemUnmap") || !set)
            return false;
        double t3 = now_us();
        m[r] = t1 - t0, a[r] = t2 - t1, u[r] = t3 - t2;
    }
    *map_us = bench_median(m, REPEATS);
    *access_us = bench_median(a, REPEATS);
    *unmap_us = bench_median(u, REPEATS);
    return true;
}

__global__ void twice_plus_i(uint32_t *p, size_t n)
{
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

/* Maps h at va with device access; false (said) if it could not. */
static bool map_rw(CUmemGenericAllocationHandle h, CUdeviceptr va, size_t bytes,
                   const CUmemAccessDesc *access)
{
    if (!ok(cu.MemMap(va, bytes, 0, h, 0), "cuMemMap"))
        return false;
    if (ok(cu.MemSetAccess(va, bytes, access, 1), "cuMemSetAccess"))
        return true;
    (void)ok(cu.MemUnmap(va, bytes), "cuMemUnmap");
    return false;
}

/* A kernel reads and writes the host block at va; the host checks. */
static int kernel_rw(CUmemGenericAllocationHandle h, CUdeviceptr va, size_t bytes,
                     const CUmemAccessDesc *access)
{
    size_t n = bytes / sizeof(uint32_t);
    uint32_t *buf = (uint32_t *)malloc(bytes);
    int result = -1; /* -1 unknown, 0 wrong, 1 right */
    if (buf == NULL || !map_rw(h, va, bytes, access)) {
        free(buf);
        return -1;
    }
    for (size_t i = 0; i < n; i++)
        buf[i] = (uint32_t)i * 2654435761u;
    if (ok(cu.MemcpyHtoD(va, buf, bytes), "cuMemcpyHtoD (host block)")) {
        twice_plus_i<<<64, 256>>>((uint32_t *)va, n);
        if (rt_ok(cudaGetLastError(), "twice_plus_i<<<>>>") &&
            rt_ok(cudaDeviceSynchronize(), "cudaDeviceSynchronize after twice_plus_i") &&
            ok(cu.MemcpyDtoH(buf, va, bytes), "cuMemcpyDtoH (host block)")) {
            result = 1;
            for (size_t i = 0; i < n && result == 1; i++)
                if (buf[i] != 2u * ((uint32_t)i * 2654435761u) + (uint32_t)i) {
                    fprintf(stderr, "host_numa: the kernel's result is wrong at element %zu\n", i);
                    result = 0;
                }
        }
    }
    (void)ok(cu.MemUnmap(va, bytes), "cuMemUnmap");
    free(buf);
    return result;
}

/* GB/s of read_sum over a READ_BYTES block at `location`, mapped at va;
 * negative if a step failed. */
static double read_speed(const CUmemAllocationProp *prop, CUdeviceptr va,
                         const CUmemAccessDesc *access, uint32_t *scratch)
{
    CUmemGenericAllocationHandle h;
    double gbps = -1;
    if (!ok(cu.MemCreate(&h, READ_BYTES, prop, 0), "cuMemCreate (64 MiB read block)"))
        return -1;
    if (map_rw(h, va, READ_BYTES, access)) {
        cudaEvent_t e0, e1;
        float ms = 0;
        if (rt_ok(cudaEventCreate(&e0), "cudaEventCreate") &&
            rt_ok(cudaEventCreate(&e1), "cudaEventCreate")) {
            size_t n = READ_BYTES / sizeof(uint4);
            read_sum<<<264, 512>>>((const uint4 *)va, n, scratch); /* warm */
            (void)rt_ok(cudaEventRecord(e0, 0), "cudaEventRecord");
            for (int r = 0; r < 5; r++)
                read_sum<<<264, 512>>>((const uint4 *)va, n, scratch);
            (void)rt_ok(cudaEventRecord(e1, 0), "cudaEventRecord");
            if (rt_ok(cudaGetLastError(), "read_sum<<<>>>") &&
                rt_ok(cudaEventSynchronize(e1), "cudaEventSynchronize after read_sum") &&
                rt_ok(cudaEventElapsedTime(&ms, e0, e1), "cudaEventElapsedTime") && ms > 0)
                gbps = 5.0 * (double)READ_BYTES / (ms * 1e-3) / 1e9;
            cudaEventDestroy(e0);
            cudaEventDestroy(e1);
        }
        (void)ok(cu.MemUnmap(va, READ_BYTES), "cuMemUnmap");
    }
    (void)ok(cu.MemRelease(h), "cuMemRelease");
    return gbps;
}

static void json_number(const char *key, double v) /* negative: null */
{
    if (v < 0)
        printf(",\"%s\":null", key);
    else
        printf(",\"%s\":%.2f", key, v);
}

static void json_bool(const char *key, int v) /* -1: null */
{
    printf(",\"%s\":%s", key, v < 0 ? "null" : v ? "true" : "false");
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
    CUdevice dev;
    int supported = -1, numa = -1;
    if (ok(cu.DeviceGet(&dev, 0), "cuDeviceGet")) {
        if (ok(cu.DeviceGetAttribute(&supported, CU_DEVICE_ATTRIBUTE_HOST_NUMA_VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED, dev),
               "cuDeviceGetAttribute(HOST_NUMA_VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED)"))
            supported = supported != 0;
        (void)ok(cu.DeviceGetAttribute(&numa, CU_DEVICE_ATTRIBUTE_HOST_NUMA_ID, dev),
                 "cuDeviceGetAttribute(HOST_NUMA_ID)");
    } else
        dev = 0;
    int node = numa < 0 ? 0 : numa; /* no NUMA: node 0, as cuMemCreate asks */

    CUmemAllocationProp hprop, dprop;
    memset(&hprop, 0, sizeof hprop);
    hprop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
    hprop.location.type = CU_MEM_LOCATION_TYPE_HOST_NUMA;
    hprop.location.id = node;
    dprop = hprop;
    dprop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
    dprop.location.id = dev;
    size_t gh = 0, gd = 0;
    if (supported == 1)
        (void)ok(cu.MemGetAllocationGranularity(&gh, &hprop, CU_MEM_ALLOC_GRANULARITY_MINIMUM),
                 "cuMemGetAllocationGranularity(host NUMA)");
    (void)ok(cu.MemGetAllocationGranularity(&gd, &dprop, CU_MEM_ALLOC_GRANULARITY_MINIMUM),
             "cuMemGetAllocationGranularity(device)");
    size_t align = gh > gd ? gh : gd;
    if (align == 0)
        align = (size_t)2 << 20;
    size_t bytes = align; /* the granularities are powers of two: a multiple of both */

    /* lms places allocations from the bottom of its range (alloc/alloc.c:
     * take_chunks cuts the low end of the best-fitting free run), and this
     * program allocates nothing: the top of the range (4 x device and host
     * limits by default) is reserved by lms but never mapped by it. */
    uintptr_t lo = (uintptr_t)base, hi = lo + range;
    CUdeviceptr va = (CUdeviceptr)((hi - 2 * READ_BYTES - bytes) & ~(uintptr_t)(align - 1));
    CUdeviceptr read_va = (CUdeviceptr)((hi - READ_BYTES) & ~(uintptr_t)(align - 1));
    if (range < 4 * READ_BYTES || va < lo || read_va + READ_BYTES > hi) {
        fprintf(stderr, "host_numa: lms's range [%p, +%zu) is too small\n", base, range);
        return 1;
    }
    fprintf(stderr, "host_numa: mapping %zu bytes at 0x%llx, %zu bytes below the top of lms's "
            "range [%p, +%zu)\n", bytes, (unsigned long long)va, (size_t)(hi - va), base, range);

    CUmemAccessDesc access;
    memset(&access, 0, sizeof access);
    access.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
    access.location.id = dev;
    access.flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;

    double hm = -1, ha = -1, hu = -1, dm = -1, da = -1, du = -1, host_gbps = -1, dev_gbps = -1;
    int maps = -1, rw = -1;
    CUmemGenericAllocationHandle hh = 0, dh = 0;
    bool have_host = supported == 1 && ok(cu.MemCreate(&hh, bytes, &hprop, 0), "cuMemCreate(host NUMA)");
    bool have_dev = ok(cu.MemCreate(&dh, bytes, &dprop, 0), "cuMemCreate(device)");
    if (have_host) {
        /* the first cuMemMap says whether lms's reservation takes a host block */
        maps = time_mapping(hh, va, bytes, &access, &hm, &ha, &hu) ? 1 : 0;
    }
    if (have_dev)
        (void)time_mapping(dh, va, bytes, &access, &dm, &da, &du);
    uint32_t *scratch = NULL;
    (void)rt_ok(cudaMalloc(&scratch, sizeof *scratch), "cudaMalloc (scratch)");
    if (have_dev && scratch != NULL)
        dev_gbps = read_speed(&dprop, read_va, &access, scratch);
    if (have_host && maps == 1) { /* last: a fault here would end the context */
        rw = kernel_rw(hh, va, bytes, &access);
        if (rw == 1 && scratch != NULL)
            host_gbps = read_speed(&hprop, read_va, &access, scratch);
    }
    if (have_host)
        (void)ok(cu.MemRelease(hh), "cuMemRelease(host NUMA)");
    if (have_dev)
        (void)ok(cu.MemRelease(dh), "cuMemRelease(device)");
    if (scratch != NULL)
        (void)rt_ok(cudaFree(scratch), "cudaFree (scratch)");

    printf("{\"bench\":\"host_numa\",\"device\":");
    bench_json_string(dp.name);
    json_bool("supported", supported);
    printf(",\"host_numa_id\":%d,\"granularity_host\":%zu,\"granularity_device\":%zu,\"bytes\":%zu,"
           "\"range_base\":\"%p\",\"range_bytes\":%zu,\"address\":\"0x%llx\",\"below_top\":%zu",
           numa, gh, gd, bytes, base, range, (unsigned long long)va, (size_t)(hi - va));
    json_bool("maps_into_lms_range", maps);
    json_bool("kernel_rw_ok", rw);
    json_number("map_us", hm);
    json_number("set_access_us", ha);
    json_number("unmap_us", hu);
    json_number("device_map_us", dm);
    json_number("device_set_access_us", da);
    json_number("device_unmap_us", du);
    json_number("kernel_read_host_gbps", host_gbps);
    json_number("kernel_read_device_gbps", dev_gbps);
    printf(",\"repeats\":%d,\"failures\":%d}\n", REPEATS, failures);
    return failures == 0 ? 0 : 1;
}
