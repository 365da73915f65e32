/*
 * device/kernels/kernels.h — the test kernels: fill, checksum, axpy and
 * indirect, and bench/train's training kernels, one C interface over CUDA
 * kernels and host code, so that tests and benchmarks run on either backend.
 *
 * A library of its own, lms_kernels, linked into tests, benchmarks and
 * lms-info, never into liblms.so (Note [Kernels table] in device/device.c).
 * Linking it is all it takes: it registers its kernels table when the
 * program starts, so every device opened afterwards, by dev_open or inside
 * lms, gets them (info.has_kernels). Each kernel is one launch op
 * (DEV_OP_launch), named as below for the observer and in messages, so the
 * check layer checks its ranges and the fault layer fails it as it does any
 * op. On sim a kernel is host code on the stream's worker; on cuda, a CUDA
 * kernel (kernels.cu, loaded when the device opens: cuda.c).
 *
 * The calls are those of the ops (device.h): asynchronous, in stream order,
 * LMS_OK or a failure with a message. LMS_ERR_UNSUPPORTED when
 * info.has_kernels is false (a build without nvcc, a GPU older than sm_90).
 */
#ifndef LMS_DEVICE_KERNELS_H
#define LMS_DEVICE_KERNELS_H

#include <stddef.h>
#include <stdint.h>

#include "device/device.h"

/* ---- reference results ------------------------------------------------------ */

/* Word j (bytes 8j..8j+7, little-endian) of a filled range is dev_mix64(seed + j);
 * a trailing partial word keeps its low bytes. */
static inline uint64_t dev_mix64(uint64_t x)
{
    x += 0x9e3779b97f4a7c15ull; /* splitmix64's finalizer */
    x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
    x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
    return x ^ (x >> 31);
}

/* The checksum of bytes b_0..b_{n-1} is  sum_i (b_i + 1) * (2*DEV_CHECKSUM_A*i + 1)
 * mod 2^64: every weight is odd, so any single changed byte changes it, and
 * so does swapping two different bytes (less than 2^35 apart). */
#define DEV_CHECKSUM_A 0x9e3779b97f4a7c15ull

void dev_fill_ref(void *dst, size_t n, uint64_t seed);
uint64_t dev_checksum_ref(const void *src, size_t n);

/* ---- the training kernels ----------------------------------------------------- */

/*
 * What bench/train's model computes, as kernels of either backend: fp32,
 * row-major matrices (a matrix r x c is r rows of c floats). Each is
 * deterministic: every output is summed in one fixed order, with no atomics,
 * so one backend gives bitwise the same results run after run, wherever lms
 * put the memory in between. The two backends need not agree bitwise with
 * each other (their orders of summation and their expf differ).
 *
 *   GEMM       C[m x n] = opA(A)[m x k] . opB(B)[k x n], + C when
 *              DEV_GEMM_ACCUMULATE. A is stored m x k, or k x m with
 *              DEV_GEMM_TRANS_A; B is stored k x n, or n x k with
 *              DEV_GEMM_TRANS_B. p = {A, B, C}. Each C[i][j] adds its k
 *              products in order of k.
 *   BIAS_ACT   X[m x n] += bias[n] per row, then, with DEV_ACT_RELU,
 *              X = max(X, 0); in place. p = {X, bias}.
 *   RELU_BACK  dX[m x n] = 0 where Y[m x n] <= 0; in place. p = {dX, Y}.
 *   COLSUM     out[n] = sum over rows i, in order, of X[i][n]. p = {X, out}.
 *   XENT       softmax cross-entropy of logits L[m x n] against labels
 *              (m int32 in [0, n)): loss[i] (i < m) is row i's loss and
 *              loss[m] their mean, summed in order of i; dL[m x n] =
 *              (softmax(L[i]) - onehot(label i)) / m. p = {L, labels, loss
 *              (m + 1 floats), dL}; dL may be L.
 *   ADAM       for n floats: M = b1 M + (1 - b1) G; V = b2 V + (1 - b2) G^2;
 *              W -= lr_t M / (sqrt(V) + eps), with f = {lr_t, b1, b2, eps}
 *              (lr_t: the step's bias-corrected rate). p = {W, G, M, V}.
 */
