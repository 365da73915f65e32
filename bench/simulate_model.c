/*
 * bench/simulate_model.c — the simulator's discrete-event model of one GPU
 * running a workload, and the policies that drive it: lms's own policy code
 * (policy/policy.c, as linked from lms_core) and the vDNN baseline.
 *
 * The model, in simulated nanoseconds (deterministic: no clock is read):
 *   compute  one stream; a kernel runs for its compute time once every
 *            chunk it names is resident with its data and the kernel
 *            before it has finished.
 *   links    H2D and D2H, each a FIFO of chunk copies at its bandwidth;
 *            while both are busy each runs at both_factor of its rate
 *            (1: full duplex; the figures: Note [Link presets] in
 *            simulate.c).
 *   VMM      one serial host queue, as the driver does one VMM call at a
 *            time on any number of threads: a fetch maps its chunk, then
 *            sets access on it, before its H2D; an eviction unmaps its
 *            chunk after its D2H, or at once for a clean drop, before its
 *            block is free. Each call costs its us per MiB times the
 *            chunk's MiB; set_access costs access_d2h_us per MiB instead
 *            of access_us for the part of it that runs while a D2H copy is
 *            on the wire (its progress is taken at the rate of the moment,
 *            as the links' is). A chunk that takes a block without a copy
 *            (new data, an overwrite) and a freed one that gives its block
 *            back cost no VMM call here, where lms maps and sets access on
 *            the first and keeps the second mapped until its block is
 *            taken: the model leaves those calls out. With --vmm-order
 *            defer, prefetches and the evictions nothing waits for take
 *            turns with the copies out as swap/'s do (Note [VMM beside
 *            copies] in swap/prefetch.c; "The order of the VMM calls"
 *            below); with fifo, each starts when it comes.
 *   device   capacity chunks of chunk_bytes (2 MiB); a chunk holds a block
 *            while resident, fetching or evicting. Tensors lie in chunks as
 *            lms's alloc/ places them, several to a chunk where they are
 *            small: a chunk is live while alloc/ has it in use, and a
 *            kernel names every chunk its tensors' bytes touch (Note
 *            [Placement in the simulator] in simulate_workloads.c).
 * Chunk states are swap/'s (DESIGN.md, swap/): unbacked, resident,
 * evicting, host, fetching. A chunk fetched and only read keeps its host
 * copy (clean): evicting it is an unmap, no copy. A write (w or o) makes it
 * dirty. A freed chunk is dropped at once in any state (a copy in flight
 * finishes and its result is thrown away); an overwrite of a chunk on the
 * host takes a block and copies nothing. Dirty live data is copied out when
 * evicted even when the schedule says its next use overwrites it, as swap/
 * does: a wrong prediction must not lose data.
 *
 * Kernels run in order. The one after the running kernel is prepared while
 * it runs, as a program's launches run ahead of the GPU: its accesses are
 * reported to the policy (policy_access, at the simulated now), its chunks
 * pinned, and each chunk without a block gets a free one, or waits for the
 * block of a victim evicted for it: a resident chunk that neither the
 * prepared nor the running kernel names and with no copy in flight, chosen
 * by policy_victim. The prepared kernel gets freed blocks before prefetches
 * do. Frees and allocations between kernels take effect as the preparation
 * reaches them (a chunk the running kernel names keeps its block until the
 * kernel ends).
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
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#define BENCH_NAME "simulate"
#include "base/base.h"
#include "bench/bench.h"
#include "bench/simulate.h"
#include "policy/policy.h"
#include "swap/config.h"
#include "swap/need.h"

#define MAX_FETCH SIM_CONFORM_MAX /* chunks asked of policy_prefetch at a time */
#define VMM_UNMAP 0x80000000u /* a VMM queue entry's kind bit (chunk ids stay below) */

enum { VMM_MAP, VMM_ACCESS, VMM_UNMAP_CALL }; /* the calls of a VMM queue entry */

const char *const sim_policy_name[SIM_NPOLICIES] = {"schedule", "lru", "vdnn"};

/* ---- the simulation ---------------------------------------------------------- */

/* A chunk goes through swap/'s states (swap/need.h). */

