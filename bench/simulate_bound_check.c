/*
 * bench/simulate_bound_check.c — Note [Lower bound] and Note [Phase bound]
 * (simulate_bound.c) against the least time any schedule takes, found by
 * trying them all, on tiny workloads: a few one-chunk tensors, a few
 * kernels, a device of 1 to 3 chunks. Exits 1, naming the workload, when a
 * bound for any run (sim_lower_bound without steady) is above that least
 * time; prints one JSON line with how many were tried and how often the
 * phase bound was the higher.
 *
 * The search's model is the simulator's (simulate_model.c) in whole time
 * units, loosened wherever that is simpler, since a looser model's least
 * time is no more than the simulator's and the bound must still hold:
 *   - a chunk is unbacked, resident (dirty or clean), being mapped, mapped,
 *     being fetched (H2D), being copied out (D2H) or being unmapped; a
 *     fetch maps (map and set_access, m units on the VMM queue) then copies
 *     (h units on the H2D link); a dirty chunk is copied out (d units on
 *     D2H) and stays resident and clean, and any clean resident chunk can
 *     be unmapped (u units on the VMM queue), which frees its block; a
 *     chunk named by the running kernel is neither copied out nor unmapped;
 *   - at any whole time each idle link and the VMM queue may take any job
 *     or none, and the next kernel may start or wait: every schedule;
 *   - a kernel starts once the one before has ended and each chunk it names
 *     is resident, or takes a free block at once where it needs no data;
 *     its writes make its chunks dirty when it ends; the frees and allocs
 *     after it take effect then;
 *   - the step starts from any state where no copy or call is in flight
 *     and a subset of the live chunks with data, at most the device, is
 *     resident and clean (one in flight is no better placed than one done,
 *     and a clean chunk than a dirty one);
 *   - the links are full duplex, or share one wire (half duplex: both
 *     factor 0.5); set_access is no slower beside a D2H copy.
 */
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/base.h"
#include "bench/simulate.h"

#define UNIT_NS 1000.0 /* a search time unit */
#define MAXT 4         /* tensors */
#define MAX_STATES (1u << 22)

/* What simulate.c supplies to the simulator's files. */
void *sim_zalloc(size_t n, size_t size)
{
    void *p = calloc(n ? n : 1, size);
    if (p == NULL) {
        fputs("simulate_bound_check: no host memory\n", stderr);
        exit(1);
    }
    return p;
}

enum { NOB, RES, MAPPING, MAPPED, FETCH, D2H, UNMAP };
enum { R_VMM, R_H2D, R_D2H, NRES };

/* A state of the search, packed: per tensor state (3 bits), dirty, live,
 * data; per resource its tensor + 1 (3 bits) and units left (3 bits); the
 * next op and the running kernel's units left. */
typedef struct st {
    uint8_t s[MAXT], dirty[MAXT], live[MAXT], data[MAXT];
    uint8_t job[NRES], left[NRES];
    uint8_t cursor, run_left; /* run_left > 0: the kernel before cursor runs */
} st_t;

typedef struct inst {
    sim_workload_t w;
    int cost[NRES], capacity, nt;
    bool half;
    size_t first, end; /* the step's ops */
} inst_t;

static uint64_t pack(const st_t *a)
{
    uint64_t v = 0;
    for (int t = 0; t < MAXT; t++)
        v = v << 6 | a->s[t] << 3 | a->dirty[t] << 2 | a->live[t] << 1 | a->data[t];
    for (int r = 0; r < NRES; r++)
        v = v << 6 | a->job[r] << 3 | a->left[r];
    return v << 9 | (uint64_t)a->cursor << 3 | a->run_left;
}

static st_t unpack(uint64_t v)
{
    st_t a;
    a.run_left = v & 7;
    a.cursor = (v >> 3) & 63;
    v >>= 9;
    for (int r = NRES; r-- > 0; v >>= 6) {
        a.job[r] = (v >> 3) & 7;
        a.left[r] = v & 7;
    }
    for (int t = MAXT; t-- > 0; v >>= 6) {
        a.s[t] = (v >> 3) & 7;
        a.dirty[t] = (v >> 2) & 1;
        a.live[t] = (v >> 1) & 1;
        a.data[t] = v & 1;
    }
    return a;
}

