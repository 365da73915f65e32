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
static void stub_hidden(void) {}
static void stub_coop(void) {}
static void stub_via(void) {}
static void stub_unseen(void) {}

/* nvcc 13's <<<>>> entry point (crt/device_functions.h declares it for C++ only) */
extern cudaError_t __cudaLaunchKernel(cudaKernel_t, dim3, dim3, void **, size_t, cudaStream_t);
extern cudaError_t __cudaLaunchKernel_ptsz(cudaKernel_t, dim3, dim3, void **, size_t,
                                           cudaStream_t);
extern cudaError_t cudaLaunchCooperativeKernel_ptsz(const void *, dim3, dim3, void **, size_t,
                                                    cudaStream_t);
extern CUresult cuLaunchCooperativeKernel_ptsz(CUfunction, unsigned, unsigned, unsigned, unsigned,
                                               unsigned, unsigned, unsigned, CUstream, void **);
extern cudaError_t cudaGetDriverEntryPoint_ptsz(const char *, void **, unsigned long long,
                                                enum cudaDriverEntryPointQueryResult *);
extern cudaError_t cudaGetDriverEntryPointByVersion_ptsz(const char *, void **, unsigned,
                                                         unsigned long long,
                                                         enum cudaDriverEntryPointQueryResult *);

static const dim3 one = {1, 1, 1};

/* Makes buf[a] and buf[b] the least recently used by writing all the others
 * (more than the device holds), so that under LMS_POLICY=lru they are on the
 * host when the next launch names them; returns lms's fetch count. */
static uint64_t cold(int a, int b)
{
    for (int i = 0; i < N; i++)
        if (i != a && i != b)
            CHECK(lms_access((void *)(uintptr_t)buf[i], SIZE, LMS_WRITE, NULL) == LMS_OK,
                  "access %d: %s", i, lms_last_error());
    lms_stats_t t;
    CHECK(lms_stats(&t) == LMS_OK, "stats");
    return t.fetches;
}

static lms_stats_t stats(void)
{
    lms_stats_t t;
    CHECK(lms_stats(&t) == LMS_OK, "stats");
    return t;
}

/* The launch that just ran found the data of buf[a] and buf[b] (n of them),
 * which it had to fetch. */
static void fetched_and_found(uint64_t checked, uint64_t fetches, int n, const char *what)
{
    expect_checked(checked, (uint64_t)n, what);
    CHECK(stats().fetches >= fetches + (uint64_t)n, "%s: its memory was on the host (%llu fetched)",
          what, (unsigned long long)(stats().fetches - fetches));
}

/* The launch paths a CUDA 13 framework takes besides the classic ones: each
 * over memory evicted just before (it faults, or finds wrong data, if its
 * hook is missing). */