typedef enum dev_kernel {
    DEV_KERNEL_GEMM,
    DEV_KERNEL_BIAS_ACT,
    DEV_KERNEL_RELU_BACK,
    DEV_KERNEL_COLSUM,
    DEV_KERNEL_XENT,
    DEV_KERNEL_ADAM,
    DEV_KERNEL_COUNT
} dev_kernel_t;

enum {
    DEV_GEMM_TRANS_A = 1,
    DEV_GEMM_TRANS_B = 2,
    DEV_GEMM_ACCUMULATE = 4,
    DEV_ACT_RELU = 1,
};

#define DEV_KERNEL_OPERANDS 4
#define DEV_KERNEL_MAX_DIM (1u << 24) /* m, n and k; GEMM's m also < 65536 tiles of 16 rows */

typedef struct dev_kernel_args {
    dev_kernel_t kernel;
    dev_addr_t p[DEV_KERNEL_OPERANDS]; /* operands, as each kernel lists them; unused: 0 */
    uint32_t m, n, k;                  /* sizes, as each kernel names them; unused: 0 */
    uint32_t flags;                    /* DEV_GEMM_*, DEV_ACT_* */
    float f[4];                        /* ADAM's scalars */
} dev_kernel_args_t;

/* One operand of a kernel: the bytes it uses and how (read, written whole,
 * or updated in place). */
typedef struct dev_operand {
    dev_addr_t addr;
    size_t bytes;
    lms_access_mode_t mode;
} dev_operand_t;

/* The operands of a, in its p order, into out[0..*n) (what a program makes
 * resident before the kernel, with lms_access_many). LMS_ERR_INVALID, with a
 * message, for an unknown kernel, an empty or overflowing size, unknown
 * flags, a NULL or misaligned (4-byte) operand. "kernel" names the kernel. */
lms_status_t dev_kernel_operands(const dev_kernel_args_t *a, dev_operand_t out[DEV_KERNEL_OPERANDS],
                                 size_t *n);
const char *dev_kernel_name(dev_kernel_t k);

/* The kernels on the host, for the sim backend and as tests' reference:
 * the operands are host addresses. Returns nothing: a has been validated. */
void dev_kernel_ref(const dev_kernel_args_t *a);

/* ---- the kernels ------------------------------------------------------------ */

/* "fill": writes dev_fill_ref(seed) over [dst, dst+n). */
lms_status_t dev_fill(dev_device_t *dev, dev_stream_t *stream, dev_addr_t dst, size_t n,
                      uint64_t seed);
/* "checksum": stores dev_checksum_ref of [src, src+n) into *out (host memory,
 * any kind) once the kernel has run. On cuda at most 4096 checksums per
 * device may be in flight (Note [Checksum ring] in cuda.c). */
lms_status_t dev_checksum(dev_device_t *dev, dev_stream_t *stream, dev_addr_t src, size_t n,
                          uint64_t *out);
/* "axpy": y[i] = fmaf(a, x[i], y[i]) for n floats; x, y 4-byte aligned. */
lms_status_t dev_axpy(dev_device_t *dev, dev_stream_t *stream, size_t n, float a, dev_addr_t x,
                      dev_addr_t y);
/* "indirect": for i < n, with w = ((uint64_t **)ptrs)[i]: ptrs[i] = *w, then
 * *w = that + add; so afterwards ptrs holds what the kernel read, and each
 * word what it wrote. ptrs is n pointers, 8-byte aligned, each to a distinct
 * 8-byte-aligned word. The one range it declares is the array: the words
 * behind it are memory no launch names, a stand-in for a kernel that follows
 * pointers stored in device memory, which no hook of lms sees (issue 27). The
 * one kernel that breaks "the work must touch no other device memory"
 * (device.h, launch), on purpose: the check layer cannot see those words. */
lms_status_t dev_indirect(dev_device_t *dev, dev_stream_t *stream, dev_addr_t ptrs, size_t n,
                          uint64_t add);
/* Runs training kernel a->kernel (see "the training kernels" above), named
 * dev_kernel_name(a->kernel), once a passes dev_kernel_operands. */
lms_status_t dev_kernel(dev_device_t *dev, dev_stream_t *stream, const dev_kernel_args_t *a);

#endif /* LMS_DEVICE_KERNELS_H */
