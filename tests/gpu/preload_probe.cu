/*
 * tests/gpu/preload_probe.cu — the interposer on a card: an unmodified CUDA
 * program, linked against the shared libcudart, cuBLAS, cuBLASLt and NCCL
 * and knowing nothing of lms, runs every way a kernel can reach memory that
 * lms has evicted, and checks each result against the host's.
 *
 * It allocates about four times LMS_DEVICE_LIMIT with cudaMalloc (which lms
 * answers), writes it all, so that what it wrote first is on the host, and
 * before each case writes other memory again (1.25 x the limit), so that
 * the case's buffers have been evicted just before it runs. Cases:
 *   launch_chevron      a <<<>>> launch (nvcc 13: __cudaLaunchKernel)
 *   launch_runtime      an explicit cudaLaunchKernel
 *   launch_cooperative  cudaLaunchCooperativeKernel, with a grid sync
 *   cublas_sgemm        cublasSgemm
 *   cublaslt_bf16       cublasLtMatmul, bf16 A and B, fp32 compute and D
 *   nccl_allreduce      a one-rank ncclAllReduce; it also says which NCCL
 *                       this is, NCCL_CUMEM_ENABLE, and whether NCCL's own
 *                       buffers are lms allocations ("nccl:" lines)
 *   pointer_array       a kernel reaching buffers only through pointers
 *                       stored in device memory, with lms_pin on them (the
 *                       documented way: no hook sees such pointers)
 *   driver_cukernel     a kernel of a library loaded at run time
 *                       (cudaLibraryLoadData of tests/gpu/probe_library.cu,
 *                       embedded), launched by the driver's cuLaunchKernel
 *                       with its CUkernel where a CUfunction goes; and one
 *                       without parameters launched as a CUkernel and as
 *                       its CUfunction, which lms must let through
 *   tma_kernel          a kernel that reads its tensor only by TMA
 *                       (cp.async.bulk.tensor) through a CUtensorMap passed
 *                       by value (__grid_constant__), encoded by
 *                       cuTensorMapEncodeTiled as the program looked it up
 *                       (cudaGetDriverEntryPointByVersion, which lms hooks):
 *                       only the descriptor names the tensor
 *   tma_struct          the same with the descriptor inside a struct of
 *                       parameters, as CUTLASS passes its
 * Each prints "case NAME: ok (...)" or "case NAME: FAILED ...": a wrong
 * result, a CUDA error, nothing fetched during the case (then its buffers
 * were not evicted, and it proved nothing), or a launch during it whose
 * layout lms could not learn (lms_stats launches_unknown). Once the context
 * has died (an illegal address), the cases after it are not run and say so.
 * It also prints, per case, what its LMS_TRACE_ACCESSES trace must show:
 *   trace-check NAME MARKER all|any LABEL=BYTES...
 * The case ran while an allocation of MARKER bytes was live (the trace's
 * `alloc` of that size and its `free` bound the case's lines); `all`: one
 * `kernel` line there names every listed buffer, `any`: one names at least
 * one (for the libraries, whose kernels' parameters lms scans but whose
 * layouts are theirs). tests/gpu/preload-probe.sh checks that after the
 * process has exited (liblms.so flushes the trace at exit). Last, every
 * lms_stats field.
 *
 * With driver_cukernel, it first prints what the real driver answers when
 * asked about a handle of the other kind (cuFuncGetParamInfo of a CUkernel,
 * cuKernelGetParamInfo of a CUfunction or of a host function's address,
 * the names): lms's choice of how to ask depends on it (Note [Parameter
 * layouts] in interpose/launch.c), and lms asks such questions in that
 * case. Informational, never a failure:
 *   driver-answer: CALL(HANDLE[, 0]): CUresult name [(offset O, size S) | "name"]
 * They are asked by this program run again as `preload_probe
 * --driver-answers`, without the preload, since a host address is no handle
 * and the question may crash the process that asks it.
 *
 * It never links liblms (lms_pin, lms_unpin, lms_stats and
 * lms_reserved_range come from the preloaded liblms.so, by dlsym, and it
 * refuses to run without it), nor libcuda: the driver functions it calls
 * come from the runtime's cudaGetDriverEntryPointByVersion. Exit: 0 all
 * passed, 1 a case failed or lms is not preloaded, 2 usage, 77 no CUDA
 * device (CTest's "skipped").
 *
 *   LD_PRELOAD=B/liblms.so LMS_BACKEND=cuda LMS_DEVICE_LIMIT=256MiB \
 *       LMS_HOST_LIMIT=2GiB B/tests/preload_probe [CASE...]
 * or, with the trace checked: sh tests/gpu/preload-probe.sh B [OUT_DIR].
 */
#include <dlfcn.h>
#include <errno.h>
#include <math.h>
#include <signal.h>
#include <spawn.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>

#include <utility>

#include <cooperative_groups.h>
#include <cublasLt.h>
#include <cublas_v2.h>
#include <cuda.h>         /* types only: the driver's functions come from the runtime */
#include <cudaTypedefs.h> /* their signatures, PFN_<name>_v<version> */
#include <cuda/barrier>
#include <cuda/ptx>
#include <cuda_runtime.h>
#include <nccl.h>

#include "lms.h" /* types only: the functions come from the preload */
#include "probe_library_fatbin.h" /* probe_library_fatbin: tests/gpu/probe_library.cu */
#include "tests/gpu/gpu_program.h"
#include "tests/gpu/probe_kernels.h"

/* ---- lms, from the preload ------------------------------------------------------ */

static struct {
    lms_status_t (*pin)(const void *, size_t);
    lms_status_t (*unpin)(const void *, size_t);
    lms_status_t (*stats)(lms_stats_t *);
    lms_status_t (*reserved_range)(void **, size_t *);
    const char *(*last_error)(void);
} lms;

/* False, having said what is missing, unless liblms.so is preloaded. */
static bool find_lms(void)
{
    static const char *const names[] = {"lms_pin", "lms_unpin", "lms_stats", "lms_reserved_range",
                                        "lms_last_error"};
    void **slots[] = {(void **)&lms.pin, (void **)&lms.unpin, (void **)&lms.stats,
                      (void **)&lms.reserved_range, (void **)&lms.last_error};
    for (int i = 0; i < 5; i++)
        if ((*slots[i] = dlsym(RTLD_DEFAULT, names[i])) == NULL) {
            fprintf(stderr, "preload_probe: %s not found: liblms.so is not preloaded; run it as "
                            "LD_PRELOAD=BUILD/liblms.so BUILD/tests/preload_probe "
                            "(or sh tests/gpu/preload-probe.sh BUILD)\n", names[i]);
            return false;
        }
    return true;
}

/* ---- failures of the case running ------------------------------------------------ */

static char why[1024];

static bool fail(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(why, sizeof why, fmt, ap);
    va_end(ap);
    return false;
}

static const char *lms_error(lms_status_t) { return lms.last_error(); }

