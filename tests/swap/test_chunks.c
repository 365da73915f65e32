/* tests/swap/test_chunks.c — swap/'s pure parts, with no device: the chunk
 * table's LRU list, cached set and clean set (chunks.h), the handles of
 * streams (streams.h), and victims ranked between policy events
 * (ranking.h, Note [Ranking between events]). */
#include <stdlib.h>

#include "harness.h"
#include "swap/chunks.h"
#include "swap/ranking.h"
#include "swap/streams.h"

TestSuite(chunks);

static chunks_t table(size_t n)
{
    chunks_t t;
    TEST_OK(chunks_init(&t, n));
    return t;
}

/* The LRU list from least to most recent, into out; how many. */
static size_t lru_order(const chunks_t *t, uint32_t *out, size_t max)
{
    size_t n = 0;
    uint32_t prev = NO_CHUNK;
    for (uint32_t c = t->lru_head; c != NO_CHUNK && n < max; c = t->ch[c].lru_next) {
        cr_assert_eq(t->ch[c].lru_prev, prev, "chunk %u links back to %u", c, prev);
        cr_assert(t->ch[c].on_lru);
        prev = c;
        out[n++] = c;
    }
    cr_assert_eq(t->lru_tail, prev, "the tail is the last chunk walked");
    return n;
}

Test(chunks, a_new_table_is_all_free_unbacked_and_on_no_list)
{
    chunks_t t = table(100);
    for (size_t c = 0; c < 100; c++)
        cr_assert(t.ch[c].free && t.ch[c].state == UNBACKED && !t.ch[c].on_lru &&
                  !chunks_is_cached(&t, c) && !t.ch[c].clean);
    cr_assert_eq(t.lru_head, NO_CHUNK);
    cr_assert_eq(chunks_next_clean(&t, 0), 100);
    chunks_destroy(&t);
}

Test(chunks, the_lru_list_keeps_touch_order_through_removals_and_touches_again)
{
    chunks_t t = table(10);
    for (size_t c = 0; c < 6; c++)
        chunks_lru_touch(&t, c);
    chunks_lru_remove(&t, 0);   /* the head */
    chunks_lru_remove(&t, 3);   /* the middle */
    chunks_lru_remove(&t, 5);   /* the tail */
    chunks_lru_remove(&t, 9);   /* not on it: nothing */
    chunks_lru_touch(&t, 1);    /* to the most recent end */
    chunks_lru_touch(&t, 7);
    uint32_t got[10], want[] = {2, 4, 1, 7};
    size_t n = lru_order(&t, got, 10);
    cr_assert_eq(n, 4);
    for (size_t i = 0; i < n; i++)
        cr_assert_eq(got[i], want[i], "position %zu: %u, not %u", i, got[i], want[i]);
    cr_assert(!t.ch[0].on_lru && !t.ch[3].on_lru && !t.ch[5].on_lru);
    for (size_t i = 0; i < n; i++)
        chunks_lru_remove(&t, want[i]);
    cr_assert_eq(t.lru_head, NO_CHUNK);
    cr_assert_eq(t.lru_tail, NO_CHUNK);
    chunks_destroy(&t);
}

Test(chunks, the_cached_set_removes_by_moving_its_last_entry_into_the_gap)
{
    chunks_t t = table(20);
    for (size_t c = 10; c < 15; c++)
        chunks_cached_add(&t, c); /* 10 11 12 13 14 */
    chunks_cached_remove(&t, 11); /* 10 14 12 13 */
    chunks_cached_remove(&t, 13); /* 10 14 12 */
    uint32_t want[] = {10, 14, 12};
    cr_assert_eq(t.ncached, 3);
    for (size_t i = 0; i < 3; i++) {
        cr_assert_eq(t.cached[i], want[i], "entry %zu", i);
        cr_assert_eq(t.cached_pos[want[i]], i + 1, "chunk %u knows its place", want[i]);
        cr_assert(chunks_is_cached(&t, want[i]));
    }
    cr_assert(!chunks_is_cached(&t, 11) && !chunks_is_cached(&t, 13) && !chunks_is_cached(&t, 0));
    chunks_cached_remove(&t, 12); /* the last: no move */
    chunks_cached_remove(&t, 10);
    chunks_cached_remove(&t, 14);
    cr_assert_eq(t.ncached, 0);
    chunks_destroy(&t);
}

