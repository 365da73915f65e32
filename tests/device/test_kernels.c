/*
 * tests/device/test_kernels.c — the test kernels (device/kernels/kernels.h)
 * against their host references, on whichever backend the run is for: fill,
 * checksum and axpy, and the training kernels, with the arguments each
 * refuses. Registered for sim and gpu.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"

static dev_device_t *dev;

static void open_dev(void) { dev = test_open_default(); }
static void close_dev(void) { dev_close(dev); }

TestSuite(kernels, .init = open_dev, .fini = close_dev);

static void *host_alloc(size_t n)
{
    void *p = aligned_alloc(4096, (n + 4095) / 4096 * 4096);
    cr_assert_not_null(p);
    return p;
}

/* ---- fill, checksum, axpy ---- */

Test(kernels, fill_writes_the_reference_pattern_at_any_offset_and_size)
{
    test_run_t run = test_run_map(dev, 1);
    dev_stream_t *s;
    TEST_OK(dev_stream_create(dev, DEV_PRIORITY_NORMAL, &s));
    const size_t sizes[] = {1, 7, 8, 9, 4096, 100003};
    const size_t offsets[] = {0, 1, 5, 8, 13};
    unsigned char *want = host_alloc(100003), *got = host_alloc(100003);
    for (size_t si = 0; si < sizeof sizes / sizeof *sizes; si++)
        for (size_t oi = 0; oi < sizeof offsets / sizeof *offsets; oi++) {
            size_t n = sizes[si], off = offsets[oi];
            dev_fill_ref(want, n, 99 + n);
            TEST_OK(dev_fill(dev, s, run.base + off, n, 99 + n));
            TEST_OK(dev_copy_d2h(dev, s, got, run.base + off, n));
            TEST_OK(dev_stream_synchronize(dev, s));
            cr_assert(memcmp(want, got, n) == 0, "n=%zu offset=%zu", n, off);
        }
    test_run_unmap(dev, &run);
    free(want);
    free(got);
}

Test(kernels, checksum_reference_tells_apart_swapped_and_changed_bytes)
{
    unsigned char a[64], b[64];
    dev_fill_ref(a, sizeof a, 1);
    memcpy(b, a, sizeof a);
    cr_assert_eq(dev_checksum_ref(a, 64), dev_checksum_ref(b, 64));
    b[10] ^= 1;
    cr_assert_neq(dev_checksum_ref(a, 64), dev_checksum_ref(b, 64));
    memcpy(b, a, sizeof a);
    b[3] = a[40];
    b[40] = a[3];
    cr_assert(a[3] != a[40]);
    cr_assert_neq(dev_checksum_ref(a, 64), dev_checksum_ref(b, 64));
}

Test(kernels, axpy_matches_fmaf)
{
    test_run_t run = test_run_map(dev, 1);
    dev_stream_t *s;
    TEST_OK(dev_stream_create(dev, DEV_PRIORITY_NORMAL, &s));
    enum { N = 4099 };
    static float x[N], y[N], out[N];
    for (int i = 0; i < N; i++) {
        x[i] = (float)i * 0.37f - 11.f;
        y[i] = 1.f / (float)(i + 1);
    }
    dev_addr_t dx = run.base, dy = run.base + 4 * N + 60;
    TEST_OK(dev_copy_h2d(dev, s, dx, x, sizeof x));
    TEST_OK(dev_copy_h2d(dev, s, dy, y, sizeof y));
    TEST_OK(dev_axpy(dev, s, N, 1.7f, dx, dy));
    TEST_OK(dev_copy_d2h(dev, s, out, dy, sizeof out));
    TEST_OK(dev_stream_synchronize(dev, s));
    for (int i = 0; i < N; i++)
        cr_assert_eq(out[i], fmaf(1.7f, x[i], y[i]), "element %d", i);
    test_run_unmap(dev, &run);
}

/* ---- the training kernels ---- */

/* Host data for one kernel run: every operand's floats, uploaded to the
 * run's blocks at 4 KiB steps apart, and read back. */
typedef struct kernel_run {
    dev_stream_t *s;
    test_run_t run;
    dev_addr_t next;
} kernel_run_t;

static dev_addr_t upload(kernel_run_t *k, const void *host, size_t bytes)
{
    dev_addr_t at = k->next;
    k->next += (bytes + 4095) / 4096 * 4096;
    cr_assert(k->next <= k->run.base + k->run.size);
    TEST_OK(dev_copy_h2d(dev, k->s, at, host, bytes));
    return at;
}

static void download(kernel_run_t *k, void *host, dev_addr_t at, size_t bytes)
{
    TEST_OK(dev_copy_d2h(dev, k->s, host, at, bytes));
    TEST_OK(dev_stream_synchronize(dev, k->s));
}

static float *random_floats(size_t n, uint64_t seed)
{
    float *f = malloc(n * sizeof *f);
    cr_assert_not_null(f);
    for (size_t i = 0; i < n; i++)
        f[i] = (float)(dev_mix64(seed + i) >> 40) / (float)(1 << 24) * 2.0f - 1.0f;
    return f;
}