/* Fails the case unless `call` returns `good`; name() names what it returned. */
#define EXPECT(call, good, name)                                                            \
    do {                                                                                    \
        auto r_ = (call);                                                                   \
        if (r_ != (good))                                                                   \
            return fail("%s: %s (line %d)", #call, name(r_), __LINE__);                     \
    } while (0)
static const char *cu_name(CUresult r);
#define CUDA_OK(call) EXPECT(call, cudaSuccess, cudaGetErrorName)
#define CU_OK(call) EXPECT(call, CUDA_SUCCESS, cu_name)
#define CUBLAS_OK(call) EXPECT(call, CUBLAS_STATUS_SUCCESS, cublasGetStatusName)
#define NCCL_OK(call) EXPECT(call, ncclSuccess, ncclGetErrorString)
#define LMS_CALL_OK(call) EXPECT(call, LMS_OK, lms_error)

/* ---- the driver, as the program's runtime finds it ------------------------------- */

/* Driver functions, from cudaGetDriverEntryPointByVersion at this toolkit's
 * CUDA_VERSION (so that each has its typedef's signature): under the
 * preload, lms's wrapper where lms hooks the function (cuLaunchKernel,
 * cuTensorMapEncodeTiled), the driver's own elsewhere. NULL until needed. */
static struct {
    PFN_cuGetErrorName_v6000 get_error_name;
    PFN_cuLaunchKernel_v4000 launch_kernel;
    PFN_cuKernelGetFunction_v12000 kernel_get_function;
    PFN_cuTensorMapEncodeTiled_v12000 encode_tiled;
    PFN_cuFuncGetParamInfo_v12040 func_get_param_info;
    PFN_cuKernelGetParamInfo_v12040 kernel_get_param_info;
    PFN_cuFuncGetName_v12030 func_get_name;
    PFN_cuKernelGetName_v12030 kernel_get_name;
} drv;

/* The driver's `name` into *slot, unless there already; false, having
 * failed the case, if the runtime finds none. */
static bool need_driver(void **slot, const char *name)
{
    if (*slot != NULL)
        return true;
    cudaDriverEntryPointQueryResult found = cudaDriverEntryPointSymbolNotFound;
    cudaError_t e = cudaGetDriverEntryPointByVersion(name, slot, CUDA_VERSION, cudaEnableDefault, &found);
    if (e != cudaSuccess || found != cudaDriverEntryPointSuccess || *slot == NULL) {
        *slot = NULL;
        return fail("cudaGetDriverEntryPointByVersion(%s, %d): %s", name, CUDA_VERSION,
                    e != cudaSuccess ? cudaGetErrorName(e)
                    : found == cudaDriverEntryPointVersionNotSufficent
                        ? "the driver is older than that version"
                        : "no such function in the driver");
    }
    return true;
}
#define NEED_DRIVER(field, name) need_driver((void **)&drv.field, name)

/* CUDA's name of r ("CUDA_ERROR_INVALID_VALUE"), or its number. */
static const char *cu_name(CUresult r)
{
    static char number[32];
    const char *s = NULL;
    if (drv.get_error_name == NULL &&
        cudaGetDriverEntryPointByVersion("cuGetErrorName", (void **)&drv.get_error_name,
                                         CUDA_VERSION, cudaEnableDefault, NULL) != cudaSuccess)
        drv.get_error_name = NULL;
    if (drv.get_error_name != NULL && drv.get_error_name(r, &s) == CUDA_SUCCESS && s != NULL)
        return s;
    snprintf(number, sizeof number, "CUresult %d", (int)r);
    return number;
}

/* ---- buffers ----------------------------------------------------------------------- */

/* A case's device buffer. Its size is unique in the run, so that its
 * `alloc` line in the trace names it (checked once all are made). */
typedef struct buffer {
    void *d;
    size_t bytes; /* as asked of cudaMalloc (what the trace says) */
    const char *label;
} buffer_t;

#define MAX_BUFFERS 16
static buffer_t *made[64];
static int nmade;
static char *range_lo; /* lms's reserved range */
static size_t range_bytes;

static bool in_lms_range(const void *p)
{
    return (const char *)p >= range_lo && (const char *)p < range_lo + range_bytes;
}

/* cudaMalloc of `bytes` + a pad that makes the size unique to (the case,
 * the buffer); the memory must be lms's. */
static bool make(buffer_t *b, int case_index, int k, const char *label, size_t bytes)
{
    b->bytes = bytes + 8 * (size_t)(32 * case_index + k + 1);
    b->label = label;
    CUDA_OK(cudaMalloc(&b->d, b->bytes));
    if (!in_lms_range(b->d))
        return fail("cudaMalloc(%zu) gave %p, outside lms's range [%p, +%zu): lms did not answer "
                    "it (LMS_ENABLE=0?)", b->bytes, b->d, (void *)range_lo, range_bytes);
    if (nmade < 64)
        made[nmade++] = b;
    return true;
}

static bool sizes_unique(void)
{
    for (int i = 0; i < nmade; i++)
        for (int j = i + 1; j < nmade; j++)
            if (made[i]->bytes == made[j]->bytes)
                return fail("buffers %s and %s both have %zu bytes: the trace cannot tell them "
                            "apart", made[i]->label, made[j]->label, made[i]->bytes);
    return true;
}

static bool upload(const buffer_t *b, const void *host, size_t bytes)
{
    CUDA_OK(cudaMemcpy(b->d, host, bytes, cudaMemcpyHostToDevice));
    return true;
}

static bool download(void *host, const buffer_t *b, size_t bytes)
{
    CUDA_OK(cudaMemcpy(host, b->d, bytes, cudaMemcpyDeviceToHost));
    return true;
}

/* ---- kernels ----------------------------------------------------------------------- */

__global__ void mix(const uint32_t *x, const uint32_t *y, uint32_t *out, size_t n, uint32_t salt)
{
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n;
         i += (size_t)gridDim.x * blockDim.x)
        out[i] = mix_one(x[i], y[i], i, salt);
}

/* tmp = x + y; the whole grid waits; out[i] = 3 tmp[n-1-i], written by
 * other blocks than the ones that read it. */
__global__ void reverse_sum(const uint32_t *x, const uint32_t *y, uint32_t *tmp, uint32_t *out,
                            size_t n)
{
    cooperative_groups::grid_group grid = cooperative_groups::this_grid();
    size_t stride = (size_t)gridDim.x * blockDim.x;
    size_t first = blockIdx.x * (size_t)blockDim.x + threadIdx.x;
    for (size_t i = first; i < n; i += stride)
        tmp[i] = x[i] + y[i];
    grid.sync();
    for (size_t i = first; i < n; i += stride)
        out[i] = 3u * tmp[n - 1 - i];
}

/* out[i] = sum over k of (k + 1) * parts[k][i]: parts is in device memory. */
__global__ void gather(const uint32_t *const *parts, int nparts, size_t n, uint32_t *out)
{
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n;
         i += (size_t)gridDim.x * blockDim.x) {
        uint32_t s = 0;
        for (int k = 0; k < nparts; k++)
            s += (uint32_t)(k + 1) * parts[k][i];
        out[i] = s;
    }
}

static uint32_t pattern(size_t i, uint32_t seed)
{
    uint32_t v = (uint32_t)i * 0x9e3779b1u ^ seed;
    v ^= v >> 15;
    return v * 0x85ebca6bu;
}

static bool compare_u32(const uint32_t *got, const uint32_t *want, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (got[i] != want[i])
            return fail("wrong result: element %zu is 0x%08x, the host's 0x%08x", i, got[i],
                        want[i]);
    return true;
}

/* ---- the cases ---------------------------------------------------------------------- */

typedef struct probe_case {
    const char *name;
    bool (*setup)(int index); /* allocates and writes its buffers, before the filler */
    bool (*work)(void);       /* the launch or call, on evicted buffers; not synchronized */
    bool (*verify)(void);     /* its results against the host's */
    const char *mode;         /* of the trace check: "all" or "any" */
    buffer_t *traced[MAX_BUFFERS];
    int ntraced;
} probe_case_t;

static cudaStream_t stream;
static int num_sms;

/* Element-wise cases: x and y in, out written. */
typedef struct elementwise {
    buffer_t x, y, tmp, out;
    uint32_t *hx, *hy;
    size_t n;
    uint32_t salt;
} elementwise_t;

static elementwise_t chevron, runtime, cooperative;

static bool setup_elementwise(elementwise_t *e, int index, bool with_tmp)
{
    e->n = ((size_t)1 << 20) + 101 * (size_t)index; /* 4 MiB and a bit */
    e->salt = 0x5a5a0000u + (uint32_t)index;
    size_t bytes = e->n * sizeof(uint32_t);
    if ((e->hx = (uint32_t *)malloc(bytes)) == NULL || (e->hy = (uint32_t *)malloc(bytes)) == NULL)
        return fail("no host memory");
    for (size_t i = 0; i < e->n; i++)
        e->hx[i] = pattern(i, 1 + index), e->hy[i] = pattern(i, 100 + index);
    if (!make(&e->x, index, 0, "x", bytes) || !make(&e->y, index, 1, "y", bytes) ||
        !make(&e->out, index, 2, "out", bytes) ||
        (with_tmp && !make(&e->tmp, index, 3, "tmp", bytes)))
        return false;
    if (!upload(&e->x, e->hx, bytes) || !upload(&e->y, e->hy, bytes))
        return false;
    CUDA_OK(cudaMemset(e->out.d, 0xee, bytes)); /* so that the case must write it */
    if (with_tmp)
        CUDA_OK(cudaMemset(e->tmp.d, 0xee, bytes));
    return true;
}

