/*
 * tests/alloc/test_alloc.c — placement on its own (alloc/ is pure
 * bookkeeping): size classes, alignment, best fit, coalescing, lookups, bad
 * frees, determinism.
 */
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "alloc/alloc.h"
#include "harness.h"

#define CHUNK (2 * BASE_MiB)

static alloc_t *a;

static void make(void)
{
    alloc_config_t cfg = {.chunk_size = CHUNK, .nchunks = 64};
    TEST_OK(alloc_create(&cfg, &a));
}

static void destroy(void) { alloc_destroy(a); }

TestSuite(alloc, .init = make, .fini = destroy);

static size_t place(size_t size)
{
    size_t off;
    alloc_chunks_t used;
    TEST_OK(alloc_place(a, size, &off, &used));
    return off;
}

static void free_now(size_t off)
{
    size_t size;
    alloc_chunks_t freed;
    TEST_OK(alloc_mark_freed(a, off, &size));
    alloc_release(a, off, &freed);
}

Test(alloc, size_classes_waste_at_most_an_eighth_above_2_KiB)
{
    size_t prev = 0;
    for (size_t size = 1; size < 8 * CHUNK; size += 1 + size / 97) {
        size_t usable = alloc_usable_size(a, size);
        cr_assert(usable >= size && usable % 256 == 0, "size %zu -> %zu", size, usable);
        if (size > 2048)
            cr_assert((double)(usable - size) / (double)size <= 0.125, "size %zu -> %zu", size,
                      usable);
        int cls = alloc_class_of(a, size);
        cr_assert(cls < ALLOC_MAX_CLASSES);
        if (size < CHUNK / 2)
            cr_assert(cls >= 0, "size %zu is small", size);
        if (cls < 0) /* a class served by runs: a run wastes no more than its slab would */
            cr_assert((double)((size + CHUNK - 1) / CHUNK * CHUNK - size) / (double)size <= 0.25,
                      "size %zu takes a run", size);
        cr_assert(usable >= prev, "classes grow with size");
        cr_assert_eq(alloc_usable_size(a, usable), usable, "a class's own size stays in it");
        prev = usable;
    }
    cr_assert_eq(alloc_class_of(a, CHUNK), -1, "a chunk is a run's");
    cr_assert_eq(alloc_class_of(a, 3 * CHUNK), -1);
    cr_assert_eq(alloc_class_of(a, 8 * CHUNK), -1, "8 chunks or more are large");
    cr_assert_geq(alloc_class_of(a, CHUNK / 2), 0, "half a chunk is small");
    cr_assert_geq(alloc_class_of(a, CHUNK + CHUNK / 8), 0, "so is 1.125 chunks");
}

Test(alloc, a_large_threshold_of_half_a_chunk_gives_whole_chunks_from_there)
{
    alloc_config_t cfg = {.chunk_size = CHUNK, .nchunks = 16, .large_threshold = CHUNK / 2};
    alloc_t *b;
    TEST_OK(alloc_create(&cfg, &b));
    cr_assert_eq(alloc_class_of(b, CHUNK / 2), -1, "half a chunk is large");
    cr_assert_geq(alloc_class_of(b, CHUNK / 2 - 1), 0);
    size_t off;
    alloc_chunks_t used;
    TEST_OK(alloc_place(b, CHUNK + CHUNK / 8, &off, &used));
    cr_assert(off % CHUNK == 0 && used.n == 2, "1.125 chunks: a run of 2");
    alloc_destroy(b);
    for (size_t bad = 0; bad < 2; bad++) {
        cfg.large_threshold = bad ? 4095 : 16 * CHUNK + 1;
        TEST_FAILS(LMS_ERR_INVALID, alloc_create(&cfg, &b));
    }
}

