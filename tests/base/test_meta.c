/* tests/base/test_meta.c — host metadata: base_meta_* from lms's private jemalloc. */
#include <malloc.h>
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <lms_jemalloc.h>

#include "harness.h"

TestSuite(meta);

static void fill(unsigned char *p, size_t n, unsigned seed)
{
    for (size_t i = 0; i < n; i++)
        p[i] = (unsigned char)(seed + i * 31);
}

static bool holds(const unsigned char *p, size_t n, unsigned seed)
{
    for (size_t i = 0; i < n; i++)
        if (p[i] != (unsigned char)(seed + i * 31))
            return false;
    return true;
}

static bool all_zero(const unsigned char *p, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (p[i] != 0)
            return false;
    return true;
}

Test(meta, calloc_memory_is_zeroed_even_where_freed_memory_was)
{
    const size_t sizes[] = {1, 24, 100, 4096, 100000, 4 << 20};
    for (size_t i = 0; i < sizeof sizes / sizeof *sizes; i++) {
        for (int round = 0; round < 4; round++) {
            unsigned char *dirty = base_meta_alloc(sizes[i]);
            cr_assert_not_null(dirty);
            memset(dirty, 0xa5, sizes[i]);
            base_meta_free(dirty);
            unsigned char *p = base_meta_calloc(sizes[i], 1);
            cr_assert_not_null(p);
            cr_assert(all_zero(p, sizes[i]), "calloc of %zu bytes is not zeroed", sizes[i]);
            base_meta_free(p);
        }
    }
    uint64_t *words = base_meta_calloc(1000, sizeof *words);
    cr_assert_not_null(words);
    cr_assert(all_zero((unsigned char *)words, 1000 * sizeof *words));
    base_meta_free(words);
}

Test(meta, realloc_keeps_the_data_when_growing_and_shrinking)
{
    unsigned char *p = base_meta_alloc(100);
    cr_assert_not_null(p);
    fill(p, 100, 7);
    const size_t sizes[] = {200, 5000, 3 << 20, 64 << 20, 1 << 20, 50};
    size_t kept = 100;
    for (size_t i = 0; i < sizeof sizes / sizeof *sizes; i++) {
        p = base_meta_realloc(p, sizes[i]);
        cr_assert_not_null(p, "realloc to %zu bytes", sizes[i]);
        if (sizes[i] < kept)
            kept = sizes[i];
        cr_assert(holds(p, kept, 7), "realloc to %zu bytes lost the data", sizes[i]);
    }
    base_meta_free(p);
}

Test(meta, realloc_of_null_allocates_and_free_of_null_does_nothing)
{
    unsigned char *p = base_meta_realloc(NULL, 64);
    cr_assert_not_null(p);
    fill(p, 64, 1);
    base_meta_free(p);
    base_meta_free(NULL);
}

Test(meta, zero_bytes_give_distinct_pointers_to_free)
{
    void *a = base_meta_alloc(0), *b = base_meta_alloc(0), *c = base_meta_calloc(0, 8);
    cr_assert(a && b && c);
    cr_assert(a != b && b != c && a != c);
    void *d = base_meta_realloc(a, 0);
    cr_assert_not_null(d);
    base_meta_free(b);
    base_meta_free(c);
    base_meta_free(d);
}

Test(meta, calloc_whose_size_overflows_returns_null)
{
    cr_assert_null(base_meta_calloc(SIZE_MAX / 2 + 1, 2));
    cr_assert_null(base_meta_calloc(2, SIZE_MAX / 2 + 1));
    cr_assert_null(base_meta_calloc(SIZE_MAX, SIZE_MAX));
    cr_assert_null(base_meta_calloc((size_t)1 << 33, (size_t)1 << 33));
}

Test(meta, impossible_sizes_return_null_and_realloc_keeps_the_block)
{
    cr_assert_null(base_meta_alloc(SIZE_MAX));
    cr_assert_null(base_meta_alloc(SIZE_MAX / 2));
    unsigned char *p = base_meta_alloc(32);
    cr_assert_not_null(p);
    fill(p, 32, 3);
    cr_assert_null(base_meta_realloc(p, SIZE_MAX - 4096));
    cr_assert(holds(p, 32, 3), "a failed realloc changed the block");
    base_meta_free(p);
}

/* ---- threads ------------------------------------------------------------- */

#define THREADS 8
#define OPS 20000
#define WINDOW 64

typedef struct worker {
    unsigned id;
    unsigned char *handoff[WINDOW]; /* left for the main thread to check and free */
    size_t handoff_size[WINDOW];
    unsigned failures;
} worker_t;

static size_t pick_size(unsigned *state)
{
    *state = *state * 1103515245u + 12345u;
    unsigned r = *state >> 8;
    return (r & 7) == 0 ? 4096 + r % (256 << 10) : 1 + r % 512; /* mostly small */
}