static void assert_close(const float *got, const double *want, size_t n, const char *what)
{
    for (size_t i = 0; i < n; i++)
        cr_assert(fabs(got[i] - want[i]) <= 1e-4 * (1 + fabs(want[i])), "%s[%zu]: %g, want %g",
                  what, i, got[i], want[i]);
}

Test(kernels, gemm_computes_every_transpose_and_accumulates)
{
    enum { M = 37, N = 29, K = 23 };
    kernel_run_t k = {.run = test_run_map(dev, 1)};
    k.next = k.run.base;
    TEST_OK(dev_stream_create(dev, DEV_PRIORITY_NORMAL, &k.s));
    float *a = random_floats(M * K, 1), *b = random_floats(K * N, 2), *c0 = random_floats(M * N, 3);
    static float got[M * N];
    static double want[M * N];
    for (uint32_t flags = 0; flags < 8; flags++) {
        bool ta = flags & DEV_GEMM_TRANS_A, tb = flags & DEV_GEMM_TRANS_B;
        k.next = k.run.base;
        dev_kernel_args_t g = {DEV_KERNEL_GEMM, {upload(&k, a, sizeof(float) * M * K),
                                                 upload(&k, b, sizeof(float) * K * N),
                                                 upload(&k, c0, sizeof(float) * M * N)},
                               .m = M, .n = N, .k = K, .flags = flags};
        TEST_OK(dev_kernel(dev, k.s, &g));
        download(&k, got, g.p[2], sizeof got);
        for (int i = 0; i < M; i++)
            for (int j = 0; j < N; j++) {
                double sum = flags & DEV_GEMM_ACCUMULATE ? c0[i * N + j] : 0;
                for (int x = 0; x < K; x++)
                    sum += (double)(ta ? a[x * M + i] : a[i * K + x]) *
                           (tb ? b[j * K + x] : b[x * N + j]);
                want[i * N + j] = sum;
            }
        assert_close(got, want, M * N, "gemm");
    }
    free(a);
    free(b);
    free(c0);
    TEST_OK(dev_stream_destroy(dev, k.s));
    test_run_unmap(dev, &k.run);
}

Test(kernels, layer_kernels_compute_what_kernels_h_says)
{
    enum { M = 9, N = 13 };
    kernel_run_t k = {.run = test_run_map(dev, 1)};
    k.next = k.run.base;
    TEST_OK(dev_stream_create(dev, DEV_PRIORITY_NORMAL, &k.s));
    float *x = random_floats(M * N, 4), *bias = random_floats(N, 5), *y = random_floats(M * N, 6);
    static float got[M * N + 1];
    static double want[M * N + 1];

    dev_addr_t dx = upload(&k, x, sizeof(float) * M * N), db = upload(&k, bias, sizeof(float) * N);
    dev_kernel_args_t act = {DEV_KERNEL_BIAS_ACT, {dx, db}, .m = M, .n = N, .flags = DEV_ACT_RELU};
    TEST_OK(dev_kernel(dev, k.s, &act));
    download(&k, got, dx, sizeof(float) * M * N);
    for (int i = 0; i < M * N; i++)
        want[i] = fmax(0.0, (double)x[i] + bias[i % N]);
    assert_close(got, want, M * N, "bias_act");

    dx = upload(&k, x, sizeof(float) * M * N);
    dev_addr_t dy = upload(&k, y, sizeof(float) * M * N);
    dev_kernel_args_t back = {DEV_KERNEL_RELU_BACK, {dx, dy}, .m = M, .n = N};
    TEST_OK(dev_kernel(dev, k.s, &back));
    download(&k, got, dx, sizeof(float) * M * N);
    for (int i = 0; i < M * N; i++)
        want[i] = y[i] > 0 ? x[i] : 0;
    assert_close(got, want, M * N, "relu_back");

    dev_kernel_args_t colsum = {DEV_KERNEL_COLSUM, {dy, k.next}, .m = M, .n = N};
    TEST_OK(dev_kernel(dev, k.s, &colsum));
    download(&k, got, colsum.p[1], sizeof(float) * N);
    for (int j = 0; j < N; j++) {
        want[j] = 0;
        for (int i = 0; i < M; i++)
            want[j] += y[i * N + j];
    }
    assert_close(got, want, N, "colsum");

    int32_t labels[M];
    for (int i = 0; i < M; i++)
        labels[i] = (i * 7) % N;
    dev_addr_t dl = upload(&k, y, sizeof(float) * M * N), dlab = upload(&k, labels, sizeof labels);
    dev_addr_t loss = k.next;
    dev_kernel_args_t xent = {DEV_KERNEL_XENT, {dl, dlab, loss, dl}, .m = M, .n = N};
    TEST_OK(dev_kernel(dev, k.s, &xent));
    float losses[M + 1];
    download(&k, losses, loss, sizeof losses);
    download(&k, got, dl, sizeof(float) * M * N);
    double mean = 0;
    for (int i = 0; i < M; i++) {
        double max = -1e30, z = 0;
        for (int j = 0; j < N; j++)
            max = fmax(max, y[i * N + j]);
        for (int j = 0; j < N; j++)
            z += exp(y[i * N + j] - max);
        double l = log(z) - (y[i * N + labels[i]] - max);
        cr_assert(fabs(losses[i] - l) < 1e-5, "loss[%d] %g, want %g", i, losses[i], l);
        mean += l / M;
        for (int j = 0; j < N; j++)
            want[i * N + j] = (exp(y[i * N + j] - max) / z - (j == labels[i])) / M;
    }
    cr_assert(fabs(losses[M] - mean) < 1e-5, "mean loss %g, want %g", losses[M], mean);
    assert_close(got, want, M * N, "xent gradient");

    float *w = random_floats(N, 7), *g = random_floats(N, 8), *m1 = random_floats(N, 9),
          *v = random_floats(N, 10);
    for (int i = 0; i < N; i++)
        v[i] = fabsf(v[i]);
    dev_kernel_args_t adam = {DEV_KERNEL_ADAM,
                              {upload(&k, w, sizeof(float) * N), upload(&k, g, sizeof(float) * N),
                               upload(&k, m1, sizeof(float) * N), upload(&k, v, sizeof(float) * N)},
                              .m = 1, .n = N, .f = {0.01f, 0.9f, 0.999f, 1e-8f}};
    TEST_OK(dev_kernel(dev, k.s, &adam));
    download(&k, got, adam.p[0], sizeof(float) * N);
    for (int i = 0; i < N; i++) {
        double mo = 0.9 * m1[i] + 0.1 * g[i], vo = 0.999 * v[i] + 0.001 * g[i] * g[i];
        want[i] = w[i] - 0.01 * mo / (sqrt(vo) + 1e-8);
    }
    assert_close(got, want, N, "adam");
    free(x), free(bias), free(y), free(w), free(g), free(m1), free(v);
    TEST_OK(dev_stream_destroy(dev, k.s));
    test_run_unmap(dev, &k.run);
}