static int blocks(const st_t *a)
{
    int n = 0;
    for (int t = 0; t < MAXT; t++)
        n += a->s[t] != NOB;
    return n;
}

static bool pinned(const inst_t *in, const st_t *a, int t)
{
    if (a->run_left == 0)
        return false;
    const sim_op_t *op = &in->w.ops[a->cursor - 1];
    for (uint32_t i = op->acc; i < op->acc + op->nacc; i++)
        if ((int)in->w.acc[i].tensor == t)
            return true;
    return false;
}

/* Applies the allocs and frees from the cursor to the next kernel. */
static void settle(const inst_t *in, st_t *a)
{
    for (; a->cursor < in->end && in->w.ops[a->cursor].kind != SIM_KERNEL; a->cursor++) {
        const sim_op_t *op = &in->w.ops[a->cursor];
        int t = (int)op->tensor;
        if (op->kind == SIM_ALLOC) {
            a->live[t] = 1;
            a->data[t] = a->dirty[t] = 0;
            a->s[t] = NOB;
        } else if (op->kind == SIM_FREE) {
            a->live[t] = a->data[t] = a->dirty[t] = 0;
            a->s[t] = NOB;
            for (int r = 0; r < NRES; r++)
                if (a->job[r] == t + 1)
                    a->job[r] = a->left[r] = 0;
        }
    }
}

/* Starts the kernel at the cursor if it can: every tensor it names resident,
 * or given a free block where it needs no data. */
static bool start_kernel(const inst_t *in, st_t *a)
{
    if (a->run_left > 0 || a->cursor >= in->end)
        return false;
    const sim_op_t *op = &in->w.ops[a->cursor];
    int need = 0;
    for (uint32_t i = op->acc; i < op->acc + op->nacc; i++) {
        int t = (int)in->w.acc[i].tensor;
        bool reads = in->w.acc[i].mode != SIM_OVERWRITE && a->data[t];
        if (a->s[t] == NOB && !reads)
            need++;
        else if (a->s[t] != RES)
            return false;
    }
    if (blocks(a) + need > in->capacity)
        return false;
    for (uint32_t i = op->acc; i < op->acc + op->nacc; i++)
        if (a->s[in->w.acc[i].tensor] == NOB)
            a->s[in->w.acc[i].tensor] = RES;
    a->cursor++;
    a->run_left = (uint8_t)(op->ns / (uint64_t)UNIT_NS);
    return true;
}

/* One time unit passes; the jobs and the kernel that end then finish. */
static void advance(const inst_t *in, st_t *a)
{
    for (int r = 0; r < NRES; r++) {
        if (a->job[r] == 0 || --a->left[r] > 0)
            continue;
        int t = a->job[r] - 1;
        a->job[r] = 0;
        a->s[t] = r == R_VMM ? (a->s[t] == MAPPING ? MAPPED : NOB) : RES;
        if (r == R_D2H)
            a->dirty[t] = 0;
    }
    if (a->run_left > 0 && --a->run_left == 0) {
        const sim_op_t *op = &in->w.ops[a->cursor - 1];
        for (uint32_t i = op->acc; i < op->acc + op->nacc; i++) {
            int t = (int)in->w.acc[i].tensor;
            if (in->w.acc[i].mode != SIM_READ)
                a->dirty[t] = a->data[t] = 1;
        }
        settle(in, a);
    }
}