static void *worker_run(void *arg)
{
    worker_t *w = arg;
    unsigned char *live[WINDOW] = {0};
    size_t size[WINDOW] = {0};
    unsigned state = w->id * 7919u + 1;
    for (unsigned op = 0; op < OPS; op++) {
        unsigned slot = op % WINDOW;
        if (live[slot] != NULL) {
            if (!holds(live[slot], size[slot], w->id + slot))
                w->failures++;
            if (op % 3 == 0) {
                size_t grown = size[slot] * 2;
                unsigned char *q = base_meta_realloc(live[slot], grown);
                if (q == NULL || !holds(q, size[slot], w->id + slot)) {
                    w->failures++;
                    base_meta_free(q ? q : live[slot]);
                    live[slot] = NULL;
                    continue;
                }
                base_meta_free(q);
            } else {
                base_meta_free(live[slot]);
            }
        }
        size[slot] = pick_size(&state);
        live[slot] = op % 5 == 0 ? base_meta_calloc(size[slot], 1) : base_meta_alloc(size[slot]);
        if (live[slot] == NULL) {
            w->failures++;
            continue;
        }
        if (op % 5 == 0 && !all_zero(live[slot], size[slot]))
            w->failures++;
        fill(live[slot], size[slot], w->id + slot);
    }
    for (unsigned slot = 0; slot < WINDOW; slot++) {
        w->handoff[slot] = live[slot];
        w->handoff_size[slot] = size[slot];
    }
    return NULL;
}

Test(meta, many_threads_allocate_and_free_at_once_and_free_each_others_memory)
{
    static worker_t workers[THREADS];
    pthread_t threads[THREADS];
    for (unsigned i = 0; i < THREADS; i++) {
        workers[i] = (worker_t){.id = i * 64};
        cr_assert_eq(pthread_create(&threads[i], NULL, worker_run, &workers[i]), 0);
    }
    for (unsigned i = 0; i < THREADS; i++)
        cr_assert_eq(pthread_join(threads[i], NULL), 0);
    for (unsigned i = 0; i < THREADS; i++) {
        cr_assert_eq(workers[i].failures, 0, "thread %u: %u lost or failed blocks", i,
                     workers[i].failures);
        for (unsigned slot = 0; slot < WINDOW; slot++) {
            unsigned char *p = workers[i].handoff[slot];
            if (p == NULL)
                continue;
            cr_assert(holds(p, workers[i].handoff_size[slot], workers[i].id + slot));
            base_meta_free(p); /* freed by a thread that did not allocate it */
        }
    }
}

/* ---- not glibc's heap ----------------------------------------------------- */

/* Bytes glibc's malloc holds for the program: its heap plus its mmapped blocks. */
static size_t glibc_in_use(void)
{
    struct mallinfo2 mi = mallinfo2();
    return mi.uordblks + mi.hblkhd;
}

static unsigned arena_of(void *p)
{
    unsigned arena = UINT32_MAX;
    size_t len = sizeof arena;
    cr_assert_eq(lms_je_mallctl("arenas.lookup", &arena, &len, &p, sizeof p), 0);
    return arena;
}

Test(meta, memory_comes_from_one_private_arena_and_not_from_glibc)
{
    const size_t big = 64 << 20;
    void *small = base_meta_alloc(64);
    cr_assert_not_null(small);
    size_t before = glibc_in_use();
    unsigned char *p = base_meta_alloc(big);
    cr_assert_not_null(p);
    memset(p, 1, big);
    void *q = base_meta_calloc(1000, 1000);
    cr_assert_not_null(q);
    size_t after = glibc_in_use();
    cr_assert_lt(after, before + (1 << 20),
                 "glibc's heap grew by %zu bytes for a %zu-byte base_meta_alloc", after - before,
                 big);

    /* jemalloc knows the pointers (glibc's malloc_usable_size must not be asked:
     * they are not its), and they share one arena that is not jemalloc's
     * default arena 0. */
    cr_assert_geq(lms_je_sallocx(p, 0), big);
    unsigned arena = arena_of(p);
    cr_assert_neq(arena, 0);
    cr_assert_eq(arena_of(small), arena);
    cr_assert_eq(arena_of(q), arena);

#ifndef __SANITIZE_ADDRESS__ /* ASan's malloc is not glibc's: no mallinfo2 to see */
    /* The same measure sees a malloc of the program. */
    before = glibc_in_use();
    unsigned char *g = malloc(big);
    cr_assert_not_null(g);
    memset(g, 1, big);
    cr_assert_geq(glibc_in_use(), before + big, "mallinfo2 does not see a glibc malloc");
    free(g);
#endif
    base_meta_free(q);
    base_meta_free(p);
    base_meta_free(small);
}
