/*
 * interpose/launch.c — see launch.h.
 *
 * Note [Parameter layouts]
 * A launch passes its parameters as an array of pointers to each value
 * (kernelParams), whose length the launch does not say, or as one buffer
 * (extra). Only the driver knows how many parameters a function has and
 * where each sits: cuFuncGetParamInfo(f, i) answers for i = 0, 1, ... until
 * CUDA_ERROR_INVALID_VALUE (CUDA 12.4 and later drivers). A CUkernel (what
 * cuLibraryGetKernel gives, and what the runtime launches since CUDA 12)
 * may stand for a CUfunction in cuLaunchKernel; the driver answers for it
 * through cuKernelGetParamInfo. Layouts are asked once per function and
 * kept in a table that launches read without a lock (entries are written
 * once, under `table_lock`, and published with a release store); nothing
 * is ever removed, since a function lives as long as its module, and a
 * module unloaded and another loaded at the same address has a new layout
 * only if the table is not full.
 * A function whose layout the driver does not give (an old driver) is
 * launched with nothing made resident but what an extra buffer shows, and
 * said once in the log: what it touches of lms's memory must be pinned.
 *
 * Note [Stream handles]
 * A launch names a CUDA stream; lms_access_pointers wants the lms stream
 * adopted for it. Each thread keeps the last few pairs. A pair goes stale
 * when the stream is unadopted (cudaStreamDestroy): its handle's generation
 * no longer matches, lms_access_pointers says LMS_ERR_INVALID, and the
 * stream is adopted again. (A handle could only name another stream after
 * lms_shutdown and a new init, which the interposer never does.)
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include <cuda.h>
#include <cuda_runtime_api.h>

#include "base/base.h"
#include "interpose/graph.h"
#include "interpose/launch.h"
#include "interpose/trace.h"
#include "interpose/scan.h"

#define TABLE_SIZE 16384  /* functions whose layout is kept; a power of two */
#define MAX_PARAMS 4096   /* asked of the driver per function, at most */
#define STACK_HITS 64     /* pointers found per launch without a heap buffer */

typedef struct layout {
    launch_kind_t kind;
    const void *fn;
    bool known;  /* the driver gave the layout */
    size_t n;
    scan_param_t p[];
} layout_t;

static layout_t *table[TABLE_SIZE]; /* open addressing; read with acquire loads */
static pthread_mutex_t table_lock = PTHREAD_MUTEX_INITIALIZER;

/* ---- the driver's and the runtime's answers ---------------------------------- */

void *interpose_sym(const char *name)
{
    void *f = dlsym(RTLD_NEXT, name);
    if (f == NULL) {
        void *lib = dlopen("libcuda.so.1", RTLD_NOW | RTLD_NOLOAD);
        if (lib != NULL) {
            f = dlsym(lib, name);
            dlclose(lib); /* the runtime holds it loaded */
        }
    }
    return f;
}

typedef CUresult (*param_info_t)(void *fn, size_t i, size_t *offset, size_t *size);

/* The layout of fn into p (at most MAX_PARAMS); false if the driver gives
 * none. See Note [Parameter layouts]. */
static bool ask_layout(launch_kind_t kind, const void *fn, scan_param_t *p, size_t *n)
{
    void *f = (void *)fn;
    if (kind == LAUNCH_RUNTIME) {
        cudaError_t (*by_symbol)(cudaFunction_t *, const void *) = interpose_sym("cudaGetFuncBySymbol");
        cudaFunction_t cf;
        if (by_symbol == NULL || by_symbol(&cf, fn) != cudaSuccess)
            return false;
        f = (void *)cf;
    }
    param_info_t ask[2] = {(param_info_t)interpose_sym("cuFuncGetParamInfo"),
                           (param_info_t)interpose_sym("cuKernelGetParamInfo")};
    for (int a = 0; a < 2; a++) {
        if (ask[a] == NULL)
            continue;
        size_t i = 0;
        CUresult r = CUDA_SUCCESS;
        while (i < MAX_PARAMS && (r = ask[a](f, i, &p[i].offset, &p[i].size)) == CUDA_SUCCESS)
            i++;
        if (r == CUDA_SUCCESS || r == CUDA_ERROR_INVALID_VALUE) { /* past the last one */
            *n = i;
            return true;
        }
    }
    return false;
}

static size_t slot_of(launch_kind_t kind, const void *fn)
{
    uint64_t h = (uint64_t)(uintptr_t)fn * 0x9e3779b97f4a7c15ull + (uint64_t)kind;
    return (size_t)(h >> 40) & (TABLE_SIZE - 1);
}

