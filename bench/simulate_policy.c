/*
 * bench/simulate_policy.c — what the simulator's policies do beside the
 * model of simulate_model.c, which runs the kernels and their demands:
 * prefetch, eviction ahead and reclaim, the order of the VMM calls and the
 * copies out, and vDNN's plan.
 *
 * Policies:
 *   schedule  policy/ as lms uses it: every access and free reported,
 *             victims by policy_victim, and prefetch: after every event
 *             (a kernel prepared or done, a copy or map landed) it asks
 *             policy_prefetch, with the H2D link's bandwidth and chunk size
 *             and needs() = what the chunk is (resident or on its way, or
 *             named by the prepared kernel: there; its data on the host; no
 *             data). Each chunk returned, in order, takes a spare block if
 *             its blocks_before is below the spare blocks (free ones the
 *             prepared kernel does not wait for, and those on their way out),
 *             else the block of the ranked victim blocks_before - spare
 *             down, if its evict key is above the fetch's evict_after
 *             (policy.h, Note [Prefetch without harm]), else the rest wait
 *             for the next call. It is told the spare blocks and the bytes
 *             on their way to the device, for the fetches past the horizon
 *             (into free blocks only: Note [Prefetch horizon]).
 *   reclaim   for schedule and lru, as swap/'s reclaim thread: while free
 *             blocks and those on their way out are below a low watermark,
 *             victims are evicted up to a high one; the capacity / 32 and
 *             / 16, or, while the schedule is followed, policy_prefetch's
 *             blocks_ahead (what new data ahead needs) for both, and then
 *             not chunks fetched ahead and not yet used.
 *   lru       policy_create with .lru: the same reports, no prefetch.
 *   vdnn      vDNN (Rhu et al., MICRO 2016), the baseline: in forward each
 *             activation is offloaded (a D2H, then its block freed) right
 *             after its last forward use; when backward starts a layer, the
 *             activations of the layer it goes to next are fetched; the
 *             rest on demand, victims by LRU (a policy with .lru; a chunk
 *             vdnn fetches is reported as used then, so that LRU does not
 *             take it back before its use). It needs the workload's hints
 *             (activations; kernels' layers and phases): without them it
 *             runs as lru, and its rows say "hints":false.
 * Every policy gets policy_mark_iteration at each boundary, as a program
 * that marks its iterations calls lms_mark_iteration whatever LMS_POLICY is.
 */
#include <stdlib.h>

#include "bench/simulate_model.h"

/* ---- prefetch -------------------------------------------------------------------- */

static policy_chunk_facts_t chunk_facts(const chunk_t *k);

/* vdnn's: a chunk whose data is on the host and that waits for no block. */
static bool needs_fetch(void *arg, uint32_t c)
{
    const chunk_t *k = &((model_t *)arg)->c[c];
    return chunk_facts(k).data && !k->queued;
}

/* Blocks not promised to the prepared kernel. */
static uint32_t spare(const model_t *s)
{
    return s->free_blocks > s->waiting ? s->free_blocks - s->waiting : 0;
}

/* Prefetched chunks that waited for a block, in order, into spare ones. */
static void serve_queue(model_t *s)
{
    while (s->pq.n > 0 && spare(s) > 0) {
        uint32_t c = model_ring_pop(&s->pq);
        if (s->c[c].queued && s->c[c].state == HOST) {
            model_take_block(s, c, true);
            s->cur.prefetched++;
        }
    }
}

/* Prefetches chunk c into a spare block, or queues it behind an eviction. */
static void prefetch_one(model_t *s, uint32_t c, uint32_t v)
{
    s->c[c].ahead = true;
    if (v == SIM_NONE) {
        model_take_block(s, c, true);
        s->cur.prefetched++;
        return;
    }
    model_evict(s, v);
    model_set_queued(s, c, true);
    model_ring_push(&s->pq, c);
}

/* For policy_prefetch: what chunk c is, as swap/ says it of its own
 * chunks (swap_chunk_facts, Note [One plan] in policy/plan.c): the pins of
 * the prepared kernel and the running one are the holds of access windows,
 * and a chunk not allocated is free. A chunk vdnn's prefetch queued for a
 * block has that block promised. */
static policy_chunk_facts_t chunk_facts(const chunk_t *k)
{
    policy_chunk_facts_t f = swap_chunk_facts(k->state, k->pins, !k->live);
    f.promised = k->queued;
    return f;
}

static policy_need_t chunk_need(void *arg, uint32_t c)
{
    return policy_need_of(chunk_facts(&((model_t *)arg)->c[c]));
}

/* For the conformance check (simulate_conform.c): chunk c as swap/'s table
 * has it. */