typedef struct chunk {
    uint8_t state;
    uint8_t pins;     /* the prepared and the running kernel that name it: 0..2 */
    bool live;        /* allocated */
    bool discard;     /* freed while a copy or map was in flight: drop its result */
    bool queued;      /* on the host, waiting for a block to be prefetched into */
    bool dirty;       /* the host has no copy of its current data */
    bool ahead;       /* prefetched and not yet used */
    uint32_t version; /* of its data (0: none yet); each w/o makes a new one */
    uint32_t dev_version, host_version; /* what the block and the host copy hold */
    uint32_t cand;                      /* index in the candidate set, SIM_NONE: not evictable */
} chunk_t;

typedef struct ring {
    uint32_t *v;
    size_t head, n, cap;
} ring_t;

typedef struct link {
    double rate;      /* bytes per ns, alone */
    ring_t q;         /* chunks; the head is on the wire */
    double left;      /* bytes of the head still to move */
    uint64_t done_at; /* when the head lands at the current rates */
} link_t;

typedef struct prep {
    long op;         /* the kernel, -1: none */
    uint32_t *chunk; /* the chunks it names, whether it needs their data, */
    bool *needs;
    bool *cut;       /* and whether each is the first its access listed (start_kernel) */
    size_t n, cap;
    size_t backed; /* chunk[0 .. backed) all hold blocks */
    size_t ready;  /* chunk[0 .. ready) all resident */
} prep_t;

typedef struct model {
    const sim_workload_t *w;
    const sim_config_t *cfg;
    const sim_iters_t *its;
    const sim_vdnn_plan_t *plan; /* NULL unless vdnn with hints */
    sim_policy_t pol;
    policy_t *p;
    uint64_t chunk;
    uint32_t capacity, free_blocks;
    uint32_t low, high; /* lms's reclaim watermarks for the capacity (reclaim) */
    uint32_t waiting;  /* blocks the prepared kernel still waits for */
    uint32_t evicting; /* evictions whose blocks are not yet free */
    chunk_t *c;
    uint32_t *cand; /* the evictable chunks */
    uint32_t *listed; /* per chunk: the kernel op + 1 that last listed it (prep_take) */
    uint64_t *ranked; /* scratch of rank(): key, chunk pairs */
    int64_t blocks_ahead; /* policy_prefetch's: what to keep free while following */
    size_t ranked_n;      /* in ranked, while ranked_ok (a plan's ranking) */
    bool ranked_ok;
    size_t ncand;
    link_t h2d, d2h;
    uint64_t links_at; /* when the links' progress was last taken */
    ring_t vmm;        /* chunk ids, VMM_UNMAP set for an unmap */
    uint8_t vmm_call;  /* the head's call: VMM_MAP, VMM_ACCESS or VMM_UNMAP_CALL */
    double vmm_left;   /* the fraction of that call still to run, */
    double vmm_ns;     /* at this many ns for the whole call, */
    uint64_t vmm_done; /* so it ends then */
    uint32_t vmm_fetches; /* fetches' entries in the VMM queue (map and set_access) */
    bool vmm_deferred;  /* a prefetch waits for the D2H link to go idle (vmm_defer_ahead) */
    ring_t pq;            /* prefetched chunks waiting for a block (and stale entries) */
    uint32_t queued;      /* chunks waiting in pq */
    uint64_t h2d_pending; /* bytes to the device issued and not landed */
    uint64_t now, version;
    size_t cursor, iter; /* the next op; the iteration the running kernel is in */
    prep_t prep, run;    /* the prepared kernel, the running one */
    uint64_t run_end;
    uint64_t win_start; /* when the current iteration's time began */
    sim_result_t cur;   /* counts of the current iteration */
    sim_result_t last;  /* of the last finished one */
    policy_fetch_t fetch[MAX_FETCH];
} model_t;

static void invariant(bool ok, const model_t *s, uint32_t c, const char *what)
{
    if (!ok)
        sim_die("invariant broken at %.6f ms, op %zu, chunk %u (state %d, version %u, device %u, "
                "host %u): %s",
                (double)s->now / 1e6, s->cursor, c, s->c[c].state, s->c[c].version,
                s->c[c].dev_version, s->c[c].host_version, what);
}

static void ring_push(ring_t *r, uint32_t x)
{
    if (r->n == r->cap) {
        size_t cap = r->cap ? 2 * r->cap : 64;
        uint32_t *v = sim_zalloc(cap, sizeof *v);
        for (size_t i = 0; i < r->n; i++)
            v[i] = r->v[(r->head + i) % r->cap];
        free(r->v);
        r->v = v;
        r->head = 0;
        r->cap = cap;
    }
    r->v[(r->head + r->n++) % r->cap] = x;
}

