/*
 * interpose/access.c — what copies and memsets touch of lms's memory, made
 * resident before they go on to CUDA (access.h), and the ranges of one
 * call that nccl.c's collectives share (internal.h).
 *
 * Note [Copy and memset ranges]
 * A copy reads its source range and writes its destination range; a memset
 * writes its range. A range is named exactly (lms_access_many), so a small
 * copy out of a large allocation moves only the chunks it touches. A
 * destination every byte of which the call writes (a linear copy, a memset,
 * a pitched one whose pitch is its width) is an overwrite: what is not on
 * the device is not fetched first (LMS_OVERWRITE). That is also why a
 * runtime copy with a kind CUDA does not know writes, rather than
 * overwrites: CUDA will refuse it, and an overwrite would have given up the
 * destination's contents. A range whose extent cannot be known (the linear
 * side of a 3D copy to or from a CUDA array, whose width is in the array's
 * elements, where the 2D and linear ones give bytes; or an extent whose
 * arithmetic overflows), or that does not lie
 * inside one live allocation (the program's mistake, which CUDA will report
 * in its own way), makes the whole allocations its first and last bytes
 * fall in resident instead (lms_access_pointers), and then so do all the
 * ranges of that call. Host memory, CUDA arrays and memory lms did not hand
 * out are not lms's: no range.
 *
 * Note [Batched copies]
 * cuMemcpyBatchAsync makes count linear copies in one call, and
 * cuMemcpy3DBatchAsync numOps pitched ones, in no order among themselves
 * and all after the stream's earlier work. All their ranges are made
 * resident in one lms_access_many; each destination a copy writes whole is
 * an overwrite. Two things are particular to them:
 * - A copy's srcAccessOrder. STREAM reads the source in stream order,
 *   after what lms fetched for it. DURING_API_CALL and ANY let CUDA read
 *   the source at once, out of stream order, which could be before lms's
 *   fetch of it has landed. When such a copy reads lms's memory, the hook
 *   waits for the stream (lms_stream_synchronize) before CUDA is called.
 *   That wait is a call into lms, which ends the access window (lms.h:
 *   resident until the thread's next call into lms), so the hook then
 *   makes the ranges resident again, held until CUDA has the copy
 *   (fuzz_access found them evicted and unmapped before it). A chunk
 *   evicted during the wait is fetched again by that second access, and
 *   the copy is then after that fetch only in stream order: lms has no
 *   wait on the host that keeps the window open.
 *   The program has said that no earlier work of the stream touches that
 *   memory, so the wait costs time, not correctness; those orders are for
 *   host sources, for which nothing waits.
 * - CUDA refuses a whole batch when one thing in it is malformed, but only
 *   after lms has made its memory resident: attrsIdxs[0] not 0, not
 *   increasing, not below count; numAttrs 0 or over count; a
 *   srcAccessOrder not one of the three; address 0; the legacy stream
 *   (NULL outside the per-thread forms); in the 3D form, flags not 0, an
 *   extent of 0, or a rowLength or layerHeight (where given) below the
 *   extent's width or height. In such a batch, or with copy flags lms does
 *   not know, every destination is a write, not an overwrite, and gives
 *   nothing up. With rows and layers at least the extent's, a 3D
 *   destination is written whole exactly when its span is the bytes copied.
 * Between a pointer and a CUDA array, the extent is in the array's
 * elements: the pointer's whole allocation. CUDA 13 dropped the failIdx
 * argument, keeping the names for its forms (cuMemcpyBatchAsync_v2 in
 * libcuda): both forms are hooked, and lookups by name give the one of the
 * version asked for. When lms cannot make a batch resident, the 12.8 form's
 * *failIdx is SIZE_MAX: no one copy failed. The runtime's
 * cudaMemcpyBatchAsync, whose two forms share one name across
 * libcudart.so.12 and .13, is not hooked: the runtime makes it through
 * the driver's, which it looks up by name (lms's answer).
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "base/base.h"
#include "interpose/internal.h"

/* ---- ranges of one call, or of one NCCL group --------------------------------- */

/* A range past the end of the address space is an extent that cannot be
 * known: its last byte would wrap round. */
void access_touch(touches_t *t, const void *ptr, size_t bytes, lms_access_mode_t mode)
{
    uintptr_t last;
    if (bytes == 0 || !interpose_owns(ptr))
        return;
    if (__builtin_add_overflow((uintptr_t)ptr, bytes - 1, &last))
        bytes = ACCESS_UNKNOWN;
    if (t->n == t->cap) {
        size_t cap = 2 * t->cap;
        lms_range_t *r = base_meta_alloc(cap * sizeof *r);
        if (r == NULL) {
            t->no_memory = true;
            return;
        }
        memcpy(r, t->r, t->n * sizeof *r);
        if (t->r != t->inline_r)
            base_meta_free(t->r);
        t->r = r;
        t->cap = cap;
    }
    if (bytes == ACCESS_UNKNOWN)
        t->whole = true;
    t->r[t->n++] = (lms_range_t){ptr, bytes == ACCESS_UNKNOWN ? 1 : bytes, mode};
}

