/*
 * bench/simulate_model.c — the simulator's discrete-event model of one GPU
 * running a workload, driven by lms's own policy code (policy/policy.c, as
 * linked from lms_core) or the vDNN baseline (simulate_policy.c).
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
 *            taken: the model leaves those calls out. --evicted host
 *            adds a host block's calls (Note [Host-mapped eviction in the
 *            simulator], below). With --vmm-order
 *            defer (the default, as lms), prefetches and the evictions
 *            nothing waits for take turns with the copies out as swap/'s
 *            do (Note [VMM beside copies] in swap/prefetch.c; "The order of
 *            the VMM calls" in simulate_policy.c); with fifo, each starts
 *            when it comes, as the model did before.
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
 * The policies: simulate_policy.c.
 *
 * Note [Host-mapped eviction in the simulator]
 * With --evicted host (issue 27), an evicted chunk's addresses map its
 * host block, so that an access no hook saw reads or writes it over the
 * link instead of faulting; the model charges the VMM calls that costs,
 * on the one serial VMM queue, at their own us per MiB (the host_* figures
 * of Note [Link presets] in simulate.c):
 *   - an eviction, once its copy has landed (at once for a clean drop),
 *     unmaps its device block, and once that is done (the block is free
 *     then, as swap/ gives it back) maps its host block at its addresses
 *     and sets access on it (at the beside-D2H rate while a copy out is on
 *     the wire);
 *   - a fetch first unmaps the host block from the chunk's addresses, then
 *     maps a device block and sets access as in the unmapped mode; an
 *     overwrite of a chunk on the host, and a free of one, unmap the host
 *     block alone (its cost charged to the queue; the chunk does not wait
 *     for it, as it waits for no map when it takes a block with no copy);
 *   - with --vmm-order defer, an eviction whose copy lands while another
 *     copy out is queued or on the wire (Note [Remap beside copies] in
 *     swap/residency.c) waits, still evicting, on its block: its unmap and
 *     host map are queued when the D2H link goes idle, or at once when a
 *     kernel being prepared finds too few free blocks (it waits for them
 *     then, beside the copies out). Meanwhile its block counts as on its
 *     way, as an eviction's in flight does; a kernel that names the chunk
 *     finds it resident (it stays, its host copy current), and a free
 *     gives its block back at once. An eviction nothing waits for does not
 *     start while such evictions wait, or their calls are queued, as for a
 *     prefetch's map and set_access: swap/ makes the calls under its lock,
 *     so no copy starts until they return. Rows count these evictions as
 *     remaps_deferred.
 * A chunk's host map queued before its fetch runs first (the queue is
 * FIFO), and the fetch then unmaps it. The unmapped mode (the default, as lms
 * until a card has measured the host-mapped one) queues none of these
 * calls, so its rows are the same as before the mode was modelled. The
 * lower bound (Note [Lower bound] in simulate_bound.c) leaves them out:
 * it is the unmapped mode's, and a host row over it shows the mode's cost.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#define BENCH_NAME "simulate"
#include "base/base.h"
#include "bench/bench.h"
#include "bench/simulate_model.h"
#include "swap/config.h"

const char *const sim_policy_name[SIM_NPOLICIES] = {"schedule", "lru", "vdnn"};

/* ---- the simulation ---------------------------------------------------------- */

void model_invariant(bool ok, const model_t *s, uint32_t c, const char *what)
{
    if (!ok)
        sim_die("invariant broken at %.6f ms, op %zu, chunk %u (state %d, version %u, device %u, "
                "host %u): %s",
                (double)s->now / 1e6, s->cursor, c, s->c[c].state, s->c[c].version,
                s->c[c].dev_version, s->c[c].host_version, what);
}

void model_ring_push(ring_t *r, uint32_t x)
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