static void conform_chunk(void *arg, uint32_t c, sim_conform_chunk_t *out)
{
    const chunk_t *k = &((model_t *)arg)->c[c];
    *out = (sim_conform_chunk_t){.state = k->state, .pins = k->pins, .live = k->live,
                                 .ahead = k->ahead};
}

/* A plan's room, counted as swap/ counts it (policy_room_of). */
static policy_room_t plan_room(const model_t *s)
{
    return policy_room_of(s->free_blocks, s->evicting, s->queued);
}

static int cmp_key_desc(const void *a, const void *b)
{
    uint64_t x = ((const uint64_t *)a)[0], y = ((const uint64_t *)b)[0];
    return (x < y) - (x > y);
}

/* The evictable chunks ranked as policy/ evicts them: s->ranked[2i] is a
 * key, [2i + 1] its chunk; how many. */
static size_t rank(model_t *s)
{
    for (size_t i = 0; i < s->ncand; i++) {
        s->ranked[2 * i] = policy_evict_key(s->p, s->cand[i]);
        s->ranked[2 * i + 1] = s->cand[i];
    }
    qsort(s->ranked, s->ncand, 2 * sizeof *s->ranked, cmp_key_desc);
    return s->ncand;
}

/* For policy_plan_prefetch: the candidates ranked, once a plan (nothing
 * changes while it is made), in full: the simulator ranks exactly where
 * swap/ samples (Note [Ranking between events] in swap/ranking.c). */
static size_t rank_victims(void *arg, size_t depth)
{
    model_t *s = arg;
    (void)depth;
    if (!s->ranked_ok) {
        s->ranked_n = rank(s);
        s->ranked_ok = true;
    }
    return s->ranked_n;
}

static uint64_t victim_key(void *arg, size_t i) { return ((model_t *)arg)->ranked[2 * i]; }

/*
 * The order of the VMM calls and the copies out (--vmm-order defer): the
 * rule of Note [VMM beside copies] in swap/prefetch.c, as swap/ carries it
 * out. While a D2H copy is queued or on the wire, a prefetch's fetches
 * (their map and set_access, which nothing waits for yet) are not started:
 * the prefetch is deferred, and planned again once the D2H link is idle.
 * An eviction nothing waits for (the reclaim thread's, eviction ahead's, a
 * prefetch's room) does not start while a prefetch is deferred, nor while
 * any fetch's map and set_access are in the VMM queue: swap/ makes those
 * calls under its lock, so no copy is started until they return. What a
 * kernel waits for (its fetches, and the evictions that free its blocks)
 * goes at once. Copies out already queued run on, and a fetch a kernel
 * waits for then pays set_access's rate beside them. With --evicted host,
 * evictions' remaps take the same turns (Note [Host-mapped eviction in the
 * simulator] in simulate_model.c).
 * --vmm-order fifo starts each in the order it comes.
 */

/* Whether a prefetch's fetches wait for the D2H link to go idle (and, if so,
 * marks the prefetch deferred). */
static bool vmm_defer_ahead(model_t *s)
{
    if (s->cfg->vmm_defer && s->d2h.q.n > 0)
        s->vmm_deferred = true;
    return s->vmm_deferred;
}

/* Whether an eviction nothing waits for waits for the VMM work ahead. */
static bool ahead_evictions_wait(const model_t *s)
{
    return s->cfg->vmm_defer && (s->vmm_deferred || s->vmm_fetches > 0 || s->remaps_pending > 0);
}

/* The plan's placed fetches, into the blocks spare now. */
static void fetch_placed(model_t *s, const policy_plan_t *plan)
{
    for (size_t i = 0; i < plan->placed && spare(s) > 0; i++)
        prefetch_one(s, s->fetch[i].chunk, SIM_NONE);
}

/* Prefetch as policy/ plans it (policy_plan_prefetch, Note [One plan] in
 * policy/plan.c), carried out as swap/'s prefetch carries it out: the
 * ranked victims [0, plan.evict) go now (not chunks fetched ahead and not
 * yet used), and the first placed fetches take the blocks spare now, as
 * many as there are; the rest wait for a later plan, made as evictions
 * end. */
