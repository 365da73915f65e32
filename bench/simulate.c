/*
 * bench/simulate — the trace-driven policy simulator (issue 5): lms's own
 * policy code (policy/policy.c, linked from lms_core) decides what to evict
 * and what to fetch ahead for a discrete-event model of one GPU training
 * with more memory than it has. Prints JSON lines on stdout, each with
 * "bench":"simulate", and nothing else there:
 *
 *   build/bench/simulate [--quick] [--check] [--workload gpt|cnn|all]
 *       [--oversub X[,X...]] [--policy schedule|lru|vdnn[,...]] [--trace FILE]
 *       [--device BYTES] [--iterations N] [--link h100-pcie5|pcie4|c2c]
 *       [--h2d-gbps G] [--d2h-gbps G] [--both-factor F] [--map-us-per-mib U]
 *       [--set-access-us-per-mib U] [--set-access-d2h-us-per-mib U]
 *       [--unmap-us-per-mib U] [--placement lms|chunks]
 *       [--vmm-order defer|fifo] [--evicted unmapped|host]
 *       [--host-map-us-per-mib U] [--host-set-access-us-per-mib U]
 *       [--host-set-access-d2h-us-per-mib U] [--host-unmap-us-per-mib U]
 *       [--dump-trace FILE]
 *
 *   {"bench":"simulate","model":"discrete-event",...,"host_cpu":...}   the settings
 *   {"bench":"simulate","workload":W,...,"footprint_bytes":...}        each workload's shape
 *   {"bench":"simulate","workload":W,"oversub":X,"feasible":true,"policy":P,
 *    "step_over_lower_bound":R,"stall_fraction":S,"bytes_moved":B,...} one per run
 *   {"bench":"simulate","workload":W,"oversub":X,"feasible":false,
 *    "reason":...,"device_bytes":...,"largest_kernel_bytes":...}       a size too small to run
 *   {"bench":"simulate","summary":W,...}        the targets beside what was measured
 * Every line but --check's last names the link model it ran on: "link",
 * its preset's name and figures (Note [Link presets]).
 *
 * Workloads: gpt and cnn (simulate_workloads.c), or a trace
 * (docs/trace-format.md, simulate_trace.c). A generated workload runs
 * --iterations training steps (4; 3 with --quick and --check), a trace the
 * steps it has; the last step is reported (the first records the schedule,
 * the others follow one). The device holds footprint / X chunks for each
 * oversubscription X (1.25, 1.5, 2, 4 and 8; 1.5 and 2 with --quick),
 * where the footprint is the most chunks in use at once in the reported
 * step, as placed (--placement: lms's alloc/ by default, Note [Placement in
 * the simulator] in simulate_workloads.c); or --device bytes; or a trace's
 * device line. A size at which the largest kernel's chunks do not fit gives
 * a row that says so ("feasible": false), and the other sizes run. A row's
 * times are that step's: step_ms from the end of the step before to the end
 * of its last kernel, compute_ms the sum of its kernels' times, stall_ms the rest
 * (the compute stream waiting for data); bytes are copies that landed in
 * it; prefetched counts the fetches issued ahead of need; vmm_busy_ms is
 * the VMM queue's busy time, host_vmm_ms its part on host blocks' calls,
 * host_remaps the evicted chunks whose addresses were mapped to their host
 * block, and remaps_deferred the evictions that waited on their blocks
 * for the copies out to end first (--evicted host: Note [Host-mapped
 * eviction in the simulator] in simulate_model.c).
 *
 * The model and the policies: simulate_model.c and simulate_policy.c. The
 * lower bound each row is measured against: Note [Lower bound] in
 * simulate_bound.c, on the workload's chunks (Note [Chunk workload]).
 *
 * --check (the ctest): the quick workloads at 1.5x and 2x, the trace given
 * with --trace, and the gpt workload written as a trace and read back,
 * under every policy. It fails (exit 1, the reasons on stderr) unless every
 * kernel found its chunks resident with their copies landed and read the
 * version last written (each w or o writes a new one, copies carry them,
 * and no live chunk's data is ever lost: asserted as it runs); every row's
 * time is at least the strict bound and it moved at least its in_min and
 * out_min; compute is the same under every policy; the trace read back
 * runs exactly as the workload it was written from; and policy_victim
 * names a chunk of the highest policy_evict_key.
 * Bad options or a malformed trace: a message on stderr, exit status 2.
 *
 * Note [Link presets]
 * The link and the VMM queue the model runs on (simulate_model.c) come from
 * a preset, --link NAME, whose figures each flag of its own overrides (the
 * rows then say "changed_by_flags":true). Where each figure comes from:
 *   h100-pcie5 (the default): docs/gpu-results.md's H100 80GB HBM3, PCIe 5.0
 *       x16, driver 580.159.04 (2026-11-23).
 *       h2d 54.0, d2h 54.6 GB/s: lms-info's pinned 64 MiB copies, each
 *         direction alone ("What passed"); an H200 read 54.2 and 54.2.
 *       both_factor 0.89: bench/swap's raw rows on that card
 *         (docs/benchmarks.md, "bench/swap — 2026-11-23, NVIDIA H100"): a
 *         copy each way at once over the two alone, (both) / (d2h + h2d),
 *         for runs of 2, 8, 32, 128 and 256 MiB: 74.24 / 81.04 = 0.92,
 *         0.95, 0.89, 0.87 and 0.83; the median, 0.89, is each direction's
 *         share of its rate while both run (the "74–98 GB/s both at once").
 *       The VMM calls, per MiB, from bench/remap's 2 MiB rows: map 0.5 us
 *         (1 us a block: 0.8–1.1 in the remap table, 1 in the ninth call);
 *         set_access 15 us (30 a block idle in the ninth call; 23–29 in the
 *         remap table, 14 per MiB in the eighth call); unmap 10 us (20 a
 *         block idle in the ninth call, 16–19 in the remap table); and
 *         set_access beside a D2H copy 500 us (996–1031 a block in the
 *         ninth call, 515 per MiB over 1 to 32 blocks in the eighth; the
 *         copies were not slowed). docs/gpu-results.md's "What the measured
 *         costs allow bench/swap" rounds them the same way. An H200's
 *         host_numa rows (2026-11-26) agree: a device block's map 0.48 and
 *         0.97, set_access 31.0 and 27.2, unmap 19.5 and 17.6 us. Not in
 *         the model: unmap slowed beside D2H copies (24, then 48–55 us a
 *         block, in the eighth and ninth calls) and set_access beside H2D
 *         copies (37–40 us a block): each is slower than the model's.
 *       The calls of --evicted host (Note [Host-mapped eviction in the
 *         simulator] in simulate_model.c), on a host block of 2 MiB
 *         (cuMemCreate on the host NUMA node), per MiB, from that H200's
 *         host_numa rows: map 0.26 us (0.52 a block), set_access 24 (47.9),
 *         unmap 12.5 (25.0). set_access on a host block beside a D2H copy
 *         was not measured: its default is the device block's 500, the
 *         figure to expect if the driver serializes it behind the copy as
 *         it does a device block's; 24 (--host-set-access-d2h-us-per-mib)
 *         is the other end, a call the copy does not slow.
 *   pcie4: not measured here. PCIe 4.0 x16 signals at 16 GT/s a lane to
 *       PCIe 5.0's 32, with the same 128b/130b encoding, so the rates are
 *       h100-pcie5's halved (27.0 and 27.3 GB/s); its both_factor and VMM
 *       costs are h100-pcie5's, taken as they are (the VMM calls are the
 *       host driver's work, not the link's), an assumption.
 *   c2c: NVLink-C2C class (Grace Hopper): 450 GB/s each way, both at once
 *       (both_factor 1), the vendor's figure, not measured here; the VMM
 *       costs h100-pcie5's, as for pcie4.
 * The model before (issue 5) was half duplex at 25 GB/s each way and 10 us
 * a chunk mapped or unmapped: docs/benchmarks.md gives the flags that
 * reproduce it.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <math.h>
#include <stddef.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/base.h"
#include "bench/bench.h"
#include "bench/simulate.h"

#define DEFAULT_CHUNK (2 * BASE_MiB)
#define MAX_OVERSUB 16

static const double default_oversub[] = {1.25, 1.5, 2, 4, 8};
static const double quick_oversub[] = {1.5, 2};

/* ---- the link presets (Note [Link presets]) ---------------------------------- */

