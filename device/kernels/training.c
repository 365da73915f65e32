/*
 * device/kernels/training.c — the training kernels (kernels.h, "the training
 * kernels"): what each one's operands are, and the kernels themselves on the
 * host, which a launch runs on sim's stream workers and tests use as the
 * reference. Their CUDA twins are in kernels.cu.
 *
 * No state and no locks: every function works on its arguments only.
 * Determinism is the contract: each output is summed in one fixed order, so
 * a run gives bitwise the same numbers however often lms moved its memory.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "base/base.h"
#include "device/kernels/kernels.h"

static const char *const names[DEV_KERNEL_COUNT] = {
    [DEV_KERNEL_GEMM] = "gemm",         [DEV_KERNEL_BIAS_ACT] = "bias_act",
    [DEV_KERNEL_RELU_BACK] = "relu_back", [DEV_KERNEL_COLSUM] = "colsum",
    [DEV_KERNEL_XENT] = "xent",         [DEV_KERNEL_ADAM] = "adam",
};

const char *dev_kernel_name(dev_kernel_t k)
{
    return (unsigned)k < DEV_KERNEL_COUNT ? names[k] : "?";
}

/* rows x cols floats in *bytes; false on overflow. */
static bool floats(uint64_t rows, uint64_t cols, size_t *bytes)
{
    uint64_t n = rows * cols; /* both < 2^32: no overflow */
    if (n > SIZE_MAX / sizeof(float))
        return false;
    *bytes = (size_t)n * sizeof(float);
    return true;
}

lms_status_t dev_kernel_operands(const dev_kernel_args_t *a, dev_operand_t out[DEV_KERNEL_OPERANDS],
                                 size_t *n)
{
    if (a == NULL || out == NULL || n == NULL)
        return base_fail(LMS_ERR_INVALID, "kernel: NULL argument");
    const char *name = dev_kernel_name(a->kernel);
    if ((unsigned)a->kernel >= DEV_KERNEL_COUNT)
        return base_fail(LMS_ERR_INVALID, "kernel: unknown kernel %d", (int)a->kernel);
    uint32_t m = a->m, cols = a->n, k = a->k;
    size_t count = 0, b[DEV_KERNEL_OPERANDS] = {0};
    lms_access_mode_t mode[DEV_KERNEL_OPERANDS] = {0};
    uint32_t allowed = 0;
    bool ok = m > 0 && cols > 0;
    switch (a->kernel) {
    case DEV_KERNEL_GEMM:
        allowed = DEV_GEMM_TRANS_A | DEV_GEMM_TRANS_B | DEV_GEMM_ACCUMULATE;
        count = 3;
        ok = ok && k > 0 && floats(m, k, &b[0]) && floats(k, cols, &b[1]) && floats(m, cols, &b[2]);
        mode[0] = mode[1] = LMS_READ;
        mode[2] = a->flags & DEV_GEMM_ACCUMULATE ? LMS_WRITE : LMS_OVERWRITE;
        break;
    case DEV_KERNEL_BIAS_ACT:
        allowed = DEV_ACT_RELU;
        count = 2;
        ok = ok && floats(m, cols, &b[0]) && floats(1, cols, &b[1]);
        mode[0] = LMS_WRITE;
        mode[1] = LMS_READ;
        break;
    case DEV_KERNEL_RELU_BACK:
        count = 2;
        ok = ok && floats(m, cols, &b[0]) && floats(m, cols, &b[1]);
        mode[0] = LMS_WRITE;
        mode[1] = LMS_READ;
        break;
    case DEV_KERNEL_COLSUM:
        count = 2;
        ok = ok && floats(m, cols, &b[0]) && floats(1, cols, &b[1]);
        mode[0] = LMS_READ;
        mode[1] = LMS_OVERWRITE;
        break;
    case DEV_KERNEL_XENT:
        count = 4;
        ok = ok && floats(m, cols, &b[0]) && floats(1, m, &b[1]) && floats(1, (uint64_t)m + 1, &b[2]) &&
             floats(m, cols, &b[3]);
        mode[0] = LMS_READ;
        mode[1] = LMS_READ;
        mode[2] = LMS_OVERWRITE;
        mode[3] = a->p[3] == a->p[0] ? LMS_WRITE : LMS_OVERWRITE;
        if (a->p[3] == a->p[0])
            mode[0] = LMS_WRITE;
        break;
    case DEV_KERNEL_ADAM:
        count = 4;
        ok = floats(1, cols, &b[0]) && cols > 0;
        b[1] = b[2] = b[3] = b[0];
        mode[0] = mode[2] = mode[3] = LMS_WRITE;
        mode[1] = LMS_READ;
        break;
    default:
        break;
    }
    ok = ok && m <= DEV_KERNEL_MAX_DIM && cols <= DEV_KERNEL_MAX_DIM && k <= DEV_KERNEL_MAX_DIM &&
         (a->kernel != DEV_KERNEL_GEMM || m < 65536u * 16);
    if (!ok)
        return base_fail(LMS_ERR_INVALID, "kernel %s: sizes m=%u n=%u k=%u are empty or too large "
                         "(each at most %u)", name, m, cols, k, DEV_KERNEL_MAX_DIM);
    if (a->flags & ~allowed)
        return base_fail(LMS_ERR_INVALID, "kernel %s: unknown flags 0x%x", name, a->flags & ~allowed);
    for (size_t i = 0; i < count; i++) {
        if (a->p[i] == 0 || a->p[i] % sizeof(float) != 0)
            return base_fail(LMS_ERR_INVALID, "kernel %s: operand %zu (0x%llx) is NULL or not "
                             "4-byte aligned", name, i, (unsigned long long)a->p[i]);
        out[i] = (dev_operand_t){a->p[i], b[i], mode[i]};
    }
    *n = count;
    return LMS_OK;
}

