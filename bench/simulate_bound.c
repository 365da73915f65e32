/*
 * bench/simulate_bound.c — the simulator's iterations, footprints and lower
 * bound: what the op stream alone says about the least time an iteration
 * can take at a given device size, whatever the policy.
 *
 * Note [Lower bound]
 * For the reported step, its compute and the least data that must cross
 * the link in it bound its time: LB = max(compute, link, vmm), "bound"
 * naming the largest term.
 *   in   At any instant t, the device holds at most C chunks. Let R(t) be
 *        the live chunks with data whose next access in the step reads it.
 *        When a kernel starts, every chunk K it names is resident, so at
 *        least |R(t) u K| - C chunks of R(t) are elsewhere, and each needs
 *        an H2D between t and its read. in_min = the most of |R(t) u K| - C
 *        over kernel starts and the step's start. At the start this is the
 *        issue's "chunks whose data exists at the step's start and is read
 *        in it, minus C"; the maximum, usually at the end of forward, also
 *        counts the activations that cannot all stay.
 *   out  Let D(t) be the chunks of R(t) written before t. One that is not
 *        resident at t was copied out after its write and before t, and
 *        at most C - |K \ D(t)| are resident: out_min = the most of
 *        |D(t) u K| - C over kernel starts, and of (live chunks written in
 *        the step) - C at its end (the simulator, like swap/, copies out
 *        every dirty live chunk it evicts: the "live at both the
 *        start and the end and written" is a part of these).
 *   link With a = in_min x chunk / h2d and b = out_min x chunk / d2h, each
 *        direction alone, and both_factor f of each rate when both run, the
 *        least time is a linear programme over the time spent with one or
 *        both busy: a + b - min(a, b) max(0, 2f - 1) / f. On a full-duplex
 *        link (f = 1, the h100-pcie5 and c2c presets) that is max(a, b),
 *        not a + b; at f <= 0.5 (half duplex) it is a + b; h100-pcie5's
 *        0.89 lies between.
 *   vmm  The model's VMM queue (simulate_model.c) does one call at a time.
 *        A chunk counted in in_min holds no block at t (the C above are
 *        blocks), so it is mapped and made accessible in the step, before
 *        its H2D: M and S ns in all, S at set_access's idle cost. One
 *        counted in out_min gave its block back before t, so it was
 *        unmapped in the step, after its D2H: U ns. So the step takes at
 *        least M + U + S. And set_access runs r = access_us /
 *        access_d2h_us as fast while a D2H copy is on the wire: with
 *        D >= b the time D2H copies are on the wire in the step and x <= D
 *        of it spent on set_access, the set_access left to run when no D2H
 *        does is S - r x, so the step takes at least
 *          max(M + U + x + max(0, S - r x), D + max(0, S - r x)).
 *        D = b loses nothing (the second term grows with D, and for r < 1
 *        an x above b makes both larger), and the least over x in [0, b]
 *        (each term is convex and piecewise linear in x) is at 0, b, S / r,
 *        or b - M - U, where the two cross. Where set_access is no slower
 *        beside D2H (r >= 1) the term is M + U + S at that cost instead.
 * Written so, the bound holds for any run of the step ("strict"), and
 * --check asserts it. The bound reported is the steady state's, where the
 * step before was the same: a tensor live across both of the step's
 * boundaries (weights, optimizer state) counts as written before t if the
 * step writes it anywhere, since its copy out after that write may fall in
 * the step before, as this step's does for the next, and as read after its
 * last access in the step if its first access reads it. It is higher (the
 * optimizer's state, dirtied at the end of every step, must go out and
 * come back), and the step_over_lower_bound of the last of several steps
 * is measured against it. Neither is tight: chunks that must move because
 * kernels' working sets, not only the totals, do not fit are not counted,
 * and a chunk is counted once however often it must move. The VMM term
 * lets every set_access run at its idle cost where it can wait for the D2H
 * copies to stop (the x above may be 0): the best any order of the calls
 * can do, whether or not the policy defers set_access away from them.
 *
 * Note [Phase bound]
 * The terms above are the whole step's, so they cannot see that on a full
 * duplex link the two directions may be busy at different times (a forward
 * pass that only evicts, an optimizer that only fetches). Split the step at
 * boundaries: its start, each kernel's start, its end. Between two of them,
 * i and j, the time is at least the segment's own max(compute, link, vmm)
 * over the chunks that must cross in it, and the segments of any split add
 * up to the step's time; so the most that a split can sum to is a bound
 * (found by dynamic programming over the boundaries, best[j] = the most of
 * best[i] + segment(i, j)). In the segment:
 *   compute  the kernels that start in it run in it whole: those from
 *            boundary i's (or the first) to the one before j's.
 *   in       X: the tensors holding data at i whose first access in the
 *            segment reads it. At i (a kernel's start, whose chunks K_i
 *            are resident) at most C blocks are held, so |X u K_i| - C
 *            chunks of X hold none at i: each is mapped, made accessible
 *            and copied in after i and before the kernel that reads it,
 *            all inside the segment.
 *   out      Y: the tensors written in the segment whose data is needed
 *            at j (next event a read; or, none in the step, live at its
 *            end, as the simulator and swap/ never drop live data). At j
 *            at most C - |K_j \ Y| of them hold a block; the others were
 *            copied out after their write and unmapped before j.
 * Each fetch or eviction counted lies whole inside one segment, so the
 * segment's link and VMM terms are Note [Lower bound]'s for its counts.
 * Without steady the split runs from the step's start to its end, and the
 * bound holds for any run: bench/simulate_bound_check.c checks it against
 * the least time of every schedule of tiny workloads. With steady the
 * step is one turn of a cycle (the same step before and after), and the
 * split may start at any cut c: a segment may then wrap from the step
 * before into this one, as the optimizer's writes, copied out in the next
 * forward pass, do. Where it wraps, the period before's accesses are to
 * other instances of the tensors not live across the whole step, so those
 * get ids of their own, count in no Y there, and the ones live at the start
 * leave X (their data may have been written in the wrapped part). The cuts
 * tried are where the kernels' phase hints change and PHASE_CUTS evenly
 * spaced ones; a segment ends only at PHASE_POINTS boundaries at most
 * (evenly spaced, and the hints' changes): any choice gives a bound, these
 * keep it to a fraction of a second on 2500-kernel steps.
 * Still not counted: fetches a kernel's own working set forces (K is
 * counted only at the segment's ends), a chunk moved twice in one
 * segment, and what the order inside a segment forces (a fetch that needs
 * the block of an eviction behind it): where lms's schedule moves exactly
 * in_min and out_min and still runs above the bound, the time lost is
 * there, or in the policy.
 *
 * Note [Chunk workload]
 * The model (simulate_model.c) moves chunks, and alloc/ puts several small
 * tensors in one (Note [Placement in the simulator] in
 * simulate_workloads.c), so the notes above are computed not on the
 * placed workload but on its chunk workload (sim_chunk_workload): the same
 * op stream with a tensor for each interval in which a chunk is in use. It
 * is allocated where alloc/ brought the chunk into use (its tensor's
 * used_first/used_n) and freed where it went out of use (gone_first/gone_n),
 * as the model's chunk is live; each kernel names every such tensor whose
 * chunk it touches, once, with the kernel's times, phases and iteration
 * marks. Its mode in the kernel is o only where the kernel's tensor
 * overwrites it and fills the chunk entirely (the model needs the data of
 * any other chunk an overwrite touches: a chunk kept in use past the tensor
 * that was in it still has that tensor's bytes, which the model keeps); a
 * partial overwrite is w, and two tensors in one chunk merge as sim_touch
 * merges. So the notes' R, D, X and Y count each chunk once, as the model
 * holds and moves it, and the bound holds for the model for the reason it
 * holds for whole-chunk tensors (bench/simulate_bound_check.c checks those
 * exhaustively). The chunks a tensor fills that came into use at its alloc
 * and go out of use at its free (or never do) are touched by it alone, all
 * alike: they are one tensor of that many chunks, which gives the same
 * bound as one each and keeps a run of many chunks one access a kernel. A
 * whole-chunk placement's chunk workload is the workload itself (each
 * tensor one such group), so --placement chunks rows are as before.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "base/base.h"
#include "bench/simulate.h"

/* ---- iterations ----------------------------------------------------------------- */