/* The jobs resource r could start: tensor + 1, 0 for none. */
static int jobs(const inst_t *in, const st_t *a, int r, int *out)
{
    int n = 0;
    out[n++] = 0;
    if (a->job[r] != 0 || (in->half && r != R_VMM && a->job[R_H2D + R_D2H - r] != 0))
        return n;
    for (int t = 0; t < in->nt; t++) {
        bool ok = false;
        if (r == R_H2D)
            ok = a->s[t] == MAPPED;
        else if (r == R_D2H)
            ok = a->s[t] == RES && a->dirty[t] && !pinned(in, a, t);
        else
            ok = (a->s[t] == NOB && a->live[t] && a->data[t] && blocks(a) < in->capacity) ||
                 (a->s[t] == RES && !a->dirty[t] && !pinned(in, a, t));
        if (ok)
            out[n++] = t + 1;
    }
    return n;
}

static int cmp_u64(const void *x, const void *y)
{
    uint64_t a = *(const uint64_t *)x, b = *(const uint64_t *)y;
    return a < b ? -1 : a > b;
}

static bool done(const inst_t *in, const st_t *a)
{
    return a->cursor >= in->end && a->run_left == 0;
}

/* The least whole units from the step's start to its last kernel's end. */
static int least_time(const inst_t *in)
{
    uint64_t *cur = sim_zalloc(MAX_STATES, sizeof *cur), *next = sim_zalloc(MAX_STATES, 8);
    size_t ncur = 0;
    st_t base = {0};
    for (size_t j = 0; j < in->first; j++) { /* what the steps before leave: live, data */
        const sim_op_t *op = &in->w.ops[j];
        if (op->kind == SIM_ALLOC)
            base.live[op->tensor] = 1;
        if (op->kind == SIM_FREE)
            base.live[op->tensor] = base.data[op->tensor] = 0;
        for (uint32_t i = op->acc; op->kind == SIM_KERNEL && i < op->acc + op->nacc; i++)
            base.data[in->w.acc[i].tensor] |= in->w.acc[i].mode != SIM_READ;
    }
    base.cursor = (uint8_t)in->first;
    settle(in, &base);
    for (int mask = 0; mask < 1 << in->nt; mask++) {
        st_t a = base;
        for (int t = 0; t < in->nt; t++)
            if (mask >> t & 1)
                a.s[t] = a.live[t] && a.data[t] ? RES : 9;
        bool ok = blocks(&a) <= in->capacity;
        for (int t = 0; t < in->nt; t++)
            ok &= a.s[t] != 9;
        if (ok)
            cur[ncur++] = pack(&a);
    }
    for (int time = 0; time < 200; time++) {
        size_t nnext = 0;
        for (size_t k = 0; k < ncur; k++) {
            st_t a = unpack(cur[k]);
            if (done(in, &a)) {
                free(cur);
                free(next);
                return time;
            }
            int jv[MAXT + 1], jh[MAXT + 1], jd[MAXT + 1];
            int nv = jobs(in, &a, R_VMM, jv), nh = jobs(in, &a, R_H2D, jh);
            int nd = jobs(in, &a, R_D2H, jd);
            for (int go = 0; go < 2; go++)
                for (int v = 0; v < nv; v++)
                    for (int h = 0; h < nh; h++)
                        for (int d = 0; d < nd; d++) {
                            st_t b = a;
                            if (in->half && jh[h] && jd[d])
                                continue;
                            if (jv[v] && jv[v] == jd[d])
                                continue;
                            int c[NRES] = {jv[v], jh[h], jd[d]};
                            for (int r = 0; r < NRES; r++) {
                                if (c[r] == 0)
                                    continue;
                                int t = c[r] - 1;
                                b.job[r] = (uint8_t)c[r];
                                b.left[r] = (uint8_t)in->cost[r];
                                b.s[t] = r == R_H2D   ? FETCH
                                         : r == R_D2H ? D2H
                                         : b.s[t] == NOB ? MAPPING
                                                         : UNMAP;
                            }
                            if (blocks(&b) > in->capacity)
                                continue;
                            if (go && !start_kernel(in, &b))
                                continue;
                            advance(in, &b);
                            if (nnext == MAX_STATES) {
                                fputs("simulate_bound_check: too many states\n", stderr);
                                exit(1);
                            }
                            next[nnext++] = pack(&b);
                        }
        }
        qsort(next, nnext, sizeof *next, cmp_u64);
        ncur = 0;
        for (size_t k = 0; k < nnext; k++)
            if (k == 0 || next[k] != next[k - 1])
                cur[ncur++] = next[k];
    }
    fputs("simulate_bound_check: no schedule ends\n", stderr);
    exit(1);
}

