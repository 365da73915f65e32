/*
 * tests/fuzz/fuzz_access.c — fuzzes the interposer's copy validation
 * (interpose/access.c): what the 2D and 3D copies, the memsets and the
 * batched copies (Note [Batched copies]) touch of lms's memory, from
 * parameters as a program may pass them. Built from interpose/access.c and
 * what it calls in the interposer (launch.c, graph.c, trace.c, ...) with
 * lms_core, on the sim backend: lms runs for real, with a device smaller
 * than the four allocations made at the start, so calls swap.
 *
 * The input is a sequence of calls, each a byte choosing the entry point
 * and then its parameters, read from the input as it goes (past its end,
 * zeros). A pointer is an offset into one of the allocations (in it or a
 * little past its end), address 0, a host buffer, or any 64-bit value.
 *
 * What must hold, for any input: no crash or sanitizer report; and when a
 * call returns LMS_OK, every byte a copy between pointers reads or writes
 * that lies in one allocation is resident, which is checked by reading
 * the first and last byte of each of its rows (the sim's device memory is
 * the host's; a chunk that is not resident faults).
 */
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fuzz.h"
#include "interpose/access.h"

#define MIB ((size_t)1 << 20)
#define NALLOC 4
#define MAX_CALLS 16
#define MAX_ROWS 256 /* rows checked at most per side */

static const size_t alloc_size[NALLOC] = {MIB, 3 * MIB, 64 << 10, 6 * MIB};
static char *alloc_at[NALLOC];
static char host[4096];

/* What interpose.c answers in liblms.so: the hooks are not live here. */
bool interpose_hooks_live(void);
bool interpose_hooks_live(void) { return false; }

int LLVMFuzzerInitialize(int *argc, char **argv[])
{
    (void)argc, (void)argv;
    setenv("LMS_BACKEND", "sim", 1);
    setenv("LMS_SIM_MEMORY", "64MiB", 1);
    setenv("LMS_DEVICE_LIMIT", "8MiB", 1);
    setenv("LMS_HOST_LIMIT", "64MiB", 1);
    setenv("LMS_VA_RESERVE", "1GiB", 1);
    setenv("LMS_LOG", "error", 1);
    for (int i = 0; i < NALLOC; i++)
        FUZZ_CHECK(lms_malloc((void **)&alloc_at[i], alloc_size[i], NULL) == LMS_OK,
                   "lms_malloc: %s", lms_last_error());
    return 0;
}

/* ---- reading the input ---- */

typedef struct input {
    const uint8_t *p, *end;
} input_t;

static uint64_t take(input_t *in, size_t n)
{
    uint64_t v = 0;
    for (size_t i = 0; i < n; i++)
        v = v << 8 | (in->p < in->end ? *in->p++ : 0);
    return v;
}

/* A count or a size: small ones most often, any 64-bit value sometimes. */
static uint64_t number(input_t *in)
{
    switch (take(in, 1) % 5) {
    case 0: return take(in, 1);
    case 1: return take(in, 1) + 1;
    case 2: return take(in, 2);
    case 3: return take(in, 4);
    default: return take(in, 8);
    }
}

static uintptr_t pointer(input_t *in)
{
    uint8_t k = (uint8_t)take(in, 1);
    if (k < 4 * NALLOC) /* in an allocation or just past its end */
        return (uintptr_t)alloc_at[k % NALLOC] + take(in, 4) % (alloc_size[k % NALLOC] + 4096);
    if (k < 4 * NALLOC + 4)
        return (uintptr_t)alloc_at[k % NALLOC];
    if (k < 4 * NALLOC + 6)
        return 0;
    if (k < 4 * NALLOC + 8)
        return (uintptr_t)host + take(in, 1);
    return (uintptr_t)take(in, 8);
}

static void *stream(input_t *in)
{
    static void *const streams[] = {NULL, (void *)1, (void *)2, (void *)0x1000};
    return streams[take(in, 1) % 4];
}

/* ---- the oracle: rows resident after LMS_OK ---- */

typedef struct rows {
    uintptr_t at;  /* the first row's first byte */
    size_t width;  /* bytes of a row */
    size_t pitch;  /* between rows */
    size_t height; /* rows of a slice */
    size_t slice;  /* rows between slices */
    size_t depth;
} rows_t;