static void schedule_prefetch(model_t *s)
{
    if (!policy_following(s->p))
        return;
    policy_room_t room = plan_room(s);
    policy_link_t link = {.bytes_per_ns = s->h2d.rate,
                          .chunk_bytes = s->chunk,
                          .free_blocks = room.spare,
                          .queued_bytes = s->h2d_pending};
    policy_victims_t victims = {.rank = rank_victims, .key = victim_key, .arg = s};
    policy_plan_t plan;
    s->ranked_ok = false;
    size_t n = policy_plan_prefetch(s->p, &link, chunk_need, s, &room, &victims, s->fetch,
                                    MAX_FETCH, &plan);
    s->blocks_ahead = plan.blocks_ahead;
    if (s->cfg->check)
        sim_conform_plan(s->p, &link, s->w->nchunks, conform_chunk, s, s->free_blocks,
                         s->evicting, MAX_FETCH, s->fetch, n, &plan, s->ranked);
    /* deferred, the fetches go first, as swap/'s do: their VMM calls then
     * hold back the evictions (Note [VMM beside copies] in swap/prefetch.c) */
    bool fetch_first = s->cfg->vmm_defer;
    if (fetch_first && plan.placed > 0 && !vmm_defer_ahead(s))
        fetch_placed(s, &plan);
    for (size_t i = 0, started = 0;
         i < plan.ranked && started < plan.evict && !ahead_evictions_wait(s); i++) {
        uint32_t v = (uint32_t)s->ranked[2 * i + 1];
        if (s->c[v].cand != SIM_NONE && !s->c[v].ahead) {
            model_evict(s, v);
            started++;
        }
    }
    if (!fetch_first)
        fetch_placed(s, &plan);
}

/* Eviction ahead as policy/ plans it (policy_evict_ahead, Note [Eviction
 * ahead] in policy.c): the victims MIN would evict before their next use
 * go now when the D2H link would otherwise free the blocks the events ahead
 * need too late; not chunks fetched ahead and not yet used. */
static void evict_ahead(model_t *s)
{
    if (!s->cfg->evict_ahead || !policy_following(s->p) || ahead_evictions_wait(s))
        return;
    policy_link_t link = {.chunk_bytes = s->chunk, .d2h_bytes_per_ns = s->d2h.rate};
    policy_room_t room = plan_room(s);
    policy_victims_t victims = {.rank = rank_victims, .key = victim_key, .arg = s};
    size_t from;
    s->ranked_ok = false;
    size_t n = policy_evict_ahead(s->p, &link, chunk_need, s, &room, &victims, &from);
    for (size_t i = from; i < from + n; i++) {
        uint32_t v = (uint32_t)s->ranked[2 * i + 1];
        if (s->c[v].cand != SIM_NONE && !s->c[v].ahead)
            model_evict(s, v);
    }
}

void model_vdnn_prefetch(model_t *s, size_t j)
{
    const sim_vdnn_plan_t *pl = s->plan;
    for (uint32_t i = pl->pre_at[j]; i < pl->pre_at[j + 1]; i++) {
        const sim_tensor_t *t = &s->w->tensors[pl->pre[i]];
        for (uint32_t c = t->first; c < t->first + t->span; c++) {
            if (!needs_fetch(s, c))
                continue;
            if (spare(s) == 0 && s->ncand == 0)
                return;
            prefetch_one(s, c, spare(s) > 0 ? SIM_NONE : model_victim(s));
            model_report(s, c, 1, POLICY_USE); /* most recently used: LRU keeps it */
        }
    }
}

void model_vdnn_offload(model_t *s, size_t j)
{
    const sim_vdnn_plan_t *pl = s->plan;
    for (uint32_t i = pl->off_at[j]; i < pl->off_at[j + 1]; i++) {
        const sim_tensor_t *t = &s->w->tensors[pl->off[i]];
        for (uint32_t c = t->first; c < t->first + t->span; c++)
            if (s->c[c].cand != SIM_NONE)
                model_evict(s, c);
    }
}

/* lms's reclaim thread (swap/reclaim.c): while the free blocks and those
 * on their way out fall below the low watermark, evicts the victims policy/
 * names up to the high one, so that new data rarely waits for an eviction.
 * The watermarks are policy/'s (policy_watermarks) from lms's for a device
 * limit of the capacity (the capacity / 32 and / 16: Note [Resolved
 * configuration], resolved by sim_run). For lms's policies; vdnn has its
 * own. */
static void reclaim(model_t *s)
{
    bool following = s->pol == SIM_SCHEDULE && policy_following(s->p);
    size_t low, high;
    policy_watermarks(following ? s->p : NULL, s->blocks_ahead, s->low, s->high, &low, &high);
    if (s->pol == SIM_VDNN || s->free_blocks + s->evicting >= low || ahead_evictions_wait(s))
        return;
    if (following) {
        /* by rank, but not chunks fetched ahead and not yet used: a
         * prefetch and the reclaim thread must not take turns on them */
        size_t m = rank(s);
        for (size_t i = 0; i < m && s->free_blocks + s->evicting < high; i++)
            if (!s->c[s->ranked[2 * i + 1]].ahead)
                model_evict(s, (uint32_t)s->ranked[2 * i + 1]);
        return;
    }
    while (s->free_blocks + s->evicting < high && s->ncand > 0)
        model_evict(s, model_victim(s));
}

