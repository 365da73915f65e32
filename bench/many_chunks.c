/*
 * bench/many_chunks.c — lms's host time per access when many chunks are
 * resident: a loop over one-chunk allocations, `oversub` times the device,
 * each written in turn by an access (LMS_WRITE), each iteration marked.
 * LRU evicts until a schedule is learnt (at the second iteration's end);
 * from then on each access that must evict ranks victims by the schedule
 * (Note [Ranking between events] in swap/ranking.c), at a cost that
 * grows with the chunks resident: an 80 GB card holds 40K chunks of 2 MiB.
 *
 *   build/bench/many_chunks [--chunks N] [--oversub X] [--iterations N] [--quick]
 *
 * On sim the device is N chunks of 64 KiB, so that 20K chunks fit in this
 * machine's memory; an access's time then includes the sim's copies of a
 * chunk each way. On a GPU chunks are the driver's granularity and the
 * device limit is N of them. A JSON line per iteration (access time in
 * microseconds, median and mean; the accesses that waited for an eviction,
 * by lms_stats' stall_ns, and their mean time apart from the others'; chunks
 * fetched) and a summary of the iterations that followed the schedule,
 * beside MIN's fetches for the loop.
 */
#define _GNU_SOURCE
#define BENCH_NAME "many_chunks"
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "base/base.h"
#include "bench.h"
#include "device/device.h"
#include "lms.h"
#include "swap/swap.h"

#define SIM_CHUNK (64 * BASE_KiB)

static double now_us(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec * 1e6 + (double)t.tv_nsec / 1e3;
}

static void usage(const char *argv0)
{
    fprintf(stderr,
            "usage: %s [--chunks N] [--oversub X] [--iterations N] [--quick]\n"
            "  --chunks N      device chunks (20480; 2048 with --quick)\n"
            "  --oversub X     the loop's chunks / the device's, 1.1 to 8 (2)\n"
            "  --iterations N  iterations of the loop, 3 or more (5; 4 with --quick)\n",
            argv0);
    exit(2);
}