sim_iters_t sim_iters_of(const sim_workload_t *w)
{
    sim_iters_t r = {sim_zalloc(w->nops + 1, sizeof *r.it), 0};
    size_t first = 0, last = SIZE_MAX;
    for (size_t j = 0; j <= w->nops; j++) {
        if (j < w->nops && w->ops[j].kind == SIM_KERNEL)
            last = j;
        if (j < w->nops && w->ops[j].kind != SIM_ITERATION)
            continue;
        if (last != SIZE_MAX && last >= first)
            r.it[r.n++] = (sim_iter_t){first, j, last};
        first = j + 1;
    }
    return r;
}

/* ---- the chunk workload (Note [Chunk workload]) ----------------------------- */

/* The chunks [lo, hi) tensor t alone touches in the whole of their time in
 * use, as one group (Note [Chunk workload]): those it fills that came into
 * use at its alloc and go out at its free or never. */
static void own_group(const sim_tensor_t *t, uint32_t *lo, uint32_t *hi)
{
    uint32_t a = t->whole > t->used_first ? t->whole : t->used_first;
    uint32_t b = t->whole + t->nwhole, u = t->used_first + t->used_n;
    b = u < b ? u : b;
    if (t->free_op != SIM_NONE) {
        a = t->gone_first > a ? t->gone_first : a;
        b = t->gone_first + t->gone_n < b ? t->gone_first + t->gone_n : b;
    }
    *lo = a;
    *hi = b > a ? b : a;
}

