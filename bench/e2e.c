/*
 * bench/e2e — end to end: the training throughput lms keeps at 1.25x, 1.5x,
 * 2x and 4x oversubscription, relative to the same training with room for
 * everything (issue 7). On sim it runs bench/train (the program next to this
 * one) once, with every ratio after one unlimited reference run, over a link
 * throttled to a PCIe-like share of the device's memory bandwidth:
 *
 *   build/bench/e2e [--quick] [--dynamic] [--link-ratio R] [--oversub X,Y,...]
 *
 * The link: a PCIe 5.0 x16 link moves about 55 GB/s each way, an H100's HBM3
 * 3.35 TB/s: 1/60. The sim's "device memory" is host memory, so bench/train
 * --link-ratio R measures its bandwidth and throttles the sim's link to that
 * / R (R = 60). What this does not make PCIe-like is compute: the sim's kernels run on a CPU,
 * which does far fewer operations per byte of memory than a GPU, so a step
 * has much more time to hide its copies in than on a GPU. The rows show how
 * well lms schedules its copies (what it moves, whether they overlap the
 * kernels), not the throughput a GPU would keep: for that, the GPU rows
 * (docs/gpu-results.md, bench/gpt2.py).
 *
 * --dynamic: activations allocated and freed in each step, as a framework's
 * (bench/train --dynamic).
 *
 * Output: a "case":"settings" line (the machine, the measured memory
 * bandwidth and the link), then one line per ratio:
 *   {"bench":"e2e","backend":"sim","oversub":X,"throughput_vs_unlimited":T,
 *    "loss_identical":true|false,"step_ms":..,"unlimited_step_ms":..,
 *    "h2d_gb_per_step":..,"d2h_gb_per_step":..,"link_gbps":..}
 * T = unlimited step time / step time (medians, first step left out), as
 * bench/train measures it. Exit status 1 if train fails or a loss differs.
 */
#define BENCH_NAME "e2e"

#include <libgen.h>
#include <math.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base/base.h"
#include "bench/bench.h"

#define PCIE_RATIO 60.0 /* HBM3 3.35 TB/s / PCIe 5.0 x16 55 GB/s */

/* The number after "key": in line, or NAN. */
static double field(const char *line, const char *key)
{
    char pattern[64];
    snprintf(pattern, sizeof pattern, "\"%s\":", key);
    const char *at = strstr(line, pattern);
    return at == NULL ? NAN : strtod(at + strlen(pattern), NULL);
}

static void usage(void)
{
    fprintf(stderr, "usage: e2e [--quick] [--dynamic] [--link-ratio R] [--oversub X,Y,...]\n");
    exit(2);
}

int main(int argc, char **argv)
{
    const char *ratios = "1.25,1.5,2,4";
    double link_ratio = PCIE_RATIO;
    bool quick = false, dynamic = false;
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--quick") == 0)
            quick = true;
        else if (strcmp(argv[i], "--dynamic") == 0)
            dynamic = true;
        else if (strcmp(argv[i], "--link-ratio") == 0 && i + 1 < argc)
            link_ratio = strtod(argv[++i], NULL);
        else if (strcmp(argv[i], "--oversub") == 0 && i + 1 < argc)
            ratios = argv[++i];
        else
            usage();
    }
    if (!(link_ratio >= 1) || strspn(ratios, "0123456789.,") != strlen(ratios))
        usage();

    const char *backend = base_options()->backend;
    if (strcmp(backend, "cuda") == 0) {
        fprintf(stderr, "bench/e2e: on a GPU the end-to-end rows come from bench/gpt2.py "
                        "(PyTorch under LD_PRELOAD); this program is the sim's\n");
        return 2;
    }
    char self[PATH_MAX];
    ssize_t len = readlink("/proc/self/exe", self, sizeof self - 1);
    if (len <= 0)
        bench_die("readlink /proc/self/exe");
    self[len] = '\0';
    char cmd[2 * PATH_MAX];
    snprintf(cmd, sizeof cmd, "LMS_BACKEND=sim '%s/train' --link-ratio %g --oversub %s%s%s",
             dirname(self), link_ratio, ratios, quick ? " --quick" : "",
             dynamic ? " --dynamic" : "");
    FILE *train = popen(cmd, "r");
    if (train == NULL)
        bench_die("popen bench/train");
    char line[4096];
    int rows = 0, status = 0;
    double link = NAN;
    while (fgets(line, sizeof line, train) != NULL) {
        if (strstr(line, "\"case\":\"settings\"") != NULL) {
            char cpu[128];
            base_host_cpu(cpu, sizeof cpu);
            link = field(line, "h2d_gbps");
            printf("{\"bench\":\"e2e\",\"case\":\"settings\",\"backend\":\"sim\",\"host_cpu\":");
            bench_json_string(cpu);
            printf(",\"nproc\":%ld,\"memory_gbps\":%.2f,\"link_ratio\":%g,\"link_gbps\":%.4f,"
                   "\"model\":\"%s\",\"activations\":\"%s\",\"footprint_bytes\":%.0f,"
                   "\"step_gflop\":%.3f}\n",
                   sysconf(_SC_NPROCESSORS_ONLN), field(line, "memory_gbps"), link_ratio, link,
                   quick ? "quick" : "default", dynamic ? "dynamic" : "static",
                   field(line, "footprint_bytes"),
                   field(line, "step_gflop"));
            fflush(stdout);
        }
        if (strncmp(line, "{\"bench\":\"train\",\"oversub\":", 27) != 0)
            continue;
        bool identical = strstr(line, "\"loss_identical\":true") != NULL;
        double over = field(line, "step_over_unlimited");
        printf("{\"bench\":\"e2e\",\"backend\":\"sim\",\"oversub\":%g,"
               "\"throughput_vs_unlimited\":%.3f,\"loss_identical\":%s,\"step_ms\":%.3f,"
               "\"unlimited_step_ms\":%.3f,\"h2d_gb_per_step\":%.4f,\"d2h_gb_per_step\":%.4f,"
               "\"link_gbps\":%.4f}\n",
               field(line, "oversub"), 1.0 / over, identical ? "true" : "false",
               field(line, "step_ms"), field(line, "unlimited_step_ms"),
               field(line, "h2d_gb_per_step"), field(line, "d2h_gb_per_step"), link);
        fflush(stdout);
        rows++;
        status |= !identical;
    }
    int rc = pclose(train);
    if (rc != 0 || rows == 0) {
        fprintf(stderr, "bench/e2e: bench/train failed (status %d, %d rows): %s\n", rc, rows, cmd);
        return 1;
    }
    return status;
}