#define H100_VMM                                                                                   \
    .map_us = 0.5, .access_us = 15, .access_d2h_us = 500, .unmap_us = 10, .host_map_us = 0.26,    \
    .host_access_us = 24, .host_access_d2h_us = 500, .host_unmap_us = 12.5
#define H100_BOTH 0.89

static const struct link_preset {
    const char *doc;
    sim_config_t cfg; /* its link and VMM figures; .link its name */
} presets[] = {
    {"the H100's PCIe 5.0 as measured: full duplex, serial VMM calls (default)",
     {.link = "h100-pcie5", .h2d_gbps = 54.0, .d2h_gbps = 54.6, .both = H100_BOTH, H100_VMM}},
    {"PCIe 4.0 x16: h100-pcie5's rates halved, not measured",
     {.link = "pcie4", .h2d_gbps = 27.0, .d2h_gbps = 27.3, .both = H100_BOTH, H100_VMM}},
    {"NVLink-C2C class: 450 GB/s each way at once, h100-pcie5's VMM calls",
     {.link = "c2c", .h2d_gbps = 450, .d2h_gbps = 450, .both = 1, H100_VMM}},
};
#define NPRESETS (sizeof presets / sizeof presets[0])

/* The flags that override one of a preset's figures: where it goes, and
 * the values it takes ([min, max]; a VMM call's ns must fit the clock's
 * uint64_t). */
static const struct figure {
    const char *opt, *json;
    size_t off;
    double min, max;
} figures[] = {
    {"--h2d-gbps", "h2d_gbps", offsetof(sim_config_t, h2d_gbps), 1e-6, 1e9},
    {"--d2h-gbps", "d2h_gbps", offsetof(sim_config_t, d2h_gbps), 1e-6, 1e9},
    {"--both-factor", "both_factor", offsetof(sim_config_t, both), 1e-3, 1},
    {"--map-us-per-mib", "map_us_per_mib", offsetof(sim_config_t, map_us), 0, 1e9},
    {"--set-access-us-per-mib", "set_access_us_per_mib", offsetof(sim_config_t, access_us), 0,
     1e9},
    {"--set-access-d2h-us-per-mib", "set_access_beside_d2h_us_per_mib",
     offsetof(sim_config_t, access_d2h_us), 0, 1e9},
    {"--unmap-us-per-mib", "unmap_us_per_mib", offsetof(sim_config_t, unmap_us), 0, 1e9},
    {"--host-map-us-per-mib", "host_map_us_per_mib", offsetof(sim_config_t, host_map_us), 0, 1e9},
    {"--host-set-access-us-per-mib", "host_set_access_us_per_mib",
     offsetof(sim_config_t, host_access_us), 0, 1e9},
    {"--host-set-access-d2h-us-per-mib", "host_set_access_beside_d2h_us_per_mib",
     offsetof(sim_config_t, host_access_d2h_us), 0, 1e9},
    {"--host-unmap-us-per-mib", "host_unmap_us_per_mib", offsetof(sim_config_t, host_unmap_us), 0,
     1e9},
};
#define NFIGURES (sizeof figures / sizeof figures[0])

static double figure_of(const sim_config_t *cfg, size_t i)
{
    return *(const double *)((const char *)cfg + figures[i].off);
}

/* ,"link":{"name":...,"changed_by_flags":...,figures}: which model a line's
 * numbers come from. */
