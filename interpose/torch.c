/*
 * interpose/torch.c — see lms_torch.h.
 *
 * Note [Recorded streams]
 * PyTorch frees a tensor on the stream it was allocated on; a tensor also
 * used on another stream is marked with record_stream, and its memory must
 * not be reused before that stream's work is done either. lms keeps the
 * recorded pointers in a set; the free of one is for all streams
 * (LMS_ALL_STREAMS), after the recorded stream was adopted, so that lms
 * knows it. A set rather than a per-allocation list: record_stream is rare,
 * and freeing after every stream is at most later, never wrong.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>

#include "lms_torch.h"
#include "base/base.h"
#include "base/lockorder.h"
#include "interpose/internal.h"

/* ---- the preload, or not ----------------------------------------------------------- */

static void forbid_swapping_unless_hooked(void)
{
    if (interpose_hooks_live())
        return;
    lms_status_t st = lms_forbid_swapping();
    if (st == LMS_OK)
        interpose_start_again(); /* the configuration changed: Note [A failed start] */
    base_log(BASE_LOG_WARN,
             "loaded as a PyTorch allocator without LD_PRELOAD=liblms.so, lms cannot see what "
             "kernels touch, so it does not swap: LMS_DEVICE_LIMIT is a hard limit%s%s",
             st == LMS_OK ? "" : " -- but lms already runs with swapping: ",
             st == LMS_OK ? "" : lms_last_error());
}

/* Once, before the first allocation: without the hooks lms cannot see
 * kernels, and must not swap (lms_torch.h). */
static void check_hooks(void)
{
    static pthread_once_t once = PTHREAD_ONCE_INIT;
    pthread_once(&once, forbid_swapping_unless_hooked);
}

/* ---- recorded pointers (Note [Recorded streams]) -------------------------------- */

static pthread_mutex_t recorded_lock = PTHREAD_MUTEX_INITIALIZER;
static uintptr_t *recorded; /* open addressing; 0 empty, 1 removed */
static size_t recorded_cap, recorded_used;

static size_t slot(uintptr_t p, size_t cap) { return (size_t)((p * 0x9e3779b97f4a7c15ull) >> 20) & (cap - 1); }

/* Adds p (lock held); false when the host has no memory for it. */
static bool record(uintptr_t p)
{
    if (2 * (recorded_used + 1) > recorded_cap) {
        size_t cap = recorded_cap ? 2 * recorded_cap : 64, used = 0;
        uintptr_t *t = base_meta_calloc(cap, sizeof *t);
        if (t == NULL)
            return false;
        for (size_t i = 0; i < recorded_cap; i++)
            if (recorded[i] > 1) {
                size_t j = slot(recorded[i], cap);
                while (t[j] != 0)
                    j = (j + 1) & (cap - 1);
                t[j] = recorded[i];
                used++;
            }
        base_meta_free(recorded);
        recorded = t;
        recorded_cap = cap;
        recorded_used = used;
    }
    size_t j = slot(p, recorded_cap);
    while (recorded[j] != 0 && recorded[j] != p)
        j = (j + 1) & (recorded_cap - 1);
    if (recorded[j] == 0) {
        recorded[j] = p;
        recorded_used++;
    }
    return true;
}

/* Removes p; whether it was there (lock held). */
static bool unrecord(uintptr_t p)
{
    if (recorded_cap == 0)
        return false;
    for (size_t j = slot(p, recorded_cap); recorded[j] != 0; j = (j + 1) & (recorded_cap - 1))
        if (recorded[j] == p) {
            recorded[j] = 1; /* removed: lookups go on past it; used counts it until a rehash */
            return true;
        }
    return false;
}

/* ---- the entry points ------------------------------------------------------------ */

static bool lms_device(int device, const char *op)
{
    long mine = (long)base_options()->device;
    if (device == mine)
        return true;
    base_log(BASE_LOG_INFO, "%s on device %d: lms runs on device %ld (LMS_DEVICE)", op, device,
             mine);
    return false;
}

void *lms_torch_malloc(size_t size, int device, void *stream)
{
    check_hooks();
    void *p = NULL;
    if (!lms_device(device, "lms_torch_malloc"))
        return NULL;
    lms_status_t st = interpose_malloc_on(&p, size, stream);
    if (st != LMS_OK) {
        base_log(BASE_LOG_INFO, "lms_torch_malloc(%zu): %s", size, lms_last_error());
        return NULL;
    }
    return p;
}

void lms_torch_free(void *ptr, size_t size, int device, void *stream)
{
    (void)size, (void)device;
    if (ptr == NULL)
        return;
    lo_lock(&recorded_lock, LO_TORCH_RECORDED);
    bool all = unrecord((uintptr_t)ptr);
    lo_unlock(&recorded_lock, LO_TORCH_RECORDED);
    lms_status_t st = LMS_OK;
    if (all) { /* what interpose_free_on does first */
        graph_forget(ptr);
        trace_free(ptr);
        st = lms_free(ptr, LMS_ALL_STREAMS);
    } else {
        st = interpose_free_on(ptr, stream);
    }
    if (st != LMS_OK)
        base_log(BASE_LOG_WARN, "lms_torch_free(%p): %s", ptr, lms_last_error());
}

void lms_torch_init(int device_count)
{
    (void)device_count;
    check_hooks();
    if (interpose_start() != LMS_OK)
        base_log(BASE_LOG_WARN, "lms_torch_init: %s", lms_last_error());
}

void lms_torch_reset(void)
{
    lms_status_t st = interpose_start();
    if (st == LMS_OK)
        st = lms_empty_cache();
    if (st != LMS_OK)
        base_log(BASE_LOG_WARN, "lms_torch_reset: %s", lms_last_error());
}

void lms_torch_memory_fraction(double fraction, int device)
{
    if (!lms_device(device, "lms_torch_memory_fraction"))
        return;
    if (lms_set_device_fraction(fraction) == LMS_OK)
        interpose_start_again(); /* the configuration changed: Note [A failed start] */
    else
        base_log(BASE_LOG_WARN, "lms_torch_memory_fraction(%g): %s", fraction, lms_last_error());
}

void lms_torch_record_stream(void *ptr, void *stream)
{
    lms_stream_t s;
    lms_status_t st = interpose_stream(stream, false, &s); /* lms must know the stream */
    lo_lock(&recorded_lock, LO_TORCH_RECORDED);
    bool kept = record((uintptr_t)ptr);
    lo_unlock(&recorded_lock, LO_TORCH_RECORDED);
    if (st != LMS_OK || !kept)
        base_log(BASE_LOG_WARN, "lms_torch_record_stream(%p): %s", ptr,
                 st != LMS_OK ? lms_last_error() : "no host memory: its free may come too early");
}