static uint32_t ring_pop(ring_t *r)
{
    uint32_t x = r->v[r->head];
    r->head = (r->head + 1) % r->cap;
    r->n--;
    return x;
}

/* -- the evictable set: resident, live, named by no prepared or running kernel */

static void update_cand(model_t *s, uint32_t c)
{
    chunk_t *k = &s->c[c];
    bool want = k->state == RESIDENT && k->pins == 0 && k->live;
    if (want && k->cand == SIM_NONE) {
        k->cand = (uint32_t)s->ncand;
        s->cand[s->ncand++] = c;
    } else if (!want && k->cand != SIM_NONE) {
        uint32_t moved = s->cand[--s->ncand];
        s->cand[k->cand] = moved;
        s->c[moved].cand = k->cand;
        k->cand = SIM_NONE;
    }
}

/* policy_victim over the evictable set; ncand > 0. */
static uint32_t victim(model_t *s)
{
    long i = policy_victim(s->p, s->cand, s->ncand);
    if (s->cfg->check) {
        uint64_t top = policy_evict_key(s->p, s->cand[i]);
        for (long j = 0; j < (long)s->ncand; j++) {
            uint64_t k = policy_evict_key(s->p, s->cand[j]);
            if (k > top || (k == top && j < i))
                sim_die("policy_victim chose candidate %ld (key %llu) over %ld (key %llu)", i,
                        (unsigned long long)top, j, (unsigned long long)k);
        }
    }
    return s->cand[i];
}

/* -- the links and the VMM queue -- */

static double link_rate(const model_t *s, const link_t *l, const link_t *other)
{
    return l->rate * (other->q.n > 0 ? s->cfg->both : 1.0);
}

/* The ns the VMM queue head's call takes, whole, at the rate of now: its
 * us per MiB times the chunk's MiB; set_access at the slower rate while a
 * D2H copy is on the wire. */
static double vmm_call_ns(const model_t *s)
{
    const sim_config_t *cfg = s->cfg;
    double us = s->vmm_call == VMM_MAP      ? cfg->map_us
                : s->vmm_call == VMM_UNMAP_CALL ? cfg->unmap_us
                : s->d2h.q.n > 0            ? cfg->access_d2h_us
                                            : cfg->access_us;
    return us * 1e3 * ((double)s->chunk / (double)BASE_MiB);
}

/* When the VMM queue's head call ends at the rate from now on; kept as it
 * was while the rate is (no drift from rounding). */
static void vmm_retime(model_t *s, bool fresh)
{
    double call = vmm_call_ns(s);
    if (!fresh && call == s->vmm_ns)
        return;
    s->vmm_ns = call;
    double ns = ceil(s->vmm_left * call);
    s->vmm_done = s->now + (ns > 0 ? (uint64_t)ns : 0);
}

/* Takes the links' and the VMM queue's progress up to now, at the rates
 * since they last changed. */
static void links_advance(model_t *s)
{
    double dt = (double)(s->now - s->links_at);
    double r1 = link_rate(s, &s->h2d, &s->d2h), r2 = link_rate(s, &s->d2h, &s->h2d);
    if (s->h2d.q.n > 0)
        s->h2d.left -= dt * r1;
    if (s->d2h.q.n > 0)
        s->d2h.left -= dt * r2;
    if (s->vmm.n > 0 && s->vmm_ns > 0)
        s->vmm_left -= dt / s->vmm_ns;
    if (s->vmm.n > 0 && s->vmm_call == VMM_ACCESS && s->d2h.q.n > 0)
        s->cur.access_d2h_ns += s->now - s->links_at;
    s->links_at = s->now;
}

/* When each link's head, and the VMM queue's head call, ends at the rates
 * from now on. */
static void links_retime(model_t *s)
{
    if (s->vmm.n > 0)
        vmm_retime(s, false);
    link_t *l[2] = {&s->h2d, &s->d2h};
    for (int i = 0; i < 2; i++) {
        if (l[i]->q.n == 0) {
            l[i]->done_at = UINT64_MAX;
            continue;
        }
        double ns = ceil(l[i]->left / link_rate(s, l[i], l[1 - i]));
        l[i]->done_at = s->now + (ns > 0 ? (uint64_t)ns : 0);
    }
}

static void link_push(model_t *s, link_t *l, uint32_t c)
{
    if (l->q.n == 0)
        l->left = (double)s->chunk;
    ring_push(&l->q, c);
}

