/*
 * bench/train — the main job: train a model larger than the device, and show
 * that it trains exactly as it would with room for everything (issue 7).
 *
 *   build/bench/train [--oversub X[,Y...]] [--steps N] [--layers L]
 *                     [--width W] [--batch B] [--quick] [--dynamic]
 *                     [--link-ratio R] [--evict-ahead V[,V...]]
 *                     [--vmm-order V[,V...]]
 *
 * The model (bench/model.h): an MLP of L layers of W x W with Adam, batch B;
 * every tensor in lms. First a reference run with a device limit above the
 * model's footprint (nothing swaps), then, for each X, a run with the device
 * limit = footprint / X (on sim, the simulated device is that size), each
 * with N steps from the same initial weights and data. lms is started afresh
 * for each run (swap_init), with the LMS_* settings of the environment
 * (LMS_BACKEND, LMS_SIM_H2D_GBPS / LMS_SIM_D2H_GBPS for a throttled link,
 * LMS_POLICY, LMS_TRACE: the timeline of the last run).
 *
 * Defaults: X = 4, N = 8, L = 8, W = 1024, B = 256 (a footprint of about
 * 150 MiB on sim); --quick: N = 4, L = 6, W = 512, B = 64.
 *
 * --dynamic: activations and their gradients are allocated in each step and
 * freed (stream-ordered) once used, as a framework's are, instead of once
 * with the model; the footprint is then the steps' peak of allocated bytes.
 *
 * --link-ratio R (sim): throttle the link, both ways, to 1/R of the
 * device's memory bandwidth, which on sim is the host's: measured here (the
 * best of 5 memcpy of 256 MiB, bytes copied per second). R = 60 is PCIe 5.0
 * x16 (55 GB/s) beside an H100's HBM3 (3.35 TB/s). Only the link is made
 * PCIe-like so: the sim's kernels run on a CPU, which does far fewer
 * operations per byte of memory than a GPU, so a step has much more time to
 * hide its copies in than on a GPU.
 *
 * --evict-ahead V[,V...]: runs each X once for each value of eviction ahead
 * (0 or 1, in the order given; Note [Eviction ahead] in policy/policy.c),
 * in place of LMS_EVICT_AHEAD's, so that a before and after come from one
 * run, with one link; each run's lines carry its value. --vmm-order V[,V...]
 * likewise for the order of VMM calls around D2H copies (1, the default:
 * Note [VMM beside copies] in swap/prefetch.c; 0: swap_config_t's
 * vmm_unordered), each value with each of --evict-ahead's.
 *
 * Output: JSON lines on stdout, each with "bench":"train":
 *   "case":"settings"  the machine, the model and the limits
 *   "case":"step"      per run and step: loss (and its bits), ms, GB fetched
 *                      and evicted in the step; stall_pct: the share of the
 *                      step beyond the reference's same step (the time lost
 *                      to swapping); lms_blocked_pct: the share in which the
 *                      program was blocked in lms (lms_stats stall_ns: waiting
 *                      for device memory, which includes waiting for queued
 *                      kernels to finish with it, so it is high whenever the
 *                      device is small, even when nothing is lost)
 *   the summary per X: {"bench":"train","oversub":X,"steps":N,
 *                       "loss_identical":true|false,"step_over_unlimited":R,...,
 *                       "h2d_busy_ms","d2h_busy_ms","both_busy_ms"}
 * the last three a step on average (steps after the first): how long the
 * copies kept each direction of the link busy, and both at once, as the
 * device ran them (swap_link_busy), where loss_identical says whether every step's loss was bitwise the
 * reference's, and R is the median step time over the reference's, steps
 * after the first (which learns the schedule) only. Progress for people on
 * stderr. Exit status 1 when a run fails or a loss differs.
 */
#define BENCH_NAME "train"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/base.h"
#include "bench/bench.h"
#include "bench/model.h"
#include "swap/swap.h"

#define MAX_RATIOS 16