void access_clear(touches_t *t)
{
    if (t->r != t->inline_r)
        base_meta_free(t->r);
    *t = (touches_t){.r = t->inline_r, .cap = ACCESS_INLINE_RANGES};
}

/* The whole allocations of t's ranges, on the lms stream s, or pinned for
 * the graph being captured on `stream` (captured). */
static lms_status_t run_whole(const touches_t *t, void *stream, lms_stream_t s, bool captured)
{
    const void *stack[2 * ACCESS_INLINE_RANGES], **p = stack;
    if (t->n > ACCESS_INLINE_RANGES && (p = base_meta_alloc(2 * t->n * sizeof *p)) == NULL)
        return base_fail(LMS_ERR_OUT_OF_MEMORY, "interpose: no host memory for %zu ranges", t->n);
    size_t m = 0;
    lms_access_mode_t mode = LMS_READ;
    for (size_t i = 0; i < t->n; i++) {
        p[m++] = t->r[i].ptr;
        p[m++] = (const char *)t->r[i].ptr + (t->r[i].bytes - 1);
        if (t->r[i].mode != LMS_READ)
            mode = LMS_WRITE;
    }
    lms_status_t st =
        captured ? graph_pin_pointers(stream, p, m) : lms_access_pointers(p, m, mode, s);
    if (p != stack)
        base_meta_free(p);
    return st;
}

/* t's ranges on the lms stream s; their whole allocations when lms takes
 * the ranges not (LMS_ERR_INVALID: one does not lie in one live
 * allocation, Note [Copy and memset ranges]; or s is stale, which
 * interpose_on_stream then recovers from). */
static lms_status_t resident_on(lms_stream_t s, void *touches)
{
    const touches_t *t = touches;
    if (!t->whole) {
        lms_status_t st = lms_access_many(t->r, t->n, s);
        if (st != LMS_ERR_INVALID)
            return st;
    }
    return run_whole(t, NULL, s, false);
}

/* Makes t's ranges resident on the lms stream adopted for `stream`, as
 * access_run does, without writing them to LMS_TRACE_ACCESSES's trace. */
static lms_status_t make_resident(touches_t *t, void *stream)
{
    if (t->no_memory)
        return base_fail(LMS_ERR_OUT_OF_MEMORY, "interpose: no host memory for the ranges of a call");
    if (t->n == 0)
        return LMS_OK;
    if (graph_capturing(stream)) /* Note [Graph capture] in graph.c */
        return run_whole(t, stream, NULL, true);
    return interpose_on_stream(stream, resident_on, t);
}

lms_status_t access_run(touches_t *t, void *stream)
{
    if (!t->no_memory && t->n > 0)
        trace_access(t->r, t->n);
    return make_resident(t, stream);
}

/* ---- extents --------------------------------------------------------------------- */

/* Rows of `width` bytes, `pitch` apart: from the first byte to the last. */
static size_t span2d(size_t pitch, size_t width, size_t height)
{
    size_t b;
    if (width == 0 || height == 0)
        return 0;
    if (__builtin_mul_overflow(height - 1, pitch, &b) || __builtin_add_overflow(b, width, &b))
        return ACCESS_UNKNOWN;
    return b;
}

/* And `depth` slices of `rows` rows each. */
static size_t span3d(size_t pitch, size_t rows, size_t width, size_t height, size_t depth)
{
    size_t b, r;
    if (width == 0 || height == 0 || depth == 0)
        return 0;
    if (__builtin_mul_overflow(depth - 1, rows, &r) || __builtin_add_overflow(r, height - 1, &r) ||
        __builtin_mul_overflow(r, pitch, &b) || __builtin_add_overflow(b, width, &b))
        return ACCESS_UNKNOWN;
    return b;
}

/* base + ((z * rows) + y) * pitch + x, or NULL when it overflows. */
static const void *at3d(uintptr_t base, size_t x, size_t y, size_t z, size_t pitch, size_t rows)
{
    size_t o;
    if (__builtin_mul_overflow(z, rows, &o) || __builtin_add_overflow(o, y, &o) ||
        __builtin_mul_overflow(o, pitch, &o) || __builtin_add_overflow(o, x, &o) ||
        __builtin_add_overflow(base, o, &base))
        return NULL;
    return (const void *)base;
}

/* What a destination of a runtime copy of this kind is (Note [Copy and memset ranges]). */
static lms_access_mode_t written(enum cudaMemcpyKind kind, bool every_byte)
{
    return every_byte && kind >= cudaMemcpyHostToHost && kind <= cudaMemcpyDefault ? LMS_OVERWRITE
                                                                                    : LMS_WRITE;
}

/* ---- the runtime's copies and memsets ---------------------------------------------- */

static lms_status_t copy1(void *dst, const void *src, size_t count, lms_access_mode_t dmode,
                          void *stream)
{
    TOUCHES(t);
    access_touch(&t, src, count, LMS_READ);
    access_touch(&t, dst, count, dmode);
    return access_run(&t, stream);
}

lms_status_t access_cudaMemcpy(void *dst, const void *src, size_t count, enum cudaMemcpyKind kind)
{
    return copy1(dst, src, count, written(kind, true), NULL);
}