static bool verify_mix(const elementwise_t *e)
{
    uint32_t *got = (uint32_t *)malloc(e->n * sizeof *got), *want = (uint32_t *)malloc(e->n * sizeof *want);
    bool ok = got != NULL && want != NULL ? true : fail("no host memory");
    for (size_t i = 0; ok && i < e->n; i++)
        want[i] = mix_one(e->hx[i], e->hy[i], i, e->salt);
    ok = ok && download(got, &e->out, e->n * sizeof *got) && compare_u32(got, want, e->n);
    free(got);
    free(want);
    return ok;
}

static bool setup_chevron(int index) { return setup_elementwise(&chevron, index, false); }

static bool work_chevron(void)
{
    mix<<<2 * num_sms, 256, 0, stream>>>((const uint32_t *)chevron.x.d, (const uint32_t *)chevron.y.d,
                                         (uint32_t *)chevron.out.d, chevron.n, chevron.salt);
    CUDA_OK(cudaGetLastError()); /* <<<>>> drops the launch's own result */
    return true;
}

static bool verify_chevron(void) { return verify_mix(&chevron); }

static bool setup_runtime(int index) { return setup_elementwise(&runtime, index, false); }

static bool work_runtime(void)
{
    const uint32_t *x = (const uint32_t *)runtime.x.d, *y = (const uint32_t *)runtime.y.d;
    uint32_t *out = (uint32_t *)runtime.out.d;
    void *args[] = {&x, &y, &out, &runtime.n, &runtime.salt};
    CUDA_OK(cudaLaunchKernel((const void *)mix, dim3(2 * num_sms), dim3(256), args, 0, stream));
    return true;
}

static bool verify_runtime(void) { return verify_mix(&runtime); }

static bool setup_cooperative(int index)
{
    int can = 0;
    CUDA_OK(cudaDeviceGetAttribute(&can, cudaDevAttrCooperativeLaunch, 0));
    if (!can)
        return fail("the device has no cooperative launch (cudaDevAttrCooperativeLaunch 0)");
    return setup_elementwise(&cooperative, index, true);
}

static bool work_cooperative(void)
{
    int per_sm = 0;
    CUDA_OK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, reverse_sum, 256, 0));
    if (per_sm < 1)
        return fail("reverse_sum: no block fits on an SM");
    int blocks = per_sm * num_sms; /* all co-resident, as a cooperative launch needs */
    const uint32_t *x = (const uint32_t *)cooperative.x.d, *y = (const uint32_t *)cooperative.y.d;
    uint32_t *tmp = (uint32_t *)cooperative.tmp.d, *out = (uint32_t *)cooperative.out.d;
    void *args[] = {&x, &y, &tmp, &out, &cooperative.n};
    CUDA_OK(cudaLaunchCooperativeKernel((const void *)reverse_sum, dim3(blocks), dim3(256), args, 0,
                                        stream));
    return true;
}

static bool verify_cooperative(void)
{
    const elementwise_t *e = &cooperative;
    uint32_t *got = (uint32_t *)malloc(e->n * sizeof *got), *want = (uint32_t *)malloc(e->n * sizeof *want);
    bool ok = got != NULL && want != NULL ? true : fail("no host memory");
    for (size_t i = 0; ok && i < e->n; i++)
        want[i] = 3u * (e->hx[e->n - 1 - i] + e->hy[e->n - 1 - i]);
    ok = ok && download(got, &e->out, e->n * sizeof *got) && compare_u32(got, want, e->n);
    free(got);
    free(want);
    return ok;
}

/* cuBLAS: C (m x n) = A (m x k) B (k x n), column-major, small integers, so
 * that every sum is exact in fp32 (and in TF32). */
enum { SG_M = 512, SG_N = 520, SG_K = 528 };
static struct {
    cublasHandle_t handle;
    buffer_t a, b, c;
    float *ha, *hb;
} sgemm;

static bool setup_sgemm(int index)
{
    CUBLAS_OK(cublasCreate(&sgemm.handle));
    CUBLAS_OK(cublasSetStream(sgemm.handle, stream));
    sgemm.ha = (float *)malloc(sizeof(float) * SG_M * SG_K);
    sgemm.hb = (float *)malloc(sizeof(float) * SG_K * SG_N);
    if (sgemm.ha == NULL || sgemm.hb == NULL)
        return fail("no host memory");
    for (size_t i = 0; i < (size_t)SG_M * SG_K; i++)
        sgemm.ha[i] = (float)((int)(pattern(i, 7) % 9) - 4);
    for (size_t i = 0; i < (size_t)SG_K * SG_N; i++)
        sgemm.hb[i] = (float)((int)(pattern(i, 8) % 9) - 4);
    if (!make(&sgemm.a, index, 0, "A", sizeof(float) * SG_M * SG_K) ||
        !make(&sgemm.b, index, 1, "B", sizeof(float) * SG_K * SG_N) ||
        !make(&sgemm.c, index, 2, "C", sizeof(float) * SG_M * SG_N))
        return false;
    if (!upload(&sgemm.a, sgemm.ha, sizeof(float) * SG_M * SG_K) ||
        !upload(&sgemm.b, sgemm.hb, sizeof(float) * SG_K * SG_N))
        return false;
    CUDA_OK(cudaMemset(sgemm.c.d, 0xee, sizeof(float) * SG_M * SG_N));
    return true;
}

static bool work_sgemm(void)
{
    const float one = 1.0f, zero = 0.0f;
    CUBLAS_OK(cublasSgemm(sgemm.handle, CUBLAS_OP_N, CUBLAS_OP_N, SG_M, SG_N, SG_K, &one,
                          (const float *)sgemm.a.d, SG_M, (const float *)sgemm.b.d, SG_K, &zero,
                          (float *)sgemm.c.d, SG_M));
    return true;
}

/* d (m x n, fp32, column-major) against a (m x k) b (k x n) summed on the
 * host: each element within rel x the sum of its products' magnitudes, plus abs. */
static bool verify_matmul(const buffer_t *d, const float *a, const float *b, int m, int n, int k,
                          double rel, double abs)
{
    float *got = (float *)malloc(sizeof(float) * m * n);
    if (got == NULL)
        return fail("no host memory");
    bool ok = download(got, d, sizeof(float) * m * n);
    for (int j = 0; ok && j < n; j++)
        for (int i = 0; ok && i < m; i++) {
            double want = 0, mag = 0;
            for (int p = 0; p < k; p++) {
                double t = (double)a[i + (size_t)p * m] * b[p + (size_t)j * k];
                want += t;
                mag += fabs(t);
            }
            double g = got[i + (size_t)j * m];
            if (fabs(g - want) > rel * mag + abs)
                ok = fail("wrong result: %s[%d,%d] is %.7g, the host's %.7g (tolerance %.3g)",
                          d->label, i, j, g, want, rel * mag + abs);
        }
    free(got);
    return ok;
}

/* small integers: exact */
static bool verify_sgemm(void)
{
    return verify_matmul(&sgemm.c, sgemm.ha, sgemm.hb, SG_M, SG_N, SG_K, 0, 0.5);
}

/* cuBLASLt: D (m x n, fp32) = A (m x k, bf16) B (k x n, bf16), fp32 compute. */
enum { LT_M = 384, LT_N = 392, LT_K = 400 };
#define LT_WORKSPACE ((size_t)32 << 20)
static struct {
    cublasLtHandle_t handle;
    buffer_t a, b, d, workspace;
    float *ha, *hb; /* the bf16 values, as floats */
} lt;

static uint16_t to_bf16(float f) /* round to nearest even */
{
    uint32_t u;
    memcpy(&u, &f, sizeof u);
    u += 0x7fffu + ((u >> 16) & 1u);
    return (uint16_t)(u >> 16);
}

static float from_bf16(uint16_t h)
{
    uint32_t u = (uint32_t)h << 16;
    float f;
    memcpy(&f, &u, sizeof f);
    return f;
}