Test(alloc, slots_over_half_a_chunk_fill_slabs_of_several_chunks)
{
    /* 1.125 MiB (GPT-2 small's 768 x 768 fp16 weights): 5 slots to a slab of
     * 3 chunks (a tail of 6.25%), where alone each would take a chunk. A
     * chunk comes into use with the first slot that has bytes in it. */
    size_t size = 9 * CHUNK / 16, off[11], base, got;
    const size_t comes_in[5] = {1, 1, 0, 1, 0}; /* slot 1 spans chunks 0-1, slot 3 1-2 */
    alloc_chunks_t used;
    size_t slab = 0;
    for (int i = 0; i < 11; i++) {
        TEST_OK(alloc_place(a, size, &off[i], &used));
        cr_assert_eq(off[i] % 256, 0);
        if (i % 5 == 0)
            slab = off[i];
        cr_assert_eq(off[i], slab + (size_t)(i % 5) * size, "slots are packed");
        cr_assert_eq(used.n, comes_in[i % 5], "allocation %d", i);
        if (used.n)
            cr_assert_eq(used.first * CHUNK, (off[i] + size - 1) / CHUNK * CHUNK);
    }
    alloc_usage_t u;
    alloc_usage(a, &u);
    cr_assert_eq(u.used_chunks, 7, "11 x 1.125 MiB in 7 chunks, not 11");
    for (int i = 0; i < 11; i++) /* every byte of a straddling slot finds it */
        for (size_t o = off[i]; o < off[i] + size; o += 4093) {
            TEST_OK(alloc_find(a, o, &base, &got));
            cr_assert(base == off[i] && got == size, "offset 0x%zx", o);
            cr_assert(alloc_find_small(a, o, &base, &got) && base == off[i] && got == size);
        }
    int cls;
    cr_assert_not_null(alloc_live_small(a, off[1], ALLOC_MAX_CLASSES, &cls));
    cr_assert_lt(off[1] / CHUNK, (off[1] + size - 1) / CHUNK, "slot 1 straddles two chunks");
    cr_assert_null(alloc_live_small(a, off[1] + CHUNK / 2, ALLOC_MAX_CLASSES, &cls));
    TEST_FAILS(LMS_ERR_INVALID, alloc_mark_freed(a, off[1] + CHUNK / 2, &got));
    cr_assert(strstr(lms_last_error(), "inside"));
    /* a chunk goes out of use with the last slot that has bytes in it */
    alloc_chunks_t freed;
    size_t s1;
    TEST_OK(alloc_mark_freed(a, off[6], &s1));
    alloc_release(a, off[6], &freed);
    cr_assert_eq(freed.n, 0, "slot 1's chunks still hold slots 0 and 2");
    TEST_OK(alloc_mark_freed(a, off[5], &s1));
    alloc_release(a, off[5], &freed);
    cr_assert(freed.n == 1 && freed.first * CHUNK == off[5], "slot 0 was the last in chunk 0");
    for (int i = 7; i < 10; i++) /* the second slab empties: its chunks go out of use */
        free_now(off[i]);
    alloc_usage(a, &u);
    cr_assert_eq(u.used_chunks, 4);
    for (int i = 0; i < 5; i++)
        free_now(off[i]);
    free_now(off[10]); /* the last of its class: kept, in use by nothing */
    alloc_usage(a, &u);
    cr_assert_eq(u.used_chunks, 0);
    cr_assert_eq(u.free_runs, 2, "the kept slab keeps its addresses");
    cr_assert_eq(place(size), off[10], "and is used again");
    free_now(off[10]);
    cr_assert(alloc_trim_one(a));
    cr_assert_not(alloc_trim_one(a));
    alloc_usage(a, &u);
    cr_assert_eq(u.free_runs, 1);
    cr_assert_eq(u.largest_free_run, 64);
}

Test(alloc, a_slot_never_brings_more_chunks_into_use_than_a_run_would)
{
    /* callers check the limit on what a request brings into use */
    size_t live[48] = {0};
    srand(11);
    for (int i = 0; i < 20000; i++) {
        int k = rand() % 48;
        alloc_chunks_t c;
        if (live[k]) {
            free_now(live[k] - 1);
            live[k] = 0;
            continue;
        }
        size_t size = CHUNK / 4 + (size_t)rand() % (4 * CHUNK), off;
        if (alloc_place(a, size, &off, &c) != LMS_OK)
            continue;
        cr_assert_leq(c.n, (size + CHUNK - 1) / CHUNK, "%zu bytes brought %zu chunks", size, c.n);
        if (c.n)
            cr_assert(c.first * CHUNK < off + size && (c.first + c.n) * CHUNK > off);
        live[k] = off + 1;
    }
}

