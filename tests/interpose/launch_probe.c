/*
 * tests/interpose/launch_probe.c — kernel launches through liblms.so's hooks
 * on the sim backend, with libfake_cuda.so (fake_cuda.h) as the CUDA the
 * hooks pass them on to. Run with LD_PRELOAD=liblms.so, LMS_BACKEND=sim,
 * LMS_DEVICE_LIMIT=16MiB, LMS_HOST_LIMIT=64MiB, LMS_POLICY=lru
 * (tests/CMakeLists.txt).
 *
 * Twelve 2 MiB allocations are written (so the first ones are evicted), and
 * kernels are launched, in each launch form, with pointers to them in scalar
 * parameters, in a struct passed by value and in an extra buffer. The fake
 * "kernel" reads what they point to when the launch reaches it: it faults
 * if a hook did not make the memory resident, and counts it wrong if the
 * data is not what was written. Also: layouts are asked once per function,
 * a launch whose memory cannot fit fails without reaching CUDA, a stream
 * destroyed is forgotten, and stream-ordered allocation is lms's.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cuda.h>
#include <cuda_runtime_api.h>

#include "lms.h"
#include "fake_cuda.h"

#define MIB ((size_t)1 << 20)
#define N 12
#define SIZE (2 * MIB)

#include "probe.h"
#include "stand_in.h"

static CUdeviceptr buf[N];

static void write_pattern(int i) { stand_in_write(buf[i], SIZE, 100 + (uint64_t)i); }

/* Whether a and b are code of the same loaded object. */
static bool same_object(void *a, void *b)
{
    Dl_info x, y;
    return dladdr(a, &x) != 0 && dladdr(b, &y) != 0 && x.dli_fbase == y.dli_fbase;
}

static void stub_a(void) {} /* a "runtime stub": only its address matters */
static void stub_b(void) {}