static bool setup_lt(int index)
{
    CUBLAS_OK(cublasLtCreate(&lt.handle));
    size_t na = (size_t)LT_M * LT_K, nb = (size_t)LT_K * LT_N;
    uint16_t *a16 = (uint16_t *)malloc(na * 2), *b16 = (uint16_t *)malloc(nb * 2);
    lt.ha = (float *)malloc(na * sizeof(float));
    lt.hb = (float *)malloc(nb * sizeof(float));
    if (a16 == NULL || b16 == NULL || lt.ha == NULL || lt.hb == NULL)
        return fail("no host memory");
    for (size_t i = 0; i < na; i++) /* in [-1, 1), then rounded to bf16 */
        a16[i] = to_bf16((float)(pattern(i, 21) % 2048) / 1024.0f - 1.0f), lt.ha[i] = from_bf16(a16[i]);
    for (size_t i = 0; i < nb; i++)
        b16[i] = to_bf16((float)(pattern(i, 22) % 2048) / 1024.0f - 1.0f), lt.hb[i] = from_bf16(b16[i]);
    bool ok = make(&lt.a, index, 0, "A", na * 2) && make(&lt.b, index, 1, "B", nb * 2) &&
              make(&lt.d, index, 2, "D", sizeof(float) * LT_M * LT_N) &&
              make(&lt.workspace, index, 3, "workspace", LT_WORKSPACE) &&
              upload(&lt.a, a16, na * 2) && upload(&lt.b, b16, nb * 2);
    free(a16);
    free(b16);
    if (ok)
        CUDA_OK(cudaMemset(lt.d.d, 0xee, sizeof(float) * LT_M * LT_N));
    return ok;
}

static bool work_lt(void)
{
    cublasLtMatmulDesc_t op = NULL;
    cublasLtMatrixLayout_t la = NULL, lb = NULL, ld = NULL;
    cublasLtMatmulPreference_t pref = NULL;
    cublasLtMatmulHeuristicResult_t heur;
    int found = 0;
    size_t ws = LT_WORKSPACE;
    const float one = 1.0f, zero = 0.0f;
    bool ok = false;
    cublasStatus_t s;
#define LT_STEP(call)                                                                       \
    if ((s = (call)) != CUBLAS_STATUS_SUCCESS) {                                            \
        fail("%s: %s", #call, cublasGetStatusName(s));                                      \
        goto done;                                                                          \
    }
    LT_STEP(cublasLtMatmulDescCreate(&op, CUBLAS_COMPUTE_32F, CUDA_R_32F));
    LT_STEP(cublasLtMatrixLayoutCreate(&la, CUDA_R_16BF, LT_M, LT_K, LT_M));
    LT_STEP(cublasLtMatrixLayoutCreate(&lb, CUDA_R_16BF, LT_K, LT_N, LT_K));
    LT_STEP(cublasLtMatrixLayoutCreate(&ld, CUDA_R_32F, LT_M, LT_N, LT_M));
    LT_STEP(cublasLtMatmulPreferenceCreate(&pref));
    LT_STEP(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES,
                                                 &ws, sizeof ws));
    LT_STEP(cublasLtMatmulAlgoGetHeuristic(lt.handle, op, la, lb, ld, ld, pref, 1, &heur, &found));
    if (found < 1) {
        fail("cublasLtMatmulAlgoGetHeuristic: no algorithm for bf16 x bf16 -> fp32");
        goto done;
    }
    LT_STEP(cublasLtMatmul(lt.handle, op, &one, lt.a.d, la, lt.b.d, lb, &zero, lt.d.d, ld, lt.d.d,
                           ld, &heur.algo, lt.workspace.d, ws, stream));
    ok = true;
#undef LT_STEP
done:
    if (pref != NULL)
        cublasLtMatmulPreferenceDestroy(pref);
    if (ld != NULL)
        cublasLtMatrixLayoutDestroy(ld);
    if (lb != NULL)
        cublasLtMatrixLayoutDestroy(lb);
    if (la != NULL)
        cublasLtMatrixLayoutDestroy(la);
    if (op != NULL)
        cublasLtMatmulDescDestroy(op);
    return ok;
}

/* fp32 accumulation of LT_K products: far inside 1e-3 of their magnitude */
static bool verify_lt(void) { return verify_matmul(&lt.d, lt.ha, lt.hb, LT_M, LT_N, LT_K, 1e-3, 1e-6); }

/* NCCL, one rank: the all-reduce's sum is its input. */
static struct {
    ncclComm_t comm;
    buffer_t send, recv;
    float *hsend;
    size_t n;
} nccl;

/* Says whether NCCL's own buffers (its channels', its work queues') are lms
 * allocations: NCCL allocates them with cuMemCreate when cuMem is on
 * (ncclCuMemEnable(): NCCL_CUMEM_ENABLE, by default on where the device
 * has VMM with GPUDirect RDMA), which lms does not hook, else with
 * cudaMalloc, which is lms's under the preload. ncclMemAlloc decides the
 * same way, so where its memory lands shows it. `grew`: what lms's
 * allocated_bytes grew by across ncclCommInitAll. Informational. */
static void say_nccl_memory(long long grew)
{
    void *p = NULL;
    ncclResult_t r = ncclMemAlloc(&p, (size_t)2 << 20);
    if (r != ncclSuccess) {
        printf("nccl: ncclMemAlloc(2 MiB): %s: whether NCCL's own buffers are lms's is not known\n",
               ncclGetErrorString(r));
        return;
    }
    bool ours = in_lms_range(p);
    printf("nccl: ncclCommInitAll grew lms's allocated_bytes by %lld; ncclMemAlloc, which allocates "
           "as NCCL allocates its own buffers, gave %p, %s lms's range: %s\n", grew, p,
           ours ? "inside" : "outside",
           ours ? "cuMem is off, so NCCL's own buffers are lms allocations (cudaMalloc), which lms may "
                  "evict while NCCL's kernels reach them through structures no hook sees"
                : "cuMem is on, so NCCL allocates its own buffers with cuMemCreate, which lms does "
                  "not hook: they are never lms's, and take device memory beside LMS_DEVICE_LIMIT");
    if ((r = ncclMemFree(p)) != ncclSuccess)
        printf("nccl: ncclMemFree(%p): %s\n", p, ncclGetErrorString(r));
}

static bool setup_nccl(int index)
{
    int dev = 0, version = 0;
    NCCL_OK(ncclGetVersion(&version));
    const char *cumem = getenv("NCCL_CUMEM_ENABLE");
    printf("nccl: NCCL %d.%d.%d (the probe was built with %d.%d.%d), NCCL_CUMEM_ENABLE=%s\n",
           version / 10000, version / 100 % 100, version % 100, NCCL_MAJOR, NCCL_MINOR, NCCL_PATCH,
           cumem != NULL ? cumem : "unset (NCCL's default: cuMem where the device supports it)");
    lms_stats_t before, after;
    LMS_CALL_OK(lms.stats(&before));
    NCCL_OK(ncclCommInitAll(&nccl.comm, 1, &dev));
    LMS_CALL_OK(lms.stats(&after));
    say_nccl_memory((long long)after.allocated_bytes - (long long)before.allocated_bytes);
    nccl.n = ((size_t)3 << 20) / sizeof(float) + 17; /* 3 MiB and a bit */
    if ((nccl.hsend = (float *)malloc(nccl.n * sizeof(float))) == NULL)
        return fail("no host memory");
    for (size_t i = 0; i < nccl.n; i++)
        nccl.hsend[i] = (float)(pattern(i, 31) % 100000) - 50000.0f;
    if (!make(&nccl.send, index, 0, "send", nccl.n * sizeof(float)) ||
        !make(&nccl.recv, index, 1, "recv", nccl.n * sizeof(float)) ||
        !upload(&nccl.send, nccl.hsend, nccl.n * sizeof(float)))
        return false;
    CUDA_OK(cudaMemset(nccl.recv.d, 0xee, nccl.n * sizeof(float)));
    return true;
}

static bool work_nccl(void)
{
    NCCL_OK(ncclAllReduce(nccl.send.d, nccl.recv.d, nccl.n, ncclFloat, ncclSum, nccl.comm, stream));
    return true;
}

static bool verify_nccl(void)
{
    float *got = (float *)malloc(nccl.n * sizeof(float));
    if (got == NULL)
        return fail("no host memory");
    bool ok = download(got, &nccl.recv, nccl.n * sizeof(float));
    for (size_t i = 0; ok && i < nccl.n; i++)
        if (got[i] != nccl.hsend[i])
            ok = fail("wrong result: recv[%zu] is %g, the host's %g", i, got[i], nccl.hsend[i]);
    free(got);
    return ok;
}