static bool in_group(const uint32_t *g, uint32_t c)
{
    return c >= g[0] && c < g[1];
}

/* The chunk workload as it is built. */
typedef struct derive {
    sim_workload_t *cw;
    uint32_t *owner; /* per tensor of cw: the tensor whose group it is; SIM_NONE: a chunk's */
    size_t cap;
    uint64_t live; /* cw's chunks in use */
} derive_t;

/* A tensor of cw for n chunks, allocated now: tensor owner's group, or
 * (owner SIM_NONE) one chunk's time in use. */
static uint32_t unit_alloc(derive_t *d, uint32_t n, uint32_t owner)
{
    uint32_t u = sim_alloc(d->cw, (uint64_t)n * d->cw->chunk_bytes, false, -1);
    d->cw->tensors[u].nchunks = n;
    d->owner = sim_grow(d->owner, &d->cap, (size_t)u + 1, sizeof *d->owner);
    d->owner[u] = owner;
    d->live += n;
    return u;
}

static void unit_free(derive_t *d, uint32_t u)
{
    sim_free(d->cw, u);
    d->live -= d->cw->tensors[u].nchunks;
}

/* Kernel op's accesses in cw: each chunk its tensors touch, named once. */
static void derive_kernel(derive_t *d, const sim_workload_t *w, const sim_op_t *op,
                          const uint32_t *unit, uint32_t (*own)[2])
{
    sim_kernel(d->cw, op->ns, op->layer, op->phase);
    for (uint32_t i = op->acc; i < op->acc + op->nacc; i++) {
        const sim_access_t *a = &w->acc[i];
        const sim_tensor_t *t = &w->tensors[a->tensor];
        for (uint32_t c = t->first; c < t->first + t->span; c++) {
            bool whole = c >= t->whole && c < t->whole + t->nwhole;
            bool mine = in_group(own[a->tensor], c);
            if (unit[c] == SIM_NONE || d->owner[unit[c]] != (mine ? a->tensor : SIM_NONE))
                sim_die("%s: kernel %u touches chunk %u, %s", w->name, (unsigned)(op - w->ops),
                        c, unit[c] == SIM_NONE ? "not in use" : "another tensor's alone");
            sim_touch(d->cw, unit[c], a->mode != SIM_OVERWRITE || whole ? a->mode : SIM_WRITE);
            if (mine) /* the group, named once */
                c = own[a->tensor][1] - 1;
        }
    }
}

void sim_chunk_workload(const sim_workload_t *w, sim_workload_t *cw)
{
    sim_init(cw, w->name, w->chunk_bytes);
    cw->device_bytes = w->device_bytes;
    cw->placement = w->placement;
    derive_t d = {.cw = cw};
    uint32_t *unit = sim_zalloc(w->nchunks, sizeof *unit); /* per chunk: its tensor in cw */
    uint32_t *group = sim_zalloc(w->ntensors, sizeof *group); /* per tensor: its group's */
    uint32_t(*own)[2] = sim_zalloc(w->ntensors, sizeof *own);
    for (uint32_t c = 0; c < w->nchunks; c++)
        unit[c] = SIM_NONE;
    for (size_t j = 0; j < w->nops; j++) {
        const sim_op_t *op = &w->ops[j];
        const sim_tensor_t *t = op->kind == SIM_ALLOC || op->kind == SIM_FREE
                                     ? &w->tensors[op->tensor]
                                     : NULL;
        if (op->kind == SIM_ALLOC) {
            uint32_t *g = own[op->tensor];
            own_group(t, &g[0], &g[1]);
            group[op->tensor] = g[1] > g[0] ? unit_alloc(&d, g[1] - g[0], op->tensor) : SIM_NONE;
            for (uint32_t c = t->used_first; c < t->used_first + t->used_n; c++) {
                if (unit[c] != SIM_NONE)
                    sim_die("%s: chunk %u came into use twice", w->name, c);
                unit[c] = in_group(g, c) ? group[op->tensor] : unit_alloc(&d, 1, SIM_NONE);
            }
        } else if (op->kind == SIM_FREE) {
            for (uint32_t c = t->gone_first; c < t->gone_first + t->gone_n; c++) {
                if (unit[c] == SIM_NONE)
                    sim_die("%s: chunk %u went out of use while not in it", w->name, c);
                if (!in_group(own[op->tensor], c))
                    unit_free(&d, unit[c]);
                unit[c] = SIM_NONE;
            }
            if (group[op->tensor] != SIM_NONE)
                unit_free(&d, group[op->tensor]);
        } else if (op->kind == SIM_ITERATION) {
            sim_iteration(cw);
        } else {
            derive_kernel(&d, w, op, unit, own);
        }
        if (d.live != w->in_use[j])
            sim_die("%s: the chunk workload has %llu chunks in use after op %zu, not %u",
                    w->name, (unsigned long long)d.live, j, w->in_use[j]);
    }
    free(d.owner);
    free(unit);
    free(group);
    free(own);
}