static void other_launch_paths(CUstream st)
{
    static const fake_fn_t f2 = {0, 2, {0, 8}, {8, 8}, NULL};
    static const fake_fn_t k2 = {FAKE_KERNEL, 2, {0, 8}, {8, 8}, NULL};
    void *p[] = {&buf[0], &buf[1]};
    fake_counts_t c;
    uint64_t f;

    /* <<<>>> under nvcc 13: __cudaLaunchKernel of a cudaKernel_t (a CUkernel) */
    f = cold(0, 1);
    c = fake_counts();
    CHECK(__cudaLaunchKernel((cudaKernel_t)(uintptr_t)&k2, one, one, p, 0, (cudaStream_t)st) ==
              cudaSuccess, "__cudaLaunchKernel");
    /* and it leaves the runtime's last error as it was: the hook asked
     * cudaGetFuncBySymbol about the cudaKernel_t, whose failure the runtime
     * recorded, and PyTorch's check after every launch failed it (on an
     * H200, 2026-11-26: "CUDA error: invalid device function") */
    CHECK(cudaGetLastError() == cudaSuccess, "__cudaLaunchKernel left no error to read");
    fetched_and_found(c.checked, f, 2, "__cudaLaunchKernel");
    CHECK(fake_counts().kernel_launches == c.kernel_launches + 1, "it reached the stand-in's");
    f = cold(0, 1);
    c = fake_counts();
    CHECK(__cudaLaunchKernel_ptsz((cudaKernel_t)(uintptr_t)&k2, one, one, p, 0, NULL) == cudaSuccess,
          "__cudaLaunchKernel_ptsz");
    fetched_and_found(c.checked, f, 2, "__cudaLaunchKernel_ptsz");

    /* a CUkernel passed to cuLaunchKernel as the CUfunction: cuFuncGetParamInfo
     * says "no parameters" of it, cuKernelGetParamInfo knows better */
    static const fake_fn_t k2b = {FAKE_KERNEL, 2, {0, 8}, {8, 8}, NULL};
    f = cold(0, 1);
    c = fake_counts();
    CHECK(cuLaunchKernel((CUfunction)(uintptr_t)&k2b, 1, 1, 1, 1, 1, 1, 0, st, p, NULL) ==
              CUDA_SUCCESS, "cuLaunchKernel of a CUkernel");
    fetched_and_found(c.checked, f, 2, "cuLaunchKernel of a CUkernel");

    /* cooperative launches, runtime and driver, and their per-thread twins */
    fake_bind_stub((const void *)stub_coop, &f2);
    typedef struct { const char *what; int rt, ptsz; } coop_t;
    static const coop_t coops[] = {{"cudaLaunchCooperativeKernel", 1, 0},
                                   {"cudaLaunchCooperativeKernel_ptsz", 1, 1},
                                   {"cuLaunchCooperativeKernel", 0, 0},
                                   {"cuLaunchCooperativeKernel_ptsz", 0, 1}};
    for (size_t k = 0; k < sizeof coops / sizeof *coops; k++) {
        const coop_t *o = &coops[k];
        f = cold(2, 3);
        c = fake_counts();
        void *pc[] = {&buf[2], &buf[3]};
        int ok = o->rt ? (o->ptsz ? cudaLaunchCooperativeKernel_ptsz((const void *)stub_coop, one, one,
                                                                     pc, 0, NULL)
                                  : cudaLaunchCooperativeKernel((const void *)stub_coop, one, one, pc,
                                                                0, (cudaStream_t)st)) == cudaSuccess
                       : (o->ptsz ? cuLaunchCooperativeKernel_ptsz((CUfunction)(uintptr_t)&f2, 1, 1,
                                                                   1, 1, 1, 1, 0, NULL, pc)
                                  : cuLaunchCooperativeKernel((CUfunction)(uintptr_t)&f2, 1, 1, 1,
                                                              1, 1, 1, 0, st, pc)) == CUDA_SUCCESS;
        CHECK(ok, "%s", o->what);
        fetched_and_found(c.checked, f, 2, o->what);
        CHECK(fake_counts().cooperative == c.cooperative + 1, "%s reached the stand-in's", o->what);
    }

    /* a runtime launch whose layout the runtime hook cannot learn (its stub is
     * not one cudaGetFuncBySymbol knows, and the driver says "no parameters"
     * of it asked as a CUkernel, which it is not) */
    const char *mode = getenv("LMS_UNKNOWN_LAUNCH");
    bool launches = mode != NULL && strcmp(mode, "launch") == 0;
    static const fake_fn_t fh = {FAKE_VIA_DRIVER, 2, {0, 8}, {8, 8}, NULL};
    fake_bind_stub_hidden((const void *)stub_hidden, &fh);
    void *ph[] = {&buf[4], &buf[5]};
    lms_stats_t t = stats();
    /* before a runtime launch has been seen reaching lms's driver hooks, it
     * fails (LMS_UNKNOWN_LAUNCH=auto, swapping), or is left to the driver
     * hook (launch) (Note [Runtime launches the driver sees]) */
    f = cold(4, 5);
    c = fake_counts();
    cudaError_t e = cudaLaunchKernel((const void *)stub_hidden, one, one, ph, 0, (cudaStream_t)st);
    /* cudaGetFuncBySymbol failed on that stub: its error is not left for the
     * program (Note [The program's last error] in interpose/launch.c) */
    CHECK(cudaGetLastError() == cudaSuccess, "an unknown stub's lookup left no error to read");
    if (launches) {
        CHECK(e == cudaSuccess, "LMS_UNKNOWN_LAUNCH=launch: left to the driver hook (%d)", (int)e);
        fetched_and_found(c.checked, f, 2, "a runtime launch seen by the driver hook");
    } else {
        CHECK(e == cudaErrorNotSupported, "an unknown runtime launch fails until the runtime is "
              "seen reaching lms's driver hooks (%d)", (int)e);
        CHECK(fake_counts().launches == c.launches, "...and does not reach CUDA");
        CHECK(stats().launches_unknown == t.launches_unknown + 1, "...and is counted unknown");
    }
    /* a known runtime launch that the runtime passes on to the driver's */
    static const fake_fn_t fv = {FAKE_VIA_DRIVER, 1, {0}, {8}, NULL};
    fake_bind_stub((const void *)stub_via, &fv);
    void *pv[] = {&buf[3]};
    f = cold(3, 3);
    c = fake_counts();
    CHECK(cudaLaunchKernel((const void *)stub_via, one, one, pv, 0, (cudaStream_t)st) ==
              cudaSuccess, "a runtime launch through the driver's");
    fetched_and_found(c.checked, f, 1, "a runtime launch through the driver's");
    /* from now on an unknown one is left to the driver hook, which sees it */
    t = stats();
    f = cold(4, 5);
    c = fake_counts();
    CHECK(cudaLaunchKernel((const void *)stub_hidden, one, one, ph, 0, (cudaStream_t)st) ==
              cudaSuccess, "cudaLaunchKernel of a stub the runtime hook cannot resolve");
    fetched_and_found(c.checked, f, 2, "a runtime launch seen by the driver hook");
    CHECK(stats().launches == t.launches + 1 && stats().launches_unknown == t.launches_unknown,
          "counted once, as known (%llu launches, %llu unknown)",
          (unsigned long long)(stats().launches - t.launches),
          (unsigned long long)(stats().launches_unknown - t.launches_unknown));
    /* ...and one the runtime runs without the driver's entry points: unseen,
     * counted after the fact (over resident memory: nothing makes it so) */
    static const fake_fn_t fu = {0, 1, {0}, {8}, "_Z6unseenPf"};
    fake_bind_stub_hidden((const void *)stub_unseen, &fu);
    void *pu[] = {&buf[6]};
    CHECK(lms_access((void *)(uintptr_t)buf[6], SIZE, LMS_WRITE, NULL) == LMS_OK, "resident");
    t = stats();
    c = fake_counts();
    CHECK(cudaLaunchKernel((const void *)stub_unseen, one, one, pu, 0, (cudaStream_t)st) ==
              cudaSuccess, "a runtime launch no hook could see");
    CHECK(fake_counts().launches == c.launches + 1, "it ran");
    CHECK(stats().launches_unknown == t.launches_unknown + 1, "counted as unknown");

    /* a kernel whose layout the driver does not give (a driver before 12.4) */
    static const fake_fn_t fn = {FAKE_NO_LAYOUT, 1, {0}, {8}, "_Z8nolayoutPf"};
    t = stats();
    c = fake_counts();
    CUresult r = cuLaunchKernel((CUfunction)(uintptr_t)&fn, 1, 1, 1, 1, 1, 1, 0, st, pu, NULL);
    CHECK(launches ? r == CUDA_SUCCESS : r == CUDA_ERROR_NOT_SUPPORTED,
          "a launch of unknown layout: %d (LMS_UNKNOWN_LAUNCH=%s)", (int)r, mode ? mode : "auto");
    CHECK(fake_counts().launches == c.launches + launches, "...%s CUDA",
          launches ? "reaches" : "does not reach");
    CHECK(stats().launches_unknown == t.launches_unknown + 1 && stats().launches == t.launches + 1,
          "...and is counted as unknown");

    /* a TMA descriptor: its tensor's address is hidden from the 8-byte scan,
     * and learnt from cuTensorMapEncodeTiled (then cuTensorMapReplaceAddress) */
    static const fake_fn_t ftm = {0, 2, {0, 64}, {4, 128}, NULL};
    CUtensorMap map; /* 64-byte aligned, as CUDA declares it */
    cuuint64_t dim[1] = {SIZE / 4}, strides[1] = {SIZE};
    cuuint32_t box[1] = {256}, es[1] = {1};
    int n = 1;
    void *pt[] = {&n, &map};
    for (int k = 0; k < 2; k++) {
        CUresult er = k == 0 ? cuTensorMapEncodeTiled(&map, CU_TENSOR_MAP_DATA_TYPE_FLOAT32, 1,
                                                     (void *)(uintptr_t)buf[7], dim, strides, box,
                                                     es, CU_TENSOR_MAP_INTERLEAVE_NONE,
                                                     CU_TENSOR_MAP_SWIZZLE_NONE,
                                                     CU_TENSOR_MAP_L2_PROMOTION_NONE,
                                                     CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE)
                            : cuTensorMapReplaceAddress(&map, (void *)(uintptr_t)buf[8]);
        CHECK(er == CUDA_SUCCESS, "tensor map %d", k);
        f = cold(7 + k, 7 + k);
        c = fake_counts();
        CHECK(cuLaunchKernel((CUfunction)(uintptr_t)&ftm, 1, 1, 1, 1, 1, 1, 0, st, pt, NULL) ==
                  CUDA_SUCCESS, "a launch with a tensor map");
        CHECK(fake_counts().tensor_maps == c.tensor_maps + 1, "the kernel read its descriptor");
        fetched_and_found(c.checked, f, 1, k == 0 ? "a tensor map" : "a tensor map re-addressed");
    }
    /* thousands of other descriptors later, the first is still known */
    CUtensorMap other;
    for (uint64_t k = 1; k <= 5000; k++)
        CHECK(cuTensorMapEncodeTiled(&other, CU_TENSOR_MAP_DATA_TYPE_FLOAT32, 1,
                                     (void *)(uintptr_t)(buf[k % N] + 64 * (k / N)), dim, strides,
                                     box, es, CU_TENSOR_MAP_INTERLEAVE_NONE,
                                     CU_TENSOR_MAP_SWIZZLE_NONE, CU_TENSOR_MAP_L2_PROMOTION_NONE,
                                     CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE) == CUDA_SUCCESS,
              "tensor map %llu", (unsigned long long)k);
    f = cold(8, 8);
    c = fake_counts();
    CHECK(cuLaunchKernel((CUfunction)(uintptr_t)&ftm, 1, 1, 1, 1, 1, 1, 0, st, pt, NULL) ==
              CUDA_SUCCESS, "a launch with the tensor map again");
    fetched_and_found(c.checked, f, 1, "a tensor map after 5000 others");

    /* more pointers than a launch keeps on its stack (64): 70 words of one
     * struct, into six evicted allocations */
    static const fake_fn_t f70 = {0, 1, {0}, {70 * 8}, NULL};
    uint64_t words[70];
    for (int k = 0; k < 70; k++)
        words[k] = buf[k % 6] + 8 * (uint64_t)k;
    void *pw[] = {words};
    f = cold(0, 1);
    for (int k = 2; k < 6; k++) /* 0..5 out: the six last least recently used */
        CHECK(lms_access((void *)(uintptr_t)buf[6 + k], SIZE, LMS_WRITE, NULL) == LMS_OK, "push");
    f = stats().fetches;
    c = fake_counts();
    CHECK(cuLaunchKernel((CUfunction)(uintptr_t)&f70, 1, 1, 1, 1, 1, 1, 0, st, pw, NULL) ==
              CUDA_SUCCESS, "a launch of 70 pointers");
    expect_checked(c.checked, 70, "70 pointers");
    CHECK(stats().fetches > f, "...some of whose memory was on the host");

    /* kernels with no parameters, a CUfunction and a CUkernel: the driver says
     * "none" of each asked as either type, which is believed, and they launch */
    static const fake_fn_t f0 = {0, 0, {0}, {0}, "_Z4zerov"}, k0 = {FAKE_KERNEL, 0, {0}, {0}, NULL};
    void *p0[1] = {NULL};
    t = stats();
    c = fake_counts();
    CHECK(cuLaunchKernel((CUfunction)(uintptr_t)&f0, 1, 1, 1, 1, 1, 1, 0, st, p0, NULL) ==
              CUDA_SUCCESS && cuLaunchKernel((CUfunction)(uintptr_t)&k0, 1, 1, 1, 1, 1, 1, 0, st,
                                             p0, NULL) == CUDA_SUCCESS,
          "kernels with no parameters");
    CHECK(fake_counts().launches == c.launches + 2 && stats().launches_unknown == t.launches_unknown,
          "...launch, as known");

    /* the deprecated doors whose parameters were set before (cuParamSet*):
     * never silent, counted unknown, failed while swapping (auto) */
    static const fake_fn_t fg = {0, 1, {0}, {8}, "_Z4gridPf"};
    for (int d = 0; d < 4; d++) {
        CUDA_LAUNCH_PARAMS lp = {.function = (CUfunction)(uintptr_t)&fg, .gridDimX = 1,
                                 .gridDimY = 1, .gridDimZ = 1, .blockDimX = 1, .blockDimY = 1,
                                 .blockDimZ = 1, .hStream = st, .kernelParams = NULL};
        CUfunction gf = (CUfunction)(uintptr_t)&fg;
        t = stats();
        c = fake_counts();
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wdeprecated-declarations"
        CUresult rd = d == 0   ? cuLaunch(gf)
                      : d == 1 ? cuLaunchGrid(gf, 1, 1)
                      : d == 2 ? cuLaunchGridAsync(gf, 1, 1, st)
                               : cuLaunchCooperativeKernelMultiDevice(&lp, 1, 0);
#pragma GCC diagnostic pop
        CHECK(launches ? rd == CUDA_SUCCESS : rd == CUDA_ERROR_NOT_SUPPORTED,
              "deprecated door %d: %d", d, (int)rd);
        CHECK(fake_counts().launches == c.launches + launches, "deprecated door %d %s CUDA", d,
              launches ? "reaches" : "does not reach");
        CHECK(stats().launches_unknown == t.launches_unknown + 1, "...counted unknown");
    }

    /* a module unloaded, and a function of another at the same address with
     * another layout: learnt anew (its old one named one read-only pointer) */
    static fake_fn_t fm = {0, 1, {0}, {8}, "_Z3oldPKf"};
    void *pm[] = {&buf[10], &buf[11]};
    f = cold(10, 10);
    c = fake_counts();
    CHECK(cuLaunchKernel((CUfunction)(uintptr_t)&fm, 1, 1, 1, 1, 1, 1, 0, st, pm, NULL) ==
              CUDA_SUCCESS, "a module's function");
    fetched_and_found(c.checked, f, 1, "a module's function");
    CHECK(cuModuleUnload((CUmodule)(uintptr_t)0x77) == CUDA_SUCCESS, "cuModuleUnload");
    fm = (fake_fn_t){0, 2, {0, 8}, {8, 8}, "_Z3newPfS_"};
    f = cold(10, 11);
    c = fake_counts();
    CHECK(cuLaunchKernel((CUfunction)(uintptr_t)&fm, 1, 1, 1, 1, 1, 1, 0, st, pm, NULL) ==
              CUDA_SUCCESS, "another module's function at its address");
    fetched_and_found(c.checked, f, 2, "another module's function at its address");

    /* a launch with no lms pointer among its parameters is counted as such */
    static const fake_fn_t fi = {0, 1, {0}, {4}, "_Z4noneiv"};
    t = stats();
    void *pi[] = {&n};
    CHECK(cuLaunchKernel((CUfunction)(uintptr_t)&fi, 1, 1, 1, 1, 1, 1, 0, st, pi, NULL) ==
              CUDA_SUCCESS, "a launch of an int");
    CHECK(stats().launches_without_lms == t.launches_without_lms + 1 &&
              stats().launches == t.launches + 1, "counted as a launch with no lms pointer");

    /* a pointer to const is made resident for reading: evicting it again is
     * a drop, not a copy (Note [Access modes from the signature]) */
    static const fake_fn_t fc = {0, 2, {0, 8}, {8, 8}, "_Z4copyPKfPf"};
    f = cold(9, 10);
    t = stats();
    c = fake_counts();
    void *pcst[] = {&buf[9], &buf[10]};
    CHECK(cuLaunchKernel((CUfunction)(uintptr_t)&fc, 1, 1, 1, 1, 1, 1, 0, st, pcst, NULL) ==
              CUDA_SUCCESS, "copy(const float *, float *)");
    fetched_and_found(c.checked, f, 2, "copy(const float *, float *)");
    (void)cold(9, 10);
    CHECK(stats().clean_drops > t.clean_drops,
          "the buffer read through a pointer to const was dropped, not copied out (%llu drops)",
          (unsigned long long)(stats().clean_drops - t.clean_drops));
}

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
    CHECK(dlsym(fake, "__cudaLaunchKernel") == dlsym(self, "__cudaLaunchKernel") &&
              same_object(dlsym(self, "__cudaLaunchKernel"), (void *)lms_stats),
          "...and lms's __cudaLaunchKernel (<<<>>>)");
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

    /* the runtime's lookups for the per-thread default stream */
    CHECK(cudaGetDriverEntryPoint_ptsz("cuLaunchKernel", &fn, cudaEnableDefault, &rfound) ==
              cudaSuccess && fn == dlsym(self, "cuLaunchKernel_ptsz"),
          "cudaGetDriverEntryPoint_ptsz gives lms's cuLaunchKernel_ptsz");
    CHECK(cudaGetDriverEntryPointByVersion_ptsz("cuLaunchKernel", &fn, 12000, cudaEnableDefault,
                                                &rfound) == cudaSuccess &&
              fn == dlsym(self, "cuLaunchKernel_ptsz"),
          "cudaGetDriverEntryPointByVersion_ptsz gives lms's cuLaunchKernel_ptsz");
    CHECK(cudaGetDriverEntryPointByVersion_ptsz("cuTensorMapEncodeTiled", &fn, 12000,
                                                cudaEnableDefault, &rfound) == cudaSuccess &&
              fn == dlsym(self, "cuTensorMapEncodeTiled"),
          "...and lms's cuTensorMapEncodeTiled");

    other_launch_paths(st);

    lms_stats_t t1;
    CHECK(lms_stats(&t1) == LMS_OK, "stats");
    CHECK(t1.fetches > t0.fetches, "the launches fetched evicted memory");
    CHECK(t1.launches >= fake_counts().launches,
          "every launch that reached the stand-in was counted (%llu counted, %llu reached)",
          (unsigned long long)t1.launches, (unsigned long long)fake_counts().launches);
    for (int i = 0; i < N; i++)
        CHECK(cuMemFree(buf[i]) == CUDA_SUCCESS, "cuMemFree %d", i);
    fake_counts_t end = fake_counts();
    printf("launch_probe: %llu launches, %llu pointers checked, %llu fetches: %s\n",
           (unsigned long long)end.launches, (unsigned long long)end.checked,
           (unsigned long long)(t1.fetches - t0.fetches), failures ? "FAILED" : "ok");
    return failures != 0;
}