/* A kernel whose only lms parameters are a pointer array (in device
 * memory) and its output: what the array points to, no hook sees. */
enum { NPARTS = 4 };
static struct {
    buffer_t parts[NPARTS], table, out;
    uint32_t *hparts[NPARTS];
    size_t n;
} ptrs;

static bool setup_pointers(int index)
{
    static const char *const labels[NPARTS] = {"part0", "part1", "part2", "part3"};
    ptrs.n = ((size_t)1 << 20) + 4099;
    size_t bytes = ptrs.n * sizeof(uint32_t);
    void *table[NPARTS];
    for (int k = 0; k < NPARTS; k++) {
        if ((ptrs.hparts[k] = (uint32_t *)malloc(bytes)) == NULL)
            return fail("no host memory");
        for (size_t i = 0; i < ptrs.n; i++)
            ptrs.hparts[k][i] = pattern(i, 40 + k);
        if (!make(&ptrs.parts[k], index, k, labels[k], bytes) ||
            !upload(&ptrs.parts[k], ptrs.hparts[k], bytes))
            return false;
        table[k] = ptrs.parts[k].d;
    }
    if (!make(&ptrs.table, index, NPARTS, "table", sizeof table) ||
        !make(&ptrs.out, index, NPARTS + 1, "out", bytes) || !upload(&ptrs.table, table, sizeof table))
        return false;
    CUDA_OK(cudaMemset(ptrs.out.d, 0xee, bytes));
    return true;
}

/* lms_pin what only the table points to, launch, wait, unpin. */
static bool work_pointers(void)
{
    int pinned = 0;
    bool ok = true;
    for (; pinned < NPARTS && ok; pinned++)
        if (lms.pin(ptrs.parts[pinned].d, ptrs.parts[pinned].bytes) != LMS_OK)
            ok = fail("lms_pin(part%d, %zu): %s", pinned, ptrs.parts[pinned].bytes, lms.last_error());
    if (ok) {
        gather<<<2 * num_sms, 256, 0, stream>>>((const uint32_t *const *)ptrs.table.d, NPARTS,
                                                ptrs.n, (uint32_t *)ptrs.out.d);
        cudaError_t e = cudaGetLastError();
        if (e == cudaSuccess)
            e = cudaStreamSynchronize(stream);
        if (e != cudaSuccess)
            ok = fail("gather: %s (%s)", cudaGetErrorName(e), cudaGetErrorString(e));
    }
    if (!ok)
        pinned--; /* the failed pin */
    for (int k = 0; k < pinned; k++)
        if (lms.unpin(ptrs.parts[k].d, ptrs.parts[k].bytes) != LMS_OK && ok)
            ok = fail("lms_unpin(part%d): %s", k, lms.last_error());
    return ok;
}

static bool verify_pointers(void)
{
    uint32_t *got = (uint32_t *)malloc(ptrs.n * sizeof *got);
    if (got == NULL)
        return fail("no host memory");
    bool ok = download(got, &ptrs.out, ptrs.n * sizeof *got);
    for (size_t i = 0; ok && i < ptrs.n; i++) {
        uint32_t want = 0;
        for (int k = 0; k < NPARTS; k++)
            want += (uint32_t)(k + 1) * ptrs.hparts[k][i];
        if (got[i] != want)
            ok = fail("wrong result: element %zu is 0x%08x, the host's 0x%08x", i, got[i], want);
    }
    free(got);
    return ok;
}

/* ---- a library loaded at run time, launched by the driver ------------------------ */

/* tests/gpu/probe_library.cu, loaded from the fatbin embedded in the
 * program; its kernels as CUkernel handles (a cudaKernel_t is one). */
typedef struct library {
    cudaLibrary_t lib;
    cudaKernel_t mix, tick; /* lib_mix, lib_tick */
    unsigned int *ticks;    /* lib_ticks: the library's device memory, not lms's */
} library_t;

static bool load_library(library_t *l)
{
    CUDA_OK(cudaLibraryLoadData(&l->lib, probe_library_fatbin, NULL, NULL, 0, NULL, NULL, 0));
    CUDA_OK(cudaLibraryGetKernel(&l->mix, l->lib, "lib_mix"));
    CUDA_OK(cudaLibraryGetKernel(&l->tick, l->lib, "lib_tick"));
    size_t bytes = 0;
    CUDA_OK(cudaLibraryGetGlobal((void **)&l->ticks, &bytes, l->lib, "lib_ticks"));
    if (bytes != sizeof *l->ticks)
        return fail("lib_ticks has %zu bytes, not %zu", bytes, sizeof *l->ticks);
    return true;
}

/* Blocks of lib_tick launched as a CUkernel and as its CUfunction: the
 * sum it counts says that both ran. */
enum { TICKS_AS_KERNEL = 3, TICKS_AS_FUNCTION = 5 };

static struct {
    library_t lib;
    CUfunction tick_fn; /* lib_tick's CUfunction in the primary context */
    elementwise_t e;
} drvk;

static bool setup_driver_kernel(int index)
{
    if (!NEED_DRIVER(launch_kernel, "cuLaunchKernel") ||
        !NEED_DRIVER(kernel_get_function, "cuKernelGetFunction") || !load_library(&drvk.lib))
        return false;
    CU_OK(drv.kernel_get_function(&drvk.tick_fn, drvk.lib.tick));
    CUDA_OK(cudaMemset(drvk.lib.ticks, 0, sizeof *drvk.lib.ticks));
    printf("driver_cukernel: cuLaunchKernel from %s\n", gpu_object_of((const void *)drv.launch_kernel));
    return setup_elementwise(&drvk.e, index, false);
}

static bool work_driver_kernel(void)
{
    const uint32_t *x = (const uint32_t *)drvk.e.x.d, *y = (const uint32_t *)drvk.e.y.d;
    uint32_t *out = (uint32_t *)drvk.e.out.d;
    void *args[] = {&x, &y, &out, &drvk.e.n, &drvk.e.salt};
    /* cuda.h: a CUkernel (cuLibraryGetKernel's) may be passed cast to a
     * CUfunction, and runs in the stream's context */
    CU_OK(drv.launch_kernel((CUfunction)drvk.lib.mix, 2 * num_sms, 1, 1, 256, 1, 1, 0, stream, args,
                            NULL));
    /* lib_tick takes nothing, but kernelParams is not NULL: so lms asks the
     * driver for its layout (with NULL it has nothing to read and asks
     * nothing), and must find "no parameters", not an unknown layout */
    void *none[1] = {NULL};
    CU_OK(drv.launch_kernel((CUfunction)drvk.lib.tick, TICKS_AS_KERNEL, 1, 1, 32, 1, 1, 0, stream,
                            none, NULL));
    CU_OK(drv.launch_kernel(drvk.tick_fn, TICKS_AS_FUNCTION, 1, 1, 32, 1, 1, 0, stream, none, NULL));
    return true;
}

static bool verify_driver_kernel(void)
{
    unsigned int ticks = 0;
    CUDA_OK(cudaMemcpy(&ticks, drvk.lib.ticks, sizeof ticks, cudaMemcpyDeviceToHost));
    if (ticks != TICKS_AS_KERNEL + TICKS_AS_FUNCTION)
        return fail("lib_tick counted %u blocks, not %d (as a CUkernel) + %d (as a CUfunction)",
                    ticks, TICKS_AS_KERNEL, TICKS_AS_FUNCTION);
    return verify_mix(&drvk.e);
}

/* ---- TMA: a tensor only a descriptor names ---------------------------------------- */

/* The tensor: TMA_WIDTH x TMA_HEIGHT uint32, rows contiguous (4.3 MiB, in
 * three chunks). The kernels copy TMA_TILES square tiles of it, TMA_BOX on
 * a side (4 KiB), from its first corner to its last, to out. */
enum { TMA_WIDTH = 1024, TMA_HEIGHT = 1100, TMA_BOX = 32, TMA_TILES = 4 };
#define TILE_WORDS (TMA_BOX * TMA_BOX)

/* Where tile t starts along an axis of `extent` elements: on the diagonal,
 * at a multiple of 4 elements (16 bytes). */