static void print_link(const sim_config_t *cfg)
{
    printf(",\"link\":{\"name\":");
    bench_json_string(cfg->link != NULL ? cfg->link : "none");
    printf(",\"changed_by_flags\":%s", cfg->link_changed ? "true" : "false");
    for (size_t i = 0; i < NFIGURES; i++)
        printf(",\"%s\":%g", figures[i].json, figure_of(cfg, i));
    printf("}");
}

/* ,"placement":...,"vmm_order":...,"evicted":...: how the model ran a line's
 * workload. */
static void print_placement(const sim_workload_t *w, const sim_config_t *cfg)
{
    printf(",\"placement\":\"%s\",\"vmm_order\":\"%s\",\"evicted\":\"%s\"",
           sim_placement_name[w->placement], cfg->vmm_defer ? "defer" : "fifo",
           cfg->evicted_host ? "host" : "unmapped");
}


/* ---- rows ---------------------------------------------------------------------- */

typedef struct row {
    double oversub;
    sim_policy_t pol;
    uint32_t capacity;
    sim_result_t r;
    sim_bound_t b;      /* in the steady state: the bound reported */
    sim_bound_t strict; /* for this iteration alone: the bound --check asserts */
    double lb_ns, strict_ns;
    const char *bound; /* the term that bounds lb_ns: "compute", "link" or "vmm" */
} row_t;

typedef struct options {
    bool quick, check;
    bool gpt, cnn;
    double oversub[MAX_OVERSUB];
    int noversub;
    bool pol[SIM_NPOLICIES];
    const char *trace, *dump;
    uint64_t device;
    sim_placement_t placement; /* --placement */
    const char *link;          /* --link's preset */
    double figure[NFIGURES];   /* the figures' flags; NAN: not given */
    sim_config_t cfg;
} options_t;

static void print_ratio(const char *name, bool have, double v)
{
    if (have)
        printf(",\"%s\":%.4f", name, v);
    else
        printf(",\"%s\":null", name);
}

static void print_row(const sim_workload_t *w, const sim_config_t *cfg, const row_t *row,
                      uint64_t footprint)
{
    const sim_result_t *r = &row->r;
    double step = (double)r->step_ns, stall = step - (double)r->compute_ns;
    printf("{\"bench\":\"simulate\",\"workload\":");
    bench_json_string(w->name);
    printf(",\"oversub\":%.4g,\"feasible\":true,\"policy\":\"%s\"", row->oversub,
           sim_policy_name[row->pol]);
    /* a trace without compute time, at a ratio that moves nothing, has no bound */
    print_ratio("step_over_lower_bound", row->lb_ns > 0, step / row->lb_ns);
    printf(",\"stall_fraction\":%.4f,\"bytes_moved\":%llu,\"step_ms\":%.3f,\"lower_bound_ms\":%.3f,"
           "\"compute_ms\":%.3f,\"stall_ms\":%.3f,\"bound\":\"%s\",\"bytes_h2d\":%llu,"
           "\"bytes_d2h\":%llu,\"prefetched\":%llu,\"footprint_bytes\":%llu,\"device_bytes\":%llu,"
           "\"in_min_bytes\":%llu,\"out_min_bytes\":%llu,\"fetches\":%llu,\"evictions\":%llu,"
           "\"clean_drops\":%llu,\"set_access_beside_d2h_ms\":%.3f,\"vmm_busy_ms\":%.3f,"
           "\"host_vmm_ms\":%.3f,\"host_remaps\":%llu,\"remaps_deferred\":%llu,\"following\":%s",
           step > 0 ? stall / step : 0,
           (unsigned long long)(r->h2d + r->d2h), step / 1e6, row->lb_ns / 1e6,
           (double)r->compute_ns / 1e6, stall / 1e6, row->bound, (unsigned long long)r->h2d,
           (unsigned long long)r->d2h, (unsigned long long)r->prefetched,
           (unsigned long long)(footprint * w->chunk_bytes),
           (unsigned long long)((uint64_t)row->capacity * w->chunk_bytes),
           (unsigned long long)(row->b.in_chunks * w->chunk_bytes),
           (unsigned long long)(row->b.out_chunks * w->chunk_bytes), (unsigned long long)r->fetches,
           (unsigned long long)r->evictions, (unsigned long long)r->clean_drops,
           (double)r->access_d2h_ns / 1e6, (double)r->vmm_ns / 1e6, (double)r->host_vmm_ns / 1e6,
           (unsigned long long)r->remaps, (unsigned long long)r->remaps_deferred,
           r->following ? "true" : "false");
    if (row->pol == SIM_VDNN)
        printf(",\"hints\":%s", w->hints ? "true" : "false");
    print_placement(w, cfg);
    print_link(cfg);
    printf("}\n");
}

/* The row of a size at which the largest kernel does not fit. */
static void print_infeasible(const sim_workload_t *w, const sim_config_t *cfg, double oversub,
                             uint32_t capacity, uint64_t footprint)
{
    printf("{\"bench\":\"simulate\",\"workload\":");
    bench_json_string(w->name);
    printf(",\"oversub\":%.4g,\"feasible\":false,\"reason\":\"the device holds fewer chunks than "
           "the largest kernel names, and every chunk a kernel names must be resident while it "
           "runs\",\"device_bytes\":%llu,\"largest_kernel_bytes\":%llu,\"footprint_bytes\":%llu",
           oversub, (unsigned long long)((uint64_t)capacity * w->chunk_bytes),
           (unsigned long long)((uint64_t)w->max_kernel * w->chunk_bytes),
           (unsigned long long)(footprint * w->chunk_bytes));
    print_placement(w, cfg);
    print_link(cfg);
    printf("}\n");
}

static const row_t *find_row(const row_t *rows, size_t n, double oversub, sim_policy_t pol)
{
    for (size_t i = 0; i < n; i++)
        if (rows[i].pol == pol && fabs(rows[i].oversub - oversub) < 1e-9)
            return &rows[i];
    return NULL;
}