/* ---- tiny workloads ----------------------------------------------------------- */

static uint64_t rng_state;

static int rnd(int n)
{
    rng_state = rng_state * 6364136223846793005ull + 1442695040888963407ull;
    return (int)((rng_state >> 33) % (uint64_t)n);
}

static void push_op(inst_t *in, sim_op_t op)
{
    sim_workload_t *w = &in->w;
    w->ops[w->nops++] = op;
}

static void touch(inst_t *in, sim_op_t *op, uint32_t t, sim_mode_t mode)
{
    in->w.acc[in->w.nacc++] = (sim_access_t){t, mode};
    op->nacc++;
}

/* A kernel of ns naming up to two of the tensors live, at random modes. */
static void random_kernel(inst_t *in, const bool *live, int most)
{
    sim_op_t op = {.kind = SIM_KERNEL, .layer = -1, .acc = (uint32_t)in->w.nacc,
                   .ns = (uint64_t)(1 + rnd(3)) * (uint64_t)UNIT_NS};
    int n = 1 + rnd(most), first = rnd(in->nt);
    for (int k = 0; k < in->nt && (int)op.nacc < n; k++) {
        int t = (first + k) % in->nt;
        if (live[t])
            touch(in, &op, (uint32_t)t, (sim_mode_t)rnd(3));
    }
    push_op(in, op);
}

/* Two steps: the first allocates the tensors and writes them; the second,
 * the one bounded, runs kernels and may free a tensor and allocate it again. */
static void random_instance(inst_t *in)
{
    memset(in, 0, sizeof *in);
    sim_workload_t *w = &in->w;
    w->chunk_bytes = 2 * BASE_MiB;
    in->nt = 2 + rnd(MAXT - 1);
    w->ntensors = (size_t)in->nt;
    w->tensors = sim_zalloc(MAXT, sizeof *w->tensors);
    w->ops = sim_zalloc(64, sizeof *w->ops);
    w->acc = sim_zalloc(64, sizeof *w->acc);
    bool live[MAXT] = {0};
    for (int t = 0; t < in->nt; t++) {
        w->tensors[t] = (sim_tensor_t){.bytes = w->chunk_bytes, .layer = -1,
                                       .alloc_op = (uint32_t)w->nops, .free_op = SIM_NONE,
                                       .first = (uint32_t)t, .nchunks = 1};
        push_op(in, (sim_op_t){.kind = SIM_ALLOC, .tensor = (uint32_t)t});
        live[t] = true;
        sim_op_t op = {.kind = SIM_KERNEL, .layer = -1, .acc = (uint32_t)w->nacc,
                       .ns = (uint64_t)UNIT_NS};
        touch(in, &op, (uint32_t)t, SIM_OVERWRITE);
        push_op(in, op);
    }
    push_op(in, (sim_op_t){.kind = SIM_ITERATION});
    in->first = w->nops;
    int kernels = 2 + rnd(3), dead = rnd(in->nt + 2); /* the tensor freed, if below nt */
    for (int k = 0; k < kernels; k++) {
        random_kernel(in, live, 2);
        if (k == 0 && dead < in->nt) { /* freed after the first kernel */
            w->tensors[dead].free_op = (uint32_t)w->nops;
            push_op(in, (sim_op_t){.kind = SIM_FREE, .tensor = (uint32_t)dead});
            live[dead] = false;
        }
    }
    in->end = w->nops;
    in->capacity = 1 + rnd(3);
    in->half = rnd(2);
    in->cost[R_VMM] = 1 + rnd(2);
    in->cost[R_H2D] = 1 + rnd(3);
    in->cost[R_D2H] = 1 + rnd(3);
    w->nchunks = (uint32_t)in->nt;
}