/* Over more than one upper word (4096 chunks) and a size that is not a
 * multiple of 64, chunks_next_clean finds exactly the clean chunks, in
 * order, from any start, as chunks are made clean and dirty at random. */
Test(chunks, the_clean_set_walks_the_clean_chunks_in_order)
{
    enum { N = 3 * 4096 + 77 };
    chunks_t t = table(N);
    static bool ref[N];
    srand(25);
    for (int round = 0; round < 4; round++) {
        for (int k = 0; k < 2000; k++) {
            size_t c = (size_t)rand() % N;
            bool clean = rand() % (round + 2) == 0;
            chunks_set_clean(&t, c, clean);
            ref[c] = clean;
        }
        size_t starts[] = {0, 1, 63, 64, 4095, 4096, 8191, N - 1, N};
        for (size_t s = 0; s < sizeof starts / sizeof *starts; s++) {
            size_t want = starts[s];
            while (want < N && !ref[want])
                want++;
            cr_assert_eq(chunks_next_clean(&t, starts[s]), want, "from %zu", starts[s]);
        }
        size_t seen = 0;
        for (size_t c = chunks_next_clean(&t, 0), prev = 0; c < N;
             prev = c, c = chunks_next_clean(&t, c + 1)) {
            cr_assert(ref[c] && t.ch[c].clean, "chunk %zu is clean", c);
            for (size_t d = seen == 0 ? 0 : prev + 1; d < c; d++)
                cr_assert(!ref[d], "chunk %zu, clean, was skipped", d);
            seen++;
        }
        size_t count = 0;
        for (size_t c = 0; c < N; c++)
            count += ref[c];
        cr_assert_eq(seen, count);
    }
    for (size_t c = 0; c < N; c++)
        chunks_set_clean(&t, c, false);
    cr_assert_eq(chunks_next_clean(&t, 0), N, "none left: every upper word emptied too");
    chunks_destroy(&t);
}

/* ---- stream handles ---------------------------------------------------------- */

Test(chunks, a_stream_handle_names_its_slot_only_in_its_generation)
{
    static streams_t t; /* large: not on the stack */
    static stream_t dflt, s5, all;
    t.slot[0] = &dflt;
    t.slot[5] = &s5;
    t.slot[6] = &all;
    all.all = true;
    t.generation_of[5] = 7;
    t.generation_of[6] = 1;
    t.n = 7;
    lms_stream_t h = streams_handle(5, 7);
    cr_assert_eq(streams_slot_of(h), 5);
    cr_assert_eq(streams_slot_of(NULL), 0);
    cr_assert_eq(streams_find(&t, h), &s5);
    cr_assert_eq(streams_find(&t, NULL), &dflt, "NULL is the default stream");
    cr_assert_null(streams_find(&t, streams_handle(5, 6)), "an older generation's handle");
    cr_assert_null(streams_find(&t, streams_handle(0, 0)), "slot 0 only as NULL");
    cr_assert_null(streams_find(&t, streams_handle(4, 0)), "an empty slot");
    cr_assert_null(streams_find(&t, streams_handle(7, 0)), "past the slots in use");
    cr_assert_null(streams_find(&t, streams_handle(6, 1)), "the all-streams stream is no handle's");
    cr_assert_null(streams_find(&t, (lms_stream_t)((uintptr_t)h | 1u << 20)), "bits 16-31 set");
    cr_assert_null(streams_find(&t, (lms_stream_t)(uintptr_t)((uintptr_t)7 << 32)), "slot bits 0");
    for (size_t slot = 0; slot < MAX_STREAMS; slot += 4093)
        cr_assert_eq(streams_slot_of(streams_handle(slot, 0xfffffffeu)), (int)slot);
}

/* ---- victims between policy events --------------------------------------------- */

static bool all_evictable(const chunks_t *t, size_t c)
{
    return t->ch[c].on_lru;
}