/* The allocation [p, p + n) lies in, or -1. */
static int alloc_of(uintptr_t p, size_t n)
{
    for (int i = 0; i < NALLOC; i++) {
        uintptr_t a = (uintptr_t)alloc_at[i];
        if (p >= a && p - a < alloc_size[i] && n <= alloc_size[i] - (p - a))
            return i;
    }
    return -1;
}

static void touch_byte(uintptr_t p)
{
    (void)*(volatile const char *)p;
}

/* Reads the first and last byte of every row, if they all lie in one
 * allocation (else the copy is the program's mistake, Note [Copy and
 * memset ranges], and lms makes resident only the allocations of its first
 * and last bytes) and there are few enough of them; else checks nothing. */
static void expect_resident(const rows_t *r)
{
    if (r->width == 0 || r->height == 0 || r->depth == 0 || r->height > MAX_ROWS ||
        r->depth > MAX_ROWS || r->height * r->depth > MAX_ROWS)
        return;
    uintptr_t row[MAX_ROWS];
    size_t n = 0;
    int in = -1;
    for (size_t z = 0; z < r->depth; z++)
        for (size_t y = 0; y < r->height; y++) {
            size_t k, off;
            if (__builtin_mul_overflow(z, r->slice, &k) || __builtin_add_overflow(k, y, &k) ||
                __builtin_mul_overflow(k, r->pitch, &off) ||
                __builtin_add_overflow(r->at, off, &row[n]))
                return;
            int a = alloc_of(row[n], r->width);
            if (a < 0 || (n > 0 && a != in))
                return;
            in = a;
            n++;
        }
    for (size_t i = 0; i < n; i++) {
        touch_byte(row[i]);
        touch_byte(row[i] + r->width - 1);
    }
}

/* Offsets x bytes, y rows and z slices in. */
static bool offset(rows_t *r, uintptr_t base, size_t x, size_t y, size_t z)
{
    size_t k, off;
    return !__builtin_mul_overflow(z, r->slice, &k) && !__builtin_add_overflow(k, y, &k) &&
           !__builtin_mul_overflow(k, r->pitch, &off) && !__builtin_add_overflow(off, x, &off) &&
           !__builtin_add_overflow(base, off, &r->at);
}

/* ---- the calls ---- */

static void runtime_3d(input_t *in, bool peer)
{
    struct cudaMemcpy3DParms p = {0};
    p.srcPtr = (struct cudaPitchedPtr){(void *)pointer(in), number(in), number(in), number(in)};
    p.dstPtr = (struct cudaPitchedPtr){(void *)pointer(in), number(in), number(in), number(in)};
    p.srcPos = (struct cudaPos){number(in), number(in), number(in)};
    p.dstPos = (struct cudaPos){number(in), number(in), number(in)};
    p.extent = (struct cudaExtent){number(in), number(in), number(in)};
    p.kind = (enum cudaMemcpyKind)(take(in, 1) % 6);
    if (take(in, 1) % 8 == 0)
        p.srcArray = (cudaArray_t)(uintptr_t)0x10;
    lms_status_t st;
    if (peer) {
        struct cudaMemcpy3DPeerParms q = {.srcArray = p.srcArray, .srcPos = p.srcPos,
                                          .srcPtr = p.srcPtr, .dstPos = p.dstPos,
                                          .dstPtr = p.dstPtr, .extent = p.extent};
        st = access_cudaMemcpy3DPeer(&q);
    } else {
        st = access_cudaMemcpy3DAsync(&p, stream(in));
    }
    if (st != LMS_OK || p.srcArray != NULL)
        return;
    struct cudaPitchedPtr side[2] = {p.srcPtr, p.dstPtr};
    struct cudaPos pos[2] = {p.srcPos, p.dstPos};
    for (int k = 0; k < 2; k++) {
        rows_t r = {.width = p.extent.width, .pitch = side[k].pitch, .height = p.extent.height,
                    .slice = side[k].ysize, .depth = p.extent.depth};
        if (offset(&r, (uintptr_t)side[k].ptr, pos[k].x, pos[k].y, pos[k].z))
            expect_resident(&r);
    }
}

