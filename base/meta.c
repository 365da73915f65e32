/*
 * base/meta.c — host metadata: the memory lms's own tables live in.
 *
 * It comes from one arena of a private jemalloc (every symbol prefixed
 * lms_je_, linked statically and hidden; see DESIGN.md, "Dependencies"),
 * never from the host program's malloc, which lms must leave alone: a program
 * that loads liblms.so keeps glibc's malloc, and lms's tables neither show up
 * in nor fragment the program's heap. The arena is created on first use and
 * lives as long as the process (lms_shutdown frees what lms allocated; the
 * arena serves the next lms_init). The thread cache is bypassed: metadata
 * traffic is light, and a cache would hold memory in every thread that ever
 * called lms.
 *
 * Lock: meta_lock serializes only the arena's creation; meta_arena, once set,
 * never changes, and jemalloc locks the arena itself.
 */
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>

#include <lms_jemalloc.h>

#include "base/base.h"
#include "base/lockorder.h"

static pthread_mutex_t meta_lock = PTHREAD_MUTEX_INITIALIZER;
static atomic_uint meta_arena; /* the arena's index + 1; 0 until created */

/* The flags every call passes, or 0 when the arena cannot be created (no
 * memory); a later call tries again. */
static int meta_flags(void)
{
    unsigned arena = atomic_load_explicit(&meta_arena, memory_order_acquire);
    if (arena == 0) {
        lo_lock(&meta_lock, LO_META);
        arena = atomic_load_explicit(&meta_arena, memory_order_relaxed);
        if (arena == 0) {
            unsigned index;
            size_t len = sizeof index;
            if (lms_je_mallctl("arenas.create", &index, &len, NULL, 0) == 0) {
                arena = index + 1;
                atomic_store_explicit(&meta_arena, arena, memory_order_release);
            }
        }
        lo_unlock(&meta_lock, LO_META);
        if (arena == 0)
            return 0;
    }
    return MALLOCX_ARENA(arena - 1) | MALLOCX_TCACHE_NONE;
}

/* jemalloc's *allocx take no size 0; a request for 0 bytes gets 1. */
static size_t nonzero(size_t size)
{
    return size ? size : 1;
}

void *base_meta_alloc(size_t size)
{
    int flags = meta_flags();
    return flags ? lms_je_mallocx(nonzero(size), flags) : NULL;
}

void *base_meta_calloc(size_t n, size_t size)
{
    size_t bytes;
    if (__builtin_mul_overflow(n, size, &bytes))
        return NULL;
    int flags = meta_flags();
    return flags ? lms_je_mallocx(nonzero(bytes), flags | MALLOCX_ZERO) : NULL;
}

void *base_meta_calloc_aligned(size_t size, size_t align)
{
    int flags = meta_flags();
    return flags ? lms_je_mallocx(nonzero(size), flags | MALLOCX_ZERO | MALLOCX_ALIGN(align)) : NULL;
}

void *base_meta_realloc(void *p, size_t size)
{
    if (p == NULL)
        return base_meta_alloc(size);
    /* p came from the arena, so the flags were made before and cannot fail. */
    return lms_je_rallocx(p, nonzero(size), meta_flags());
}

void base_meta_free(void *p)
{
    if (p != NULL)
        lms_je_dallocx(p, meta_flags());
}