static __host__ __device__ inline int tile_start(int t, int extent)
{
    return ((extent - TMA_BOX) * t / (TMA_TILES - 1)) & ~3;
}

typedef cuda::barrier<cuda::thread_scope_block> block_barrier_t;

/* One block: each tile loaded by TMA (cp.async.bulk.tensor, which reads
 * global memory through *map alone) into shared memory, then copied to
 * out[t * TILE_WORDS ...]. map must be a __grid_constant__ parameter's
 * address (or in global or constant memory). */
static __device__ __forceinline__ void copy_tiles(const CUtensorMap *map, uint32_t *out)
{
    __shared__ alignas(128) uint32_t tile[TILE_WORDS];
#pragma nv_diag_suppress static_var_with_dynamic_init
    __shared__ block_barrier_t bar;
    if (threadIdx.x == 0) {
        init(&bar, blockDim.x);
        cuda::ptx::fence_proxy_async(cuda::ptx::space_shared); /* TMA sees the barrier made */
    }
    __syncthreads();
    for (int t = 0; t < TMA_TILES; t++) {
        block_barrier_t::arrival_token token;
        if (threadIdx.x == 0) {
            const int32_t at[2] = {tile_start(t, TMA_WIDTH), tile_start(t, TMA_HEIGHT)};
            cuda::ptx::cp_async_bulk_tensor(cuda::ptx::space_cluster, cuda::ptx::space_global, tile,
                                            map, at, cuda::device::barrier_native_handle(bar));
            token = cuda::device::barrier_arrive_tx(bar, 1, sizeof tile);
        } else {
            token = bar.arrive();
        }
        bar.wait(std::move(token)); /* the tile has landed */
        for (int i = threadIdx.x; i < TILE_WORDS; i += blockDim.x)
            out[(size_t)t * TILE_WORDS + i] = tile[i];
        __syncthreads(); /* all have read the tile before TMA writes the next */
    }
}

/* tma_kernel: the descriptor, a parameter of its own. */
__global__ void tma_tiles(const __grid_constant__ CUtensorMap map, uint32_t *out)
{
    copy_tiles(&map, out);
}

/* tma_struct: the descriptor inside the one parameter, beside a pointer. */
typedef struct tma_params {
    CUtensorMap map;
    uint32_t *out;
} tma_params_t;

__global__ void tma_tiles_in_struct(const __grid_constant__ tma_params_t p)
{
    copy_tiles(&p.map, p.out);
}

typedef struct tma_case {
    buffer_t tensor, out;
    uint32_t *htensor;
    CUtensorMap map; /* encoded at setup, long before the launch, as programs do */
} tma_case_t;

static tma_case_t tma_alone, tma_in_struct;

static bool setup_tma(tma_case_t *c, const char *name, int index)
{
    int major = 0;
    CUDA_OK(cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, 0));
    if (major < 9)
        return fail("TMA needs compute capability 9.0 or later; the device has %d.x", major);
    if (!NEED_DRIVER(encode_tiled, "cuTensorMapEncodeTiled"))
        return false;
    size_t n = (size_t)TMA_WIDTH * TMA_HEIGHT, bytes = n * sizeof(uint32_t);
    if ((c->htensor = (uint32_t *)malloc(bytes)) == NULL)
        return fail("no host memory");
    for (size_t i = 0; i < n; i++)
        c->htensor[i] = pattern(i, 60 + index);
    if (!make(&c->tensor, index, 0, "tensor", bytes) ||
        !make(&c->out, index, 1, "out", TMA_TILES * TILE_WORDS * sizeof(uint32_t)) ||
        !upload(&c->tensor, c->htensor, bytes))
        return false;
    CUDA_OK(cudaMemset(c->out.d, 0xee, c->out.bytes));
    const cuuint64_t dims[2] = {TMA_WIDTH, TMA_HEIGHT};
    const cuuint64_t row_bytes[1] = {TMA_WIDTH * sizeof(uint32_t)}; /* a multiple of 16 */
    const cuuint32_t box[2] = {TMA_BOX, TMA_BOX}, steps[2] = {1, 1};
    CU_OK(drv.encode_tiled(&c->map, CU_TENSOR_MAP_DATA_TYPE_UINT32, 2, c->tensor.d, dims, row_bytes,
                           box, steps, CU_TENSOR_MAP_INTERLEAVE_NONE, CU_TENSOR_MAP_SWIZZLE_NONE,
                           CU_TENSOR_MAP_L2_PROMOTION_NONE, CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE));
    printf("%s: cuTensorMapEncodeTiled from %s\n", name, gpu_object_of((const void *)drv.encode_tiled));
    return true;
}

static bool verify_tma(const tma_case_t *c)
{
    size_t n = TMA_TILES * TILE_WORDS;
    uint32_t *got = (uint32_t *)malloc(n * sizeof *got), *want = (uint32_t *)malloc(n * sizeof *want);
    bool ok = got != NULL && want != NULL ? true : fail("no host memory");
    for (int t = 0; ok && t < TMA_TILES; t++)
        for (int r = 0; r < TMA_BOX; r++)
            for (int col = 0; col < TMA_BOX; col++)
                want[((size_t)t * TMA_BOX + r) * TMA_BOX + col] =
                    c->htensor[(size_t)(tile_start(t, TMA_HEIGHT) + r) * TMA_WIDTH +
                               tile_start(t, TMA_WIDTH) + col];
    ok = ok && download(got, &c->out, n * sizeof *got) && compare_u32(got, want, n);
    free(got);
    free(want);
    return ok;
}

static bool setup_tma_alone(int index) { return setup_tma(&tma_alone, "tma_kernel", index); }

static bool work_tma_alone(void)
{
    tma_tiles<<<1, 128, 0, stream>>>(tma_alone.map, (uint32_t *)tma_alone.out.d);
    CUDA_OK(cudaGetLastError());
    return true;
}

static bool verify_tma_alone(void) { return verify_tma(&tma_alone); }

static bool setup_tma_in_struct(int index) { return setup_tma(&tma_in_struct, "tma_struct", index); }

static bool work_tma_in_struct(void)
{
    tma_params_t p;
    memset(&p, 0, sizeof p); /* its padding too: every byte lms reads is defined */
    p.map = tma_in_struct.map;
    p.out = (uint32_t *)tma_in_struct.out.d;
    tma_tiles_in_struct<<<1, 128, 0, stream>>>(p);
    CUDA_OK(cudaGetLastError());
    return true;
}

static bool verify_tma_in_struct(void) { return verify_tma(&tma_in_struct); }

static probe_case_t cases[] = {
    {"launch_chevron", setup_chevron, work_chevron, verify_chevron, "all",
     {&chevron.x, &chevron.y, &chevron.out}, 3},
    {"launch_runtime", setup_runtime, work_runtime, verify_runtime, "all",
     {&runtime.x, &runtime.y, &runtime.out}, 3},
    {"launch_cooperative", setup_cooperative, work_cooperative, verify_cooperative, "all",
     {&cooperative.x, &cooperative.y, &cooperative.tmp, &cooperative.out}, 4},
    {"cublas_sgemm", setup_sgemm, work_sgemm, verify_sgemm, "any", {&sgemm.a, &sgemm.b, &sgemm.c}, 3},
    {"cublaslt_bf16", setup_lt, work_lt, verify_lt, "any", {&lt.a, &lt.b, &lt.d}, 3},
    {"nccl_allreduce", setup_nccl, work_nccl, verify_nccl, "all", {&nccl.send, &nccl.recv}, 2},
    /* the table and out are the launch's parameters; the parts are not */
    {"pointer_array", setup_pointers, work_pointers, verify_pointers, "all", {&ptrs.table, &ptrs.out}, 2},
    {"driver_cukernel", setup_driver_kernel, work_driver_kernel, verify_driver_kernel, "all",
     {&drvk.e.x, &drvk.e.y, &drvk.e.out}, 3},
    /* the tensor is named by the descriptor only */
    {"tma_kernel", setup_tma_alone, work_tma_alone, verify_tma_alone, "all",
     {&tma_alone.tensor, &tma_alone.out}, 2},
    {"tma_struct", setup_tma_in_struct, work_tma_in_struct, verify_tma_in_struct, "all",
     {&tma_in_struct.tensor, &tma_in_struct.out}, 2},
};
enum { NCASES = sizeof cases / sizeof cases[0] };