void model_policies(model_t *s)
{
    serve_queue(s);
    if (s->d2h.q.n == 0) {
        s->vmm_deferred = false; /* the deferred prefetch is planned again now */
        model_flush_remaps(s);   /* Note [Host-mapped eviction in the simulator] */
    }
    if (s->pol == SIM_SCHEDULE) {
        schedule_prefetch(s);
        evict_ahead(s);
    }
    reclaim(s);
}

/* ---- vdnn's plan --------------------------------------------------------------- */

/* The kernel after which each activation is offloaded: its last forward
 * kernel, if its next access after that reads it (SIM_NONE: never). */
static uint32_t *offload_points(const sim_workload_t *w)
{
    uint32_t *at = sim_zalloc(w->ntensors, sizeof *at);
    uint8_t *then = sim_zalloc(w->ntensors, 1); /* the next access's mode + 1; 0: none yet */
    for (size_t t = 0; t < w->ntensors; t++)
        at[t] = SIM_NONE;
    for (size_t j = 0; j < w->nops; j++) {
        const sim_op_t *op = &w->ops[j];
        for (uint32_t i = op->acc; op->kind == SIM_KERNEL && i < op->acc + op->nacc; i++) {
            uint32_t t = w->acc[i].tensor;
            if (op->phase == SIM_FWD) {
                at[t] = (uint32_t)j;
                then[t] = 0;
            } else if (at[t] != SIM_NONE && then[t] == 0) {
                then[t] = (uint8_t)(w->acc[i].mode + 1);
            }
        }
    }
    for (size_t t = 0; t < w->ntensors; t++)
        if (!w->tensors[t].act || then[t] == 0 || then[t] == SIM_OVERWRITE + 1)
            at[t] = SIM_NONE;
    free(then);
    return at;
}

/* The layer backward goes to after the one kernel j starts, if j is the
 * first backward kernel of its layer; -1 otherwise. */
static int32_t next_backward_layer(const sim_workload_t *w, size_t j, int32_t prev)
{
    const sim_op_t *op = &w->ops[j];
    if (op->kind != SIM_KERNEL || op->phase != SIM_BWD || op->layer < 0 || op->layer == prev)
        return -1;
    for (size_t k = j + 1; k < w->nops && w->ops[k].kind != SIM_ITERATION; k++) {
        const sim_op_t *o = &w->ops[k];
        if (o->kind == SIM_KERNEL && o->phase == SIM_BWD && o->layer >= 0 && o->layer != op->layer)
            return o->layer;
    }
    return -1;
}

/* Offload after the kernel that uses an activation last in forward, if it
 * is read again; prefetch, when backward enters a layer, the live
 * activations of the layer it goes to next. */
void sim_vdnn_plan(const sim_workload_t *w, sim_vdnn_plan_t *pl)
{
    uint32_t *at = offload_points(w);
    pl->off_at = sim_zalloc(w->nops + 1, sizeof *pl->off_at);
    pl->pre_at = sim_zalloc(w->nops + 1, sizeof *pl->pre_at);
    for (size_t t = 0; t < w->ntensors; t++) /* counting sort by offload point */
        if (at[t] != SIM_NONE)
            pl->off_at[at[t] + 1]++;
    for (size_t j = 0; j < w->nops; j++)
        pl->off_at[j + 1] += pl->off_at[j];
    pl->off = sim_zalloc(pl->off_at[w->nops], sizeof *pl->off);
    uint32_t *fill = sim_zalloc(w->nops, sizeof *fill);
    for (size_t t = 0; t < w->ntensors; t++)
        if (at[t] != SIM_NONE)
            pl->off[pl->off_at[at[t]] + fill[at[t]]++] = (uint32_t)t;
    size_t npre = 0, cappre = 0;
    pl->pre = NULL;
    int32_t prev = -1;
    for (size_t j = 0; j < w->nops; j++) {
        pl->pre_at[j] = (uint32_t)npre;
        int32_t next = next_backward_layer(w, j, prev);
        if (w->ops[j].kind == SIM_KERNEL)
            prev = w->ops[j].phase == SIM_BWD ? w->ops[j].layer : -1;
        for (size_t t = 0; next >= 0 && t < w->ntensors; t++) {
            const sim_tensor_t *ts = &w->tensors[t];
            if (ts->act && ts->layer == next && sim_alive_at(ts, j)) {
                pl->pre = sim_grow(pl->pre, &cappre, npre + 1, sizeof *pl->pre);
                pl->pre[npre++] = (uint32_t)t;
            }
        }
    }
    pl->pre_at[w->nops] = (uint32_t)npre;
    free(at);
    free(fill);
}

void sim_vdnn_plan_free(sim_vdnn_plan_t *pl)
{
    free(pl->off_at);
    free(pl->off);
    free(pl->pre_at);
    free(pl->pre);
}