lms_status_t access_cudaMemcpyAsync(void *dst, const void *src, size_t count,
                                    enum cudaMemcpyKind kind, cudaStream_t stream)
{
    return copy1(dst, src, count, written(kind, true), stream);
}

static lms_status_t copy2d(void *dst, size_t dpitch, const void *src, size_t spitch, size_t width,
                           size_t height, enum cudaMemcpyKind kind, void *stream)
{
    TOUCHES(t);
    access_touch(&t, src, span2d(spitch, width, height), LMS_READ);
    access_touch(&t, dst, span2d(dpitch, width, height), written(kind, dpitch == width));
    return access_run(&t, stream);
}

lms_status_t access_cudaMemcpy2D(void *dst, size_t dpitch, const void *src, size_t spitch,
                                 size_t width, size_t height, enum cudaMemcpyKind kind)
{
    return copy2d(dst, dpitch, src, spitch, width, height, kind, NULL);
}

lms_status_t access_cudaMemcpy2DAsync(void *dst, size_t dpitch, const void *src, size_t spitch,
                                      size_t width, size_t height, enum cudaMemcpyKind kind,
                                      cudaStream_t stream)
{
    return copy2d(dst, dpitch, src, spitch, width, height, kind, stream);
}

/* One side of a runtime 3D copy or memset: with an array on either side,
 * the extent is in the array's elements, which lms does not know. */
static void touch_pitched(touches_t *t, struct cudaPitchedPtr p, struct cudaPos pos,
                          struct cudaExtent e, bool array, lms_access_mode_t mode)
{
    if (array) {
        access_touch(t, p.ptr, ACCESS_UNKNOWN, mode);
        return;
    }
    const void *at = at3d((uintptr_t)p.ptr, pos.x, pos.y, pos.z, p.pitch, p.ysize);
    size_t bytes = span3d(p.pitch, p.ysize, e.width, e.height, e.depth);
    access_touch(t, at != NULL ? at : p.ptr, at != NULL ? bytes : ACCESS_UNKNOWN, mode);
}

/* A runtime 3D copy, within a device or between two (p: a cudaMemcpy3DParms
 * or a cudaMemcpy3DPeerParms, whose fields of the same names mean the same). */
#define COPY3D(p, stream)                                                                   \
    do {                                                                                    \
        if ((p) == NULL)                                                                    \
            return LMS_OK; /* CUDA's to refuse */                                           \
        TOUCHES(t);                                                                         \
        bool array = (p)->srcArray != NULL || (p)->dstArray != NULL;                        \
        if ((p)->srcArray == NULL)                                                          \
            touch_pitched(&t, (p)->srcPtr, (p)->srcPos, (p)->extent, array, LMS_READ);      \
        if ((p)->dstArray == NULL)                                                          \
            touch_pitched(&t, (p)->dstPtr, (p)->dstPos, (p)->extent, array, LMS_WRITE);     \
        return access_run(&t, (stream));                                                           \
    } while (0)

lms_status_t access_cudaMemcpy3D(const struct cudaMemcpy3DParms *p) { COPY3D(p, NULL); }

lms_status_t access_cudaMemcpy3DAsync(const struct cudaMemcpy3DParms *p, cudaStream_t stream)
{
    COPY3D(p, stream);
}

/* The other device's memory is not lms's: only lms's side is a range. */
lms_status_t access_cudaMemcpy3DPeer(const struct cudaMemcpy3DPeerParms *p) { COPY3D(p, NULL); }

lms_status_t access_cudaMemcpy3DPeerAsync(const struct cudaMemcpy3DPeerParms *p,
                                          cudaStream_t stream)
{
    COPY3D(p, stream);
}

/* Copies between a CUDA array and linear memory: width is in bytes, so
 * the linear side's range is known; the array is not lms's. */
lms_status_t access_cudaMemcpy2DToArray(cudaArray_t dst, size_t wOffset, size_t hOffset,
                                        const void *src, size_t spitch, size_t width,
                                        size_t height, enum cudaMemcpyKind kind)
{
    (void)dst, (void)wOffset, (void)hOffset;
    return copy2d(NULL, 0, src, spitch, width, height, kind, NULL);
}

lms_status_t access_cudaMemcpy2DToArrayAsync(cudaArray_t dst, size_t wOffset, size_t hOffset,
                                             const void *src, size_t spitch, size_t width,
                                             size_t height, enum cudaMemcpyKind kind,
                                             cudaStream_t stream)
{
    (void)dst, (void)wOffset, (void)hOffset;
    return copy2d(NULL, 0, src, spitch, width, height, kind, stream);
}

lms_status_t access_cudaMemcpy2DFromArray(void *dst, size_t dpitch, cudaArray_const_t src,
                                          size_t wOffset, size_t hOffset, size_t width,
                                          size_t height, enum cudaMemcpyKind kind)
{
    (void)src, (void)wOffset, (void)hOffset;
    return copy2d(dst, dpitch, NULL, 0, width, height, kind, NULL);
}