/* The VMM queue's head starts its first call now. */
static void vmm_start(model_t *s)
{
    s->vmm_call = s->vmm.v[s->vmm.head] & VMM_UNMAP ? VMM_UNMAP_CALL : VMM_MAP;
    s->vmm_left = 1;
    vmm_retime(s, true);
}

static void vmm_push(model_t *s, uint32_t entry)
{
    ring_push(&s->vmm, entry);
    if (s->vmm.n == 1)
        vmm_start(s);
}

/* -- chunk transitions -- */

static void release_block(model_t *s, uint32_t c)
{
    s->c[c].state = UNBACKED;
    s->free_blocks++;
    invariant(s->free_blocks <= s->capacity, s, c, "more blocks free than the device has");
}

static void set_queued(model_t *s, uint32_t c, bool queued)
{
    s->queued += (uint32_t)queued - (uint32_t)s->c[c].queued;
    s->c[c].queued = queued;
}

/* Gives chunk c, unbacked or on the host, a free block; fetches its data if
 * it has some and needs says it is needed. */
static void take_block(model_t *s, uint32_t c, bool needs)
{
    chunk_t *k = &s->c[c];
    invariant(s->free_blocks > 0, s, c, "a block taken when none is free");
    s->free_blocks--;
    set_queued(s, c, false);
    if (k->state == HOST && needs) {
        k->state = FETCHING;
        s->vmm_fetches++;
        vmm_push(s, c);
        s->h2d_pending += s->chunk;
        s->cur.fetches++;
    } else {
        k->state = RESIDENT;
        k->dev_version = 0; /* what the block held is not this chunk's */
    }
    update_cand(s, c);
}

/* Starts evicting a resident chunk: a D2H if the host has no copy of its
 * data, then (or at once) the unmap. */
static void evict(model_t *s, uint32_t c)
{
    chunk_t *k = &s->c[c];
    invariant(k->state == RESIDENT && k->pins == 0, s, c, "evicting a chunk in use");
    k->state = EVICTING;
    k->ahead = false;
    update_cand(s, c);
    s->evicting++;
    s->cur.evictions++;
    if (k->version != 0 && k->dirty) {
        link_push(s, &s->d2h, c);
    } else {
        invariant(k->version == 0 || k->host_version == k->version, s, c,
                  "a clean drop of data the host does not have");
        s->cur.clean_drops++;
        vmm_push(s, c | VMM_UNMAP);
    }
}

static void h2d_done(model_t *s, uint32_t c)
{
    chunk_t *k = &s->c[c];
    s->h2d_pending -= s->chunk;
    s->cur.h2d += s->chunk;
    k->state = RESIDENT;
    if (k->discard) { /* freed meanwhile: the block holds nothing of use */
        k->discard = false;
        k->dev_version = 0;
        if (!k->live && k->pins == 0)
            release_block(s, c);
    } else {
        k->dev_version = k->host_version;
        k->dirty = false;
    }
    update_cand(s, c);
}

static void d2h_done(model_t *s, uint32_t c)
{
    chunk_t *k = &s->c[c];
    s->cur.d2h += s->chunk;
    if (k->discard) { /* freed meanwhile: no copy to keep, no unmap to wait for */
        k->discard = false;
        s->evicting--;
        release_block(s, c);
        return;
    }
    k->host_version = k->dev_version;
    k->dirty = false;
    vmm_push(s, c | VMM_UNMAP);
}

static void vmm_done(model_t *s, uint32_t entry)
{
    uint32_t c = entry & ~VMM_UNMAP;
    chunk_t *k = &s->c[c];
    if (entry & VMM_UNMAP) {
        s->evicting--;
        bool keep = k->live && !k->discard && k->version != 0;
        k->discard = false;
        release_block(s, c);
        if (keep) {
            invariant(k->host_version == k->version, s, c, "evicted data lost");
            k->state = HOST;
        }
        return;
    }
    s->vmm_fetches--;
    if (k->discard) { /* mapped for a fetch of data freed meanwhile */
        k->discard = false;
        s->h2d_pending -= s->chunk;
        k->state = RESIDENT;
        k->dev_version = 0;
        if (!k->live && k->pins == 0)
            release_block(s, c);
        update_cand(s, c);
    } else {
        link_push(s, &s->h2d, c);
    }
}

/* -- the op stream -- */

static void report(model_t *s, uint32_t first, uint32_t n, policy_kind_t kind)
{
    bench_check(policy_access(s->p, first, n, kind, s->now), "policy_access");
}

