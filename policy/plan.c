/*
 * policy/plan.c — the plan: where each fetch ahead goes (a free block, or
 * the block of a victim evicted for it), which victims go now, and the
 * reclaim thread's watermarks. Pure, as policy.c: the caller describes its
 * blocks and its ranked victims, and carries the plan out. swap/ (prefetch.c,
 * reclaim.c) and the trace simulator (bench/simulate_model.c) both execute
 * this code, so that what the simulator measures is what lms decides
 * (Note [One plan]).
 *
 * Note [One plan]
 * The placement rule of Note [Prefetch without harm] and the watermarks
 * were written twice, in swap/ and in the simulator, and drifted: swap/
 * kept a block for the reclaim thread, the simulator did not, so the
 * numbers behind a Note were the copy's. Now the rule is here, once, and
 * each caller supplies only what it alone knows: what a chunk is
 * (policy_need_t), its blocks (free, or on their way out), and its victims
 * ranked by policy_evict_key (swap/ samples and repairs a ranking, the
 * simulator ranks every candidate: Note [Ranking between events] in
 * swap/ranking.c). tests/policy/test_plan.c checks the rule.
 *
 * The description is shared too. What a chunk needs is decided here
 * (policy_need_of) from facts each caller states of its chunks
 * (policy_chunk_facts_t), and swap/ states them with swap_chunk_facts
 * (swap/need.h), which the simulator calls as well: its chunks go through
 * swap/'s states, its kernels' pins are swap/'s access windows, and it
 * reports a kernel's accesses once their chunks are in, as swap/ reports
 * an access. The room is counted here (policy_room_of). Each caller still
 * ranks its own way and carries the plan out its own way, so with --check
 * the simulator makes each plan again with swap/'s code (its chunk table,
 * its evictable rule, its ranking) over the same state and stops at the
 * first difference (bench/simulate_conform.c). Making it found two drifts:
 * the simulator queued a fetch placed on a victim behind that eviction,
 * where swap/ leaves it to a later plan; and it reported a kernel before
 * its chunks were in, counting their blocks out of the room instead.
 */
#include "policy/policy.h"

policy_room_t policy_room_of(size_t free_blocks, size_t leaving, size_t promised)
{
    size_t spare = free_blocks + leaving;
    return (policy_room_t){.spare = spare > promised ? spare - promised : 0,
                           .reserve = POLICY_RESERVE};
}

policy_need_t policy_need_of(policy_chunk_facts_t f)
{
    if (f.block || f.promised)
        return POLICY_HAS;
    if (f.leaving || f.held)
        return POLICY_CLAIMED;
    return f.data ? POLICY_ON_HOST : POLICY_NO_DATA;
}

void policy_watermarks(const policy_t *p, int64_t blocks_ahead, size_t low, size_t high,
                       size_t *lo, size_t *hi)
{
    if (p != NULL && policy_following(p)) {
        /* what new data ahead needs; keeping more free only shrinks the
         * device (Note [Prefetch] in swap/prefetch.c) */
        *lo = *hi = blocks_ahead > 0 ? (size_t)blocks_ahead : 1;
        return;
    }
    *lo = low;
    *hi = high;
}

/* Note [Prefetch without harm]: fetch i takes a free block if its
 * blocks_before is below the room (the spare blocks less the reclaim
 * thread's reserve: a fetch into that one would only make it evict the
 * chunk ranked first, needed soon or not, so it counts as that chunk's
 * place), else the block of ranked victim blocks_before - room, if the
 * victim's key is above evict_after; the first that cannot be placed ends
 * the plan. */
void policy_plan_place(policy_fetch_t *fetch, size_t n, const policy_room_t *room,
                       const policy_victims_t *v, policy_plan_t *plan)
{
    size_t free_room = room->spare > room->reserve ? room->spare - room->reserve : 0;
    size_t ranked = 0;
    plan->placed = plan->evict = 0;
    bool asked = false;
    for (; plan->placed < n; plan->placed++) {
        policy_fetch_t *f = &fetch[plan->placed];
        int64_t slot = f->blocks_before;
        if (free_room > 0 && slot < (int64_t)free_room) {
            f->victim = -1;
            continue;
        }
        size_t r = slot > (int64_t)free_room ? (size_t)slot - free_room : 0;
        if (!asked || r >= ranked) { /* deeper: (doubling, so few asks a plan) */
            ranked = v->rank(v->arg, asked ? 2 * (r + 1) : n);
            asked = true;
        }
        if (r >= ranked || v->key(v->arg, r) <= f->evict_after)
            break;
        f->victim = (int64_t)r;
        plan->evict = r + 1 > plan->evict ? r + 1 : plan->evict;
    }
    plan->ranked = ranked;
}

size_t policy_plan_prefetch(policy_t *p, const policy_link_t *link,
                            policy_need_t (*needs)(void *arg, uint32_t chunk), void *arg,
                            const policy_room_t *room, const policy_victims_t *victims,
                            policy_fetch_t *out, size_t max, policy_plan_t *plan)
{
    *plan = (policy_plan_t){0};
    size_t n = policy_prefetch(p, link, needs, arg, out, max, &plan->blocks_ahead);
    policy_plan_place(out, n, room, victims, plan);
    return n;
}