/* fn's layout: from the table, or asked now and kept. NULL only when the
 * host has no memory for it. */
static const layout_t *layout_of(launch_kind_t kind, const void *fn)
{
    size_t i = slot_of(kind, fn);
    for (size_t probe = 0; probe < TABLE_SIZE; probe++, i = (i + 1) & (TABLE_SIZE - 1)) {
        layout_t *l = __atomic_load_n(&table[i], __ATOMIC_ACQUIRE);
        if (l == NULL)
            break;
        if (l->fn == fn && l->kind == kind)
            return l;
    }
    scan_param_t *p = malloc(MAX_PARAMS * sizeof *p);
    size_t n = 0;
    bool known = p != NULL && ask_layout(kind, fn, p, &n);
    layout_t *l = p != NULL ? malloc(sizeof *l + n * sizeof *p) : NULL;
    if (l == NULL) {
        free(p);
        return NULL;
    }
    *l = (layout_t){.kind = kind, .fn = fn, .known = known, .n = n};
    for (size_t k = 0; k < n; k++)
        l->p[k] = p[k];
    free(p);
    if (!known)
        base_log(BASE_LOG_WARN,
                 "interpose: the driver gives no parameter layout for kernel %p (cuFuncGetParamInfo "
                 "needs CUDA 12.4): lms memory its parameters point to is not made resident; "
                 "lms_pin it", fn);
    /* keep it, unless another thread did first or the table is full */
    pthread_mutex_lock(&table_lock);
    i = slot_of(kind, fn);
    for (size_t probe = 0; probe < TABLE_SIZE; probe++, i = (i + 1) & (TABLE_SIZE - 1)) {
        layout_t *t = table[i];
        if (t == NULL) {
            __atomic_store_n(&table[i], l, __ATOMIC_RELEASE);
            pthread_mutex_unlock(&table_lock);
            return l;
        }
        if (t->fn == fn && t->kind == kind) {
            pthread_mutex_unlock(&table_lock);
            free(l);
            return t;
        }
    }
    pthread_mutex_unlock(&table_lock);
    static __thread layout_t *unkept; /* the table is full: this thread's last one */
    free(unkept);
    return unkept = l;
}

/* ---- streams (Note [Stream handles]) ----------------------------------------- */

#define STREAM_CACHE 4
static __thread struct {
    void *native;
    lms_stream_t stream;
    bool set;
} streams[STREAM_CACHE];
static __thread unsigned streams_next;

lms_status_t interpose_stream(void *native, bool fresh, lms_stream_t *out)
{
    for (unsigned k = 0; k < STREAM_CACHE; k++)
        if (streams[k].set && streams[k].native == native) {
            if (!fresh) {
                *out = streams[k].stream;
                return LMS_OK;
            }
            streams[k].set = false;
        }
    lms_status_t st = lms_stream_adopt(native, out);
    if (st == LMS_OK) {
        unsigned k = streams_next++ % STREAM_CACHE;
        streams[k].native = native;
        streams[k].stream = *out;
        streams[k].set = true;
    }
    return st;
}

/*
 * Note [Pinned small allocations]
 * What a kernel reaches through pointers stored in device memory (an array
 * of pointers) no hook sees. Such arrays and what they point to are often
 * small: with LMS_PIN_SMALLER_THAN, an allocation below it is pinned when it
 * is made (lms_pin: resident from then on, for any stream) and stays pinned
 * until its memory is released after the free, when the chunks it alone
 * occupied drop their pins; a chunk shared with other small allocations
 * stays pinned until all of them are freed. Pinned longer than needed,
 * never shorter. An allocation that cannot be pinned is freed again and
 * fails as out of memory.
 */
lms_status_t interpose_pin_small(void *p, size_t size)
{
    if (p == NULL || size == 0 || size >= base_options()->pin_smaller_than)
        return LMS_OK;
    lms_status_t st = lms_pin(p, size);
    if (st != LMS_OK) {
        char why[256];
        snprintf(why, sizeof why, "%s", lms_last_error());
        (void)lms_free(p, LMS_ALL_STREAMS);
        st = base_fail(st, "LMS_PIN_SMALLER_THAN: %zu bytes could not be pinned: %s", size, why);
    }
    return st;
}

/* Stream-ordered allocation on a stream being captured makes graph memory
 * nodes, which lms cannot (Note [Graph capture] in graph.c). */
static lms_status_t not_in_capture(void *stream, const char *what)
{
    if (!graph_capturing(stream))
        return LMS_OK;
    return base_fail(LMS_ERR_UNSUPPORTED, "interpose: %s on stream %p, which is being captured "
                     "into a CUDA graph: lms does not make graph memory nodes", what, stream);
}