/* ---- the filler: memory written between cases, to evict theirs --------------------------- */

static buffer_t filler[64];
static int nfiller, next_filler;

/* Writes fillers (whole, so nothing is fetched for them) until `bytes`. */
static bool write_filler(size_t bytes)
{
    for (size_t done = 0; done < bytes; done += filler[next_filler].bytes,
                next_filler = (next_filler + 1) % nfiller)
        CUDA_OK(cudaMemsetAsync(filler[next_filler].d, next_filler & 0xff,
                                filler[next_filler].bytes, stream));
    CUDA_OK(cudaStreamSynchronize(stream));
    return true;
}

/* ---- running them -------------------------------------------------------------------------- */

static const char *dead; /* the case in which the context died */
static char dead_why[1024];

/* Whether the context still works; else remembers where it died. */
static void check_alive(const char *name)
{
    cudaError_t e = cudaDeviceSynchronize();
    if (e != cudaSuccess && dead == NULL) {
        dead = name;
        snprintf(dead_why, sizeof dead_why, "%s", cudaGetErrorName(e));
    }
}

/* The marker of case i has MARKER_BYTES + 2 i bytes, an odd size no library
 * asks for: its alloc and free lines bound the case's lines in the trace. */
#define MARKER_BYTES 3001

static bool run_case(probe_case_t *c, int index, size_t push, lms_stats_t *s0, lms_stats_t *s1)
{
    void *marker = NULL;
    if (!write_filler(push))
        return false;
    CUDA_OK(cudaMalloc(&marker, MARKER_BYTES + 2 * index));
    LMS_CALL_OK(lms.stats(s0));
    bool ok = c->work();
    if (ok) {
        cudaError_t e = cudaStreamSynchronize(stream);
        if (e != cudaSuccess)
            ok = fail("after the case's work: %s (%s)", cudaGetErrorName(e), cudaGetErrorString(e));
    }
    if (lms.stats(s1) != LMS_OK && ok)
        ok = fail("lms_stats: %s", lms.last_error());
    cudaError_t e = cudaFree(marker);
    if (e != cudaSuccess && ok)
        ok = fail("cudaFree(marker): %s", cudaGetErrorName(e));
    if (ok && !c->verify())
        return false;
    if (ok && s1->launches_unknown != s0->launches_unknown)
        return fail("lms could not learn the parameter layout of %llu launches while it ran (its log "
                    "names the kernels): what they touched was not made resident",
                    (unsigned long long)(s1->launches_unknown - s0->launches_unknown));
    if (ok && s1->fetches == s0->fetches)
        return fail("nothing was fetched while it ran: its buffers were not evicted, so it proved "
                    "nothing (is the device limit too large for the filler?)");
    return ok;
}

static void print_trace_check(const probe_case_t *c, int index)
{
    printf("trace-check %s %d %s", c->name, MARKER_BYTES + 2 * index, c->mode);
    for (int k = 0; k < c->ntraced; k++)
        printf(" %s=%zu", c->traced[k]->label, c->traced[k]->bytes);
    printf("\n");
}

static bool set_up(bool *wanted, int *setup_failed)
{
    void *base;
    LMS_CALL_OK(lms.reserved_range(&base, &range_bytes));
    range_lo = (char *)base;
    lms_stats_t st;
    LMS_CALL_OK(lms.stats(&st));
    if (st.host_limit == 0)
        return fail("lms does not swap (host limit 0): set LMS_HOST_LIMIT");
    if (st.device_limit > ((uint64_t)4 << 30))
        return fail("LMS_DEVICE_LIMIT is %llu MiB: set it to 4GiB or less (the probe writes 3.5 "
                    "times it)", (unsigned long long)(st.device_limit >> 20));
    CUDA_OK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
    CUDA_OK(cudaDeviceGetAttribute(&num_sms, cudaDevAttrMultiProcessorCount, 0));
    for (int i = 0; i < NCASES; i++)
        if (wanted[i] && !cases[i].setup(i)) {
            printf("case %s: FAILED in its setup: %s\n", cases[i].name, why);
            setup_failed[i] = 1;
            wanted[i] = false;
        }
    /* The filler: 3.5 x the limit, in quarters of it, written once: with the
     * cases' buffers, about 4 x the limit, and all the cases' on the host. */
    size_t piece = (size_t)(st.device_limit / 4);
    for (nfiller = 0; nfiller < 14; nfiller++)
        if (!make(&filler[nfiller], NCASES, nfiller, "filler", piece))
            return false;
    if (!sizes_unique())
        return false;
    return write_filler(piece * (size_t)nfiller);
}

static void print_stats(void)
{
    lms_stats_t st;
    if (lms.stats(&st) != LMS_OK) {
        printf("lms_stats: %s\n", lms.last_error());
        return;
    }
    printf("lms_stats:");
#define PRINT_FIELD(name) printf(" %s=%llu", #name, (unsigned long long)st.name);
    LMS_STATS_FIELDS(PRINT_FIELD)
#undef PRINT_FIELD
    printf("\n");
}

/* ---- what the driver answers for a handle of the other kind ------------------------ */

typedef enum { ASK_FUNC_PARAM, ASK_KERNEL_PARAM, ASK_FUNC_NAME, ASK_KERNEL_NAME, NASKS } ask_t;
static const char *const ask_call[NASKS] = {"cuFuncGetParamInfo", "cuKernelGetParamInfo",
                                            "cuFuncGetName", "cuKernelGetName"};

/* Prints the driver's answer to one question about h (`what` names it):
 * parameter 0's place, or the name, each driver function taking h as its
 * own kind of handle. Flushed, in case the next question kills the process. */
static void ask_driver(ask_t ask, const char *what, void *h)
{
    size_t offset = 0, size = 0;
    const char *name = NULL;
    CUresult r = CUDA_ERROR_UNKNOWN;
    switch (ask) {
    case ASK_FUNC_PARAM: r = drv.func_get_param_info((CUfunction)h, 0, &offset, &size); break;
    case ASK_KERNEL_PARAM: r = drv.kernel_get_param_info((CUkernel)h, 0, &offset, &size); break;
    case ASK_FUNC_NAME: r = drv.func_get_name(&name, (CUfunction)h); break;
    case ASK_KERNEL_NAME: r = drv.kernel_get_name(&name, (CUkernel)h); break;
    case NASKS: break;
    }
    printf("driver-answer: %s(%s%s): %s", ask_call[ask], what,
           ask == ASK_FUNC_PARAM || ask == ASK_KERNEL_PARAM ? ", 0" : "", cu_name(r));
    if (r == CUDA_SUCCESS && (ask == ASK_FUNC_PARAM || ask == ASK_KERNEL_PARAM))
        printf(" (offset %zu, size %zu)", offset, size);
    else if (r == CUDA_SUCCESS) { /* what a foreign handle names may be no string */
        printf(" \"");
        for (int i = 0; name != NULL && name[i] != '\0' && i < 120; i++)
            putchar(name[i] >= ' ' && name[i] <= '~' ? name[i] : '?');
        printf("\"%s", name == NULL ? " (NULL)" : "");
    }
    printf("\n");
    fflush(stdout);
}

/* `preload_probe --driver-answers`: each question of ask_driver about each
 * handle, the probe's own kernels' handles of both kinds first and the host
 * address last (the one most likely to crash). Run without the preload:
 * these are the driver's answers. Exit 0, or 1 if it could not ask. */