/* The chunks alloc/ brought into use (Note [Placement in the simulator] in
 * simulate_workloads.c) hold no data yet. */
static void do_alloc(model_t *s, const sim_tensor_t *t)
{
    for (uint32_t c = t->used_first; c < t->used_first + t->used_n; c++) {
        chunk_t *k = &s->c[c];
        invariant(!k->live && (k->state == UNBACKED || k->discard || k->pins > 0), s, c,
                  "allocated while holding data");
        k->live = true;
        k->version = 0;
        k->dirty = false;
        update_cand(s, c);
    }
}

/* The chunks the free took out of use are dropped; policy/ hears of a
 * run's, as from swap/ (a slot's free says nothing of its chunks). */
static void do_free(model_t *s, const sim_tensor_t *t)
{
    if (!t->slot && t->gone_n > 0)
        report(s, t->gone_first, t->gone_n, POLICY_FREE);
    for (uint32_t c = t->gone_first; c < t->gone_first + t->gone_n; c++) {
        chunk_t *k = &s->c[c];
        k->live = false;
        k->ahead = false;
        set_queued(s, c, false);
        k->version = 0;
        if (k->state == HOST)
            k->state = UNBACKED;
        else if (k->state == EVICTING || k->state == FETCHING)
            k->discard = true;
        else if (k->state == RESIDENT && k->pins == 0)
            release_block(s, c);
        update_cand(s, c); /* a pinned one goes when its kernel is done */
    }
}

/* Whether an access of mode to tensor t needs chunk c's data: all but an
 * overwrite of a chunk it fills entirely, as swap/ decides (mark_needs in
 * swap/window.c): other bytes of a chunk it covers in part may be live. */
static bool needs_data(const sim_tensor_t *t, sim_mode_t mode, uint32_t c)
{
    return mode != SIM_OVERWRITE || c < t->whole || c >= t->whole + t->nwhole;
}

/* Takes kernel j to prepare: the chunks its tensors' bytes touch, each once
 * (tensors may share one) and in the order of its accesses, held. */
static void prep_take(model_t *s, size_t j)
{
    const sim_op_t *op = &s->w->ops[j];
    prep_t *pr = &s->prep;
    pr->op = (long)j;
    pr->n = pr->backed = pr->ready = 0;
    for (uint32_t i = op->acc; i < op->acc + op->nacc; i++) {
        const sim_access_t *a = &s->w->acc[i];
        const sim_tensor_t *t = &s->w->tensors[a->tensor];
        pr->chunk = sim_grow(pr->chunk, &pr->cap, pr->n + t->span, sizeof *pr->chunk);
        pr->needs = realloc(pr->needs, pr->cap * sizeof *pr->needs);
        pr->cut = realloc(pr->cut, pr->cap * sizeof *pr->cut);
        if (pr->needs == NULL || pr->cut == NULL)
            sim_die("no host memory");
        bool cut = true;
        for (uint32_t c = t->first; c < t->first + t->span; c++) {
            if (s->listed[c] == j + 1) /* an earlier tensor of the kernel shares it */
                continue;
            s->listed[c] = (uint32_t)j + 1;
            pr->cut[pr->n] = cut;
            cut = false;
            pr->chunk[pr->n] = c;
            pr->needs[pr->n++] = needs_data(t, a->mode, c);
            s->c[c].pins++;
            update_cand(s, c);
        }
    }
}

/* Walks the ops up to the next kernel, which it takes to prepare. */
static bool advance_cursor(model_t *s)
{
    bool moved = false;
    while (s->prep.op < 0 && s->cursor < s->w->nops) {
        const sim_op_t *op = &s->w->ops[s->cursor];
        if (op->kind == SIM_ALLOC)
            do_alloc(s, &s->w->tensors[op->tensor]);
        else if (op->kind == SIM_FREE)
            do_free(s, &s->w->tensors[op->tensor]);
        else if (op->kind == SIM_ITERATION)
            bench_check(policy_mark_iteration(s->p), "policy_mark_iteration");
        else
            prep_take(s, s->cursor);
        s->cursor++;
        moved = true;
    }
    return moved;
}