/* The targets beside what the rows measured. */
static void print_summary(const sim_workload_t *w, const sim_config_t *cfg, const row_t *rows,
                          size_t n)
{
    const row_t *s2 = find_row(rows, n, 2, SIM_SCHEDULE), *l2 = find_row(rows, n, 2, SIM_LRU);
    double lb_max = 0, lb_max_compute = 0;
    int compute_rows = 0, le2_rows = 0;
    bool never_slower = true;
    double worst = 0; /* the most of schedule / lru and schedule / vdnn at one size */
    printf("{\"bench\":\"simulate\",\"summary\":");
    bench_json_string(w->name);
    for (size_t i = 0; i < n; i++) {
        const row_t *r = &rows[i];
        if (r->pol != SIM_SCHEDULE)
            continue;
        double ratio = r->lb_ns > 0 ? (double)r->r.step_ns / r->lb_ns : 0; /* 0: no bound */
        if (r->oversub <= 2 + 1e-9 && r->lb_ns > 0) {
            le2_rows++;
            lb_max = ratio > lb_max ? ratio : lb_max;
            if (strcmp(r->bound, "compute") == 0) {
                compute_rows++;
                lb_max_compute = ratio > lb_max_compute ? ratio : lb_max_compute;
            }
        }
        for (sim_policy_t p = SIM_LRU; p < SIM_NPOLICIES; p++) {
            const row_t *o = find_row(rows, n, r->oversub, p);
            if (o == NULL)
                continue;
            never_slower &= r->r.step_ns <= o->r.step_ns;
            if (o->r.step_ns > 0) {
                double x = (double)r->r.step_ns / (double)o->r.step_ns;
                worst = x > worst ? x : worst;
            }
        }
    }
    bool have2 = s2 != NULL && l2 != NULL && s2->r.step_ns > 0;
    double speedup = have2 ? (double)l2->r.step_ns / (double)s2->r.step_ns : 0;
    print_ratio("schedule_vs_lru_at_2x", have2, speedup);
    /* no policy beats the lower bound: LRU's distance from it caps the target */
    print_ratio("any_policy_vs_lru_at_2x_at_most", have2 && l2->lb_ns > 0,
                have2 && l2->lb_ns > 0 ? (double)l2->r.step_ns / l2->lb_ns : 0);
    printf(",\"target_schedule_vs_lru_at_2x\":2.0");
    printf(",\"met_schedule_vs_lru_at_2x\":%s", !have2 ? "null" : speedup >= 2 ? "true" : "false");
    print_ratio("schedule_over_lb_compute_bound_le_2x", compute_rows > 0, lb_max_compute);
    printf(",\"compute_bound_rows_le_2x\":%d,\"target_schedule_over_lb\":1.10", compute_rows);
    printf(",\"met_schedule_over_lb\":%s", compute_rows == 0        ? "null"
                                           : lb_max_compute <= 1.10 ? "true"
                                                                    : "false");
    print_ratio("schedule_over_lb_le_2x_any_bound", le2_rows > 0, lb_max);
    print_ratio("max_schedule_over_baseline", worst > 0, worst);
    printf(",\"schedule_never_slower\":%s,\"target_schedule_never_slower\":true",
           worst > 0 ? (never_slower ? "true" : "false") : "null");
    print_link(cfg);
    printf("}\n");
}

/* ---- running a workload ----------------------------------------------------------- */

typedef struct run {
    row_t *rows;
    size_t n;
    uint64_t footprint; /* chunks */
} run_t;

/* The device sizes to run at: --device, else footprint / X for each X
 * asked for (or the defaults), else the trace's device line. */
static size_t capacities(const sim_workload_t *w, const options_t *o, uint64_t footprint,
                         uint32_t *cap, double *oversub)
{
    uint64_t device = o->device ? o->device : o->noversub == 0 ? w->device_bytes : 0;
    if (device != 0) {
        if (device / w->chunk_bytes == 0 || device / w->chunk_bytes > SIM_MAX_CHUNKS)
            sim_bad("%s: a device of %llu bytes is not 1 .. 2^31 - 1 chunks", w->name,
                    (unsigned long long)device);
        cap[0] = (uint32_t)(device / w->chunk_bytes);
        oversub[0] = (double)footprint / cap[0];
        return 1;
    }
    const double *x = o->noversub ? o->oversub : o->quick ? quick_oversub : default_oversub;
    size_t n = o->noversub ? (size_t)o->noversub
               : o->quick  ? sizeof quick_oversub / sizeof *x
                           : sizeof default_oversub / sizeof *x;
    for (size_t i = 0; i < n; i++) {
        double c = floor((double)footprint / x[i] + 0.5);
        cap[i] = c < 1 ? 1 : (uint32_t)c;
        oversub[i] = x[i];
    }
    return n;
}

static void print_workload(const sim_workload_t *w, const sim_config_t *cfg, const sim_iters_t *its,
                           uint64_t footprint)
{
    const sim_iter_t *last = &its->it[its->n - 1];
    size_t kernels = 0;
    for (size_t j = last->first; j < last->end; j++)
        kernels += w->ops[j].kind == SIM_KERNEL;
    printf("{\"bench\":\"simulate\",\"workload\":");
    bench_json_string(w->name);
    printf(",%s%s\"iterations\":%zu,\"kernels_per_iteration\":%zu,\"footprint_bytes\":%llu,"
           "\"largest_kernel_bytes\":%llu,\"hints\":%s",
           w->shape, w->shape[0] ? "," : "", its->n, kernels,
           (unsigned long long)(footprint * w->chunk_bytes),
           (unsigned long long)((uint64_t)w->max_kernel * w->chunk_bytes),
           w->hints ? "true" : "false");
    print_placement(w, cfg);
    print_link(cfg);
    printf("}\n");
}

/* One row per policy at one device size, into run->rows; or, where the
 * largest kernel does not fit, one row that says so. The bound is the
 * chunk workload's (Note [Chunk workload] in simulate_bound.c): cw and its
 * last iteration, clast. */
