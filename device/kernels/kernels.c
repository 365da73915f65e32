/*
 * device/kernels/kernels.c — the kernels library's front: its kernels table,
 * registered when the program starts (Note [Kernels table] in
 * device/device.c), the calls of kernels.h as launches, and what a launch
 * runs on sim: the reference results, here, and the training kernels
 * (training.c). The CUDA side is cuda.c.
 *
 * No state but the table; a device's kernel state is dev->kernels (cuda.c's
 * on cuda, none on sim). No locks.
 */
#include <math.h>
#include <string.h>

#include "base/base.h"
#include "device/kernels/cuda.h"

/* ---- the kernels table ------------------------------------------------------ */

static void kernels_open(dev_device_t *dev)
{
    if (strcmp(dev->info.backend, "cuda") == 0)
        dev->kernels = kernels_cuda_open(dev);
    else
        dev->info.has_kernels = true; /* sim: host code on the streams' workers */
}

static void kernels_close(dev_device_t *dev)
{
    kernels_cuda_close(dev->kernels);
}

static const dev_kernels_t table = {.open = kernels_open, .close = kernels_close};

/* Before main, so before any device of the program is opened. */
__attribute__((constructor)) static void register_table(void)
{
    dev_set_kernels(&table);
}

/* ---- the kernels as launches ------------------------------------------------- */

static void *as_ptr(dev_addr_t a) { return (void *)(uintptr_t)a; }

/* A launch's run on sim: the kernel on the host, device addresses being host
 * addresses there. */
static void run(const void *args)
{
    kernel_call_t c;
    memcpy(&c, args, sizeof c);
    switch (c.which) {
    case KERNEL_FILL:
        dev_fill_ref(as_ptr(c.u.fill.dst), c.u.fill.n, c.u.fill.seed);
        break;
    case KERNEL_CHECKSUM:
        *c.u.checksum.out = dev_checksum_ref(as_ptr(c.u.checksum.src), c.u.checksum.n);
        break;
    case KERNEL_AXPY: {
        const float *x = as_ptr(c.u.axpy.x);
        float *y = as_ptr(c.u.axpy.y);
        for (size_t i = 0; i < c.u.axpy.n; i++)
            y[i] = fmaf(c.u.axpy.a, x[i], y[i]);
        break;
    }
    case KERNEL_INDIRECT: {
        uint64_t *ptrs = as_ptr(c.u.indirect.ptrs);
        for (size_t i = 0; i < c.u.indirect.n; i++) {
            uint64_t *w = as_ptr(ptrs[i]);
            uint64_t got = *w;
            *w = got + c.u.indirect.add;
            ptrs[i] = got;
        }
        break;
    }
    case KERNEL_TRAINING:
        dev_kernel_ref(&c.u.training);
        break;
    }
}

/* Launches call as l (its name and ranges set) on stream. */
static lms_status_t launch(dev_device_t *dev, dev_stream_t *stream, dev_launch_t *l,
                           const kernel_call_t *call)
{
    l->run = run;
    l->enqueue = kernels_cuda_enqueue;
    l->ctx = dev->kernels;
    memcpy(l->args, call, sizeof *call);
    return dev_launch(dev, stream, l);
}

lms_status_t dev_fill(dev_device_t *dev, dev_stream_t *stream, dev_addr_t dst, size_t n,
                      uint64_t seed)
{
    kernel_call_t call = {KERNEL_FILL, .u.fill = {dst, n, seed}};
    dev_launch_t l = {.name = "fill", .nranges = 1, .ranges = {{dst, n}}};
    return launch(dev, stream, &l, &call);
}

lms_status_t dev_checksum(dev_device_t *dev, dev_stream_t *stream, dev_addr_t src, size_t n,
                          uint64_t *out)
{
    if (out == NULL)
        return base_fail(LMS_ERR_INVALID, "checksum: NULL output");
    kernel_call_t call = {KERNEL_CHECKSUM, .u.checksum = {src, n, out}};
    dev_launch_t l = {.name = "checksum", .nranges = 1, .ranges = {{src, n}}};
    return launch(dev, stream, &l, &call);
}

lms_status_t dev_axpy(dev_device_t *dev, dev_stream_t *stream, size_t n, float a, dev_addr_t x,
                      dev_addr_t y)
{
    if (n > SIZE_MAX / sizeof(float) || x % sizeof(float) || y % sizeof(float))
        return base_fail(LMS_ERR_INVALID,
                         "axpy: x and y must be float-aligned and n * 4 must not overflow");
    kernel_call_t call = {KERNEL_AXPY, .u.axpy = {n, a, x, y}};
    dev_launch_t l = {.name = "axpy", .nranges = 2,
                      .ranges = {{x, n * sizeof(float)}, {y, n * sizeof(float)}}};
    return launch(dev, stream, &l, &call);
}

lms_status_t dev_indirect(dev_device_t *dev, dev_stream_t *stream, dev_addr_t ptrs, size_t n,
                          uint64_t add)
{
    if (n > SIZE_MAX / sizeof(uint64_t) || ptrs % sizeof(uint64_t))
        return base_fail(LMS_ERR_INVALID,
                         "indirect: ptrs must be 8-byte aligned and n * 8 must not overflow");
    kernel_call_t call = {KERNEL_INDIRECT, .u.indirect = {ptrs, n, add}};
    /* Only the array: the words behind its pointers are what no launch names. */
    dev_launch_t l = {.name = "indirect", .nranges = 1, .ranges = {{ptrs, n * sizeof(uint64_t)}}};
    return launch(dev, stream, &l, &call);
}

lms_status_t dev_kernel(dev_device_t *dev, dev_stream_t *stream, const dev_kernel_args_t *a)
{
    dev_operand_t ops[DEV_KERNEL_OPERANDS];
    size_t n = 0;
    lms_status_t st = dev_kernel_operands(a, ops, &n);
    if (st != LMS_OK)
        return st;
    kernel_call_t call = {KERNEL_TRAINING, .u.training = *a};
    dev_launch_t l = {.name = dev_kernel_name(a->kernel), .nranges = n};
    for (size_t i = 0; i < n; i++) {
        l.ranges[i].addr = ops[i].addr;
        l.ranges[i].bytes = ops[i].bytes;
    }
    return launch(dev, stream, &l, &call);
}

/* ---- the reference results: what sim runs and what tests compare with ---- */

void dev_fill_ref(void *dst, size_t n, uint64_t seed)
{
    unsigned char *p = dst;
    size_t words = n / 8;
    for (size_t j = 0; j < words; j++) {
        uint64_t w = dev_mix64(seed + j);
        memcpy(p + 8 * j, &w, 8); /* little-endian on every target lms runs on */
    }
    uint64_t w = dev_mix64(seed + words);
    memcpy(p + 8 * words, &w, n % 8);
}

uint64_t dev_checksum_ref(const void *src, size_t n)
{
    const unsigned char *p = src;
    uint64_t sum = 0, weight = 1; /* 2*A*i + 1 */
    for (size_t i = 0; i < n; i++) {
        sum += ((uint64_t)p[i] + 1) * weight;
        weight += 2 * DEV_CHECKSUM_A;
    }
    return sum;
}