Test(alloc, a_request_whose_slab_finds_no_room_in_the_range_takes_a_run)
{
    size_t filler = place(63 * CHUNK), off;
    (void)filler;
    alloc_chunks_t used;
    TEST_OK(alloc_place(a, 9 * CHUNK / 16, &off, &used)); /* its slab would take 3 */
    cr_assert(off == 63 * CHUNK && used.first == 63 && used.n == 1, "a run of its own chunk");
    size_t base, size;
    TEST_OK(alloc_find(a, off + 100, &base, &size));
    cr_assert(base == off && size == 9 * CHUNK / 16);
    cr_assert_eq(alloc_class_at(a, off), -1, "freed as the run it is");
    TEST_FAILS(LMS_ERR_OUT_OF_MEMORY, alloc_place(a, 9 * CHUNK / 16, &off, &used));
}

Test(alloc, freeing_everything_leaves_one_free_run)
{
    size_t offs[300];
    srand(3);
    int n = 0;
    for (; n < 300; n++) {
        size_t off;
        alloc_chunks_t used;
        if (alloc_place(a, 1 + (size_t)rand() % (n % 7 ? 9000 : 2 * CHUNK), &off, &used))
            break;
        offs[n] = off;
    }
    for (int i = n - 1; i >= 0; i -= 2)
        free_now(offs[i]);
    for (int i = n - 2; i >= 0; i -= 2)
        free_now(offs[i]);
    alloc_usage_t u;
    alloc_usage(a, &u);
    cr_assert_eq(u.used_chunks, 0, "kept empty slabs hold no chunk in use");
    int kept = 0;
    while (alloc_trim_one(a))
        kept++;
    cr_assert(kept > 0 && kept <= ALLOC_MAX_CLASSES, "at most one empty slab kept per class");
    alloc_usage(a, &u);
    cr_assert_eq(u.live_count, 0);
    cr_assert_eq(u.live_bytes, 0);
    cr_assert_eq(u.used_chunks, 0);
    cr_assert_eq(u.free_runs, 1);
    cr_assert_eq(u.largest_free_run, 64);
}

Test(alloc, lookups_find_the_allocation_from_any_address_inside)
{
    size_t big = place(CHUNK + 1000), small = place(700), size, base;
    TEST_OK(alloc_find(a, big + CHUNK + 999, &base, &size));
    cr_assert_eq(base, big);
    cr_assert_eq(size, alloc_usable_size(a, CHUNK + 1000));
    TEST_FAILS(LMS_ERR_INVALID, alloc_find(a, big + size, &base, &size));
    TEST_OK(alloc_find(a, small + 5, &base, &size));
    cr_assert_eq(base, small);
    cr_assert_eq(size, 768);
    TEST_FAILS(LMS_ERR_INVALID, alloc_find(a, small + 768, &base, &size)); /* the next slot */
    TEST_FAILS(LMS_ERR_INVALID, alloc_find(a, 63 * CHUNK, &base, &size));
    TEST_FAILS(LMS_ERR_INVALID, alloc_find(a, 64 * CHUNK, &base, &size));
}

Test(alloc, bad_frees_are_rejected_and_change_nothing)
{
    size_t big = place(3 * CHUNK), small = place(100), size;
    alloc_usage_t before, after;
    alloc_usage(a, &before);
    TEST_FAILS(LMS_ERR_INVALID, alloc_mark_freed(a, big + CHUNK, &size));
    cr_assert(strstr(lms_last_error(), "inside"));
    TEST_FAILS(LMS_ERR_INVALID, alloc_mark_freed(a, small + 256, &size));
    TEST_FAILS(LMS_ERR_INVALID, alloc_mark_freed(a, small + 1, &size));
    TEST_FAILS(LMS_ERR_INVALID, alloc_mark_freed(a, 40 * CHUNK, &size));
    TEST_FAILS(LMS_ERR_INVALID, alloc_mark_freed(a, 999 * CHUNK, &size));
    alloc_usage(a, &after);
    cr_assert(memcmp(&before, &after, sizeof before) == 0);
    TEST_OK(alloc_mark_freed(a, small, &size));
    TEST_FAILS(LMS_ERR_INVALID, alloc_mark_freed(a, small, &size));
    TEST_FAILS(LMS_ERR_INVALID, alloc_find(a, small, &size, &size));
    alloc_revive(a, small, 100);
    TEST_OK(alloc_find(a, small, &size, &size));
}