static void run_at(const sim_workload_t *w, const options_t *o, const sim_iters_t *its,
                   const sim_vdnn_plan_t *plan, run_t *run, uint32_t capacity, double oversub,
                   const sim_workload_t *cw, const sim_iter_t *clast)
{
    if (capacity < w->max_kernel) {
        print_infeasible(w, &o->cfg, oversub, capacity, run->footprint);
        fflush(stdout);
        return;
    }
    sim_bound_t b = sim_lower_bound(cw, clast, capacity, true);
    sim_bound_t strict = sim_lower_bound(cw, clast, capacity, false);
    const char *bound, *which; /* the bounds once, for every policy's row */
    double lb_ns = sim_bound_ns(&b, &o->cfg, w->chunk_bytes, &bound);
    double strict_ns = sim_bound_ns(&strict, &o->cfg, w->chunk_bytes, &which);
    /* cw is released before the rows are read again: they keep no pointer to it */
    b.w = strict.w = NULL;
    for (sim_policy_t p = 0; p < SIM_NPOLICIES; p++) {
        if (!o->pol[p])
            continue;
        row_t *row = &run->rows[run->n++];
        *row = (row_t){.oversub = oversub, .pol = p, .capacity = capacity, .b = b,
                       .strict = strict, .lb_ns = lb_ns, .strict_ns = strict_ns, .bound = bound};
        row->r = sim_run(w, its, &o->cfg, plan, p, capacity);
        print_row(w, &o->cfg, row, run->footprint);
        fflush(stdout);
    }
}

/* Prints the workload's rows and summary; returns the rows. */
static run_t run_workload(const sim_workload_t *w, const options_t *o)
{
    sim_iters_t its = sim_iters_of(w);
    if (its.n == 0)
        sim_bad("%s: no kernels to run", w->name);
    const sim_iter_t *last = &its.it[its.n - 1];
    run_t run = {.footprint = sim_chunks_in_use(w, last)};
    uint32_t cap[MAX_OVERSUB];
    double oversub[MAX_OVERSUB];
    size_t ncap = capacities(w, o, run.footprint, cap, oversub);
    sim_vdnn_plan_t plan = {0};
    sim_vdnn_plan(w, &plan);
    print_workload(w, &o->cfg, &its, run.footprint);
    run.rows = sim_zalloc(ncap * SIM_NPOLICIES, sizeof *run.rows);
    sim_workload_t cw;
    sim_chunk_workload(w, &cw);
    sim_iters_t cits = sim_iters_of(&cw);
    if (cits.n != its.n)
        sim_die("%s: the chunk workload has %zu iterations, not %zu", w->name, cits.n, its.n);
    for (size_t i = 0; i < ncap; i++)
        run_at(w, o, &its, &plan, &run, cap[i], oversub[i], &cw, &cits.it[cits.n - 1]);
    print_summary(w, &o->cfg, run.rows, run.n);
    sim_vdnn_plan_free(&plan);
    free(cits.it);
    sim_release(&cw);
    free(its.it);
    return run;
}

/* ---- check mode ---------------------------------------------------------------------- */

static int failures;

