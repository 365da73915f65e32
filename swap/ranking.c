/*
 * swap/ranking.c — victims ranked by policy/'s eviction keys (ranking.h).
 *
 * Note [Ranking between events]
 * policy/'s keys change at every event, and a ranking of the resident
 * chunks costs a walk of them all, a key each for up to RANKED_MAX, and a
 * sort: about 0.4 ms with 20K chunks resident (sim, 64 KiB chunks), which
 * an access that must evict paid once per event, under the lock (an 80 GB
 * card holds 40K chunks of 2 MiB). But between two events the keys of the
 * chunks neither event named keep their order (policy_basis: the position
 * moved, all their distances shrank alike), so a full ranking stays right
 * for them; only the chunks named since (touched) are misplaced, and they
 * are few. So a full ranking is made when policy_basis changes, when more
 * than TOUCHED_MAX chunks were named since the last one, or when its head
 * ran out (evict_some); between, rank_head re-keys the first REPAIR_HEAD
 * still evictable chunks of it not named since, adds the named ones, and
 * sorts those (at most REPAIR_HEAD + TOUCHED_MAX keys; measured with
 * bench/many_chunks: docs/benchmarks.md). A closing window counts its
 * chunks as named again if a full ranking was made while they were held
 * (it left them out), and a prefetch that needs a victim deeper than the
 * head asks for a deeper one.
 * Missing from a head: chunks that came resident since the full ranking
 * without being named (fetched ahead: not the reclaim thread's victims
 * either), and chunks whose next use the position skipped over (they rank
 * as needed soon: a worse victim than MIN's, never a wrong one).
 */
#include "swap/ranking.h"

#include <stdlib.h>
#include <string.h>

#define REPAIR_HEAD 128 /* entries of the full ranking rank_head re-keys, at least */

lms_status_t ranking_init(ranking_t *r, const chunks_t *chunks, const policy_t *policy,
                          ranking_evictable_fn evictable)
{
    *r = (ranking_t){.chunks = chunks, .policy = policy, .evictable = evictable};
    r->full = base_meta_calloc(RANKED_MAX, sizeof *r->full);
    r->head = base_meta_calloc(RANKED_MAX, sizeof *r->head);
    r->touched = base_meta_calloc(TOUCHED_MAX, sizeof *r->touched);
    r->touched_sorted = base_meta_calloc(TOUCHED_MAX, sizeof *r->touched_sorted);
    r->ranked = r->full;
    if (!r->full || !r->head || !r->touched || !r->touched_sorted)
        return base_fail(LMS_ERR_OUT_OF_MEMORY, "lms_init: no host memory for the policy");
    return LMS_OK;
}

void ranking_destroy(ranking_t *r)
{
    base_meta_free(r->full);
    base_meta_free(r->head);
    base_meta_free(r->touched);
    base_meta_free(r->touched_sorted);
    *r = (ranking_t){0};
}

static int cmp_ranked(const void *a, const void *b)
{
    const ranked_t *x = a, *y = b;
    if (x->key != y->key)
        return x->key < y->key ? 1 : -1;
    return (x->order > y->order) - (x->order < y->order);
}

/* The evictable chunks, in the order policy/ would evict them, into r->full
 * (and r->ranked); how many. At most RANKED_MAX are looked at, taken evenly
 * along the whole LRU list: under the schedule the least recently used are
 * often the ones needed soonest (a loop), so the list's end alone is a
 * biased sample. */
static size_t rank_full(ranking_t *r, size_t resident)
{
    const chunks_t *t = r->chunks;
    size_t n = 0, seen = 0, stride = resident / RANKED_MAX + 1;
    for (uint32_t c = t->lru_head; c != NO_CHUNK && n < RANKED_MAX; c = t->ch[c].lru_next)
        if (r->evictable(t, c) && seen++ % stride == 0) {
            r->full[n] = (ranked_t){policy_evict_key(r->policy, c), (uint32_t)n, c};
            n++;
        }
    qsort(r->full, n, sizeof *r->full, cmp_ranked);
    r->full_n = n;
    r->full_basis = policy_basis(r->policy);
    r->rankings_full++;
    r->ntouched = 0;
    r->ranked = r->full;
    return n;
}

/* The full ranking's head, re-keyed, with the chunks named since, into
 * r->head (and r->ranked); how many (Note [Ranking between events]). At
 * least `need` of the full ranking's entries are looked at. */
static size_t rank_head(ranking_t *r, size_t need)
{
    const chunks_t *t = r->chunks;
    size_t nt = r->ntouched, n = 0, taken = 0;
    memcpy(r->touched_sorted, r->touched, nt * sizeof *r->touched);
    qsort(r->touched_sorted, nt, sizeof *r->touched_sorted, chunks_cmp_id);
    for (size_t i = 0; i < nt; i++) { /* after the others among equals, each once */
        uint32_t c = r->touched_sorted[i];
        if (r->evictable(t, c) && (i == 0 || r->touched_sorted[i - 1] != c))
            r->head[n++] = (ranked_t){policy_evict_key(r->policy, c), RANKED_MAX + (uint32_t)i, c};
    }
    need = need > REPAIR_HEAD ? need : REPAIR_HEAD;
    for (size_t i = 0; i < r->full_n && taken < need && n < RANKED_MAX; i++) {
        uint32_t c = r->full[i].chunk;
        if (!r->evictable(t, c) ||
            bsearch(&c, r->touched_sorted, nt, sizeof *r->touched_sorted, chunks_cmp_id) != NULL)
            continue;
        r->head[n++] = (ranked_t){policy_evict_key(r->policy, c), r->full[i].order, c};
        taken++;
    }
    qsort(r->head, n, sizeof *r->head, cmp_ranked);
    r->ranked = r->head;
    r->rankings_head++;
    return n;
}

size_t ranking_victims(ranking_t *r, size_t need, size_t resident)
{
    if (r->ranked_for == policy_version(r->policy) && r->ranked_n > 0)
        return r->ranked_n;
    bool full = r->full_n == 0 || r->full_basis != policy_basis(r->policy) ||
                r->ntouched > TOUCHED_MAX;
    r->ranked_n = full ? rank_full(r, resident) : rank_head(r, need);
    r->ranked_for = policy_version(r->policy);
    return r->ranked_n;
}