/* Blocks for the prepared kernel: free ones, then victims for the rest. */
static void demand(model_t *s)
{
    prep_t *pr = &s->prep;
    uint32_t short_of = 0;
    bool all = true;
    for (size_t i = pr->backed; i < pr->n; i++) {
        uint32_t c = pr->chunk[i];
        uint8_t st = s->c[c].state;
        if (st == RESIDENT || st == FETCHING) {
            if (all)
                pr->backed = i + 1;
            continue;
        }
        all = false;
        if (st == EVICTING)
            continue; /* back on the host first */
        if (s->free_blocks > 0)
            take_block(s, c, pr->needs[i]);
        else
            short_of++;
    }
    s->waiting = short_of;
    for (uint32_t need = short_of > s->evicting ? short_of - s->evicting : 0;
         need > 0 && s->ncand > 0; need--)
        evict(s, victim(s));
}

static bool prep_ready(model_t *s)
{
    prep_t *pr = &s->prep;
    while (pr->ready < pr->n && s->c[pr->chunk[pr->ready]].state == RESIDENT)
        pr->ready++;
    return pr->ready == pr->n;
}

static void vdnn_prefetch(model_t *s, size_t j);

/* Runs the prepared kernel: every chunk resident, each read sees the data
 * last written, each write makes a new version. Its accesses are reported
 * to policy/ now, once its chunks are in, as swap/ reports an access
 * (resid_report_access, after bringing its chunks in): until then its
 * chunks are held, and a plan counts the blocks they still need (Note [One
 * plan] in policy/plan.c). */
static void start_kernel(model_t *s)
{
    const sim_op_t *op = &s->w->ops[s->prep.op];
    const prep_t *pr = &s->prep;
    /* each access's chunks (those no earlier access of the kernel listed), in
     * runs of one kind; swap/ merges runs across an access window's ranges,
     * which moves a few prefetches: kept apart, --placement chunks gives
     * the rows it gave before the simulator placed with alloc/ */
    for (size_t i = 0, e; i < pr->n; i = e) {
        for (e = i + 1; e < pr->n && pr->chunk[e] == pr->chunk[e - 1] + 1 &&
                        pr->needs[e] == pr->needs[i] && !pr->cut[e];
             e++)
            ;
        report(s, pr->chunk[i], (uint32_t)(e - i), pr->needs[i] ? POLICY_USE : POLICY_OVERWRITE);
    }
    for (uint32_t i = op->acc; i < op->acc + op->nacc; i++) {
        const sim_access_t *a = &s->w->acc[i];
        const sim_tensor_t *t = &s->w->tensors[a->tensor];
        for (uint32_t c = t->first; c < t->first + t->span; c++) {
            chunk_t *k = &s->c[c];
            invariant(k->state == RESIDENT && k->pins > 0, s, c, "a kernel ran without it");
            k->ahead = false;
            /* the rule itself, not needs_data: a partial overwrite reads */
            bool whole = c >= t->whole && c < t->whole + t->nwhole;
            invariant((a->mode == SIM_OVERWRITE && whole) || k->version == 0 ||
                          k->dev_version == k->version,
                      s, c, "a kernel read stale data");
            if (a->mode != SIM_READ) {
                k->version = k->dev_version = (uint32_t)++s->version;
                k->dirty = true;
            }
        }
    }
    prep_t t = s->run;
    s->run = s->prep;
    s->prep = t;
    s->prep.op = -1;
    s->run_end = s->now + op->ns;
    if (s->plan != NULL)
        vdnn_prefetch(s, (size_t)s->run.op);
}

static void vdnn_offload(model_t *s, size_t j);

static void kernel_done(model_t *s)
{
    size_t j = (size_t)s->run.op;
    s->cur.compute_ns += s->w->ops[j].ns;
    for (size_t i = 0; i < s->run.n; i++) {
        uint32_t c = s->run.chunk[i];
        chunk_t *k = &s->c[c];
        k->pins--;
        if (!k->live && k->pins == 0 && k->state == RESIDENT)
            release_block(s, c);
        update_cand(s, c);
    }
    s->run.op = -1;
    if (s->plan != NULL)
        vdnn_offload(s, j);
    if (j == s->its->it[s->iter].last_kernel) {
        s->cur.step_ns = s->now - s->win_start;
        s->cur.following = policy_following(s->p);
        s->last = s->cur;
        s->cur = (sim_result_t){0};
        s->win_start = s->now;
        s->iter++;
    }
}

/* -- prefetch -- */