Test(kernels, training_kernels_give_bitwise_the_same_results_each_run)
{
    enum { M = 64, N = 96, K = 80 };
    kernel_run_t k = {.run = test_run_map(dev, 1)};
    TEST_OK(dev_stream_create(dev, DEV_PRIORITY_NORMAL, &k.s));
    float *a = random_floats(M * K, 11), *b = random_floats(K * N, 12);
    static float first[M * N], again[M * N];
    for (int rep = 0; rep < 2; rep++) {
        k.next = k.run.base;
        dev_kernel_args_t g = {DEV_KERNEL_GEMM, {upload(&k, a, sizeof(float) * M * K),
                                                 upload(&k, b, sizeof(float) * K * N), k.next},
                               .m = M, .n = N, .k = K};
        TEST_OK(dev_kernel(dev, k.s, &g));
        download(&k, rep ? again : first, g.p[2], sizeof first);
    }
    cr_assert(memcmp(first, again, sizeof first) == 0);
    free(a);
    free(b);
    TEST_OK(dev_stream_destroy(dev, k.s));
    test_run_unmap(dev, &k.run);
}

Test(kernels, training_kernels_refuse_bad_arguments)
{
    test_run_t run = test_run_map(dev, 1);
    dev_stream_t *s;
    TEST_OK(dev_stream_create(dev, DEV_PRIORITY_NORMAL, &s));
    dev_addr_t base = run.base;
    dev_kernel_args_t ok = {DEV_KERNEL_COLSUM, {base, base + 4096}, .m = 4, .n = 4};
    dev_kernel_args_t bad = ok;
    bad.kernel = DEV_KERNEL_COUNT;
    TEST_FAILS(LMS_ERR_INVALID, dev_kernel(dev, s, &bad));
    bad = ok, bad.m = 0;
    TEST_FAILS(LMS_ERR_INVALID, dev_kernel(dev, s, &bad));
    bad = ok, bad.p[1] = base + 2;
    TEST_FAILS(LMS_ERR_INVALID, dev_kernel(dev, s, &bad));
    bad = ok, bad.p[1] = 0;
    TEST_FAILS(LMS_ERR_INVALID, dev_kernel(dev, s, &bad));
    bad = ok, bad.flags = DEV_GEMM_TRANS_A;
    TEST_FAILS(LMS_ERR_INVALID, dev_kernel(dev, s, &bad));
    bad = ok, bad.m = (uint32_t)(run.size / 16 + 1); /* reads past the mapped run */
    TEST_FAILS(LMS_ERR_INVALID, dev_kernel(dev, s, &bad));
    bad = ok, bad.n = DEV_KERNEL_MAX_DIM + 1, bad.m = 1; /* more than a launch can cover */
    TEST_FAILS(LMS_ERR_INVALID, dev_kernel(dev, s, &bad));
    TEST_FAILS(LMS_ERR_INVALID, dev_kernel(dev, s, NULL));
    TEST_OK(dev_kernel(dev, s, &ok));
    TEST_OK(dev_stream_synchronize(dev, s));
    TEST_OK(dev_stream_destroy(dev, s));
    test_run_unmap(dev, &run);
}