static void driver_3d(input_t *in, bool two_d)
{
    CUDA_MEMCPY3D c = {0};
    CUmemorytype types[] = {CU_MEMORYTYPE_DEVICE, CU_MEMORYTYPE_UNIFIED, CU_MEMORYTYPE_HOST,
                            CU_MEMORYTYPE_ARRAY};
    c.srcMemoryType = types[take(in, 1) % 4];
    c.dstMemoryType = types[take(in, 1) % 4];
    c.srcDevice = pointer(in), c.dstDevice = pointer(in);
    c.srcXInBytes = number(in), c.srcY = number(in), c.srcPitch = number(in);
    c.dstXInBytes = number(in), c.dstY = number(in), c.dstPitch = number(in);
    c.WidthInBytes = number(in), c.Height = number(in);
    if (!two_d) {
        c.srcZ = number(in), c.srcHeight = number(in);
        c.dstZ = number(in), c.dstHeight = number(in);
        c.Depth = number(in);
    }
    void *s = stream(in);
    lms_status_t st;
    if (two_d) {
        CUDA_MEMCPY2D d = {.srcXInBytes = c.srcXInBytes, .srcY = c.srcY,
                           .srcMemoryType = c.srcMemoryType, .srcDevice = c.srcDevice,
                           .srcPitch = c.srcPitch, .dstXInBytes = c.dstXInBytes, .dstY = c.dstY,
                           .dstMemoryType = c.dstMemoryType, .dstDevice = c.dstDevice,
                           .dstPitch = c.dstPitch, .WidthInBytes = c.WidthInBytes,
                           .Height = c.Height};
        st = access_cuMemcpy2DAsync_v2(&d, (CUstream)s);
        c.Depth = 1;
    } else {
        st = access_cuMemcpy3DAsync_v2(&c, (CUstream)s);
    }
    if (st != LMS_OK)
        return;
    CUmemorytype type[2] = {c.srcMemoryType, c.dstMemoryType};
    CUdeviceptr dev[2] = {c.srcDevice, c.dstDevice};
    size_t x[2] = {c.srcXInBytes, c.dstXInBytes}, y[2] = {c.srcY, c.dstY};
    size_t z[2] = {c.srcZ, c.dstZ}, pitch[2] = {c.srcPitch, c.dstPitch};
    size_t slice[2] = {c.srcHeight, c.dstHeight};
    for (int k = 0; k < 2; k++) {
        if (type[k] != CU_MEMORYTYPE_DEVICE && type[k] != CU_MEMORYTYPE_UNIFIED)
            continue;
        rows_t r = {.width = c.WidthInBytes, .pitch = pitch[k], .height = c.Height,
                    .slice = slice[k], .depth = c.Depth};
        if (offset(&r, (uintptr_t)dev[k], x[k], y[k], z[k]))
            expect_resident(&r);
    }
}

static void runtime_2d(input_t *in)
{
    uintptr_t dst = pointer(in), src = pointer(in);
    size_t dpitch = number(in), spitch = number(in), width = number(in), height = number(in);
    enum cudaMemcpyKind kind = (enum cudaMemcpyKind)(take(in, 1) % 6);
    if (access_cudaMemcpy2DAsync((void *)dst, dpitch, (void *)src, spitch, width, height, kind,
                                 stream(in)) != LMS_OK)
        return;
    rows_t d = {.at = dst, .width = width, .pitch = dpitch, .height = height, .depth = 1};
    rows_t s = {.at = src, .width = width, .pitch = spitch, .height = height, .depth = 1};
    expect_resident(&d);
    expect_resident(&s);
}

static void runtime_memset_3d(input_t *in)
{
    struct cudaPitchedPtr p = {(void *)pointer(in), number(in), number(in), number(in)};
    struct cudaExtent e = {number(in), number(in), number(in)};
    if (access_cudaMemset3DAsync(p, 0, e, stream(in)) != LMS_OK)
        return;
    rows_t r = {.at = (uintptr_t)p.ptr, .width = e.width, .pitch = p.pitch, .height = e.height,
                .slice = p.ysize, .depth = e.depth};
    expect_resident(&r);
}

static void driver_memset_2d(input_t *in)
{
    CUdeviceptr p = pointer(in);
    size_t pitch = number(in), width = number(in), height = number(in);
    if (access_cuMemsetD2D32Async(p, pitch, 0, width, height, (CUstream)stream(in)) != LMS_OK)
        return;
    rows_t r = {.at = p, .width = width * 4, .pitch = height == 1 ? width * 4 : pitch,
                .height = height, .depth = 1};
    if (width <= SIZE_MAX / 4)
        expect_resident(&r);
}

#if CUDA_VERSION >= 12080
#define MAX_BATCH 8