/* ---- the lower bound (Note [Lower bound]) ---------------------------------- */

enum { NEXT_NONE, NEXT_READ, NEXT_DEAD };

bool sim_alive_at(const sim_tensor_t *t, size_t j)
{
    return t->alloc_op < j && (t->free_op == SIM_NONE || t->free_op >= j);
}

/* The walk over one iteration: R and D of Note [Lower bound], in chunks. */
typedef struct walk {
    const sim_workload_t *w;
    uint8_t *after; /* per access: its tensor's next event kind */
    uint8_t *first; /* per tensor: its first event kind in the iteration */
    bool *in_r, *written, *data;
    uint64_t r, d;
    uint32_t capacity;
    sim_bound_t b;
} walk_t;

/* The kind of each access's tensor's next event in the iteration (with
 * steady, a tensor live across both boundaries wraps round to its first),
 * and each tensor's first. */
static void next_events(walk_t *k, const sim_iter_t *it, bool steady)
{
    const sim_workload_t *w = k->w;
    for (size_t j = it->end; j-- > it->first;) {
        const sim_op_t *op = &w->ops[j];
        if (op->kind == SIM_FREE) {
            k->first[op->tensor] = NEXT_DEAD;
        } else if (op->kind == SIM_KERNEL) {
            for (uint32_t i = op->acc; i < op->acc + op->nacc; i++) {
                uint32_t t = w->acc[i].tensor;
                k->after[i] = k->first[t];
                k->first[t] = w->acc[i].mode == SIM_OVERWRITE ? NEXT_DEAD : NEXT_READ;
            }
        }
    }
    for (size_t j = it->first; steady && j < it->end; j++) {
        const sim_op_t *op = &w->ops[j];
        for (uint32_t i = op->acc; op->kind == SIM_KERNEL && i < op->acc + op->nacc; i++) {
            const sim_tensor_t *t = &w->tensors[w->acc[i].tensor];
            if (k->after[i] == NEXT_NONE && sim_alive_at(t, it->first) && sim_alive_at(t, it->end))
                k->after[i] = k->first[w->acc[i].tensor];
        }
    }
}

static void take_max(uint64_t *m, uint64_t n, uint32_t capacity)
{
    if (n > capacity && n - capacity > *m)
        *m = n - capacity;
}

/* Tensor t's membership of R and D, from its state. */
static void walk_set(walk_t *k, uint32_t t, bool in_r)
{
    uint64_t n = k->w->tensors[t].nchunks;
    if (k->in_r[t]) {
        k->r -= n;
        k->d -= k->written[t] ? n : 0;
    }
    k->in_r[t] = in_r;
    if (in_r) {
        k->r += n;
        k->d += k->written[t] ? n : 0;
    }
}

static void walk_kernel(walk_t *k, const sim_op_t *op)
{
    const sim_workload_t *w = k->w;
    uint64_t k_r = 0, k_d = 0; /* the kernel's chunks outside R, outside D */
    for (uint32_t i = op->acc; i < op->acc + op->nacc; i++) {
        uint32_t t = w->acc[i].tensor;
        k_r += k->in_r[t] ? 0 : w->tensors[t].nchunks;
        k_d += k->in_r[t] && k->written[t] ? 0 : w->tensors[t].nchunks;
    }
    take_max(&k->b.in_chunks, k->r + k_r, k->capacity);
    take_max(&k->b.out_chunks, k->d + k_d, k->capacity);
    k->b.compute_ns += op->ns;
    for (uint32_t i = op->acc; i < op->acc + op->nacc; i++) {
        uint32_t t = w->acc[i].tensor;
        walk_set(k, t, false);
        if (w->acc[i].mode != SIM_READ)
            k->data[t] = k->written[t] = true;
        walk_set(k, t, k->data[t] && k->after[i] == NEXT_READ);
    }
}

/* Note [Lower bound]'s in_min and out_min for one iteration at capacity
 * chunks. steady: in the steady state, where the iteration before was the
 * same: a tensor live across both boundaries counts as written if the
 * iteration writes it anywhere (its copy out may fall in the iteration
 * before, as this one's does for the next), and as needed after its last
 * access if its first reads it. Without steady, a bound for any run. */