enum { LOOP_CHUNKS = 200 };

/* A policy following a loop over chunks 0..LOOP_CHUNKS-1, each used once
 * per iteration, and every chunk on the LRU list. */
static policy_t *loop_policy(chunks_t *t)
{
    policy_config_t pc = {.nchunks = LOOP_CHUNKS};
    policy_t *p;
    TEST_OK(policy_create(&pc, &p));
    for (int it = 0; it < 3; it++) {
        for (size_t c = 0; c < LOOP_CHUNKS; c++)
            TEST_OK(policy_access(p, c, 1, POLICY_USE, 0));
        TEST_OK(policy_mark_iteration(p));
    }
    cr_assert(policy_following(p));
    *t = table(LOOP_CHUNKS);
    for (size_t c = 0; c < LOOP_CHUNKS; c++)
        chunks_lru_touch(t, c);
    return p;
}

/* A ranking repaired between events (its head re-keyed, the chunks named
 * since added) puts first the same keys, in the same order, as a ranking
 * made afresh in full. */
Test(chunks, a_repaired_ranking_heads_as_a_full_one_does)
{
    chunks_t t;
    policy_t *p = loop_policy(&t);
    ranking_t r, fresh;
    TEST_OK(ranking_init(&r, &t, p, all_evictable));
    TEST_OK(ranking_init(&fresh, &t, p, all_evictable));
    size_t n = ranking_victims(&r, 1, LOOP_CHUNKS);
    cr_assert_eq(n, LOOP_CHUNKS);
    cr_assert_eq(r.rankings_full, 1);
    for (size_t step = 0; step < 5; step++) {
        for (size_t c = step * 10; c < step * 10 + 10; c++) { /* the schedule's next events */
            TEST_OK(policy_access(p, c, 1, POLICY_USE, 0));
            ranking_touched(&r, c, 1);
            chunks_lru_touch(&t, c);
        }
        size_t head = ranking_victims(&r, 1, LOOP_CHUNKS);
        cr_assert_eq(r.rankings_full, 1, "between events, no full ranking (step %zu)", step);
        cr_assert_eq(r.rankings_head, step + 1);
        ranking_stale_full(&fresh);
        size_t full = ranking_victims(&fresh, 1, LOOP_CHUNKS);
        size_t k = head < 64 ? head : 64;
        cr_assert_geq(full, k);
        for (size_t i = 0; i < k; i++)
            cr_assert_eq(r.ranked[i].key, fresh.ranked[i].key,
                         "step %zu, victim %zu: key %llu, a full ranking's %llu", step, i,
                         (unsigned long long)r.ranked[i].key,
                         (unsigned long long)fresh.ranked[i].key);
        cr_assert_eq(r.ranked[0].chunk, fresh.ranked[0].chunk, "the same first victim");
    }
    ranking_destroy(&fresh);
    ranking_destroy(&r);
    policy_destroy(p);
    chunks_destroy(&t);
}

/* Named more than TOUCHED_MAX chunks since the full ranking, or a new
 * iteration taken (policy_basis), the next ranking is made in full. */
Test(chunks, a_ranking_is_made_again_in_full_when_a_repair_cannot_hold)
{
    chunks_t t;
    policy_t *p = loop_policy(&t);
    ranking_t r;
    TEST_OK(ranking_init(&r, &t, p, all_evictable));
    (void)ranking_victims(&r, 1, LOOP_CHUNKS);
    for (size_t c = 0; c < LOOP_CHUNKS; c++)
        TEST_OK(policy_access(p, c, 1, POLICY_USE, 0));
    ranking_touched(&r, 0, TOUCHED_MAX + 1);
    (void)ranking_victims(&r, 1, LOOP_CHUNKS);
    cr_assert_eq(r.rankings_full, 2, "too many named: in full");
    TEST_OK(policy_mark_iteration(p));
    (void)ranking_victims(&r, 1, LOOP_CHUNKS);
    cr_assert_eq(r.rankings_full, 3, "a new schedule: in full");
    cr_assert_eq(r.rankings_head, 0);
    ranking_destroy(&r);
    policy_destroy(p);
    chunks_destroy(&t);
}