static bool needs_fetch(void *arg, uint32_t c)
{
    const chunk_t *k = &((model_t *)arg)->c[c];
    return k->state == HOST && k->live && !k->queued;
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
        uint32_t c = ring_pop(&s->pq);
        if (s->c[c].queued && s->c[c].state == HOST) {
            take_block(s, c, true);
            s->cur.prefetched++;
        }
    }
}

/* Prefetches chunk c into a spare block, or queues it behind an eviction. */
static void prefetch_one(model_t *s, uint32_t c, uint32_t v)
{
    s->c[c].ahead = true;
    if (v == SIM_NONE) {
        take_block(s, c, true);
        s->cur.prefetched++;
        return;
    }
    evict(s, v);
    set_queued(s, c, true);
    ring_push(&s->pq, c);
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
 * waits for then pays set_access's rate beside them.
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
    return s->cfg->vmm_defer && (s->vmm_deferred || s->vmm_fetches > 0);
}

/* The plan's placed fetches, into the blocks spare now. */
static void fetch_placed(model_t *s, const policy_plan_t *plan)
{
    for (size_t i = 0; i < plan->placed && spare(s) > 0; i++) {
        invariant(!s->cfg->vmm_defer || s->d2h.q.n == 0, s, s->fetch[i].chunk,
                  "a prefetch's map and set_access queued while a D2H copy runs");
        prefetch_one(s, s->fetch[i].chunk, SIM_NONE);
    }
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
            evict(s, v);
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
            evict(s, v);
    }
}

static void vdnn_prefetch(model_t *s, size_t j)
{
    const sim_vdnn_plan_t *pl = s->plan;
    for (uint32_t i = pl->pre_at[j]; i < pl->pre_at[j + 1]; i++) {
        const sim_tensor_t *t = &s->w->tensors[pl->pre[i]];
        for (uint32_t c = t->first; c < t->first + t->span; c++) {
            if (!needs_fetch(s, c))
                continue;
            if (spare(s) == 0 && s->ncand == 0)
                return;
            prefetch_one(s, c, spare(s) > 0 ? SIM_NONE : victim(s));
            report(s, c, 1, POLICY_USE); /* most recently used: LRU keeps it */
        }
    }
}

static void vdnn_offload(model_t *s, size_t j)
{
    const sim_vdnn_plan_t *pl = s->plan;
    for (uint32_t i = pl->off_at[j]; i < pl->off_at[j + 1]; i++) {
        const sim_tensor_t *t = &s->w->tensors[pl->off[i]];
        for (uint32_t c = t->first; c < t->first + t->span; c++)
            if (s->c[c].cand != SIM_NONE)
                evict(s, c);
    }
}

/* -- the event loop -- */

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
                evict(s, (uint32_t)s->ranked[2 * i + 1]);
        return;
    }
    while (s->free_blocks + s->evicting < high && s->ncand > 0)
        evict(s, victim(s));
}

static void schedule(model_t *s)
{
    for (;;) {
        bool moved = advance_cursor(s);
        if (s->prep.op >= 0) {
            demand(s);
            if (s->run.op < 0 && prep_ready(s)) {
                start_kernel(s);
                moved = true;
            }
        }
        if (!moved)
            break;
    }
    serve_queue(s);
    if (s->d2h.q.n == 0)
        s->vmm_deferred = false; /* the deferred prefetch is planned again now */
    if (s->pol == SIM_SCHEDULE) {
        schedule_prefetch(s);
        evict_ahead(s);
    }
    reclaim(s);
}

/* Finishes whatever is due at now; false if nothing was. */
static bool complete_due(model_t *s)
{
    bool any = false;
    if (s->h2d.q.n > 0 && s->h2d.done_at <= s->now) {
        h2d_done(s, ring_pop(&s->h2d.q));
        if (s->h2d.q.n > 0)
            s->h2d.left = (double)s->chunk;
        any = true;
    }
    if (s->d2h.q.n > 0 && s->d2h.done_at <= s->now) {
        d2h_done(s, ring_pop(&s->d2h.q));
        if (s->d2h.q.n > 0)
            s->d2h.left = (double)s->chunk;
        any = true;
    }
    /* a fetch's map, then its set_access (either may take no time) */
    if (s->vmm.n > 0 && s->vmm_done <= s->now && s->vmm_call == VMM_MAP) {
        s->vmm_call = VMM_ACCESS;
        s->vmm_left = 1;
        vmm_retime(s, true);
    }
    if (s->vmm.n > 0 && s->vmm_done <= s->now) {
        vmm_done(s, ring_pop(&s->vmm));
        if (s->vmm.n > 0)
            vmm_start(s);
        any = true;
    }
    if (s->run.op >= 0 && s->run_end <= s->now) {
        kernel_done(s);
        any = true;
    }
    links_retime(s);
    return any;
}