Test(alloc, freed_space_is_not_reused_until_released)
{
    size_t p = place(300), q = place(5 * CHUNK), size;
    TEST_OK(alloc_mark_freed(a, p, &size));
    TEST_OK(alloc_mark_freed(a, q, &size));
    for (int i = 0; i < 200; i++) {
        size_t r = place(i % 2 ? 300 : 5 * CHUNK);
        cr_assert(r != p && r != q, "freed but unreleased space was handed out");
        if (i % 2 == 0)
            free_now(r); /* keep the range from filling up */
    }
    alloc_chunks_t freed;
    alloc_release(a, q, &freed);
    cr_assert_eq(freed.first * CHUNK, q);
    cr_assert_eq(freed.n, 5);
}

Test(alloc, too_large_requests_fail_cleanly)
{
    size_t off;
    alloc_chunks_t used;
    TEST_FAILS(LMS_ERR_OUT_OF_MEMORY, alloc_place(a, 65 * CHUNK, &off, &used));
    TEST_FAILS(LMS_ERR_OUT_OF_MEMORY, alloc_place(a, SIZE_MAX, &off, &used));
    TEST_FAILS(LMS_ERR_OUT_OF_MEMORY, alloc_place(a, SIZE_MAX - CHUNK + 2, &off, &used));
    place(64 * CHUNK);
    TEST_FAILS(LMS_ERR_OUT_OF_MEMORY, alloc_place(a, 1, &off, &used));
    alloc_config_t bad = {.chunk_size = 3000, .nchunks = 4};
    alloc_t *b;
    TEST_FAILS(LMS_ERR_INVALID, alloc_create(&bad, &b));
}

/* A fixed pseudo-random sequence of places and frees; writes every offset. */
static void run_sequence(alloc_t *x, size_t *out, int n)
{
    uint64_t seed = 12345;
    size_t live[64] = {0};
    for (int i = 0; i < n; i++) {
        seed = seed * 6364136223846793005ull + 1442695040888963407ull;
        int slot = (int)(seed >> 58);
        size_t size = 1 + (seed >> 20) % ((seed >> 40) % 4 ? 20000 : 3 * CHUNK);
        alloc_chunks_t c;
        if (live[slot] != 0) {
            size_t s;
            alloc_mark_freed(x, live[slot] - 1, &s);
            alloc_release(x, live[slot] - 1, &c);
            live[slot] = 0;
        }
        size_t off = 0;
        if (alloc_place(x, size, &off, &c) == LMS_OK)
            live[slot] = off + 1;
        out[i] = off;
    }
}

Test(alloc, placement_is_deterministic_across_instances_and_processes)
{
    enum { N = 5000 };
    static size_t first[N], second[N], child[N];
    alloc_config_t cfg = {.chunk_size = CHUNK, .nchunks = 512};
    alloc_t *x, *y;
    TEST_OK(alloc_create(&cfg, &x));
    run_sequence(x, first, N);
    alloc_destroy(x);
    for (int i = 0; i < 100; i++) /* disturb the host heap between runs */
        free(malloc((size_t)i * 1000));
    TEST_OK(alloc_create(&cfg, &y));
    run_sequence(y, second, N);
    alloc_destroy(y);
    cr_assert(memcmp(first, second, sizeof first) == 0);

    int fds[2];
    cr_assert_eq(pipe(fds), 0);
    pid_t pid = fork();
    if (pid == 0) {
        alloc_t *z;
        if (alloc_create(&cfg, &z) != LMS_OK)
            _exit(1);
        run_sequence(z, child, N);
        ssize_t w = write(fds[1], child, sizeof child);
        _exit(w == (ssize_t)sizeof child ? 0 : 1);
    }
    close(fds[1]);
    size_t got = 0;
    for (ssize_t r; got < sizeof child && (r = read(fds[0], (char *)child + got, sizeof child - got)) > 0;)
        got += (size_t)r;
    int status;
    waitpid(pid, &status, 0);
    cr_assert(WIFEXITED(status) && WEXITSTATUS(status) == 0);
    cr_assert_eq(got, sizeof child);
    cr_assert(memcmp(first, child, sizeof first) == 0, "another process placed the same");
}