lms_status_t interpose_malloc_on(void **p, size_t size, void *stream)
{
    lms_stream_t s;
    lms_status_t st = not_in_capture(stream, "stream-ordered allocation");
    if (st != LMS_OK)
        return st;
    st = interpose_stream(stream, false, &s);
    if (st == LMS_OK && (st = lms_malloc(p, size, s)) == LMS_ERR_INVALID &&
        (st = interpose_stream(stream, true, &s)) == LMS_OK) /* stale */
        st = lms_malloc(p, size, s);
    if (st == LMS_OK && (st = interpose_pin_small(*p, size)) != LMS_OK)
        *p = NULL;
    if (st == LMS_OK)
        trace_alloc(*p, size);
    return st;
}

lms_status_t interpose_free_on(void *p, void *stream)
{
    lms_stream_t s;
    lms_status_t st = not_in_capture(stream, "stream-ordered free");
    if (st != LMS_OK)
        return st;
    graph_forget(p);
    trace_free(p);
    st = interpose_stream(stream, false, &s);
    if (st == LMS_OK && (st = lms_free(p, s)) == LMS_ERR_INVALID &&
        (st = interpose_stream(stream, true, &s)) == LMS_OK) /* stale */
        st = lms_free(p, s);
    return st;
}

/* ---- the launch ----------------------------------------------------------------- */

/* lms's range, once lms is up; {0, 0} while it cannot start. Threads that
 * find it at once store the same values. Kept for the process: the
 * interposer never calls lms_shutdown (after which the range could move). */
static uintptr_t range_lo;
static size_t range_bytes; /* 0: not known yet; stored after range_lo (release) */

static scan_range_t lms_range(void)
{
    size_t bytes = __atomic_load_n(&range_bytes, __ATOMIC_ACQUIRE);
    if (bytes == 0) {
        void *base;
        if (lms_reserved_range(&base, &bytes) != LMS_OK)
            return (scan_range_t){0, 0};
        __atomic_store_n(&range_lo, (uintptr_t)base, __ATOMIC_RELAXED);
        __atomic_store_n(&range_bytes, bytes, __ATOMIC_RELEASE);
    }
    return (scan_range_t){__atomic_load_n(&range_lo, __ATOMIC_RELAXED), bytes};
}

bool interpose_owns(const void *ptr)
{
    scan_range_t r = lms_range();
    return (uintptr_t)ptr >= r.lo && (uintptr_t)ptr - r.lo < r.bytes;
}

lms_status_t launch_access(launch_kind_t kind, const void *fn, void *stream, void **params,
                           void **extra)
{
    scan_range_t r = lms_range();
    if (r.bytes == 0)
        return LMS_OK;
    uintptr_t stack[STACK_HITS], *hits = stack;
    size_t found = 0;
    const void *buf;
    size_t size;
    if (params != NULL) {
        const layout_t *l = layout_of(kind, fn);
        if (l == NULL)
            return base_fail(LMS_ERR_OUT_OF_MEMORY, "interpose: no host memory for a layout");
        found = scan_params(params, l->p, l->n, r, hits, STACK_HITS);
        if (found > STACK_HITS && (hits = malloc(found * sizeof *hits)) != NULL)
            (void)scan_params(params, l->p, l->n, r, hits, found);
    } else if (scan_extra(extra, &buf, &size)) {
        found = scan_buffer(buf, size, r, hits, STACK_HITS);
        if (found > STACK_HITS && (hits = malloc(found * sizeof *hits)) != NULL)
            (void)scan_buffer(buf, size, r, hits, found);
    }
    if (hits == NULL)
        return base_fail(LMS_ERR_OUT_OF_MEMORY, "interpose: no host memory for %zu pointers", found);
    if (found == 0)
        return LMS_OK;
    lms_stream_t s;
    lms_status_t st = LMS_OK;
    trace_access_pointers((const void *const *)hits, found);
    if (graph_capturing(stream)) /* Note [Graph capture] in graph.c */
        st = graph_pin_pointers(stream, (const void *const *)hits, found);
    else if ((st = interpose_stream(stream, false, &s)) == LMS_OK) {
        st = lms_access_pointers((const void *const *)hits, found, LMS_WRITE, s);
        if (st == LMS_ERR_INVALID && (st = interpose_stream(stream, true, &s)) == LMS_OK) /* stale */
            st = lms_access_pointers((const void *const *)hits, found, LMS_WRITE, s);
    }
    if (hits != stack)
        free(hits);
    return st;
}