sim_bound_t sim_lower_bound(const sim_workload_t *w, const sim_iter_t *it, uint32_t capacity,
                            bool steady)
{
    walk_t k = {.w = w,
                 .capacity = capacity,
                 .b = {.w = w, .it = *it, .capacity = capacity, .steady = steady}};
    k.after = sim_zalloc(w->nacc, 1);
    k.first = sim_zalloc(w->ntensors, 1);
    k.in_r = sim_zalloc(w->ntensors, sizeof(bool));
    k.written = sim_zalloc(w->ntensors, sizeof(bool));
    k.data = sim_zalloc(w->ntensors, sizeof(bool));
    next_events(&k, it, steady);
    for (size_t j = 0; j < it->end; j++) { /* data: written before; steady: written in it too */
        const sim_op_t *op = &w->ops[j];
        for (uint32_t i = op->acc; op->kind == SIM_KERNEL && i < op->acc + op->nacc; i++) {
            uint32_t t = w->acc[i].tensor;
            bool write = w->acc[i].mode != SIM_READ, before = j < it->first;
            k.data[t] |= write && before;
            k.written[t] |= write && !before && steady && sim_alive_at(&w->tensors[t], it->first) &&
                            sim_alive_at(&w->tensors[t], it->end);
        }
    }
    for (uint32_t t = 0; t < w->ntensors; t++)
        walk_set(&k, t,
                 sim_alive_at(&w->tensors[t], it->first) && k.data[t] && k.first[t] == NEXT_READ);
    take_max(&k.b.in_chunks, k.r, capacity);
    take_max(&k.b.out_chunks, k.d, capacity);
    for (size_t j = it->first; j < it->end; j++) {
        const sim_op_t *op = &w->ops[j];
        if (op->kind == SIM_ALLOC) {
            walk_set(&k, op->tensor, false);
            k.data[op->tensor] = k.written[op->tensor] = false;
        } else if (op->kind == SIM_FREE) {
            walk_set(&k, op->tensor, false);
        } else if (op->kind == SIM_KERNEL) {
            walk_kernel(&k, op);
        }
    }
    uint64_t dirty_end = 0;
    for (uint32_t t = 0; t < w->ntensors; t++)
        dirty_end +=
            sim_alive_at(&w->tensors[t], it->end) && k.written[t] ? w->tensors[t].nchunks : 0;
    take_max(&k.b.out_chunks, dirty_end, capacity);
    free(k.after);
    free(k.first);
    free(k.in_r);
    free(k.written);
    free(k.data);
    return k.b;
}

/* The least time for in and out bytes over the two directions (Note [Lower bound]). */
static double link_ns(const sim_config_t *cfg, double in, double out)
{
    double a = in / cfg->h2d_gbps, b = out / cfg->d2h_gbps;
    double f = cfg->both > 0.5 ? (2 * cfg->both - 1) / cfg->both : 0;
    return a + b - f * (a < b ? a : b);
}

/* The step's VMM time at x ns of set_access beside D2H copies (Note [Lower
 * bound]): mu = M + U, s = S, d = b, r the rate beside D2H over the idle one. */
static double vmm_at(double mu, double s, double d, double r, double x)
{
    double idle = s - r * x > 0 ? s - r * x : 0; /* set_access left to run with no D2H */
    double queue = mu + x + idle, beside = d + idle;
    return queue > beside ? queue : beside;
}

/* The least time the VMM queue allows for in and out chunks (Note [Lower bound]). */
static double vmm_ns(const sim_config_t *cfg, uint64_t chunk, uint64_t in, uint64_t out)
{
    double mib = (double)chunk / (double)BASE_MiB;
    double mu = ((double)in * cfg->map_us + (double)out * cfg->unmap_us) * mib * 1e3;
    double s = (double)in * cfg->access_us * mib * 1e3;
    double d = (double)(out * chunk) / cfg->d2h_gbps;
    if (cfg->access_d2h_us <= cfg->access_us) /* no slower beside D2H: the cheaper one */
        return mu + (double)in * cfg->access_d2h_us * mib * 1e3;
    double r = cfg->access_us / cfg->access_d2h_us;
    double at[4] = {0, d, s < r * d ? s / r : d, mu < d ? d - mu : 0};
    double least = vmm_at(mu, s, d, r, at[0]);
    for (int i = 1; i < 4; i++) {
        double v = vmm_at(mu, s, d, r, at[i]);
        least = v < least ? v : least;
    }
    return least;
}

double sim_bound_whole_step_ns(const sim_bound_t *b, const sim_config_t *cfg, uint64_t chunk,
                               const char **which)
{
    double compute = (double)b->compute_ns;
    double link = link_ns(cfg, (double)(b->in_chunks * chunk), (double)(b->out_chunks * chunk));
    double vmm = vmm_ns(cfg, chunk, b->in_chunks, b->out_chunks);
    double lb = compute;
    *which = "compute";
    if (link > lb) {
        lb = link;
        *which = "link";
    }
    if (vmm > lb) {
        lb = vmm;
        *which = "vmm";
    }
    return lb;
}