lms_status_t access_cudaMemcpy2DFromArrayAsync(void *dst, size_t dpitch, cudaArray_const_t src,
                                               size_t wOffset, size_t hOffset, size_t width,
                                               size_t height, enum cudaMemcpyKind kind,
                                               cudaStream_t stream)
{
    (void)src, (void)wOffset, (void)hOffset;
    return copy2d(dst, dpitch, NULL, 0, width, height, kind, stream);
}

lms_status_t access_cudaMemcpyPeer(void *dst, int dstDevice, const void *src, int srcDevice,
                                   size_t count)
{
    (void)dstDevice, (void)srcDevice;
    return copy1(dst, src, count, LMS_OVERWRITE, NULL);
}

lms_status_t access_cudaMemcpyPeerAsync(void *dst, int dstDevice, const void *src, int srcDevice,
                                        size_t count, cudaStream_t stream)
{
    (void)dstDevice, (void)srcDevice;
    return copy1(dst, src, count, LMS_OVERWRITE, stream);
}

/* A symbol is a module's global, never lms's: only the other side is. */
lms_status_t access_cudaMemcpyToSymbol(const void *symbol, const void *src, size_t count,
                                       size_t offset, enum cudaMemcpyKind kind)
{
    (void)symbol, (void)offset, (void)kind;
    return copy1(NULL, src, count, LMS_READ, NULL);
}

lms_status_t access_cudaMemcpyFromSymbol(void *dst, const void *symbol, size_t count,
                                         size_t offset, enum cudaMemcpyKind kind)
{
    (void)symbol, (void)offset;
    return copy1(dst, NULL, count, written(kind, true), NULL);
}

lms_status_t access_cudaMemcpyToSymbolAsync(const void *symbol, const void *src, size_t count,
                                            size_t offset, enum cudaMemcpyKind kind,
                                            cudaStream_t stream)
{
    (void)symbol, (void)offset, (void)kind;
    return copy1(NULL, src, count, LMS_READ, stream);
}

lms_status_t access_cudaMemcpyFromSymbolAsync(void *dst, const void *symbol, size_t count,
                                              size_t offset, enum cudaMemcpyKind kind,
                                              cudaStream_t stream)
{
    (void)symbol, (void)offset;
    return copy1(dst, NULL, count, written(kind, true), stream);
}

static lms_status_t set2d(const void *ptr, size_t pitch, size_t width, size_t height, void *stream)
{
    TOUCHES(t);
    access_touch(&t, ptr, span2d(pitch, width, height), pitch == width ? LMS_OVERWRITE : LMS_WRITE);
    return access_run(&t, stream);
}

lms_status_t access_cudaMemset(void *devPtr, int value, size_t count)
{
    (void)value;
    return set2d(devPtr, count, count, 1, NULL);
}

lms_status_t access_cudaMemsetAsync(void *devPtr, int value, size_t count, cudaStream_t stream)
{
    (void)value;
    return set2d(devPtr, count, count, 1, stream);
}

lms_status_t access_cudaMemset2D(void *devPtr, size_t pitch, int value, size_t width,
                                 size_t height)
{
    (void)value;
    return set2d(devPtr, pitch, width, height, NULL);
}

lms_status_t access_cudaMemset2DAsync(void *devPtr, size_t pitch, int value, size_t width,
                                      size_t height, cudaStream_t stream)
{
    (void)value;
    return set2d(devPtr, pitch, width, height, stream);
}

static lms_status_t set3d(struct cudaPitchedPtr p, struct cudaExtent e, void *stream)
{
    TOUCHES(t);
    touch_pitched(&t, p, (struct cudaPos){0, 0, 0}, e, false, LMS_WRITE);
    return access_run(&t, stream);
}

lms_status_t access_cudaMemset3D(struct cudaPitchedPtr pitchedDevPtr, int value,
                                 struct cudaExtent extent)
{
    (void)value;
    return set3d(pitchedDevPtr, extent, NULL);
}

lms_status_t access_cudaMemset3DAsync(struct cudaPitchedPtr pitchedDevPtr, int value,
                                      struct cudaExtent extent, cudaStream_t stream)
{
    (void)value;
    return set3d(pitchedDevPtr, extent, stream);
}

/* ---- the driver's ---------------------------------------------------------------- */

#define DPTR(d) ((const void *)(uintptr_t)(d))

lms_status_t access_cuMemcpy(CUdeviceptr dst, CUdeviceptr src, size_t ByteCount)
{
    return copy1((void *)DPTR(dst), DPTR(src), ByteCount, LMS_OVERWRITE, NULL);
}

lms_status_t access_cuMemcpyAsync(CUdeviceptr dst, CUdeviceptr src, size_t ByteCount,
                                  CUstream hStream)
{
    return copy1((void *)DPTR(dst), DPTR(src), ByteCount, LMS_OVERWRITE, hStream);
}

lms_status_t access_cuMemcpyPeer(CUdeviceptr dstDevice, CUcontext dstContext,
                                 CUdeviceptr srcDevice, CUcontext srcContext, size_t ByteCount)
{
    (void)dstContext, (void)srcContext;
    return copy1((void *)DPTR(dstDevice), DPTR(srcDevice), ByteCount, LMS_OVERWRITE, NULL);
}