static void check_fail(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void check_fail(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    fputs("bench/simulate: check failed: ", stderr);
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
    va_end(ap);
    failures++;
}

/* What the rows of one workload must satisfy (the invariants inside the
 * simulation die on the spot). */
static void check_rows(const sim_workload_t *w, const run_t *run)
{
    for (size_t i = 0; i < run->n; i++) {
        const row_t *r = &run->rows[i];
        const char *p = sim_policy_name[r->pol];
        if ((double)r->r.step_ns + 1 < r->strict_ns)
            check_fail("%s %.4gx %s: %.6f ms, below the lower bound %.6f ms", w->name, r->oversub,
                       p, (double)r->r.step_ns / 1e6, r->strict_ns / 1e6);
        if (r->r.compute_ns != run->rows[0].r.compute_ns || r->r.compute_ns != r->b.compute_ns)
            check_fail("%s %.4gx %s: compute %llu ns, not the %llu ns of its kernels", w->name,
                       r->oversub, p, (unsigned long long)r->r.compute_ns,
                       (unsigned long long)r->b.compute_ns);
        if (r->r.h2d < r->strict.in_chunks * w->chunk_bytes ||
            r->r.d2h < r->strict.out_chunks * w->chunk_bytes)
            check_fail("%s %.4gx %s: moved %llu in and %llu out, less than the %llu and %llu that "
                       "must move",
                       w->name, r->oversub, p, (unsigned long long)r->r.h2d,
                       (unsigned long long)r->r.d2h,
                       (unsigned long long)(r->strict.in_chunks * w->chunk_bytes),
                       (unsigned long long)(r->strict.out_chunks * w->chunk_bytes));
    }
}

static bool same_result(const sim_result_t *a, const sim_result_t *b)
{
    return a->step_ns == b->step_ns && a->compute_ns == b->compute_ns && a->h2d == b->h2d &&
           a->d2h == b->d2h && a->prefetched == b->prefetched && a->fetches == b->fetches &&
           a->evictions == b->evictions && a->clean_drops == b->clean_drops &&
           a->vmm_ns == b->vmm_ns && a->remaps == b->remaps;
}

/* The gpt workload written as a trace and read back runs the same. */
static void check_round_trip(const options_t *o, const run_t *direct, const sim_workload_t *gpt)
{
    char *text = NULL, err[512];
    size_t len = 0;
    FILE *f = open_memstream(&text, &len);
    if (f == NULL)
        sim_die("open_memstream: %s", strerror(errno));
    sim_trace_write(f, gpt, 0);
    fclose(f);
    sim_workload_t back;
    sim_init(&back, "gpt.trace", DEFAULT_CHUNK);
    f = fmemopen(text, len, "r");
    if (f == NULL)
        sim_die("fmemopen: %s", strerror(errno));
    if (!sim_trace_read(f, "gpt.trace", &back, err, sizeof err))
        sim_die("the trace it wrote does not read back: %s", err);
    fclose(f);
    free(text);
    sim_place(&back, gpt->placement);
    run_t again = run_workload(&back, o);
    if (again.n != direct->n)
        check_fail("round trip: %zu rows, not %zu", again.n, direct->n);
    for (size_t i = 0; i < again.n && i < direct->n; i++)
        if (!same_result(&again.rows[i].r, &direct->rows[i].r))
            check_fail("round trip: %.4gx %s differs from the workload it was written from",
                       direct->rows[i].oversub, sim_policy_name[direct->rows[i].pol]);
    free(again.rows);
    sim_release(&back);
}

static int run_check(const options_t *opts, const sim_workload_t *trace)
{
    char why[256];
    if (!sim_bound_terms_agree(&opts->cfg, DEFAULT_CHUNK, why, sizeof why))
        check_fail("%s", why);
    options_t o = *opts;
    o.quick = true;
    o.cfg.check = true;
    for (int g = 0; g < 2; g++) {
        sim_workload_t w;
        sim_init(&w, g == 0 ? "gpt" : "cnn", DEFAULT_CHUNK);
        (g == 0 ? sim_gpt : sim_cnn)(&w, SIM_SCALE_QUICK, o.cfg.iterations);
        sim_place(&w, o.placement);
        run_t run = run_workload(&w, &o);
        check_rows(&w, &run);
        if (g == 0)
            check_round_trip(&o, &run, &w);
        free(run.rows);
        sim_release(&w);
    }
    if (trace != NULL) {
        o.noversub = 0;
        run_t run = run_workload(trace, &o);
        check_rows(trace, &run);
        free(run.rows);
    }
    uint64_t plans, uncompared;
    sim_conform_counts(&plans, &uncompared); /* a difference would have exited */
    printf("{\"bench\":\"simulate\",\"check\":\"%s\",\"failures\":%d,"
           "\"plans_conform\":%llu,\"plans_sampled\":%llu}\n",
           failures ? "failed" : "passed", failures, (unsigned long long)(plans - uncompared),
           (unsigned long long)uncompared);
    return failures ? 1 : 0;
}

/* ---- options and main ----------------------------------------------------------------- */

/* The options: name, its value (NULL: none), and what it does, for --help. */
static const struct option_doc {
    const char *name, *value, *doc;
} options[] = {
    {"--quick", NULL, "1.5x and 2x, 3 iterations, small models (for CI)"},
    {"--check", NULL, "self-checks on the quick workloads and --trace; exit 1 on failure"},
    {"--workload", "gpt|cnn|all", "the generated workloads to run (all)"},
    {"--oversub", "X[,X...]", "footprint / device; repeatable (1.25,1.5,2,4,8)"},
    {"--policy", "P[,P...]", "schedule, lru, vdnn; repeatable (all three)"},
    {"--trace", "FILE", "run a trace (docs/trace-format.md) instead, at its device line"},
    {"--device", "BYTES", "device memory (K/M/G suffixes), instead of --oversub"},
    {"--iterations", "N", "training steps of a generated workload (4; 3 with --quick)"},
    {"--link", "NAME", "the link and VMM model: a preset, below (h100-pcie5)"},
    {"--evict-ahead", "on|off", "the schedule evicts ahead (Note [Eviction ahead]); on, as lms"},
    {"--vmm-order", "defer|fifo", "a prefetch's VMM calls wait for copies out, and evictions "
                                  "ahead for them (Note [VMM beside copies]; defer, as lms)"},
    {"--evicted", "unmapped|host", "an evicted chunk's addresses unmapped, or mapped to its host "
                                   "copy (Note [Host-mapped eviction in the simulator]; unmapped)"},
    {"--placement", "lms|chunks", "lms's alloc/, or whole chunks each (Note [Placement in the "
                                  "simulator]; lms)"},
    {"--h2d-gbps", "G", "host-to-device GB/s alone (the preset's)"},
    {"--d2h-gbps", "G", "device-to-host GB/s alone (the preset's)"},
    {"--both-factor", "F", "each direction's share of its rate while both run (the preset's)"},
    {"--map-us-per-mib", "U", "a map's us per MiB (the preset's)"},
    {"--set-access-us-per-mib", "U", "a set_access's us per MiB (the preset's)"},
    {"--set-access-d2h-us-per-mib", "U", "set_access's us per MiB beside a D2H (the preset's)"},
    {"--unmap-us-per-mib", "U", "an unmap's us per MiB (the preset's)"},
    {"--host-map-us-per-mib", "U", "--evicted host: a host block's map, us per MiB (the preset's)"},
    {"--host-set-access-us-per-mib", "U", "its set_access's us per MiB (the preset's)"},
    {"--host-set-access-d2h-us-per-mib", "U", "its set_access beside a D2H (the preset's)"},
    {"--host-unmap-us-per-mib", "U", "its unmap's us per MiB (the preset's)"},
    {"--dump-trace", "FILE", "write the workload chosen as a trace and exit"},
    {"--help", NULL, "this"},
};
#define NOPTIONS (sizeof options / sizeof options[0])

static void usage(FILE *f)
{
    fputs("usage: build/bench/simulate [options]; prints JSON lines (bench/simulate.c)\n", f);
    for (size_t i = 0; i < NOPTIONS; i++) {
        char head[64];
        snprintf(head, sizeof head, "%s%s%s", options[i].name, options[i].value ? " " : "",
                 options[i].value ? options[i].value : "");
        fprintf(f, "  %-34s %s\n", head, options[i].doc);
    }
    fputs("link presets (--link; Note [Link presets] in bench/simulate.c):\n", f);
    for (size_t i = 0; i < NPRESETS; i++) {
        const sim_config_t *c = &presets[i].cfg;
        fprintf(f, "  %-12s %s\n               h2d %g, d2h %g GB/s, both_factor %g; us per MiB: "
                   "map %g, set_access %g (%g beside a D2H), unmap %g;\n               a host "
                   "block's map %g, set_access %g (%g beside a D2H), unmap %g\n",
                c->link, presets[i].doc, c->h2d_gbps, c->d2h_gbps, c->both, c->map_us,
                c->access_us, c->access_d2h_us, c->unmap_us, c->host_map_us, c->host_access_us,
                c->host_access_d2h_us, c->host_unmap_us);
    }
}

static double parse_double(const char *opt, const char *v, double min)
{
    char *end;
    errno = 0;
    double x = strtod(v, &end);
    if (errno != 0 || end == v || *end != '\0' || !(x >= min) || !isfinite(x))
        sim_bad("%s wants a number of at least %g, not '%s'", opt, min, v);
    return x;
}

static void parse_list(const char *opt, const char *v, options_t *o)
{
    char *copy = strdup(v), *save = NULL;
    if (copy == NULL)
        sim_die("no host memory");
    for (char *t = strtok_r(copy, ",", &save); t != NULL; t = strtok_r(NULL, ",", &save)) {
        if (strcmp(opt, "--oversub") == 0) {
            if (o->noversub == MAX_OVERSUB)
                sim_bad("at most %d oversubscriptions", MAX_OVERSUB);
            o->oversub[o->noversub++] = parse_double(opt, t, 1e-3);
            continue;
        }
        sim_policy_t p = 0;
        while (p < SIM_NPOLICIES && strcmp(t, sim_policy_name[p]) != 0)
            p++;
        if (p == SIM_NPOLICIES)
            sim_bad("--policy is schedule, lru or vdnn, not '%s'", t);
        o->pol[p] = true;
    }
    free(copy);
}

/* Whether v, the value of a two-way option opt, is yes (else no; else it
 * exits 2). */
static bool parse_choice(const char *opt, const char *v, const char *yes, const char *no)
{
    if (strcmp(v, yes) != 0 && strcmp(v, no) != 0)
        sim_bad("%s is %s or %s, not '%s'", opt, yes, no, v);
    return strcmp(v, yes) == 0;
}

static void parse_option(options_t *o, const char *opt, const char *v)
{
    for (size_t i = 0; i < NFIGURES; i++) {
        if (strcmp(opt, figures[i].opt) != 0)
            continue;
        o->figure[i] = parse_double(opt, v, figures[i].min);
        if (o->figure[i] > figures[i].max)
            sim_bad("%s is at most %g, not '%s'", opt, figures[i].max, v);
        return;
    }
    if (strcmp(opt, "--workload") == 0) {
        if (strcmp(v, "all") != 0 && strcmp(v, "gpt") != 0 && strcmp(v, "cnn") != 0)
            sim_bad("--workload is gpt, cnn or all, not '%s'", v);
        o->gpt = strcmp(v, "cnn") != 0;
        o->cnn = strcmp(v, "gpt") != 0;
    } else if (strcmp(opt, "--oversub") == 0 || strcmp(opt, "--policy") == 0) {
        parse_list(opt, v, o);
    } else if (strcmp(opt, "--trace") == 0) {
        o->trace = v;
    } else if (strcmp(opt, "--dump-trace") == 0) {
        o->dump = v;
    } else if (strcmp(opt, "--device") == 0) {
        if (!base_parse_size(v, &o->device) || o->device == 0)
            sim_bad("--device wants a size in bytes (K/M/G suffixes), not '%s'", v);
    } else if (strcmp(opt, "--iterations") == 0) {
        double n = parse_double(opt, v, 1);
        if (n > 1000 || n != floor(n))
            sim_bad("--iterations wants a whole number from 1 to 1000, not '%s'", v);
        o->cfg.iterations = (int)n;
    } else if (strcmp(opt, "--evict-ahead") == 0) {
        o->cfg.evict_ahead = parse_choice(opt, v, "on", "off");
    } else if (strcmp(opt, "--vmm-order") == 0) {
        o->cfg.vmm_defer = parse_choice(opt, v, "defer", "fifo");
    } else if (strcmp(opt, "--evicted") == 0) {
        o->cfg.evicted_host = parse_choice(opt, v, "host", "unmapped");
    } else if (strcmp(opt, "--placement") == 0) {
        o->placement = parse_choice(opt, v, "lms", "chunks") ? SIM_PLACE_LMS : SIM_PLACE_CHUNKS;
    } else { /* --link */
        o->link = v;
    }
}

/* The link preset --link names, with the figures flags gave in its place. */
static void settle_link(options_t *o)
{
    size_t p = 0;
    while (p < NPRESETS && strcmp(o->link, presets[p].cfg.link) != 0)
        p++;
    if (p == NPRESETS)
        sim_bad("--link is h100-pcie5, pcie4 or c2c, not '%s'", o->link);
    sim_config_t run = o->cfg; /* the run's settings, not the link's */
    o->cfg = presets[p].cfg;
    o->cfg.iterations = run.iterations;
    o->cfg.evict_ahead = run.evict_ahead;
    o->cfg.vmm_defer = run.vmm_defer;
    o->cfg.evicted_host = run.evicted_host;
    o->cfg.check = run.check;
    for (size_t i = 0; i < NFIGURES; i++) {
        if (isnan(o->figure[i]))
            continue;
        *(double *)((char *)&o->cfg + figures[i].off) = o->figure[i];
        o->cfg.link_changed = true;
    }
}

/* Defaults for what the options left unset, and the combinations refused. */
static void settle_options(options_t *o, bool iterations, bool policies, bool workload)
{
    if (!iterations)
        o->cfg.iterations = o->quick || o->check ? 3 : 4;
    if (!policies)
        o->pol[SIM_SCHEDULE] = o->pol[SIM_LRU] = o->pol[SIM_VDNN] = true;
    if (!workload)
        o->gpt = o->cnn = true;
    settle_link(o);
    if (o->device != 0 && o->noversub > 0)
        sim_bad("give --device or --oversub, not both");
    if (o->dump != NULL && o->trace == NULL && o->gpt == o->cnn)
        sim_bad("--dump-trace writes one workload: add --workload gpt or --workload cnn");
    if (o->dump != NULL && o->noversub > 1)
        sim_bad("--dump-trace takes at most one --oversub, for its device line");
}

static void parse_options(int argc, char **argv, options_t *o)
{
    bool iterations = false, policies = false, workload = false;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *eq = strchr(a, '=');
        size_t n = eq != NULL ? (size_t)(eq - a) : strlen(a), k = 0;
        while (k < NOPTIONS && (strlen(options[k].name) != n || strncmp(a, options[k].name, n)))
            k++;
        if (k == NOPTIONS || (options[k].value == NULL && eq != NULL))
            sim_bad("unknown option '%s' (--help lists them)", a);
        const char *name = options[k].name;
        if (strcmp(name, "--help") == 0) {
            usage(stdout);
            exit(0);
        }
        if (options[k].value == NULL) {
            *(strcmp(name, "--quick") == 0 ? &o->quick : &o->check) = true;
            continue;
        }
        if (eq == NULL && i + 1 == argc)
            sim_bad("%s wants a value", a);
        iterations |= strcmp(name, "--iterations") == 0;
        policies |= strcmp(name, "--policy") == 0;
        workload |= strcmp(name, "--workload") == 0;
        parse_option(o, name, eq != NULL ? eq + 1 : argv[++i]);
    }
    settle_options(o, iterations, policies, workload);
}