/* The bound's figures for the instance's costs: a chunk's H2D, D2H, map
 * and set_access, and unmap take their units. */
static sim_config_t config_of(const inst_t *in)
{
    double mib = (double)in->w.chunk_bytes / (double)BASE_MiB;
    double vmm_us = in->cost[R_VMM] * UNIT_NS / 1e3 / mib;
    return (sim_config_t){
        .h2d_gbps = (double)in->w.chunk_bytes / (in->cost[R_H2D] * UNIT_NS),
        .d2h_gbps = (double)in->w.chunk_bytes / (in->cost[R_D2H] * UNIT_NS),
        .both = in->half ? 0.5 : 1,
        .access_us = vmm_us,
        .access_d2h_us = vmm_us,
        .unmap_us = vmm_us,
    };
}

static void describe(const inst_t *in)
{
    const sim_workload_t *w = &in->w;
    fprintf(stderr, "  capacity %d, %s duplex, vmm %d h2d %d d2h %d units; ops:\n", in->capacity,
            in->half ? "half" : "full", in->cost[R_VMM], in->cost[R_H2D], in->cost[R_D2H]);
    for (size_t j = 0; j < w->nops; j++) {
        const sim_op_t *op = &w->ops[j];
        if (op->kind == SIM_KERNEL) {
            fprintf(stderr, "   %zu kernel %llu:", j, (unsigned long long)(op->ns / UNIT_NS));
            for (uint32_t i = op->acc; i < op->acc + op->nacc; i++)
                fprintf(stderr, " %u%c", w->acc[i].tensor, "rwo"[w->acc[i].mode]);
            fputc('\n', stderr);
        } else {
            fprintf(stderr, "   %zu %s %u\n", j,
                    op->kind == SIM_ALLOC  ? "alloc"
                    : op->kind == SIM_FREE ? "free"
                                           : "iteration",
                    op->tensor);
        }
    }
}

int main(int argc, char **argv)
{
    int n = argc > 1 ? atoi(argv[1]) : 400, failures = 0, phase_higher = 0;
    rng_state = argc > 2 ? strtoull(argv[2], NULL, 0) : 26;
    for (int k = 0; k < n; k++) {
        inst_t in;
        random_instance(&in);
        sim_iters_t its = sim_iters_of(&in.w);
        const sim_iter_t *it = &its.it[its.n - 1];
        sim_config_t cfg = config_of(&in);
        const char *which;
        sim_bound_t b = sim_lower_bound(&in.w, it, (uint32_t)in.capacity, false);
        double bound = sim_bound_ns(&b, &cfg, in.w.chunk_bytes, &which);
        double whole = sim_bound_whole_step_ns(&b, &cfg, in.w.chunk_bytes, &which);
        phase_higher += bound > whole * (1 + 1e-9);
        int max_kernel = 0;
        for (size_t j = in.first; j < in.end; j++)
            max_kernel = in.w.ops[j].nacc > (uint32_t)max_kernel ? (int)in.w.ops[j].nacc
                                                                  : max_kernel;
        if (max_kernel <= in.capacity) {
            double least = least_time(&in) * UNIT_NS;
            if (bound > least + 1e-6) {
                fprintf(stderr, "simulate_bound_check: workload %d: the bound is %.3f units "
                                "(whole step %.3f), but a schedule takes %.0f\n",
                        k, bound / UNIT_NS, whole / UNIT_NS, least / UNIT_NS);
                describe(&in);
                failures++;
            }
        }
        free(its.it);
        free(in.w.tensors);
        free(in.w.ops);
        free(in.w.acc);
    }
    printf("{\"bench\":\"simulate_bound_check\",\"workloads\":%d,\"phase_bound_higher\":%d,"
           "\"failures\":%d}\n",
           n, phase_higher, failures);
    return failures ? 1 : 0;
}