lms_status_t access_cuMemcpyPeerAsync(CUdeviceptr dstDevice, CUcontext dstContext,
                                      CUdeviceptr srcDevice, CUcontext srcContext,
                                      size_t ByteCount, CUstream hStream)
{
    (void)dstContext, (void)srcContext;
    return copy1((void *)DPTR(dstDevice), DPTR(srcDevice), ByteCount, LMS_OVERWRITE, hStream);
}

lms_status_t access_cuMemcpyHtoD_v2(CUdeviceptr dstDevice, const void *srcHost, size_t ByteCount)
{
    return copy1((void *)DPTR(dstDevice), srcHost, ByteCount, LMS_OVERWRITE, NULL);
}

lms_status_t access_cuMemcpyDtoH_v2(void *dstHost, CUdeviceptr srcDevice, size_t ByteCount)
{
    return copy1(dstHost, DPTR(srcDevice), ByteCount, LMS_OVERWRITE, NULL);
}

lms_status_t access_cuMemcpyDtoD_v2(CUdeviceptr dstDevice, CUdeviceptr srcDevice, size_t ByteCount)
{
    return copy1((void *)DPTR(dstDevice), DPTR(srcDevice), ByteCount, LMS_OVERWRITE, NULL);
}

lms_status_t access_cuMemcpyHtoDAsync_v2(CUdeviceptr dstDevice, const void *srcHost,
                                         size_t ByteCount, CUstream hStream)
{
    return copy1((void *)DPTR(dstDevice), srcHost, ByteCount, LMS_OVERWRITE, hStream);
}

lms_status_t access_cuMemcpyDtoHAsync_v2(void *dstHost, CUdeviceptr srcDevice, size_t ByteCount,
                                         CUstream hStream)
{
    return copy1(dstHost, DPTR(srcDevice), ByteCount, LMS_OVERWRITE, hStream);
}

lms_status_t access_cuMemcpyDtoDAsync_v2(CUdeviceptr dstDevice, CUdeviceptr srcDevice,
                                         size_t ByteCount, CUstream hStream)
{
    return copy1((void *)DPTR(dstDevice), DPTR(srcDevice), ByteCount, LMS_OVERWRITE, hStream);
}

/* One side of a driver 2D or 3D copy: device memory (or unified: an
 * address) at x bytes, row y, slice z, of rows `pitch` apart and slices of
 * `rows` rows. */
static void touch_side(touches_t *t, CUmemorytype type, CUdeviceptr dev, size_t x, size_t y,
                       size_t z, size_t pitch, size_t rows, size_t bytes, lms_access_mode_t mode)
{
    if (type != CU_MEMORYTYPE_DEVICE && type != CU_MEMORYTYPE_UNIFIED)
        return;
    const void *at = at3d((uintptr_t)dev, x, y, z, pitch, rows);
    access_touch(t, at != NULL ? at : DPTR(dev), at != NULL ? bytes : ACCESS_UNKNOWN, mode);
}

static lms_status_t drv_copy2d(const CUDA_MEMCPY2D *c, void *stream)
{
    if (c == NULL)
        return LMS_OK;
    TOUCHES(t);
    touch_side(&t, c->srcMemoryType, c->srcDevice, c->srcXInBytes, c->srcY, 0, c->srcPitch, 0,
               span2d(c->srcPitch, c->WidthInBytes, c->Height), LMS_READ);
    touch_side(&t, c->dstMemoryType, c->dstDevice, c->dstXInBytes, c->dstY, 0, c->dstPitch, 0,
               span2d(c->dstPitch, c->WidthInBytes, c->Height),
               c->dstPitch == c->WidthInBytes || c->Height == 1 ? LMS_OVERWRITE : LMS_WRITE);
    return access_run(&t, stream);
}

lms_status_t access_cuMemcpy2D_v2(const CUDA_MEMCPY2D *pCopy) { return drv_copy2d(pCopy, NULL); }

lms_status_t access_cuMemcpy2DAsync_v2(const CUDA_MEMCPY2D *pCopy, CUstream hStream)
{
    return drv_copy2d(pCopy, hStream);
}

/* A driver 3D copy (c: a CUDA_MEMCPY3D or a CUDA_MEMCPY3D_PEER, whose
 * fields of the same names mean the same). */
#define DRV_COPY3D(c, stream)                                                               \
    do {                                                                                    \
        if ((c) == NULL)                                                                    \
            return LMS_OK;                                                                  \
        TOUCHES(t);                                                                         \
        touch_side(&t, (c)->srcMemoryType, (c)->srcDevice, (c)->srcXInBytes, (c)->srcY,     \
                   (c)->srcZ, (c)->srcPitch, (c)->srcHeight,                                \
                   span3d((c)->srcPitch, (c)->srcHeight, (c)->WidthInBytes, (c)->Height,    \
                          (c)->Depth), LMS_READ);                                           \
        touch_side(&t, (c)->dstMemoryType, (c)->dstDevice, (c)->dstXInBytes, (c)->dstY,     \
                   (c)->dstZ, (c)->dstPitch, (c)->dstHeight,                                \
                   span3d((c)->dstPitch, (c)->dstHeight, (c)->WidthInBytes, (c)->Height,    \
                          (c)->Depth), LMS_WRITE);                                          \
        return access_run(&t, (stream));                                                           \
    } while (0)