/* Writes the chosen workload as a trace. */
static void dump(const options_t *o, const sim_workload_t *w)
{
    uint64_t device = o->device;
    if (device == 0 && o->noversub == 1) {
        sim_iters_t its = sim_iters_of(w);
        if (its.n == 0)
            sim_bad("%s: no kernels", w->name);
        const sim_iter_t *last = &its.it[its.n - 1];
        uint64_t foot = sim_chunks_in_use(w, last);
        device = (uint64_t)floor((double)foot / o->oversub[0] + 0.5) * w->chunk_bytes;
        free(its.it);
    }
    FILE *f = fopen(o->dump, "w");
    if (f == NULL)
        sim_bad("%s: %s", o->dump, strerror(errno));
    sim_trace_write(f, w, device);
    if (fclose(f) != 0)
        sim_die("%s: %s", o->dump, strerror(errno));
}

/* The model's settings; trace: the trace to run, or NULL. */
static void print_model(const options_t *o, const sim_workload_t *trace)
{
    char cpu[256];
    base_host_cpu(cpu, sizeof cpu);
    printf("{\"bench\":\"simulate\",\"model\":\"discrete-event\",\"chunk_bytes\":%llu,",
           (unsigned long long)(trace != NULL && !o->check ? trace->chunk_bytes : DEFAULT_CHUNK));
    if (o->device != 0)
        printf("\"device_bytes\":%llu,", (unsigned long long)o->device);
    else if (trace != NULL && !o->check && o->noversub == 0)
        printf("\"device_bytes\":%llu,", (unsigned long long)trace->device_bytes);
    else
        printf("\"device_bytes\":\"footprint / oversub\",");
    if (trace != NULL) {
        printf("\"trace\":");
        bench_json_string(o->trace);
        printf(",");
    }
    if (trace != NULL && !o->check)
        printf("\"iterations\":\"the trace's\",");
    else
        printf("\"iterations\":%d,", o->cfg.iterations);
    printf("\"evict_ahead\":%s,\"vmm_order\":\"%s\",\"evicted\":\"%s\",\"placement\":\"%s\",",
           o->cfg.evict_ahead ? "true" : "false", o->cfg.vmm_defer ? "defer" : "fifo",
           o->cfg.evicted_host ? "host" : "unmapped", sim_placement_name[o->placement]);
    printf("\"reported\":\"the last iteration\",\"host_cpu\":");
    bench_json_string(cpu);
    print_link(&o->cfg);
    printf("}\n");
}