static uint64_t next_event(const model_t *s)
{
    uint64_t t = UINT64_MAX;
    t = s->h2d.done_at < t ? s->h2d.done_at : t;
    t = s->d2h.done_at < t ? s->d2h.done_at : t;
    t = s->vmm.n > 0 && s->vmm_done < t ? s->vmm_done : t;
    t = s->run.op >= 0 && s->run_end < t ? s->run_end : t;
    return t;
}

/* Every live chunk's data is where its state says. */
static void check_data(const model_t *s)
{
    for (uint32_t c = 0; c < s->w->nchunks; c++) {
        const chunk_t *k = &s->c[c];
        if (!k->live || k->version == 0)
            continue;
        bool ok = (k->state == RESIDENT && k->dev_version == k->version) ||
                  (k->state == HOST && k->host_version == k->version) ||
                  (k->state == EVICTING && k->dev_version == k->version) ||
                  (k->state == FETCHING && k->host_version == k->version);
        invariant(ok, s, c, "a live chunk's data was lost");
    }
}

static void model_free(model_t *s)
{
    policy_destroy(s->p);
    free(s->c);
    free(s->cand);
    free(s->listed);
    free(s->ranked);
    free(s->prep.chunk);
    free(s->prep.needs);
    free(s->prep.cut);
    free(s->run.chunk);
    free(s->run.needs);
    free(s->run.cut);
    free(s->h2d.q.v);
    free(s->d2h.q.v);
    free(s->vmm.v);
    free(s->pq.v);
}

sim_result_t sim_run(const sim_workload_t *w, const sim_iters_t *its, const sim_config_t *cfg,
                     const sim_vdnn_plan_t *plan, sim_policy_t pol, uint32_t capacity)
{
    model_t s = {.w = w,
                 .cfg = cfg,
                 .its = its,
                 .pol = pol,
                 .chunk = w->chunk_bytes,
                 .capacity = capacity,
                 .free_blocks = capacity,
                 .prep.op = -1,
                 .run.op = -1};
    s.plan = pol == SIM_VDNN && w->hints ? plan : NULL;
    /* lms's reclaim watermarks for a device limit of the capacity, resolved
     * as lms_init resolves them (the host limit plays no part in them, so
     * none is given: swap is left false) */
    size_t limit = (size_t)capacity * w->chunk_bytes;
    swap_config_t lms_cfg = {.device_limit = limit};
    swap_facts_t facts = {.free_bytes = limit, .total_bytes = limit, .granularity = w->chunk_bytes};
    swap_resolved_t lms;
    bench_check(swap_config_resolve(&lms_cfg, false, &facts, &lms), "swap_config_resolve");
    s.low = (uint32_t)lms.low;
    s.high = (uint32_t)lms.high;
    s.h2d = (link_t){.rate = cfg->h2d_gbps, .done_at = UINT64_MAX}; /* GB/s = bytes/ns */
    s.d2h = (link_t){.rate = cfg->d2h_gbps, .done_at = UINT64_MAX};
    s.c = sim_zalloc(w->nchunks, sizeof *s.c);
    s.cand = sim_zalloc(w->nchunks, sizeof *s.cand);
    s.listed = sim_zalloc(w->nchunks, sizeof *s.listed);
    s.ranked = sim_zalloc(2 * w->nchunks, sizeof *s.ranked);
    for (uint32_t c = 0; c < w->nchunks; c++)
        s.c[c].cand = SIM_NONE;
    policy_config_t pc = {.nchunks = w->nchunks, .lru = pol != SIM_SCHEDULE};
    bench_check(policy_create(&pc, &s.p), "policy_create");
    schedule(&s);
    links_retime(&s);
    while (s.cursor < w->nops || s.prep.op >= 0 || s.run.op >= 0) {
        uint64_t t = next_event(&s);
        if (t == UINT64_MAX)
            sim_die("%s, %s, %u chunks: stuck at op %zu with nothing in flight", w->name,
                    sim_policy_name[pol], capacity, s.cursor);
        s.now = t;
        links_advance(&s);
        while (complete_due(&s))
            ;
        schedule(&s);
        links_retime(&s);
    }
    check_data(&s);
    model_free(&s);
    return s.last;
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