lms_status_t access_cuMemcpy3D_v2(const CUDA_MEMCPY3D *pCopy) { DRV_COPY3D(pCopy, NULL); }

lms_status_t access_cuMemcpy3DAsync_v2(const CUDA_MEMCPY3D *pCopy, CUstream hStream)
{
    DRV_COPY3D(pCopy, hStream);
}

lms_status_t access_cuMemcpy3DPeer(const CUDA_MEMCPY3D_PEER *pCopy) { DRV_COPY3D(pCopy, NULL); }

lms_status_t access_cuMemcpy3DPeerAsync(const CUDA_MEMCPY3D_PEER *pCopy, CUstream hStream)
{
    DRV_COPY3D(pCopy, hStream);
}

/* Between a CUDA array (not lms's) and linear device memory. */
lms_status_t access_cuMemcpyDtoA_v2(CUarray dstArray, size_t dstOffset, CUdeviceptr srcDevice,
                                    size_t ByteCount)
{
    (void)dstArray, (void)dstOffset;
    return copy1(NULL, DPTR(srcDevice), ByteCount, LMS_READ, NULL);
}

lms_status_t access_cuMemcpyAtoD_v2(CUdeviceptr dstDevice, CUarray srcArray, size_t srcOffset,
                                    size_t ByteCount)
{
    (void)srcArray, (void)srcOffset;
    return copy1((void *)DPTR(dstDevice), NULL, ByteCount, LMS_OVERWRITE, NULL);
}

/* ---- batches (CUDA 12.8 and later; Note [Batched copies]) ---------------------- */

#if CUDA_VERSION >= 12080
/* A srcAccessOrder CUDA knows. */
static bool known_order(CUmemcpySrcAccessOrder o)
{
    return o == CU_MEMCPY_SRC_ACCESS_ORDER_STREAM ||
           o == CU_MEMCPY_SRC_ACCESS_ORDER_DURING_API_CALL || o == CU_MEMCPY_SRC_ACCESS_ORDER_ANY;
}

static bool known_flags(unsigned flags)
{
    return (flags & ~CU_MEMCPY_FLAG_PREFER_OVERLAP_WITH_COMPUTE) == 0;
}

/* The legacy default stream, on which CUDA refuses batches: NULL names it
 * except in the per-thread forms. */
static bool legacy(void *stream, bool per_thread)
{
    return stream == (void *)CU_STREAM_LEGACY || (stream == NULL && !per_thread);
}

static lms_status_t synchronize(lms_stream_t s, void *unused)
{
    (void)unused;
    return lms_stream_synchronize(s);
}

/* Makes a batch's ranges resident; then, if a copy may read lms's memory
 * out of stream order (`wait`), waits for the stream, and makes them
 * resident again, since the wait ended the access window (Note [Batched
 * copies]). */
static lms_status_t run_batch(touches_t *t, void *stream, bool wait)
{
    lms_status_t st = access_run(t, stream);
    if (st == LMS_OK && wait && !graph_capturing(stream) &&
        (st = interpose_on_stream(stream, synchronize, NULL)) == LMS_OK)
        st = make_resident(t, stream);
    access_clear(t);
    return st;
}

/* Whether CUDA takes a batch of count copies with these attributes:
 * attrsIdxs[0] is 0, each entry greater than the one before and less than
 * count, numAttrs from 1 to count, every srcAccessOrder and flag one CUDA
 * knows, and no copy from or to address 0. */
static bool well_formed(const CUdeviceptr *dsts, const CUdeviceptr *srcs, size_t count,
                        const CUmemcpyAttributes *attrs, const size_t *attrsIdxs, size_t numAttrs)
{
    if (attrs == NULL || attrsIdxs == NULL || numAttrs == 0 || numAttrs > count ||
        attrsIdxs[0] != 0)
        return false;
    for (size_t k = 0; k < numAttrs; k++)
        if ((k > 0 && (attrsIdxs[k] <= attrsIdxs[k - 1] || attrsIdxs[k] >= count)) ||
            !known_order(attrs[k].srcAccessOrder) || !known_flags(attrs[k].flags))
            return false;
    for (size_t i = 0; i < count; i++)
        if (dsts[i] == 0 || srcs[i] == 0)
            return false;
    return true;
}

static lms_status_t batch(const CUdeviceptr *dsts, const CUdeviceptr *srcs, const size_t *sizes,
                          size_t count, const CUmemcpyAttributes *attrs, const size_t *attrsIdxs,
                          size_t numAttrs, void *stream, bool per_thread)
{
    if (count == 0 || dsts == NULL || srcs == NULL || sizes == NULL)
        return LMS_OK; /* CUDA's to refuse */
    bool ok = !legacy(stream, per_thread) &&
              well_formed(dsts, srcs, count, attrs, attrsIdxs, numAttrs),
         wait = false;
    TOUCHES(t);
    for (size_t i = 0, k = 0; i < count; i++) {
        while (ok && k + 1 < numAttrs && attrsIdxs[k + 1] <= i)
            k++;
        if (!ok || attrs[k].srcAccessOrder != CU_MEMCPY_SRC_ACCESS_ORDER_STREAM)
            wait |= sizes[i] > 0 && interpose_owns(DPTR(srcs[i]));
        access_touch(&t, DPTR(srcs[i]), sizes[i], LMS_READ);
        access_touch(&t, DPTR(dsts[i]), sizes[i], ok ? LMS_OVERWRITE : LMS_WRITE);
    }
    return run_batch(&t, stream, wait);
}