static void batch(input_t *in)
{
    CUdeviceptr dsts[MAX_BATCH], srcs[MAX_BATCH];
    size_t sizes[MAX_BATCH], idx[MAX_BATCH], count = take(in, 1) % (MAX_BATCH + 1);
    CUmemcpyAttributes attrs[MAX_BATCH] = {{0}};
    size_t nattrs = take(in, 1) % (MAX_BATCH + 1);
    for (size_t i = 0; i < count; i++)
        dsts[i] = pointer(in), srcs[i] = pointer(in), sizes[i] = number(in);
    for (size_t k = 0; k < nattrs; k++) {
        idx[k] = take(in, 1) % (MAX_BATCH + 2);
        attrs[k].srcAccessOrder = (CUmemcpySrcAccessOrder)(take(in, 1) % 5);
        attrs[k].flags = (unsigned)(take(in, 1) % 3);
    }
    size_t fail = 0;
    if (access_cuMemcpyBatchAsync(count ? dsts : NULL, count ? srcs : NULL,
                                  count ? sizes : NULL, count, attrs, idx, nattrs, &fail,
                                  (CUstream)stream(in)) != LMS_OK)
        return;
    for (size_t i = 0; i < count; i++) {
        rows_t d = {.at = dsts[i], .width = sizes[i], .height = 1, .depth = 1};
        rows_t s = {.at = srcs[i], .width = sizes[i], .height = 1, .depth = 1};
        expect_resident(&d);
        expect_resident(&s);
    }
}

static void batch3d(input_t *in)
{
    CUDA_MEMCPY3D_BATCH_OP ops[MAX_BATCH];
    size_t n = take(in, 1) % (MAX_BATCH + 1);
    memset(ops, 0, sizeof ops);
    for (size_t i = 0; i < n; i++) {
        CUmemcpy3DOperand *side[2] = {&ops[i].src, &ops[i].dst};
        for (int k = 0; k < 2; k++) {
            side[k]->type = take(in, 1) % 6 == 0 ? CU_MEMCPY_OPERAND_TYPE_ARRAY
                                                 : CU_MEMCPY_OPERAND_TYPE_POINTER;
            if (side[k]->type == CU_MEMCPY_OPERAND_TYPE_POINTER) {
                side[k]->op.ptr.ptr = pointer(in);
                side[k]->op.ptr.rowLength = number(in);
                side[k]->op.ptr.layerHeight = number(in);
            }
        }
        ops[i].extent = (CUextent3D){number(in), number(in), number(in)};
        ops[i].srcAccessOrder = (CUmemcpySrcAccessOrder)(take(in, 1) % 5);
        ops[i].flags = (unsigned)(take(in, 1) % 3);
    }
    size_t fail = 0;
    unsigned long long flags = take(in, 1) % 4 == 0;
    if (access_cuMemcpy3DBatchAsync(n, n ? ops : NULL, &fail, flags, (CUstream)stream(in)) !=
        LMS_OK)
        return;
    for (size_t i = 0; i < n; i++) {
        if (ops[i].src.type != CU_MEMCPY_OPERAND_TYPE_POINTER ||
            ops[i].dst.type != CU_MEMCPY_OPERAND_TYPE_POINTER)
            continue;
        const CUextent3D *e = &ops[i].extent;
        CUmemcpy3DOperand *side[2] = {&ops[i].src, &ops[i].dst};
        for (int k = 0; k < 2; k++) {
            size_t row = side[k]->op.ptr.rowLength ? side[k]->op.ptr.rowLength : e->width;
            size_t layer = side[k]->op.ptr.layerHeight ? side[k]->op.ptr.layerHeight : e->height;
            rows_t r = {.at = side[k]->op.ptr.ptr, .width = e->width, .pitch = row,
                        .height = e->height, .slice = layer, .depth = e->depth};
            expect_resident(&r);
        }
    }
}
#endif

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    input_t in = {data, data + size};
    for (int calls = 0; calls < MAX_CALLS && in.p < in.end; calls++) {
        switch (take(&in, 1) % 9) {
        case 0: runtime_2d(&in); break;
        case 1: runtime_3d(&in, false); break;
        case 2: runtime_3d(&in, true); break;
        case 3: driver_3d(&in, true); break;
        case 4: driver_3d(&in, false); break;
        case 5: runtime_memset_3d(&in); break;
        case 6: driver_memset_2d(&in); break;
#if CUDA_VERSION >= 12080
        case 7: batch(&in); break;
        case 8: batch3d(&in); break;
#endif
        default: break;
        }
    }
    return 0;
}