typedef struct run_result {
    float *loss;      /* per step */
    double *ms;       /* per step */
    double median_ms; /* of steps 1.. (all, if only one) */
    lms_stats_t stats;
    uint64_t footprint; /* allocated bytes, once the model was made */
    uint64_t device_limit;
    uint64_t chunk;
    double total_ms;  /* all steps */
    double h2d_gbps, d2h_gbps; /* the sim's throttle; 0: none (or cuda) */
    swap_link_busy_t busy;     /* the copies' busy time over steps 1.. (all, if only one) */
    char backend[16], device[128];
} run_result_t;

static model_shape_t shape = {.layers = 8, .width = 1024, .batch = 256, .batches = 8};
static int steps = 8;
static double link_gbps; /* --link-ratio's throttle of the sim's link, both ways; 0: the settings' */

static uint64_t round_up(uint64_t x, uint64_t to) { return (x + to - 1) / to * to; }

/* Bytes memcpy copies per second on this host, in GB/s: the best of 5. */
static double memory_gbps(void)
{
    size_t n = 256 * BASE_MiB;
    char *a = malloc(n), *b = malloc(n);
    if (a == NULL || b == NULL)
        bench_die("out of host memory");
    memset(a, 1, n);
    memset(b, 2, n);
    double best = 0;
    for (int rep = 0; rep < 5; rep++) {
        uint64_t t0 = base_now_ns();
        memcpy(rep % 2 ? a : b, rep % 2 ? b : a, n);
        uint64_t t1 = base_now_ns();
        double gbps = (double)n / (double)(t1 - t0);
        best = gbps > best ? gbps : best;
    }
    free(a);
    free(b);
    return best;
}

static double gb(uint64_t bytes) { return (double)bytes / 1e9; }

static uint32_t float_bits(float f)
{
    uint32_t u;
    memcpy(&u, &f, sizeof u);
    return u;
}

/* One run: lms started with device limit `limit` (0: room for the whole
 * model), the model made and trained for `steps` steps. `label` names the
 * run in the step lines. `trace` off leaves LMS_TRACE out of it.
 * evict_ahead: 0 or 1, or -1 for LMS_EVICT_AHEAD's; vmm_order: 0 or 1. */