bool sim_bound_terms_agree(const sim_config_t *cfg, uint64_t chunk_bytes, char *why, size_t n)
{
    static const uint64_t moves[][2] = {{0, 5}, {5, 0}, {3, 7}, {10, 10}, {7, 2}, {1000, 1}};
    const double chunk = (double)chunk_bytes, mib = chunk / (double)BASE_MiB, steps = 4000;
    for (size_t i = 0; i < sizeof moves / sizeof moves[0]; i++) {
        double in = (double)moves[i][0], out = (double)moves[i][1];
        double a = in * chunk / cfg->h2d_gbps, b = out * chunk / cfg->d2h_gbps, f = cfg->both;
        double both_max = (a < b ? a : b) / f, link = INFINITY;
        for (double k = 0; k <= steps; k++) {
            double t = both_max * k / steps, left_a = a - f * t, left_b = b - f * t;
            double total = t + (left_a > 0 ? left_a : 0) + (left_b > 0 ? left_b : 0);
            link = total < link ? total : link;
        }
        double mu = (in * cfg->map_us + out * cfg->unmap_us) * mib * 1e3;
        double sa = in * cfg->access_us * mib * 1e3, vmm = INFINITY;
        if (cfg->access_d2h_us > cfg->access_us) {
            double r = cfg->access_us / cfg->access_d2h_us;
            for (double k = 0; k <= steps; k++) {
                double x = b * k / steps, idle = sa - r * x > 0 ? sa - r * x : 0;
                double t = mu + x + idle > b + idle ? mu + x + idle : b + idle;
                vmm = t < vmm ? t : vmm;
            }
        } else {
            vmm = mu + in * cfg->access_d2h_us * mib * 1e3;
        }
        const char *which;
        sim_bound_t bound = {.in_chunks = moves[i][0], .out_chunks = moves[i][1]};
        double got = sim_bound_ns(&bound, cfg, chunk_bytes, &which);
        double want = link > vmm ? link : vmm;
        if (got > want * (1 + 1e-9) + 1 || got < want * (1 - 2e-3) - 1) {
            snprintf(why, n, "the lower bound of %g chunks in and %g out is %.1f ns, where trying "
                     "splits of the time finds %.1f (link %.1f, vmm %.1f)",
                     in, out, got, want, link, vmm);
            return false;
        }
    }
    return true;
}

/* ---- the phase bound (Note [Phase bound]) ----------------------------------- */

#define PHASE_POINTS 256 /* the most boundaries a segment may end at (Note [Phase bound]) */
#define PHASE_CUTS 8     /* steady: cuts tried besides the phase hints' changes */

/* A segment's least time: its compute, and its in and out chunks over the
 * link and the VMM queue (Note [Lower bound]'s terms for the segment). */
static double segment_ns(const sim_config_t *cfg, uint64_t chunk, uint64_t compute, uint64_t in,
                         uint64_t out)
{
    double t = (double)compute;
    double link = link_ns(cfg, (double)(in * chunk), (double)(out * chunk));
    double vmm = in + out > 0 ? vmm_ns(cfg, chunk, in, out) : 0;
    t = link > t ? link : t;
    return vmm > t ? vmm : t;
}

/* The iteration seen as boundaries, and the walk back from one of them:
 * X, Y and K of Note [Phase bound], in chunks. Tensor ids at and above
 * ntensors are the period before's instances of those not live across it. */
typedef struct phase {
    const sim_workload_t *w;
    size_t n;                 /* kernels in the iteration */
    const uint32_t *kernel;   /* their op indices */
    bool *has_data;           /* per access: its tensor holds data written before it */
    uint8_t *after;           /* per access: its tensor's next event kind */
    bool *live_end, *across;  /* per tensor: live at the end; live at both ends */
    uint32_t *seen, *k_at;    /* per id: the walk that last saw it; in K_j */
    bool *in_x, *in_y, *need; /* per id */
    uint32_t stamp;
    uint64_t x, y, ky; /* |X|, |Y|, |Y n K_j| */
} phase_t;

static uint32_t phase_id(const phase_t *ph, uint32_t t, bool before)
{
    return before && !ph->across[t] ? t + (uint32_t)ph->w->ntensors : t;
}

static uint64_t id_chunks(const phase_t *ph, uint32_t id)
{
    return ph->w->tensors[id % ph->w->ntensors].nchunks;
}