static float *fp(dev_addr_t a) { return (float *)(uintptr_t)a; }

/* op(src) as a plain rows x cols matrix: src itself, or its transpose (src
 * stored cols x rows) copied into *scratch. NULL when that copy finds no memory. */
static const float *plain(const float *src, uint32_t rows, uint32_t cols, bool trans, float **scratch)
{
    if (!trans)
        return src;
    float *t = base_meta_alloc((size_t)rows * cols * sizeof *t);
    if (t == NULL)
        return NULL;
    for (size_t r = 0; r < rows; r++)
        for (size_t c = 0; c < cols; c++)
            t[r * cols + c] = src[c * rows + r];
    *scratch = t;
    return t;
}

/* C = A.B (+ C): for each block of 4 rows of C, every row of B is read once
 * and added into 4 rows at a time; each C[i][j] still adds its products in
 * order of k. The inner loop runs along rows, so the compiler vectorizes it. */
static void gemm(const dev_kernel_args_t *a)
{
    uint32_t m = a->m, n = a->n, k = a->k;
    float *sa = NULL, *sb = NULL;
    const float *A = plain(fp(a->p[0]), m, k, a->flags & DEV_GEMM_TRANS_A, &sa);
    const float *B = plain(fp(a->p[1]), k, n, a->flags & DEV_GEMM_TRANS_B, &sb);
    if (A == NULL || B == NULL)
        abort(); /* a sim kernel has no way to fail: as a device fault would, it ends the run */
    float *C = fp(a->p[2]);
    if (!(a->flags & DEV_GEMM_ACCUMULATE))
        memset(C, 0, (size_t)m * n * sizeof *C);
    uint32_t i = 0;
    for (; i + 4 <= m; i += 4) {
        float *c0 = C + (size_t)i * n, *c1 = c0 + n, *c2 = c1 + n, *c3 = c2 + n;
        const float *a0 = A + (size_t)i * k, *a1 = a0 + k, *a2 = a1 + k, *a3 = a2 + k;
        for (uint32_t kk = 0; kk < k; kk++) {
            const float *b = B + (size_t)kk * n;
            float x0 = a0[kk], x1 = a1[kk], x2 = a2[kk], x3 = a3[kk];
            for (uint32_t j = 0; j < n; j++) {
                float bj = b[j];
                c0[j] += x0 * bj;
                c1[j] += x1 * bj;
                c2[j] += x2 * bj;
                c3[j] += x3 * bj;
            }
        }
    }
    for (; i < m; i++) {
        float *c = C + (size_t)i * n;
        const float *ar = A + (size_t)i * k;
        for (uint32_t kk = 0; kk < k; kk++) {
            const float *b = B + (size_t)kk * n;
            float x = ar[kk];
            for (uint32_t j = 0; j < n; j++)
                c[j] += x * b[j];
        }
    }
    base_meta_free(sa);
    base_meta_free(sb);
}