static void train(const char *label, uint64_t limit, uint64_t host_limit, bool trace,
                  int evict_ahead, int vmm_order, const run_result_t *ref, run_result_t *r)
{
    swap_config_t cfg;
    swap_config_from_options(&cfg);
    cfg.measure_links = true;
    if (evict_ahead >= 0)
        cfg.evict_ahead = evict_ahead;
    cfg.vmm_unordered = !vmm_order;
    uint64_t granularity = cfg.device.sim_granularity;
    if (limit == 0) /* the reference: twice the model, the chunk rounding's worst case */
        limit = round_up(2 * model_bytes(&shape) + 64 * BASE_MiB, granularity);
    cfg.device_limit = limit;
    cfg.device.sim_memory = limit; /* on sim, the device is the limit's size */
    cfg.host_limit = host_limit;
    if (link_gbps > 0)
        cfg.device.sim_h2d_gbps = cfg.device.sim_d2h_gbps = link_gbps;
    if (!trace)
        cfg.trace_path = NULL;
    bench_check(swap_init(&cfg), "swap_init");
    dev_device_t *dev = swap_device();
    snprintf(r->backend, sizeof r->backend, "%s", dev->info.backend);
    snprintf(r->device, sizeof r->device, "%s", dev->info.name);
    bool sim = strcmp(r->backend, "sim") == 0;
    r->h2d_gbps = sim ? cfg.device.sim_h2d_gbps : 0;
    r->d2h_gbps = sim ? cfg.device.sim_d2h_gbps : 0;
    swap_layout_t layout;
    bench_check(swap_layout(&layout), "swap_layout");
    r->device_limit = layout.device_limit;
    r->chunk = layout.chunk_size;

    model_t *m;
    bench_check(model_create(&shape, &m), "model_create");
    lms_stream_t stream;
    bench_check(lms_stream_create(&stream), "lms_stream_create");
    lms_stats_t before;
    bench_check(lms_stats(&before), "lms_stats");
    r->footprint = before.allocated_bytes;
    r->loss = calloc((size_t)steps, sizeof *r->loss);
    r->ms = calloc((size_t)steps, sizeof *r->ms);
    if (r->loss == NULL || r->ms == NULL)
        bench_die("out of host memory");
    swap_link_busy_t busy0 = {0}, busy;
    for (int i = 0; i < steps; i++) {
        if (i == (steps > 1 ? 1 : 0))
            bench_check(swap_link_busy(&busy0), "swap_link_busy");
        uint64_t t0 = base_now_ns();
        bench_check(model_step(m, stream, &r->loss[i]), "model_step");
        uint64_t t1 = base_now_ns();
        lms_stats_t now;
        bench_check(lms_stats(&now), "lms_stats");
        r->ms[i] = (double)(t1 - t0) / 1e6;
        r->total_ms += r->ms[i];
        double blocked = 100.0 * (double)(now.stall_ns - before.stall_ns) / (double)(t1 - t0);
        double stall = ref == NULL ? 0 : 100.0 * fmax(0, r->ms[i] - ref->ms[i]) / r->ms[i];
        printf("{\"bench\":\"train\",\"case\":\"step\",\"run\":\"%s\",\"step\":%d,"
               "\"loss\":%.9g,\"loss_bits\":\"0x%08x\",\"ms\":%.3f,\"h2d_gb\":%.4f,"
               "\"d2h_gb\":%.4f,\"stall_pct\":%.2f,\"lms_blocked_pct\":%.2f}\n",
               label, i, r->loss[i], float_bits(r->loss[i]), r->ms[i],
               gb(now.bytes_h2d - before.bytes_h2d), gb(now.bytes_d2h - before.bytes_d2h), stall,
               blocked);
        fflush(stdout);
        fprintf(stderr, "train %-9s step %2d/%d  loss %.6f  %6.3f GB in, %6.3f GB out  stall %5.1f%%  %8.1f ms\n",
                label, i + 1, steps, r->loss[i], gb(now.bytes_h2d - before.bytes_h2d),
                gb(now.bytes_d2h - before.bytes_d2h), stall, r->ms[i]);
        before = now;
    }
    bench_check(swap_link_busy(&busy), "swap_link_busy");
    r->busy = (swap_link_busy_t){.h2d_ns = busy.h2d_ns - busy0.h2d_ns,
                                 .d2h_ns = busy.d2h_ns - busy0.d2h_ns,
                                 .both_ns = busy.both_ns - busy0.both_ns};
    bench_check(lms_stats(&r->stats), "lms_stats");
    if (model_peak_allocated(m) > r->footprint)
        r->footprint = model_peak_allocated(m);
    bench_check(lms_stream_destroy(stream), "lms_stream_destroy");
    model_destroy(m);
    bench_check(lms_shutdown(), "lms_shutdown");

    double *sorted = malloc((size_t)steps * sizeof *sorted);
    if (sorted == NULL)
        bench_die("out of host memory");
    int first = steps > 1 ? 1 : 0;
    memcpy(sorted, r->ms + first, (size_t)(steps - first) * sizeof *sorted);
    r->median_ms = bench_median(sorted, steps - first);
    free(sorted);
}

static void usage(void)
{
    fprintf(stderr, "usage: train [--oversub X[,Y...]] [--steps N] [--layers L] [--width W] "
                    "[--batch B] [--quick] [--dynamic] [--link-ratio R] "
                    "[--evict-ahead V[,V...]] [--vmm-order V[,V...]]\n");
    exit(2);
}

static long positive(const char *text)
{
    char *end;
    long v = strtol(text, &end, 10);
    if (*end != '\0' || v <= 0 || v > 1 << 20)
        usage();
    return v;
}