int main(void)
{
    for (int i = 0; i < N; i++) {
        CHECK(cuMemAlloc(&buf[i], SIZE) == CUDA_SUCCESS, "cuMemAlloc %d", i);
        write_pattern(i);
    }
    lms_stats_t t0;
    CHECK(lms_stats(&t0) == LMS_OK, "stats");
    CHECK(t0.evictions >= N - 8, "the first allocations were evicted (%llu evictions)",
          (unsigned long long)t0.evictions);

    /* (int n, float *a, struct {int k; float *p;} s, void *host) */
    static const fake_fn_t fa = {0, 4, {0, 8, 16, 32}, {4, 8, 16, 8}};
    struct { int k; CUdeviceptr p; } s = {7, buf[1] + 4096};
    int n = 3;
    void *host = &n;
    void *pa[] = {&n, &buf[0], &s, &host};
    CUstream st = (CUstream)(uintptr_t)0x5000;
    fake_counts_t c = fake_counts();
    CHECK(cuLaunchKernel((CUfunction)(uintptr_t)&fa, 1, 1, 1, 32, 1, 1, 0, st, pa, NULL) ==
              CUDA_SUCCESS, "cuLaunchKernel");
    expect_checked(c.checked, 2, "cuLaunchKernel, a scalar and a struct");
    CHECK(fake_counts().last_stream == st, "the launch went to its stream");
    uint64_t queries = fake_counts().param_queries;
    CHECK(queries == 5, "the layout was asked once per parameter and once past them (%llu)",
          (unsigned long long)queries);

    /* the same function again, on other memory: the layout is not asked again */
    pa[1] = &buf[2];
    s.p = buf[3];
    c = fake_counts();
    CHECK(cuLaunchKernel((CUfunction)(uintptr_t)&fa, 1, 1, 1, 32, 1, 1, 0, NULL, pa, NULL) ==
              CUDA_SUCCESS, "cuLaunchKernel again");
    expect_checked(c.checked, 2, "cuLaunchKernel again");
    CHECK(fake_counts().param_queries == queries, "the layout was kept");

    /* the extra form: one buffer, a pointer at offset 8 */
    unsigned char pbuf[24] = {0};
    memcpy(pbuf + 8, &buf[4], 8);
    size_t psize = sizeof pbuf;
    void *extra[] = {CU_LAUNCH_PARAM_BUFFER_POINTER, pbuf, CU_LAUNCH_PARAM_BUFFER_SIZE, &psize,
                     CU_LAUNCH_PARAM_END};
    static const fake_fn_t fb = {0, 2, {0, 8}, {4, 8}};
    c = fake_counts();
    CHECK(cuLaunchKernel((CUfunction)(uintptr_t)&fb, 1, 1, 1, 1, 1, 1, 0, st, NULL, extra) ==
              CUDA_SUCCESS, "cuLaunchKernel, extra");
    expect_checked(c.checked, 1, "cuLaunchKernel, extra");

    /* cuLaunchKernelEx of a CUkernel: the layout comes from cuKernelGetParamInfo */
    static const fake_fn_t fk = {FAKE_KERNEL, 2, {0, 8}, {8, 8}};
    CUlaunchConfig cfg = {.gridDimX = 1, .gridDimY = 1, .gridDimZ = 1, .blockDimX = 1,
                          .blockDimY = 1, .blockDimZ = 1, .hStream = st};
    void *pk[] = {&buf[5], &buf[6]};
    c = fake_counts();
    CHECK(cuLaunchKernelEx(&cfg, (CUfunction)(uintptr_t)&fk, pk, NULL) == CUDA_SUCCESS,
          "cuLaunchKernelEx");
    expect_checked(c.checked, 2, "cuLaunchKernelEx of a CUkernel");

    /* runtime launches: stubs, through cudaGetFuncBySymbol */
    static const fake_fn_t fr = {0, 1, {0}, {8}};
    fake_bind_stub((const void *)stub_a, &fr);
    fake_bind_stub((const void *)stub_b, &fa);
    void *pr[] = {&buf[7]};
    c = fake_counts();
    CHECK(cudaLaunchKernel((const void *)stub_a, (dim3){1, 1, 1}, (dim3){1, 1, 1}, pr, 0,
                           (cudaStream_t)st) == cudaSuccess, "cudaLaunchKernel");
    expect_checked(c.checked, 1, "cudaLaunchKernel");
    pa[1] = &buf[8];
    s.p = buf[0] + SIZE - 8; /* the last word of an allocation: the whole one is made resident */
    cudaLaunchConfig_t rcfg = {.gridDim = {1, 1, 1}, .blockDim = {1, 1, 1}, .stream = NULL};
    c = fake_counts();
    CHECK(cudaLaunchKernelExC(&rcfg, (const void *)stub_b, pa) == cudaSuccess,
          "cudaLaunchKernelExC");
    expect_checked(c.checked, 2, "cudaLaunchKernelExC");

    /* more than the device at once: the launch fails and never reaches CUDA */
    static const fake_fn_t f8 = {0, 8, {0, 8, 16, 24, 32, 40, 48, 56}, {8, 8, 8, 8, 8, 8, 8, 8}};
    static const fake_fn_t f1 = {0, 1, {0}, {8}};
    CUdeviceptr big;
    CHECK(cuMemAlloc(&big, 9 * SIZE) == CUDA_SUCCESS, "cuMemAlloc of more than the device");
    void *pbig[8] = {&big, &big, &big, &big, &big, &big, &big, &big};
    c = fake_counts();
    CHECK(cuLaunchKernel((CUfunction)(uintptr_t)&f8, 1, 1, 1, 1, 1, 1, 0, st, pbig, NULL) ==
              CUDA_ERROR_OUT_OF_MEMORY, "a launch on more than the device fails");
    CHECK(fake_counts().launches == c.launches, "...and does not reach CUDA");
    CHECK(cuMemFree(big) == CUDA_SUCCESS, "cuMemFree");

    /* a freed allocation's address is no pointer of lms's any more */
    CUdeviceptr gone;
    CHECK(cuMemAlloc(&gone, SIZE) == CUDA_SUCCESS && cuMemFree(gone) == CUDA_SUCCESS, "gone");
    void *pg[] = {&gone};
    CHECK(cuLaunchKernel((CUfunction)(uintptr_t)&f1, 1, 1, 1, 1, 1, 1, 0, st, pg, NULL) ==
              CUDA_SUCCESS, "a launch with a stale address");

    /* stream-ordered allocation on a stream of the program's */
    CUstream st2 = (CUstream)(uintptr_t)0x6000;
    CUdeviceptr a1, a2;
    void *r1, *r2, *base;
    size_t size;
    CHECK(cuMemAllocAsync(&a1, SIZE, st2) == CUDA_SUCCESS, "cuMemAllocAsync");
    CHECK(lms_allocation_of((void *)(uintptr_t)a1, &base, &size) == LMS_OK, "it is lms's");
    CHECK(cuMemFreeAsync(a1, st2) == CUDA_SUCCESS, "cuMemFreeAsync");
    CHECK(cuMemAllocAsync(&a2, SIZE, st2) == CUDA_SUCCESS && a2 == a1,
          "the same stream reuses it at once");
    CHECK(cuMemFreeAsync(a2, st2) == CUDA_SUCCESS, "cuMemFreeAsync");
    CHECK(cudaMallocAsync(&r1, 1000, (cudaStream_t)st2) == cudaSuccess, "cudaMallocAsync");
    CHECK(cudaFreeAsync(r1, (cudaStream_t)st2) == cudaSuccess, "cudaFreeAsync");
    CHECK(cudaMallocAsync(&r2, 1000, (cudaStream_t)st2) == cudaSuccess && r2 == r1,
          "the same stream reuses it at once");
    CHECK(cudaFreeAsync(r2, (cudaStream_t)st2) == cudaSuccess, "cudaFreeAsync");
    CHECK(cuMemAllocAsync(NULL, SIZE, st2) == CUDA_ERROR_INVALID_VALUE, "NULL output");

    /* a stream destroyed is forgotten by lms before CUDA destroys it */
    lms_stream_t h1, h2;
    CHECK(lms_stream_adopt((void *)st2, &h1) == LMS_OK, "adopt");
    CHECK(cuStreamDestroy(st2) == CUDA_SUCCESS, "cuStreamDestroy");
    CHECK(fake_counts().stream_destroys == 1, "CUDA destroyed it");
    CHECK(lms_stream_synchronize(h1) == LMS_ERR_INVALID, "lms forgot it");
    CHECK(lms_stream_adopt((void *)st2, &h2) == LMS_OK && h2 != h1, "a new stream at that handle");
    /* and a launch on a stream whose handle the hook had kept adopts it anew */
    c = fake_counts();
    pa[1] = &buf[9];
    s.p = buf[10];
    CHECK(cuStreamDestroy(st) == CUDA_SUCCESS, "cuStreamDestroy");
    CHECK(cuLaunchKernel((CUfunction)(uintptr_t)&fa, 1, 1, 1, 32, 1, 1, 0, st, pa, NULL) ==
              CUDA_SUCCESS, "cuLaunchKernel on a stream destroyed and made again");
    expect_checked(c.checked, 2, "after the stream was destroyed");

    /* lookups by name give lms's wrappers for what lms hooks, once CUDA found it */
    void *self = dlopen(NULL, RTLD_NOW), *fake = dlopen("libfake_cuda.so", RTLD_NOW | RTLD_NOLOAD);
    void *fn = NULL;
    CUdriverProcAddressQueryResult found;
    CHECK(fake != NULL, "the stand-in is loaded");
    CHECK(cuGetProcAddress("cuLaunchKernel", &fn, 12000, CU_GET_PROC_ADDRESS_DEFAULT, &found) ==
              CUDA_SUCCESS && found == CU_GET_PROC_ADDRESS_SUCCESS, "cuGetProcAddress_v2");
    CHECK(fn == dlsym(self, "cuLaunchKernel") && same_object(fn, (void *)lms_stats),
          "cuGetProcAddress gives lms's cuLaunchKernel");
    CHECK(cuGetProcAddress("cuLaunchKernel", &fn, 12000, CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM,
                           &found) == CUDA_SUCCESS && fn == dlsym(self, "cuLaunchKernel_ptsz"),
          "...and its _ptsz twin for the per-thread default stream");
    typedef CUresult (*v1_t)(const char *, void **, int, cuuint64_t);
    v1_t v1 = (v1_t)dlsym(self, "cuGetProcAddress");
    CHECK(v1 != NULL && v1("cuMemAlloc", &fn, 12000, 0) == CUDA_SUCCESS &&
              fn == dlsym(self, "cuMemAlloc_v2"), "cuGetProcAddress (v1): cuMemAlloc is cuMemAlloc_v2");
    CHECK(cuGetProcAddress("cuCtxSynchronize", &fn, 12000, 0, &found) == CUDA_SUCCESS &&
              fn != NULL && fn != dlsym(self, "cuCtxSynchronize"), "what lms does not hook is CUDA's");
    CHECK(cuGetProcAddress("cuNothing", &fn, 12000, 0, &found) == CUDA_ERROR_NOT_FOUND &&
              found == CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND, "what CUDA does not have, lms does not add");
    enum cudaDriverEntryPointQueryResult rfound;
    CHECK(cudaGetDriverEntryPointByVersion("cuLaunchKernelEx", &fn, 12000, cudaEnableDefault,
                                           &rfound) == cudaSuccess &&
              fn == dlsym(self, "cuLaunchKernelEx"), "cudaGetDriverEntryPointByVersion");
    /* dlsym on a library's handle too, for what lms hooks (Note [dlsym]); RTLD_NEXT
     * still means after the caller: liblms.so's dlsym, after the probe */
    CHECK(dlsym(fake, "cuLaunchKernel") == dlsym(self, "cuLaunchKernel") &&
              dlsym(fake, "cuGetProcAddress_v2") == dlsym(self, "cuGetProcAddress_v2"),
          "dlsym on the stand-in's handle gives lms's cuLaunchKernel and cuGetProcAddress_v2");
    fn = dlsym(fake, "cuFuncGetParamInfo");
    CHECK(fn != NULL && same_object(fn, (void *)fake_counts), "dlsym of what lms does not hook");
    CHECK(dlsym(fake, "cuNothing") == NULL, "dlsym of what the library does not have");
    CHECK(dlsym(RTLD_NEXT, "dlsym") == dlsym(self, "dlsym") &&
              same_object(dlsym(self, "dlsym"), (void *)lms_stats),
          "dlsym(RTLD_NEXT) from the probe finds liblms.so's dlsym, the next after the probe");
    /* and a launch through what the lookup gave is hooked */
    CHECK(cuGetProcAddress("cuLaunchKernel", &fn, 12000, 0, &found) == CUDA_SUCCESS, "lookup");
    CUresult (*looked_up)(CUfunction, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned,
                          unsigned, CUstream, void **, void **) = (__typeof__(looked_up))fn;
    pa[1] = &buf[11];
    s.p = buf[1];
    c = fake_counts();
    CHECK(looked_up((CUfunction)(uintptr_t)&fa, 1, 1, 1, 32, 1, 1, 0, st, pa, NULL) == CUDA_SUCCESS,
          "a launch through cuGetProcAddress's answer");
    expect_checked(c.checked, 2, "a launch through cuGetProcAddress's answer");

    lms_stats_t t1;
    CHECK(lms_stats(&t1) == LMS_OK, "stats");
    CHECK(t1.fetches > t0.fetches, "the launches fetched evicted memory");
    for (int i = 0; i < N; i++)
        CHECK(cuMemFree(buf[i]) == CUDA_SUCCESS, "cuMemFree %d", i);
    fake_counts_t end = fake_counts();
    printf("launch_probe: %llu launches, %llu pointers checked, %llu fetches: %s\n",
           (unsigned long long)end.launches, (unsigned long long)end.checked,
           (unsigned long long)(t1.fetches - t0.fetches), failures ? "FAILED" : "ok");
    return failures != 0;
}