/* No one copy failed when lms could not make a batch resident. */
static lms_status_t no_index(lms_status_t st, size_t *failIdx)
{
    if (st != LMS_OK && failIdx != NULL)
        *failIdx = SIZE_MAX;
    return st;
}

lms_status_t access_cuMemcpyBatchAsync(CUdeviceptr *dsts, CUdeviceptr *srcs, size_t *sizes,
                                       size_t count, CUmemcpyAttributes *attrs, size_t *attrsIdxs,
                                       size_t numAttrs, size_t *failIdx, CUstream hStream)
{
    return no_index(batch(dsts, srcs, sizes, count, attrs, attrsIdxs, numAttrs, hStream, false),
                    failIdx);
}

lms_status_t access_cuMemcpyBatchAsync_ptsz(CUdeviceptr *dsts, CUdeviceptr *srcs, size_t *sizes,
                                            size_t count, CUmemcpyAttributes *attrs,
                                            size_t *attrsIdxs, size_t numAttrs, size_t *failIdx,
                                            CUstream hStream)
{
    return no_index(batch(dsts, srcs, sizes, count, attrs, attrsIdxs, numAttrs, hStream, true),
                    failIdx);
}

/* Whether CUDA takes op (on top of what the batch's flags say): a
 * srcAccessOrder and flags it knows, no extent 0, and pointer operands
 * whose rowLength and layerHeight, where given, hold a row and a layer of
 * the extent. */
static bool op_well_formed(const CUDA_MEMCPY3D_BATCH_OP *op)
{
    const CUextent3D *e = &op->extent;
    if (e->width == 0 || e->height == 0 || e->depth == 0 || !known_order(op->srcAccessOrder) ||
        !known_flags(op->flags))
        return false;
    const CUmemcpy3DOperand *sides[2] = {&op->src, &op->dst};
    for (int k = 0; k < 2; k++) {
        const CUmemcpy3DOperand *o = sides[k];
        if (o->type == CU_MEMCPY_OPERAND_TYPE_ARRAY)
            continue;
        if (o->type != CU_MEMCPY_OPERAND_TYPE_POINTER || o->op.ptr.ptr == 0 ||
            (o->op.ptr.rowLength != 0 && o->op.ptr.rowLength < e->width) ||
            (o->op.ptr.layerHeight != 0 && o->op.ptr.layerHeight < e->height))
            return false;
    }
    return true;
}

/* One operand of a 3D batch copy of extent e: a pointer operand's rows are
 * rowLength elements apart and its layers layerHeight rows (0: the
 * extent's), from ptr on. Elements are bytes between two pointers; with an
 * array on the other side they are the array's, which lms does not know. */
static void touch_operand(touches_t *t, const CUmemcpy3DOperand *o, const CUextent3D *e,
                          bool bytes_known, lms_access_mode_t mode)
{
    if (o->type != CU_MEMCPY_OPERAND_TYPE_POINTER)
        return;
    const void *p = DPTR(o->op.ptr.ptr);
    if (!bytes_known) {
        access_touch(t, p, ACCESS_UNKNOWN, mode == LMS_OVERWRITE ? LMS_WRITE : mode);
        return;
    }
    size_t row = o->op.ptr.rowLength != 0 ? o->op.ptr.rowLength : e->width;
    size_t layer = o->op.ptr.layerHeight != 0 ? o->op.ptr.layerHeight : e->height;
    size_t span = span3d(row, layer, e->width, e->height, e->depth), all;
    /* with rows and layers at least the extent's (op_well_formed), written
     * whole when the span is exactly the bytes copied */
    bool whole = !__builtin_mul_overflow(e->width, e->height, &all) &&
                 !__builtin_mul_overflow(all, e->depth, &all) && span == all;
    access_touch(t, p, span, mode == LMS_OVERWRITE && !whole ? LMS_WRITE : mode);
}

static lms_status_t batch3d(size_t numOps, const CUDA_MEMCPY3D_BATCH_OP *ops,
                            unsigned long long flags, void *stream, bool per_thread)
{
    if (numOps == 0 || ops == NULL)
        return LMS_OK; /* CUDA's to refuse */
    bool ok = flags == 0 && !legacy(stream, per_thread), wait = false;
    for (size_t i = 0; ok && i < numOps; i++)
        ok = op_well_formed(&ops[i]);
    TOUCHES(t);
    for (size_t i = 0; i < numOps; i++) {
        const CUDA_MEMCPY3D_BATCH_OP *op = &ops[i];
        bool bytes_known = op->src.type == CU_MEMCPY_OPERAND_TYPE_POINTER &&
                           op->dst.type == CU_MEMCPY_OPERAND_TYPE_POINTER;
        if ((!ok || op->srcAccessOrder != CU_MEMCPY_SRC_ACCESS_ORDER_STREAM) &&
            op->src.type == CU_MEMCPY_OPERAND_TYPE_POINTER)
            wait |= interpose_owns(DPTR(op->src.op.ptr.ptr));
        touch_operand(&t, &op->src, &op->extent, bytes_known, LMS_READ);
        touch_operand(&t, &op->dst, &op->extent, bytes_known, ok ? LMS_OVERWRITE : LMS_WRITE);
    }
    return run_batch(&t, stream, wait);
}