static int driver_answers(void)
{
    setvbuf(stdout, NULL, _IOLBF, 0);
    library_t l = {};
    CUfunction mix_fn = NULL, tick_fn = NULL;
    cudaKernel_t mix_k = NULL;
    cudaError_t e = cudaSetDevice(0); /* the primary context, current: cuKernelGetFunction's */
    bool ok = e == cudaSuccess ? true : fail("cudaSetDevice(0): %s", cudaGetErrorName(e));
    ok = ok && NEED_DRIVER(kernel_get_function, "cuKernelGetFunction") &&
              NEED_DRIVER(func_get_param_info, "cuFuncGetParamInfo") &&
              NEED_DRIVER(kernel_get_param_info, "cuKernelGetParamInfo") &&
              NEED_DRIVER(func_get_name, "cuFuncGetName") &&
              NEED_DRIVER(kernel_get_name, "cuKernelGetName") && load_library(&l);
    CUresult r = CUDA_SUCCESS;
    if (ok && ((r = drv.kernel_get_function(&mix_fn, l.mix)) != CUDA_SUCCESS ||
               (r = drv.kernel_get_function(&tick_fn, l.tick)) != CUDA_SUCCESS))
        ok = fail("cuKernelGetFunction: %s", cu_name(r));
    if (ok && (e = cudaGetKernel(&mix_k, (const void *)mix)) != cudaSuccess)
        ok = fail("cudaGetKernel(mix): %s", cudaGetErrorName(e));
    if (!ok) {
        printf("driver-answer: not asked: %s\n", why);
        return 1;
    }
    const struct {
        const char *what;
        void *h;
    } handles[] = {
        {"CUfunction of lib_mix", (void *)mix_fn},
        {"CUkernel lib_mix", (void *)l.mix},
        {"CUfunction of lib_tick", (void *)tick_fn}, /* no parameters: what "none" looks like */
        {"CUkernel lib_tick", (void *)l.tick},
        {"cudaKernel_t of mix (cudaGetKernel; <<<>>> launches a cudaKernel_t)", (void *)mix_k},
        {"host function mix (its stub, what cudaLaunchKernel passes)", (void *)mix},
    };
    for (size_t k = 0; k < sizeof handles / sizeof *handles; k++)
        for (int a = 0; a < NASKS; a++)
            ask_driver((ask_t)a, handles[k].what, handles[k].h);
    return 0;
}

/* How long the process asking may take (it starts CUDA: a few seconds). */
#define ANSWERS_SECONDS 120

/* Runs driver_answers in a process of its own (this program again, without
 * LD_PRELOAD and LMS_* in its environment), its output among the probe's;
 * says how the process ended if it did not end well, and kills it after
 * ANSWERS_SECONDS (a question may hang the driver). Never a failure. */
static void print_driver_answers(void)
{
    extern char **environ;
    size_t n = 0, kept = 0;
    while (environ[n] != NULL)
        n++;
    char **env = (char **)malloc((n + 1) * sizeof *env);
    if (env == NULL) {
        printf("driver-answer: not asked: no host memory\n");
        return;
    }
    for (size_t i = 0; i < n; i++)
        if (strncmp(environ[i], "LD_PRELOAD=", 11) != 0 && strncmp(environ[i], "LMS_", 4) != 0)
            env[kept++] = environ[i];
    env[kept] = NULL;
    char *argv[] = {(char *)"preload_probe", (char *)"--driver-answers", NULL};
    fflush(stdout);
    fflush(stderr);
    pid_t pid;
    int err = posix_spawn(&pid, "/proc/self/exe", NULL, NULL, argv, env);
    free(env);
    if (err != 0) {
        printf("driver-answer: not asked: posix_spawn(/proc/self/exe): %s\n", strerror(err));
        return;
    }
    int status = 0;
    pid_t done;
    for (int ms = 0; (done = waitpid(pid, &status, WNOHANG)) == 0 || (done < 0 && errno == EINTR);
         ms += 50) {
        if (ms >= ANSWERS_SECONDS * 1000) {
            printf("driver-answer: the process asking did not end in %d s: killed after the "
                   "answers above\n", ANSWERS_SECONDS);
            (void)kill(pid, SIGKILL);
            while (waitpid(pid, &status, 0) < 0 && errno == EINTR)
                ;
            return;
        }
        const struct timespec tick = {0, 50 * 1000 * 1000};
        nanosleep(&tick, NULL);
    }
    if (done < 0) {
        printf("driver-answer: waitpid: %s\n", strerror(errno));
        return;
    }
    if (WIFSIGNALED(status))
        printf("driver-answer: the process asking died of signal %d (%s) at the question after the "
               "last answer above\n", WTERMSIG(status), strsignal(WTERMSIG(status)));
    else if (WIFEXITED(status) && WEXITSTATUS(status) != 0)
        printf("driver-answer: the process asking exited with %d\n", WEXITSTATUS(status));
}

/* The index in cases[] of the case called name; NCASES if none is. */
static int case_index(const char *name)
{
    int i = 0;
    while (i < NCASES && strcmp(name, cases[i].name) != 0)
        i++;
    return i;
}

/* Which library answers `name` for this program (the preload or CUDA's). */
static const char *answered_by(const char *name) { return gpu_object_of(dlsym(RTLD_DEFAULT, name)); }

int main(int argc, char **argv)
{
    if (argc == 2 && strcmp(argv[1], "--driver-answers") == 0)
        return gpu_present() ? driver_answers() : GPU_SKIP;
    bool wanted[NCASES];
    int setup_failed[NCASES] = {0};
    for (int i = 0; i < NCASES; i++)
        wanted[i] = argc < 2;
    for (int a = 1; a < argc; a++) {
        int i = case_index(argv[a]);
        if (i == NCASES) {
            fprintf(stderr, "usage: preload_probe [CASE...] | preload_probe --driver-answers; cases:");
            for (int k = 0; k < NCASES; k++)
                fprintf(stderr, " %s", cases[k].name);
            fprintf(stderr, "\n");
            return 2;
        }
        wanted[i] = true;
    }
    if (!find_lms())
        return 1;
    if (!gpu_present())
        return GPU_SKIP;
    cudaError_t e;
    cudaDeviceProp prop;
    if ((e = cudaGetDeviceProperties(&prop, 0)) != cudaSuccess) {
        printf("preload_probe: cudaGetDeviceProperties: %s\n", cudaGetErrorName(e));
        return 1;
    }
    int nccl_version = 0;
    (void)ncclGetVersion(&nccl_version);
    printf("device: %s; __cudaLaunchKernel from %s, cudaLaunchKernel from %s, "
           "cudaLaunchCooperativeKernel from %s; NCCL %d\n",
           prop.name, answered_by("__cudaLaunchKernel"), answered_by("cudaLaunchKernel"),
           answered_by("cudaLaunchCooperativeKernel"), nccl_version);
    if (wanted[case_index("driver_cukernel")])
        print_driver_answers(); /* first: lms asks the same questions in that case */
    if (!set_up(wanted, setup_failed)) {
        printf("preload_probe: setting up: %s\n", why);
        return 1;
    }
    lms_stats_t st;
    if (lms.stats(&st) != LMS_OK) {
        printf("preload_probe: lms_stats: %s\n", lms.last_error());
        return 1;
    }
    printf("set up: device limit %llu MiB, %llu MiB allocated, %llu chunks evicted so far\n",
           (unsigned long long)(st.device_limit >> 20), (unsigned long long)(st.allocated_bytes >> 20),
           (unsigned long long)(st.evictions + st.clean_drops));
    size_t push = (size_t)(st.device_limit + st.device_limit / 4);
    int failed = 0, ran = 0;
    for (int i = 0; i < NCASES; i++) {
        ran += wanted[i] || setup_failed[i];
        if (setup_failed[i]) {
            failed++;
            continue;
        }
        if (!wanted[i])
            continue;
        print_trace_check(&cases[i], i);
        if (dead != NULL) {
            printf("case %s: FAILED: not run: the CUDA context died in case %s (%s)\n", cases[i].name,
                   dead, dead_why);
            failed++;
            continue;
        }
        lms_stats_t s0 = {0}, s1 = {0};
        if (run_case(&cases[i], i, push, &s0, &s1))
            printf("case %s: ok (%llu chunks fetched while it ran)\n", cases[i].name,
                   (unsigned long long)(s1.fetches - s0.fetches));
        else {
            printf("case %s: FAILED: %s\n", cases[i].name, why);
            failed++;
            check_alive(cases[i].name);
        }
        fflush(stdout);
    }
    print_stats();
    if (sgemm.handle != NULL)
        cublasDestroy(sgemm.handle);
    if (lt.handle != NULL)
        cublasLtDestroy(lt.handle);
    if (nccl.comm != NULL && dead == NULL)
        ncclCommDestroy(nccl.comm);
    printf("preload_probe: %d of %d cases failed\n", failed, ran);
    return failed == 0 ? 0 : 1;
}