Test(alloc, a_revived_large_allocation_takes_its_new_size)
{
    size_t p = place(8 * CHUNK + 256), size, base;
    TEST_OK(alloc_mark_freed(a, p, &size));
    alloc_revive(a, p, 9 * CHUNK); /* same chunk count, larger request */
    TEST_OK(alloc_find(a, p + 9 * CHUNK - 1, &base, &size));
    cr_assert_eq(base, p);
    cr_assert_eq(size, 9 * CHUNK);
    alloc_usage_t u;
    alloc_usage(a, &u);
    cr_assert_eq(u.live_bytes, 9 * CHUNK);
}

Test(alloc, an_emptied_slab_is_kept_only_while_it_is_its_classes_only_one)
{
    /* two full slabs of one class; empty the first, then free a slot of the
     * second: the empty one must not be stranded off the partial list */
    size_t per = CHUNK / 4096, n = 2 * per;
    size_t *offs = calloc(n, sizeof *offs);
    for (size_t i = 0; i < n; i++)
        offs[i] = place(4096);
    for (size_t i = 0; i < per; i++)
        free_now(offs[i]);
    free_now(offs[per]);
    alloc_usage_t u;
    alloc_usage(a, &u);
    cr_assert_eq(u.used_chunks, 1, "the emptied slab gave its chunk back at once");
    cr_assert_eq(u.free_runs, 2, "and its addresses");
    for (size_t i = per + 1; i < n; i++)
        free_now(offs[i]);
    alloc_usage(a, &u);
    cr_assert_eq(u.used_chunks, 0, "the last slab of the class is kept, its chunk out of use");
    cr_assert_eq(u.free_runs, 2);
    cr_assert_eq(place(4096), offs[per], "a kept slab is used again");
    free_now(offs[per]);
    cr_assert(alloc_trim_one(a));
    cr_assert_not(alloc_trim_one(a));
    alloc_usage(a, &u);
    cr_assert_eq(u.free_runs, 1, "trimmed: its addresses are back");
    free(offs);
}

Test(alloc, unplace_leaves_nothing_behind)
{
    alloc_usage_t before, after;
    alloc_usage(a, &before);
    size_t p = place(3000), q = place(3 * CHUNK);
    alloc_chunks_t freed;
    alloc_unplace(a, q, &freed);
    cr_assert_eq(freed.n, 3);
    alloc_unplace(a, p, &freed);
    cr_assert_eq(freed.n, 1, "an undone slot takes its new slab with it");
    alloc_usage(a, &after);
    after.peak_used_chunks = before.peak_used_chunks; /* a high-water mark stays */
    cr_assert(memcmp(&before, &after, sizeof before) == 0);
}

Test(alloc, a_cached_slot_is_no_allocation_but_stays_taken)
{
    size_t s = place(1000), big = place(3 * CHUNK), size;
    int cls = -1, other;
    alloc_flag_t *f = alloc_live_small(a, s, ALLOC_MAX_CLASSES, &cls);
    cr_assert_not_null(f);
    cr_assert_eq(cls, alloc_class_of(a, 1000));
    /* only the base of a live small allocation of a class below the bound */
    cr_assert_null(alloc_live_small(a, s, cls, &other));
    cr_assert_null(alloc_live_small(a, s + 256, ALLOC_MAX_CLASSES, &other));
    cr_assert_null(alloc_live_small(a, s + 1, ALLOC_MAX_CLASSES, &other));
    cr_assert_null(alloc_live_small(a, big, ALLOC_MAX_CLASSES, &other));
    cr_assert_null(alloc_live_small(a, 40 * CHUNK, ALLOC_MAX_CLASSES, &other));
    cr_assert_null(alloc_live_small(a, 999 * CHUNK, ALLOC_MAX_CLASSES, &other));

    alloc_usage_t before, after;
    alloc_usage(a, &before);
    cr_assert(alloc_cache(f));
    cr_assert(!alloc_cache(f), "a second free of a cached slot must fail");
    TEST_FAILS(LMS_ERR_INVALID, alloc_find(a, s, &size, &size));
    TEST_FAILS(LMS_ERR_INVALID, alloc_mark_freed(a, s, &size));
    cr_assert_null(alloc_live_small(a, s, ALLOC_MAX_CLASSES, &other), "cached twice");
    alloc_usage(a, &after);
    cr_assert(memcmp(&before, &after, sizeof before) == 0, "a cached slot still counts");
    for (int i = 0; i < 50; i++)
        cr_assert_neq(place(1000), s, "a cached slot was handed out");

    alloc_uncache(f);
    size_t base;
    TEST_OK(alloc_find(a, s + 10, &base, &size));
    cr_assert_eq(base, s);
    cr_assert_eq(alloc_live_small(a, s, ALLOC_MAX_CLASSES, &other), f);

    cr_assert(alloc_cache(f));
    cr_assert_eq(alloc_cached_freed(a, s), alloc_class_size(a, cls));
    alloc_usage(a, &after);
    cr_assert_eq(after.live_count, before.live_count + 50 - 1);
    alloc_chunks_t freed;
    alloc_release(a, s, &freed);
    cr_assert_eq(place(1000), s, "the lowest free slot is taken first");
}