static void xent(const dev_kernel_args_t *a)
{
    uint32_t m = a->m, n = a->n;
    const float *L = fp(a->p[0]);
    const int32_t *label = (const int32_t *)(uintptr_t)a->p[1];
    float *loss = fp(a->p[2]), *dL = fp(a->p[3]);
    float sum = 0;
    for (uint32_t i = 0; i < m; i++) {
        const float *row = L + (size_t)i * n;
        float *drow = dL + (size_t)i * n;
        float max = row[0];
        for (uint32_t j = 1; j < n; j++)
            max = row[j] > max ? row[j] : max;
        float z = 0;
        for (uint32_t j = 0; j < n; j++)
            z += expf(row[j] - max);
        int32_t y = label[i];
        float at_label = (y >= 0 && (uint32_t)y < n) ? row[y] : max;
        loss[i] = logf(z) - (at_label - max);
        sum += loss[i];
        for (uint32_t j = 0; j < n; j++) /* after reading row: dL may be L */
            drow[j] = (expf(row[j] - max) / z - ((int32_t)j == y ? 1.0f : 0.0f)) / (float)m;
    }
    loss[m] = sum / (float)m;
}

void dev_kernel_ref(const dev_kernel_args_t *a)
{
    uint32_t m = a->m, n = a->n;
    switch (a->kernel) {
    case DEV_KERNEL_GEMM:
        gemm(a);
        break;
    case DEV_KERNEL_BIAS_ACT: {
        float *x = fp(a->p[0]);
        const float *bias = fp(a->p[1]);
        bool relu = a->flags & DEV_ACT_RELU;
        for (size_t i = 0; i < m; i++)
            for (size_t j = 0; j < n; j++) {
                float v = x[i * n + j] + bias[j];
                x[i * n + j] = relu && !(v > 0) ? 0.0f : v;
            }
        break;
    }
    case DEV_KERNEL_RELU_BACK: {
        float *dx = fp(a->p[0]);
        const float *y = fp(a->p[1]);
        for (size_t i = 0; i < (size_t)m * n; i++)
            if (!(y[i] > 0))
                dx[i] = 0;
        break;
    }
    case DEV_KERNEL_COLSUM: {
        const float *x = fp(a->p[0]);
        float *out = fp(a->p[1]);
        memset(out, 0, n * sizeof *out);
        for (size_t i = 0; i < m; i++)
            for (size_t j = 0; j < n; j++)
                out[j] += x[i * n + j];
        break;
    }
    case DEV_KERNEL_XENT:
        xent(a);
        break;
    case DEV_KERNEL_ADAM: {
        float *w = fp(a->p[0]), *mo = fp(a->p[2]), *v = fp(a->p[3]);
        const float *g = fp(a->p[1]);
        float lr = a->f[0], b1 = a->f[1], b2 = a->f[2], eps = a->f[3];
        for (size_t i = 0; i < n; i++) {
            mo[i] = b1 * mo[i] + (1 - b1) * g[i];
            v[i] = b2 * v[i] + (1 - b2) * g[i] * g[i];
            w[i] -= lr * mo[i] / (sqrtf(v[i]) + eps);
        }
        break;
    }
    default:
        break;
    }
}