int main(int argc, char **argv)
{
    long chunks = 20480, iterations = 5;
    double oversub = 2;
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--quick") == 0) {
            chunks = 2048;
            iterations = 4;
        } else if (strcmp(argv[i], "--chunks") == 0 && i + 1 < argc)
            chunks = atol(argv[++i]);
        else if (strcmp(argv[i], "--oversub") == 0 && i + 1 < argc)
            oversub = atof(argv[++i]);
        else if (strcmp(argv[i], "--iterations") == 0 && i + 1 < argc)
            iterations = atol(argv[++i]);
        else
            usage(argv[0]);
    }
    if (chunks < 16 || chunks > (1L << 22) || !(oversub >= 1.1 && oversub <= 8) || iterations < 3)
        usage(argv[0]);
    size_t loop = (size_t)((double)chunks * oversub);

    /* the device's chunk: the probe's granularity (on sim, ours) */
    swap_config_t cfg;
    swap_config_from_options(&cfg);
    cfg.device.sim_granularity = SIM_CHUNK;
    cfg.device.sim_memory = ((size_t)chunks + 64) * SIM_CHUNK;
    dev_device_t *probe;
    bench_check(dev_open(&cfg.device, &probe), "dev_open");
    size_t chunk = probe->info.granularity;
    char backend[16], name[128], cpu[128];
    snprintf(backend, sizeof backend, "%s", probe->info.backend);
    snprintf(name, sizeof name, "%s", probe->info.name);
    dev_close(probe);
    base_host_cpu(cpu, sizeof cpu);

    cfg.device_limit = (size_t)chunks * chunk;
    cfg.host_limit = (loop + 64) * chunk;
    cfg.swap = true;
    bench_check(swap_init(&cfg), "swap_init");
    void **a = calloc(loop, sizeof *a);
    double *t = calloc(loop, sizeof *t), *sorted = calloc(loop, sizeof *sorted);
    if (a == NULL || t == NULL || sorted == NULL)
        bench_die("no host memory");
    for (size_t i = 0; i < loop; i++)
        bench_check(lms_malloc(&a[i], chunk, NULL), "lms_malloc");

    lms_stats_t s0, s;
    bench_check(lms_stats(&s0), "lms_stats");
    double follow_sum = 0, follow_p50_sum = 0, follow_stalled = 0, follow_stalled_us = 0;
    uint64_t follow_fetches = 0, stall_seen = s0.stall_ns;
    long followed = 0;
    for (long it = 0; it < iterations; it++) {
        double sum = 0, stalled_sum = 0;
        size_t stalled = 0;
        for (size_t i = 0; i < loop; i++) {
            double t0 = now_us();
            bench_check(lms_access(a[i], chunk, it == 0 ? LMS_OVERWRITE : LMS_WRITE, NULL),
                        "lms_access");
            t[i] = now_us() - t0;
            sum += t[i];
            /* whether it waited for an eviction (outside the time measured) */
            bench_check(lms_stats(&s), "lms_stats");
            if (s.stall_ns != stall_seen) {
                stalled++;
                stalled_sum += t[i];
            }
            stall_seen = s.stall_ns;
        }
        bench_check(lms_mark_iteration(), "lms_mark_iteration");
        bench_check(lms_stats(&s), "lms_stats");
        memcpy(sorted, t, loop * sizeof *t);
        double p50 = bench_quantile(sorted, (int)loop, 0.5), mean = sum / (double)loop;
        double stalled_mean = stalled > 0 ? stalled_sum / (double)stalled : 0;
        double other_mean = stalled < loop ? (sum - stalled_sum) / (double)(loop - stalled) : 0;
        uint64_t fetched = s.fetches - s0.fetches;
        s0 = s;
        bool schedule = it >= 2; /* learnt at the second iteration's end */
        printf("{\"bench\":\"many_chunks\",\"iteration\":%ld,\"schedule\":%s,"
               "\"device_chunks\":%ld,\"loop_chunks\":%zu,\"us_per_access_p50\":%.2f,"
               "\"us_per_access_mean\":%.2f,\"stalled_accesses\":%zu,"
               "\"us_per_stalled_access\":%.2f,\"us_per_other_access\":%.2f,"
               "\"fetched_chunks\":%llu}\n",
               it, schedule ? "true" : "false", chunks, loop, p50, mean, stalled, stalled_mean,
               other_mean, (unsigned long long)fetched);
        fflush(stdout);
        if (schedule) {
            follow_sum += mean;
            follow_p50_sum += p50;
            follow_fetches += fetched;
            follow_stalled += (double)stalled;
            follow_stalled_us += stalled_sum;
            followed++;
        }
    }
    /* MIN on a loop: all but the device's chunks come in each iteration,
     * one more for the block the reclaim thread keeps free */
    printf("{\"bench\":\"many_chunks\",\"summary\":true,\"backend\":\"%s\",\"device\":\"%s\","
           "\"chunk\":%zu,\"host_cpu\":\"%s\",\"host_cores\":%ld,\"device_chunks\":%ld,"
           "\"loop_chunks\":%zu,\"following_iterations\":%ld,\"us_per_access_p50\":%.2f,"
           "\"us_per_access_mean\":%.2f,\"stalled_accesses_per_iteration\":%.1f,"
           "\"us_per_stalled_access\":%.2f,\"fetches_per_iteration\":%.1f,"
           "\"min_fetches_per_iteration\":%zu}\n",
           backend, name, chunk, cpu, sysconf(_SC_NPROCESSORS_ONLN), chunks, loop, followed,
           follow_p50_sum / (double)followed, follow_sum / (double)followed,
           follow_stalled / (double)followed,
           follow_stalled > 0 ? follow_stalled_us / follow_stalled : 0,
           (double)follow_fetches / (double)followed, loop - (size_t)chunks + 1);
    for (size_t i = 0; i < loop; i++)
        bench_check(lms_free(a[i], NULL), "lms_free");
    free(a);
    free(t);
    free(sorted);
    bench_check(lms_shutdown(), "lms_shutdown");
    return 0;
}