/* A list of 0s and 1s, "V[,V...]", into out[0..MAX_RATIOS); how many. */
static int bits(const char *v, int *out)
{
    int n = 0;
    for (char *end; *v != '\0'; v = *end == ',' ? end + 1 : end) {
        long x = strtol(v, &end, 10);
        if (n == MAX_RATIOS || end == v || (x != 0 && x != 1) || (*end != ',' && *end != '\0'))
            usage();
        out[n++] = (int)x;
    }
    return n;
}

int main(int argc, char **argv)
{
    double ratio[MAX_RATIOS] = {4};
    int nratio = 1;
    int ahead[MAX_RATIOS] = {-1}; /* eviction ahead's values; -1: LMS_EVICT_AHEAD's */
    int nahead = 1;
    int order[MAX_RATIOS] = {1}; /* --vmm-order's values */
    int norder = 1;
    double link_ratio = 0, memory = 0;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (strcmp(a, "--quick") == 0) {
            shape = (model_shape_t){.layers = 6, .width = 512, .batch = 64, .batches = 4,
                                    .dynamic = shape.dynamic};
            steps = 4;
            continue;
        }
        if (strcmp(a, "--dynamic") == 0) {
            shape.dynamic = true;
            continue;
        }
        if (v == NULL)
            usage();
        i++;
        if (strcmp(a, "--oversub") == 0) {
            nratio = 0;
            for (char *end; *v != '\0' && nratio < MAX_RATIOS; v = *end == ',' ? end + 1 : end) {
                ratio[nratio] = strtod(v, &end);
                if (end == v || !(ratio[nratio] >= 1) || (*end != ',' && *end != '\0'))
                    usage();
                nratio++;
            }
        } else if (strcmp(a, "--evict-ahead") == 0) {
            nahead = bits(v, ahead);
        } else if (strcmp(a, "--vmm-order") == 0) {
            norder = bits(v, order);
        } else if (strcmp(a, "--link-ratio") == 0) {
            link_ratio = strtod(v, NULL);
            if (!(link_ratio >= 1))
                usage();
        } else if (strcmp(a, "--steps") == 0) {
            steps = (int)positive(v);
        } else if (strcmp(a, "--layers") == 0) {
            shape.layers = (uint32_t)positive(v);
        } else if (strcmp(a, "--width") == 0) {
            shape.width = (uint32_t)positive(v);
            if (shape.width > 16384) /* width^2 floats must count in 32 bits */
                usage();
        } else if (strcmp(a, "--batch") == 0) {
            shape.batch = (uint32_t)positive(v);
        } else {
            usage();
        }
    }

    if (link_ratio > 0) {
        memory = memory_gbps();
        link_gbps = memory / link_ratio;
    }
    /* Pinned host memory for everything, with room for the reclaim thread. */
    uint64_t host_limit = round_up(2 * model_bytes(&shape) + 64 * BASE_MiB, 2 * BASE_MiB);
    run_result_t ref = {0};
    train("unlimited", 0, host_limit, false, -1, 1, NULL, &ref);
    char cpu[128];
    base_host_cpu(cpu, sizeof cpu);
    printf("{\"bench\":\"train\",\"case\":\"settings\",\"backend\":\"%s\",\"device\":", ref.backend);
    bench_json_string(ref.device);
    printf(",\"host_cpu\":");
    bench_json_string(cpu);
    printf(",\"layers\":%u,\"width\":%u,\"batch\":%u,\"steps\":%d,\"model_bytes\":%llu,"
           "\"footprint_bytes\":%llu,\"step_gflop\":%.3f,\"memory_gbps\":%.3f,\"link_ratio\":%g,"
           "\"h2d_gbps\":%g,\"d2h_gbps\":%g,"
           "\"policy\":\"%s\",\"dynamic\":%s,\"unlimited_step_ms\":%.3f,\"unlimited_swapped_bytes\":%llu}\n",
           shape.layers, shape.width, shape.batch, steps,
           (unsigned long long)model_bytes(&shape), (unsigned long long)ref.footprint,
           model_step_flops(&shape) / 1e9, memory, link_ratio, ref.h2d_gbps, ref.d2h_gbps,
           base_options()->policy, shape.dynamic ? "true" : "false",
           ref.median_ms, (unsigned long long)(ref.stats.bytes_h2d + ref.stats.bytes_d2h));
    fflush(stdout);

    int status = 0;
    int runs = nratio * nahead * norder;
    for (int run = 0; run < runs; run++) {
        int k = run / (nahead * norder), ea = ahead[run / norder % nahead];
        int vo = order[run % norder];
        uint64_t limit = (uint64_t)((double)ref.footprint / ratio[k]) / ref.chunk * ref.chunk;
        if (limit == 0) {
            fprintf(stderr, "bench/train: %gx of a %llu-byte footprint is less than one %llu-byte "
                            "chunk\n", ratio[k], (unsigned long long)ref.footprint,
                    (unsigned long long)ref.chunk);
            return 1;
        }
        run_result_t r = {0};
        char label[32];
        int at = snprintf(label, sizeof label, "%gx", ratio[k]);
        if (ea >= 0)
            at += snprintf(label + at, sizeof label - (size_t)at, " ahead %d", ea);
        if (norder > 1 || !vo)
            snprintf(label + at, sizeof label - (size_t)at, " order %d", vo);
        train(label, limit, host_limit, run + 1 == runs, ea, vo, &ref, &r);
        bool identical = true;
        for (int i = 0; i < steps; i++)
            identical &= float_bits(r.loss[i]) == float_bits(ref.loss[i]);
        double steps_d = steps, timed = steps > 1 ? steps - 1 : 1;
        printf("{\"bench\":\"train\",\"oversub\":%g,\"evict_ahead\":%d,\"vmm_order\":%d,"
               "\"steps\":%d,\"loss_identical\":%s,"
               "\"step_over_unlimited\":%.3f,\"oversub_measured\":%.3f,\"device_limit\":%llu,"
               "\"step_ms\":%.3f,\"unlimited_step_ms\":%.3f,\"h2d_gb_per_step\":%.4f,"
               "\"d2h_gb_per_step\":%.4f,\"stall_pct\":%.2f,\"lms_blocked_pct\":%.2f,\"prefetch_hits\":%llu,"
               "\"fetches\":%llu,\"evictions\":%llu,\"clean_drops\":%llu,\"ooms\":%llu,"
               "\"final_loss\":%.9g,\"h2d_busy_ms\":%.1f,\"d2h_busy_ms\":%.1f,"
               "\"both_busy_ms\":%.1f}\n",
               ratio[k], ea >= 0 ? ea : (int)base_options()->evict_ahead, vo, steps,
               identical ? "true" : "false", r.median_ms / ref.median_ms,
               (double)ref.footprint / (double)r.device_limit, (unsigned long long)r.device_limit,
               r.median_ms, ref.median_ms, gb(r.stats.bytes_h2d) / steps_d,
               gb(r.stats.bytes_d2h) / steps_d,
               100.0 * fmax(0, r.total_ms - ref.total_ms) / r.total_ms,
               100.0 * (double)r.stats.stall_ns / 1e6 / r.total_ms,
               (unsigned long long)r.stats.prefetch_hits, (unsigned long long)r.stats.fetches,
               (unsigned long long)r.stats.evictions, (unsigned long long)r.stats.clean_drops,
               (unsigned long long)r.stats.ooms, r.loss[steps - 1], (double)r.busy.h2d_ns / 1e6 / timed,
               (double)r.busy.d2h_ns / 1e6 / timed, (double)r.busy.both_ns / 1e6 / timed);
        fflush(stdout);
        fprintf(stderr, "train %s: losses %s the unlimited run's; step time %.2fx unlimited; "
                        "both directions busy %.0f ms a step\n",
                label, identical ? "bitwise equal to" : "DIFFER from", r.median_ms / ref.median_ms,
                (double)r.busy.both_ns / 1e6 / timed);
        if (!identical)
            status = 1;
        free(r.loss);
        free(r.ms);
    }
    free(ref.loss);
    free(ref.ms);
    return status;
}