uint32_t model_ring_pop(ring_t *r)
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
uint32_t model_victim(model_t *s)
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
    bool d2h = s->d2h.q.n > 0;
    double us;
    switch (s->vmm_call) {
    case VMM_MAP: us = cfg->map_us; break;
    case VMM_ACCESS: us = d2h ? cfg->access_d2h_us : cfg->access_us; break;
    case VMM_UNMAP_CALL: us = cfg->unmap_us; break;
    case VMM_HMAP: us = cfg->host_map_us; break;
    case VMM_HACCESS: us = d2h ? cfg->host_access_d2h_us : cfg->host_access_us; break;
    default: us = cfg->host_unmap_us; break;
    }
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
    if (s->vmm.n > 0) {
        uint64_t ns = s->now - s->links_at;
        bool access = s->vmm_call == VMM_ACCESS || s->vmm_call == VMM_HACCESS;
        s->cur.vmm_ns += ns;
        s->cur.host_vmm_ns += s->vmm_call >= VMM_HMAP ? ns : 0;
        s->cur.access_d2h_ns += access && s->d2h.q.n > 0 ? ns : 0;
    }
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
    model_ring_push(&l->q, c);
}

/* The VMM queue's head starts its first call now (a fetch's the host
 * block's unmap, if the chunk's addresses map it). */
static void vmm_start(model_t *s)
{
    uint32_t entry = s->vmm.v[s->vmm.head];
    switch (entry & VMM_KIND) {
    case 0: s->vmm_call = s->c[entry].va_host ? VMM_HUNMAP_CALL : VMM_MAP; break;
    case VMM_UNMAP: s->vmm_call = VMM_UNMAP_CALL; break;
    case VMM_REMAP: s->vmm_call = VMM_HMAP; break;
    default: s->vmm_call = VMM_HUNMAP_CALL; break;
    }
    s->vmm_left = 1;
    vmm_retime(s, true);
}

/* The VMM queue's head goes on to its entry's next call, if it has one:
 * a fetch's map after the host block's unmap, set_access after a map. */
static bool vmm_next_call(model_t *s)
{
    uint32_t entry = s->vmm.v[s->vmm.head];
    if (s->vmm_call == VMM_HUNMAP_CALL && (entry & VMM_KIND) == 0) {
        model_invariant(s->c[entry].va_host, s, entry, "a host block unmapped where none is");
        s->c[entry].va_host = false;
        s->vmm_call = VMM_MAP;
    } else if (s->vmm_call == VMM_MAP || s->vmm_call == VMM_HMAP) {
        s->vmm_call = s->vmm_call == VMM_MAP ? VMM_ACCESS : VMM_HACCESS;
    } else {
        return false;
    }
    s->vmm_left = 1;
    vmm_retime(s, true);
    return true;
}

static void vmm_push(model_t *s, uint32_t entry)
{
    model_ring_push(&s->vmm, entry);
    if (s->vmm.n == 1)
        vmm_start(s);
}

/* -- host-mapped eviction (Note [Host-mapped eviction in the simulator]) -- */

static void remap_queue(model_t *s, uint32_t c)
{
    s->c[c].remap = REMAP_QUEUED;
    vmm_push(s, c | VMM_REMAP);
}

/* Chunk c's eviction has no copy left (its D2H landed, or it is a clean
 * drop): its block is unmapped now (and, with --evicted host, its host
 * block mapped after), or, when the host block is to be mapped beside a
 * copy out, it waits on its block, evicting, until the copies out end. */
static void evicted(model_t *s, uint32_t c)
{
    chunk_t *k = &s->c[c];
    bool host = s->cfg->evicted_host && k->live && k->version != 0;
    if (host && s->cfg->vmm_defer && s->d2h.q.n > 0) {
        k->remap = REMAP_DEFERRED;
        s->remaps_pending++;
        s->cur.remaps_deferred++;
        model_ring_push(&s->remaps, c);
        return;
    }
    if (host) {
        k->remap = REMAP_UNMAP;
        s->remaps_pending++;
    }
    vmm_push(s, c | VMM_UNMAP);
}

void model_flush_remaps(model_t *s)
{
    while (s->remaps.n > 0) {
        uint32_t c = model_ring_pop(&s->remaps);
        if (s->c[c].remap == REMAP_DEFERRED) {
            s->c[c].remap = REMAP_UNMAP;
            vmm_push(s, c | VMM_UNMAP);
        }
    }
}