/* The kernel starting at a boundary (1 .. n), or NULL. */
static const sim_op_t *kernel_at(const phase_t *ph, uint32_t b)
{
    return b >= 1 && b <= ph->n ? &ph->w->ops[ph->kernel[b - 1]] : NULL;
}

/* Kernel op, now the segment's first, seen by the walk; before: it ran in
 * the period before the one the walk started in. */
static void phase_kernel(phase_t *ph, const sim_op_t *op, bool before)
{
    const sim_workload_t *w = ph->w;
    for (uint32_t i = op->acc; i < op->acc + op->nacc; i++) {
        uint32_t id = phase_id(ph, w->acc[i].tensor, before);
        sim_mode_t mode = w->acc[i].mode;
        if (ph->seen[id] != ph->stamp) { /* its last access in the segment */
            ph->seen[id] = ph->stamp;
            ph->in_x[id] = ph->in_y[id] = false;
            ph->need[id] = id < w->ntensors && (ph->after[i] == NEXT_READ ||
                                                (ph->after[i] == NEXT_NONE && ph->live_end[id]));
        }
        bool x = mode != SIM_OVERWRITE && ph->has_data[i]; /* its first, so far */
        if (x != ph->in_x[id]) {
            ph->x = x ? ph->x + id_chunks(ph, id) : ph->x - id_chunks(ph, id);
            ph->in_x[id] = x;
        }
        if (mode != SIM_READ && ph->need[id] && !ph->in_y[id]) {
            ph->in_y[id] = true;
            ph->y += id_chunks(ph, id);
            ph->ky += ph->k_at[id] == ph->stamp ? id_chunks(ph, id) : 0;
        }
    }
}

/* The walk crosses into the period before: a tensor live at the start but
 * not across both ends may have had its data written there, by its
 * instance of that period, so it leaves X. */
static void phase_cross(phase_t *ph)
{
    for (uint32_t t = 0; t < ph->w->ntensors; t++) {
        if (ph->seen[t] == ph->stamp && ph->in_x[t] && !ph->across[t]) {
            ph->x -= id_chunks(ph, t);
            ph->in_x[t] = false;
        }
    }
}

/* |X u K| at a boundary where kernel op (NULL: none) starts. */
static uint64_t x_with_kernel(const phase_t *ph, const sim_op_t *op, bool before)
{
    uint64_t n = ph->x;
    for (uint32_t i = op != NULL ? op->acc : 0; op != NULL && i < op->acc + op->nacc; i++) {
        uint32_t id = phase_id(ph, ph->w->acc[i].tensor, before);
        n += ph->seen[id] == ph->stamp && ph->in_x[id] ? 0 : id_chunks(ph, id);
    }
    return n;
}

static uint64_t over(uint64_t n, uint32_t capacity)
{
    return n > capacity ? n - capacity : 0;
}

/* The most the segments between boundaries at[0 .. len) can sum to, a
 * segment ending only where point[] says; before[k]: at[k] is in the
 * period before the last one's. */
static double phase_partition(phase_t *ph, const uint32_t *at, const bool *before,
                              const bool *point, size_t len, uint32_t capacity,
                              const sim_config_t *cfg)
{
    double *best = sim_zalloc(len, sizeof *best);
    for (size_t e = 1; e < len; e++) {
        if (!point[e])
            continue;
        ph->stamp++;
        const sim_op_t *ke = kernel_at(ph, at[e]);
        uint64_t kchunks = 0;
        for (uint32_t i = ke != NULL ? ke->acc : 0; ke != NULL && i < ke->acc + ke->nacc; i++) {
            ph->k_at[phase_id(ph, ph->w->acc[i].tensor, before[e])] = ph->stamp;
            kchunks += ph->w->tensors[ph->w->acc[i].tensor].nchunks;
        }
        ph->x = ph->y = ph->ky = 0;
        uint64_t compute = 0;
        bool crossed = false;
        for (size_t a = e; a-- > 0;) {
            bool wraps = before[a] && !before[e];
            if (wraps && !crossed) {
                phase_cross(ph);
                crossed = true;
            }
            const sim_op_t *ka = kernel_at(ph, at[a]);
            if (ka != NULL) {
                phase_kernel(ph, ka, wraps);
                compute += ka->ns;
            }
            if (!point[a])
                continue;
            uint64_t in = over(x_with_kernel(ph, ka, wraps), capacity);
            uint64_t out = over(ph->y + kchunks - ph->ky, capacity);
            double v = best[a] + segment_ns(cfg, ph->w->chunk_bytes, compute, in, out);
            best[e] = v > best[e] ? v : best[e];
        }
    }
    double most = best[len - 1];
    free(best);
    return most;
}

/* The boundaries a segment may end at: all of them up to PHASE_POINTS,
 * else evenly spaced ones, the ends and where the phase hints change. */