int main(int argc, char **argv)
{
    options_t o = {.link = presets[0].cfg.link, .cfg.vmm_defer = true, /* as lms */
                   .cfg.evict_ahead = true};
    for (size_t i = 0; i < NFIGURES; i++)
        o.figure[i] = NAN;
    parse_options(argc, argv, &o);
    sim_scale_t scale = o.quick || o.check ? SIM_SCALE_QUICK : SIM_SCALE_DEFAULT;
    sim_workload_t trace;
    if (o.trace != NULL) {
        sim_trace_load(o.trace, DEFAULT_CHUNK, o.placement, &trace);
        if (!o.check && trace.device_bytes == 0 && o.device == 0 && o.noversub == 0)
            sim_bad("%s has no device line: give --device or --oversub", o.trace);
    }
    if (o.dump != NULL) {
        sim_workload_t w;
        if (o.trace != NULL) {
            w = trace;
        } else {
            sim_init(&w, o.gpt ? "gpt" : "cnn", DEFAULT_CHUNK);
            (o.gpt ? sim_gpt : sim_cnn)(&w, scale, o.cfg.iterations);
            sim_place(&w, o.placement);
        }
        dump(&o, &w);
        sim_release(&w);
        return 0;
    }
    print_model(&o, o.trace != NULL ? &trace : NULL);
    if (o.check) {
        int rc = run_check(&o, o.trace != NULL ? &trace : NULL);
        if (o.trace != NULL)
            sim_release(&trace);
        return rc;
    }
    if (o.trace != NULL) {
        free(run_workload(&trace, &o).rows);
        sim_release(&trace);
        return 0;
    }
    for (int g = 0; g < 2; g++) {
        if (!(g == 0 ? o.gpt : o.cnn))
            continue;
        sim_workload_t w;
        sim_init(&w, g == 0 ? "gpt" : "cnn", DEFAULT_CHUNK);
        (g == 0 ? sim_gpt : sim_cnn)(&w, scale, o.cfg.iterations);
        sim_place(&w, o.placement);
        free(run_workload(&w, &o).rows);
        sim_release(&w);
    }
    return 0;
}