/* Chunk c waits on its block (REMAP_DEFERRED) and is touched or freed: it
 * is resident again, its host copy current. */
static void unretire(model_t *s, uint32_t c)
{
    chunk_t *k = &s->c[c];
    k->remap = REMAP_NONE; /* its entry in s->remaps goes stale */
    s->remaps_pending--;
    s->evicting--;
    k->state = RESIDENT;
    k->dirty = false;
    update_cand(s, c);
}

/* Chunk c leaves the host (fetch: by a fetch, whose entry unmaps the host
 * block itself): the host block is unmapped from its addresses, once it is
 * mapped there. */
static void host_leave(model_t *s, uint32_t c, bool fetch)
{
    chunk_t *k = &s->c[c];
    if (!fetch && (k->remap == REMAP_QUEUED || k->va_host))
        vmm_push(s, c | VMM_HUNMAP);
}

/* -- chunk transitions -- */

static void release_block(model_t *s, uint32_t c)
{
    s->c[c].state = UNBACKED;
    s->free_blocks++;
    model_invariant(s->free_blocks <= s->capacity, s, c, "more blocks free than the device has");
}

void model_set_queued(model_t *s, uint32_t c, bool queued)
{
    s->queued += (uint32_t)queued - (uint32_t)s->c[c].queued;
    s->c[c].queued = queued;
}

/* Gives chunk c, unbacked or on the host, a free block; fetches its data if
 * it has some and needs says it is needed. */