static void phase_points(const phase_t *ph, const uint32_t *at, bool *point, size_t len)
{
    size_t every = len / PHASE_POINTS + 1;
    for (size_t k = 0; k < len; k++) {
        const sim_op_t *op = kernel_at(ph, at[k]), *prev = kernel_at(ph, at[k] - 1);
        point[k] = k % every == 0 || k + 1 == len ||
                   (op != NULL && prev != NULL && op->phase != prev->phase);
    }
}

double sim_phase_bound_ns(const sim_workload_t *w, const sim_iter_t *it, uint32_t capacity,
                          bool steady, const sim_config_t *cfg)
{
    size_t nt = w->ntensors, n = 0;
    uint32_t *kernel = sim_zalloc(it->end - it->first, sizeof *kernel);
    for (size_t j = it->first; j < it->end; j++)
        if (w->ops[j].kind == SIM_KERNEL)
            kernel[n++] = (uint32_t)j;
    walk_t k = {.w = w};
    k.after = sim_zalloc(w->nacc, 1);
    k.first = sim_zalloc(nt, 1);
    next_events(&k, it, steady);
    phase_t ph = {.w = w, .n = n, .kernel = kernel, .after = k.after};
    ph.has_data = sim_zalloc(w->nacc, sizeof(bool));
    bool *written = sim_zalloc(nt, sizeof(bool));
    for (size_t j = 0; j < it->end; j++) {
        const sim_op_t *op = &w->ops[j];
        for (uint32_t i = op->acc; op->kind == SIM_KERNEL && i < op->acc + op->nacc; i++)
            ph.has_data[i] = written[w->acc[i].tensor];
        for (uint32_t i = op->acc; op->kind == SIM_KERNEL && i < op->acc + op->nacc; i++)
            written[w->acc[i].tensor] |= w->acc[i].mode != SIM_READ;
    }
    ph.live_end = sim_zalloc(nt, sizeof(bool));
    ph.across = sim_zalloc(nt, sizeof(bool));
    for (uint32_t t = 0; t < nt; t++) {
        ph.live_end[t] = sim_alive_at(&w->tensors[t], it->end);
        ph.across[t] = ph.live_end[t] && sim_alive_at(&w->tensors[t], it->first);
    }
    ph.seen = sim_zalloc(2 * nt, sizeof *ph.seen);
    ph.k_at = sim_zalloc(2 * nt, sizeof *ph.k_at);
    ph.in_x = sim_zalloc(2 * nt, sizeof(bool));
    ph.in_y = sim_zalloc(2 * nt, sizeof(bool));
    ph.need = sim_zalloc(2 * nt, sizeof(bool));
    /* Boundaries 0 .. n + 1: the step's start, kernel b - 1's start, the
     * step's end. Without steady, one walk from 0 to n + 1; with it, from
     * each cut c tried round to c: c .. n + 1 of the period before, then 1 .. c. */
    size_t len = n + 2;
    uint32_t *at = sim_zalloc(len, sizeof *at);
    bool *before = sim_zalloc(len, sizeof(bool)), *point = sim_zalloc(len, sizeof(bool));
    double most = 0;
    for (size_t c = steady ? 1 : n + 1; c <= n + 1; c++) {
        const sim_op_t *op = kernel_at(&ph, (uint32_t)c), *prev = kernel_at(&ph, (uint32_t)c - 1);
        bool hint = op != NULL && prev != NULL && op->phase != prev->phase;
        if (steady && c <= n && c % (n / PHASE_CUTS + 1) != 0 && !hint)
            continue;
        for (size_t q = 0; q < len; q++) {
            before[q] = steady && q < n + 2 - c;
            at[q] = !steady    ? (uint32_t)q
                    : before[q] ? (uint32_t)(c + q)
                                : (uint32_t)(q - (n + 1 - c));
        }
        phase_points(&ph, at, point, len);
        double v = phase_partition(&ph, at, before, point, len, capacity, cfg);
        most = v > most ? v : most;
    }
    free(at);
    free(before);
    free(point);
    free(ph.seen);
    free(ph.k_at);
    free(ph.in_x);
    free(ph.in_y);
    free(ph.need);
    free(ph.live_end);
    free(ph.across);
    free(written);
    free(ph.has_data);
    free(k.after);
    free(k.first);
    free(kernel);
    return most;
}

double sim_bound_ns(const sim_bound_t *b, const sim_config_t *cfg, uint64_t chunk,
                    const char **which)
{
    double lb = sim_bound_whole_step_ns(b, cfg, chunk, which);
    if (b->w == NULL)
        return lb;
    double phases = sim_phase_bound_ns(b->w, &b->it, b->capacity, b->steady, cfg);
    if (phases > lb * (1 + 1e-9)) {
        *which = "phases";
        return phases;
    }
    return lb;
}