Test(alloc, every_slot_of_a_slab_has_a_flag_of_its_own)
{
    size_t chunks[] = {4096, 16384, 64 * 1024, CHUNK};
    for (size_t k = 0; k < sizeof chunks / sizeof *chunks; k++) {
        alloc_t *b;
        alloc_config_t cfg = {.chunk_size = chunks[k], .nchunks = 4};
        TEST_OK(alloc_create(&cfg, &b));
        size_t n = chunks[k] / 256, off, size;
        alloc_flag_t **f = calloc(n, sizeof *f);
        alloc_chunks_t used;
        for (size_t i = 0; i < n; i++) {
            TEST_OK(alloc_place(b, 256, &off, &used));
            cr_assert_eq(off, i * 256, "one slab, slots in order");
            int cls;
            f[i] = alloc_live_small(b, off, ALLOC_MAX_CLASSES, &cls);
            cr_assert_not_null(f[i]);
            for (size_t j = 0; j < i; j++)
                cr_assert_neq(f[i], f[j], "chunk %zu: slots %zu and %zu share a flag", chunks[k], i, j);
        }
        for (size_t i = 0; i < n; i += 7) { /* caching one slot changes only it */
            cr_assert(alloc_cache(f[i]));
            for (size_t j = 0; j < n; j++)
                cr_assert_eq(alloc_find(b, j * 256, &off, &size) == LMS_OK, j != i);
            alloc_uncache(f[i]);
        }
        free(f);
        alloc_destroy(b);
    }
}

Test(alloc, the_lock_free_lookup_agrees_with_alloc_find)
{
    size_t sizes[] = {100, 3000, 40000, 300000, CHUNK + 1000, 3 * CHUNK / 2, 3 * CHUNK};
    size_t off[64];
    int n = 0;
    for (int r = 0; r < 9; r++)
        for (size_t i = 0; i < sizeof sizes / sizeof *sizes; i++)
            off[n++] = place(sizes[i]);
    for (int i = 0; i < n; i += 3) /* some freed, some cached */
        if (alloc_class_at(a, off[i]) < 0 || i % 2)
            free_now(off[i]);
        else
            cr_assert(alloc_cache(alloc_live_small(a, off[i], ALLOC_MAX_CLASSES, &(int){0})));
    alloc_usage_t u;
    alloc_usage(a, &u);
    for (size_t o = 0; o < u.peak_used_chunks * CHUNK; o += 40) {
        size_t b1 = 0, s1 = 0, b2 = 0, s2 = 0;
        bool slow = alloc_find(a, o, &b1, &s1) == LMS_OK;
        bool fast = alloc_find_small(a, o, &b2, &s2);
        if (fast)
            cr_assert(slow && b1 == b2 && s1 == s2, "offset 0x%zx: fast 0x%zx+%zu, slow 0x%zx+%zu",
                      o, b2, s2, b1, s1);
        else if (slow)
            cr_assert_eq(alloc_class_at(a, b1), -1, "offset 0x%zx: a small one the fast "
                                                    "lookup missed", o);
    }
}