void model_take_block(model_t *s, uint32_t c, bool needs)
{
    chunk_t *k = &s->c[c];
    model_invariant(s->free_blocks > 0, s, c, "a block taken when none is free");
    s->free_blocks--;
    model_set_queued(s, c, false);
    if (k->state == HOST)
        host_leave(s, c, needs);
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
void model_evict(model_t *s, uint32_t c)
{
    chunk_t *k = &s->c[c];
    model_invariant(k->state == RESIDENT && k->pins == 0, s, c, "evicting a chunk in use");
    k->state = EVICTING;
    k->ahead = false;
    update_cand(s, c);
    s->evicting++;
    s->cur.evictions++;
    if (k->version != 0 && k->dirty) {
        link_push(s, &s->d2h, c);
    } else {
        model_invariant(k->version == 0 || k->host_version == k->version, s, c,
                  "a clean drop of data the host does not have");
        s->cur.clean_drops++;
        evicted(s, c);
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
    evicted(s, c);
}

static void vmm_done(model_t *s, uint32_t entry)
{
    uint32_t c = entry & ~VMM_KIND;
    chunk_t *k = &s->c[c];
    if ((entry & VMM_KIND) == VMM_UNMAP) {
        s->evicting--;
        bool keep = k->live && !k->discard && k->version != 0, remap = k->remap == REMAP_UNMAP;
        k->discard = false;
        k->remap = REMAP_NONE;
        release_block(s, c);
        if (keep) {
            model_invariant(k->host_version == k->version, s, c, "evicted data lost");
            k->state = HOST;
        }
        if (keep && remap)
            remap_queue(s, c);
        else if (remap)
            s->remaps_pending--;
        return;
    }
    if ((entry & VMM_KIND) == VMM_REMAP) {
        model_invariant(k->remap == REMAP_QUEUED && !k->va_host, s, c, "a remap not asked for");
        k->remap = REMAP_NONE;
        k->va_host = true;
        s->remaps_pending--;
        s->cur.remaps++;
        return;
    }
    if (entry & VMM_KIND) { /* a host block's unmap alone */
        model_invariant(k->va_host, s, c, "a host block unmapped where none is");
        k->va_host = false;
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

void model_report(model_t *s, uint32_t first, uint32_t n, policy_kind_t kind)
{
    bench_check(policy_access(s->p, first, n, kind, s->now), "policy_access");
}

/* The chunks alloc/ brought into use (Note [Placement in the simulator] in
 * simulate_workloads.c) hold no data yet. */
static void do_alloc(model_t *s, const sim_tensor_t *t)
{
    for (uint32_t c = t->used_first; c < t->used_first + t->used_n; c++) {
        chunk_t *k = &s->c[c];
        model_invariant(!k->live && (k->state == UNBACKED || k->discard || k->pins > 0), s, c,
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
        model_report(s, t->gone_first, t->gone_n, POLICY_FREE);
    for (uint32_t c = t->gone_first; c < t->gone_first + t->gone_n; c++) {
        chunk_t *k = &s->c[c];
        k->live = false;
        k->ahead = false;
        model_set_queued(s, c, false);
        k->version = 0;
        if (k->state == EVICTING && k->remap == REMAP_DEFERRED)
            unretire(s, c); /* and its block goes, as a resident one's */
        if (k->state == HOST) {
            host_leave(s, c, false);
            k->state = UNBACKED;
        }
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
        if (s->c[c].state == EVICTING && s->c[c].remap == REMAP_DEFERRED)
            unretire(s, c); /* touched while it waits on its block: it stays */
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
            model_take_block(s, c, pr->needs[i]);
        else
            short_of++;
    }
    s->waiting = short_of;
    if (short_of > 0) /* what waits on its block goes now, beside the copies out */
        model_flush_remaps(s);
    for (uint32_t need = short_of > s->evicting ? short_of - s->evicting : 0;
         need > 0 && s->ncand > 0; need--)
        model_evict(s, model_victim(s));
}

static bool prep_ready(model_t *s)
{
    prep_t *pr = &s->prep;
    while (pr->ready < pr->n && s->c[pr->chunk[pr->ready]].state == RESIDENT)
        pr->ready++;
    return pr->ready == pr->n;
}

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
        model_report(s, pr->chunk[i], (uint32_t)(e - i),
                     pr->needs[i] ? POLICY_USE : POLICY_OVERWRITE);
    }
    for (uint32_t i = op->acc; i < op->acc + op->nacc; i++) {
        const sim_access_t *a = &s->w->acc[i];
        const sim_tensor_t *t = &s->w->tensors[a->tensor];
        for (uint32_t c = t->first; c < t->first + t->span; c++) {
            chunk_t *k = &s->c[c];
            model_invariant(k->state == RESIDENT && k->pins > 0, s, c, "a kernel ran without it");
            k->ahead = false;
            /* the rule itself, not needs_data: a partial overwrite reads */
            bool whole = c >= t->whole && c < t->whole + t->nwhole;
            model_invariant((a->mode == SIM_OVERWRITE && whole) || k->version == 0 ||
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
        model_vdnn_prefetch(s, (size_t)s->run.op);
}

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
        model_vdnn_offload(s, j);
    if (j == s->its->it[s->iter].last_kernel) {
        s->cur.step_ns = s->now - s->win_start;
        s->cur.following = policy_following(s->p);
        s->last = s->cur;
        s->cur = (sim_result_t){0};
        s->win_start = s->now;
        s->iter++;
    }
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
    model_policies(s);
}

/* Finishes whatever is due at now; false if nothing was. */
static bool complete_due(model_t *s)
{
    bool any = false;
    if (s->h2d.q.n > 0 && s->h2d.done_at <= s->now) {
        h2d_done(s, model_ring_pop(&s->h2d.q));
        if (s->h2d.q.n > 0)
            s->h2d.left = (double)s->chunk;
        any = true;
    }
    if (s->d2h.q.n > 0 && s->d2h.done_at <= s->now) {
        d2h_done(s, model_ring_pop(&s->d2h.q));
        if (s->d2h.q.n > 0)
            s->d2h.left = (double)s->chunk;
        any = true;
    }
    /* an entry's calls one after another (any may take no time) */
    while (s->vmm.n > 0 && s->vmm_done <= s->now && vmm_next_call(s))
        ;
    if (s->vmm.n > 0 && s->vmm_done <= s->now) {
        vmm_done(s, model_ring_pop(&s->vmm));
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
        model_invariant(ok, s, c, "a live chunk's data was lost");
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
    free(s->remaps.v);
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