lms_status_t access_cuMemcpy3DBatchAsync(size_t numOps, CUDA_MEMCPY3D_BATCH_OP *opList,
                                         size_t *failIdx, unsigned long long flags,
                                         CUstream hStream)
{
    return no_index(batch3d(numOps, opList, flags, hStream, false), failIdx);
}

lms_status_t access_cuMemcpy3DBatchAsync_ptsz(size_t numOps, CUDA_MEMCPY3D_BATCH_OP *opList,
                                              size_t *failIdx, unsigned long long flags,
                                              CUstream hStream)
{
    return no_index(batch3d(numOps, opList, flags, hStream, true), failIdx);
}
#endif /* CUDA_VERSION >= 12080 */

#if CUDA_VERSION >= 13000
lms_status_t access_cuMemcpyBatchAsync_v2(CUdeviceptr *dsts, CUdeviceptr *srcs, size_t *sizes,
                                          size_t count, CUmemcpyAttributes *attrs,
                                          size_t *attrsIdxs, size_t numAttrs, CUstream hStream)
{
    return batch(dsts, srcs, sizes, count, attrs, attrsIdxs, numAttrs, hStream, false);
}

lms_status_t access_cuMemcpyBatchAsync_v2_ptsz(CUdeviceptr *dsts, CUdeviceptr *srcs,
                                               size_t *sizes, size_t count,
                                               CUmemcpyAttributes *attrs, size_t *attrsIdxs,
                                               size_t numAttrs, CUstream hStream)
{
    return batch(dsts, srcs, sizes, count, attrs, attrsIdxs, numAttrs, hStream, true);
}

lms_status_t access_cuMemcpy3DBatchAsync_v2(size_t numOps, CUDA_MEMCPY3D_BATCH_OP *opList,
                                            unsigned long long flags, CUstream hStream)
{
    return batch3d(numOps, opList, flags, hStream, false);
}

lms_status_t access_cuMemcpy3DBatchAsync_v2_ptsz(size_t numOps, CUDA_MEMCPY3D_BATCH_OP *opList,
                                                 unsigned long long flags, CUstream hStream)
{
    return batch3d(numOps, opList, flags, hStream, true);
}
#endif /* CUDA_VERSION >= 13000 */

/* A driver memset of `height` rows of `width` elements of `size` bytes. */
static lms_status_t drv_set(CUdeviceptr dst, size_t pitch, size_t width, size_t size,
                            size_t height, void *stream)
{
    size_t row;
    if (__builtin_mul_overflow(width, size, &row))
        row = ACCESS_UNKNOWN;
    if (height == 1)
        pitch = row;
    return set2d(DPTR(dst), pitch, row, row == ACCESS_UNKNOWN ? 1 : height, stream);
}

/* set2d takes ACCESS_UNKNOWN rows as the whole allocation: span2d(ACCESS_UNKNOWN,
 * ACCESS_UNKNOWN, 1) is ACCESS_UNKNOWN. */
#define DRV_SET(w, type)                                                                    \
    lms_status_t access_cuMemsetD##w##_v2(CUdeviceptr dstDevice, type v, size_t N)          \
    {                                                                                       \
        (void)v;                                                                            \
        return drv_set(dstDevice, 0, N, w / 8, 1, NULL);                                    \
    }                                                                                       \
    lms_status_t access_cuMemsetD##w##Async(CUdeviceptr dstDevice, type v, size_t N,        \
                                            CUstream hStream)                               \
    {                                                                                       \
        (void)v;                                                                            \
        return drv_set(dstDevice, 0, N, w / 8, 1, hStream);                                 \
    }                                                                                       \
    lms_status_t access_cuMemsetD2D##w##_v2(CUdeviceptr dstDevice, size_t dstPitch, type v, \
                                            size_t Width, size_t Height)                    \
    {                                                                                       \
        (void)v;                                                                            \
        return drv_set(dstDevice, dstPitch, Width, w / 8, Height, NULL);                    \
    }                                                                                       \
    lms_status_t access_cuMemsetD2D##w##Async(CUdeviceptr dstDevice, size_t dstPitch,       \
                                              type v, size_t Width, size_t Height,          \
                                              CUstream hStream)                             \
    {                                                                                       \
        (void)v;                                                                            \
        return drv_set(dstDevice, dstPitch, Width, w / 8, Height, hStream);                 \
    }
DRV_SET(8, unsigned char)
DRV_SET(16, unsigned short)
DRV_SET(32, unsigned int)
