/*
 * lms-info — what lms sees: its version (lms_version), the backend and device
 * it would use, the device's memory and granularity, the host NUMA node next
 * to it, the pinned copy bandwidth each way, measured now, and where lms would
 * point an evicted chunk's addresses, and why (LMS_EVICTED; Note [Evicted
 * mode] in swap/config.c), under the preload or the PyTorch plugin.
 *
 *   lms-info            a table
 *   lms-info --json     one JSON line
 *   lms-info --options  the LMS_* settings as parsed, with their docs, then
 *                       the sizes lms would run with on this device and host
 *                       (swap_config_resolve) and where each came from
 *   lms-info --options --markdown
 *                       the options table as docs/settings.md carries
 *                       it; needs no device
 *   lms-info --probe    exit 0 if the device opens, else print why and exit 1
 *
 * The device is chosen by LMS_BACKEND / LMS_DEVICE / LMS_SIM_* (see --options).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base/base.h"
#include "device/device.h"
#include "swap/config.h"
#include "swap/swap.h"

#define COPY_REPS 5

typedef struct measured {
    size_t free_bytes;
    size_t copy_bytes; /* bytes per timed copy */
    double h2d_gbps, d2h_gbps;
} measured_t;

static int cmp_u64(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return (x > y) - (x < y);
}

/* Median over COPY_REPS (after one warm-up) of one copy of n bytes, in GB/s. */
static lms_status_t time_copies(dev_device_t *dev, dev_stream_t *s, bool h2d, dev_addr_t d,
                                void *h, size_t n, double *gbps)
{
    uint64_t ns[COPY_REPS];
    for (int rep = -1; rep < COPY_REPS; rep++) {
        uint64_t t0 = base_now_ns();
        lms_status_t st = h2d ? dev_copy_h2d(dev, s, d, h, n) : dev_copy_d2h(dev, s, h, d, n);
        if (st == LMS_OK)
            st = dev_stream_synchronize(dev, s);
        if (st != LMS_OK)
            return st;
        if (rep >= 0)
            ns[rep] = base_now_ns() - t0;
    }
    qsort(ns, COPY_REPS, sizeof *ns, cmp_u64);
    *gbps = (double)n / (double)ns[COPY_REPS / 2];
    return LMS_OK;
}

/* Maps a run of device memory and a registered host buffer of the same size,
 * and times copies both ways. Everything is released again on every path. */
static lms_status_t measure(dev_device_t *dev, measured_t *m)
{
    size_t g = dev->info.granularity, total;
    lms_status_t st = dev_mem_info(dev, &m->free_bytes, &total);
    if (st != LMS_OK)
        return st;
    size_t n = 64 * BASE_MiB;
    if (n > m->free_bytes / 2)
        n = m->free_bytes / 2 / g * g;
    if (n < g)
        return base_fail(LMS_ERR_OUT_OF_MEMORY, "lms-info: too little free device memory to measure");
    m->copy_bytes = n;
    size_t nblocks = n / g, mapped = 0;
    dev_block_t *blocks = calloc(nblocks, sizeof *blocks);
    void *host = aligned_alloc(4096, n);
    dev_addr_t base = 0;
    dev_stream_t *s = NULL;
    bool registered = false;
    if (blocks == NULL || host == NULL) {
        st = base_fail(LMS_ERR_OUT_OF_MEMORY, "lms-info: no host memory for %zu bytes", n);
        goto out;
    }
    memset(host, 0x5a, n);
    if ((st = dev_va_reserve(dev, n, &base)) != LMS_OK)
        goto out;
    for (; mapped < nblocks; mapped++) {
        if ((st = dev_block_create(dev, &blocks[mapped])) != LMS_OK)
            goto out;
        if ((st = dev_map(dev, base + mapped * g, blocks[mapped])) != LMS_OK) {
            dev_block_release(dev, blocks[mapped]);
            goto out;
        }
    }
    if ((st = dev_set_access(dev, base, n)) != LMS_OK ||
        (st = dev_host_register(dev, host, n)) != LMS_OK)
        goto out;
    registered = true;
    if ((st = dev_stream_create(dev, DEV_PRIORITY_HIGH, &s)) != LMS_OK ||
        (st = time_copies(dev, s, true, base, host, n, &m->h2d_gbps)) != LMS_OK ||
        (st = time_copies(dev, s, false, base, host, n, &m->d2h_gbps)) != LMS_OK)
        goto out;
out:
    if (s != NULL)
        dev_stream_destroy(dev, s);
    if (registered)
        dev_host_unregister(dev, host);
    for (size_t i = 0; i < mapped; i++) {
        dev_unmap(dev, base + i * g, g);
        dev_block_release(dev, blocks[i]);
    }
    if (base != 0)
        dev_va_free(dev, base, n);
    free(host);
    free(blocks);
    return st;
}

static void json_string(const char *s)
{
    putchar('"');
    for (; *s; s++) {
        if (*s == '"' || *s == '\\')
            putchar('\\');
        if ((unsigned char)*s >= 0x20)
            putchar(*s);
    }
    putchar('"');
}

/* The settings resolved on dev as lms_init resolves them under the preload or
 * the PyTorch plugin, lms's usual way in, which expect unseen accesses
 * (lms_expect_unseen_access): where the evicted mode matters. On failure,
 * lms_last_error says why lms would not start. */
static lms_status_t resolve_on(dev_device_t *dev, swap_facts_t *facts, swap_resolved_t *r)
{
    swap_config_t cfg;
    swap_config_from_options(&cfg);
    lms_status_t st = lms_expect_unseen_access();
    if (st == LMS_OK && (st = swap_facts_device(dev, facts)) == LMS_OK &&
        (st = swap_facts_host(dev->info.host_numa_node, facts)) == LMS_OK)
        st = swap_config_resolve(&cfg, true, facts, r);
    return st;
}

/* The evicted mode, or "refused" when lms would not start; why either. */
typedef struct evicted_line {
    const char *mode;
    char why[256];
} evicted_line_t;

static evicted_line_t evicted_line(dev_device_t *dev)
{
    swap_facts_t facts = {0};
    swap_resolved_t r;
    evicted_line_t e = {.mode = "refused"};
    if (resolve_on(dev, &facts, &r) == LMS_OK) {
        e.mode = swap_evicted_str(r.evicted);
        snprintf(e.why, sizeof e.why, "%s", r.evicted_why);
    } else {
        snprintf(e.why, sizeof e.why, "lms would not start: %s", lms_last_error());
    }
    return e;
}

static void print_json(const dev_info_t *info, const measured_t *m, const char *cpu,
                       const evicted_line_t *e)
{
    printf("{\"tool\":\"lms-info\",\"version\":");
    json_string(lms_version());
    printf(",\"backend\":");
    json_string(info->backend);
    printf(",\"device\":");
    json_string(info->name);
    printf(",\"ordinal\":%d,\"total_bytes\":%zu,\"free_bytes\":%zu,\"granularity\":%zu,"
           "\"host_numa_node\":%d,\"kernels\":%s,\"copy_bytes\":%zu,\"h2d_gbps\":%.3f,"
           "\"d2h_gbps\":%.3f,\"host_cpu\":",
           info->ordinal, info->total_memory, m->free_bytes, info->granularity,
           info->host_numa_node, info->has_kernels ? "true" : "false", m->copy_bytes,
           m->h2d_gbps, m->d2h_gbps);
    json_string(cpu);
    printf(",\"evicted\":");
    json_string(e->mode);
    printf(",\"evicted_why\":");
    json_string(e->why);
    printf("}\n");
}

static void print_table(const dev_info_t *info, const measured_t *m, const char *cpu,
                        const evicted_line_t *e)
{
    char total[32], free_b[32], gran[32], copy[32];
    base_format_size(info->total_memory, total, sizeof total);
    base_format_size(m->free_bytes, free_b, sizeof free_b);
    base_format_size(info->granularity, gran, sizeof gran);
    base_format_size(m->copy_bytes, copy, sizeof copy);
    printf("%-18s %s\n", "lms version", lms_version());
    printf("%-18s %s\n", "backend", info->backend);
    printf("%-18s %s\n", "device", info->name);
    printf("%-18s %d\n", "ordinal", info->ordinal);
    printf("%-18s %s\n", "total memory", total);
    printf("%-18s %s\n", "free memory", free_b);
    printf("%-18s %s\n", "granularity", gran);
    if (info->host_numa_node >= 0)
        printf("%-18s %d\n", "host NUMA node", info->host_numa_node);
    else
        printf("%-18s %s\n", "host NUMA node", "unknown");
    printf("%-18s %s\n", "test kernels", info->has_kernels ? "yes" : "no (built without nvcc)");
    printf("%-18s %.2f GB/s  (%s copies, median of %d)\n", "H2D pinned copy", m->h2d_gbps, copy,
           COPY_REPS);
    printf("%-18s %.2f GB/s  (%s copies, median of %d)\n", "D2H pinned copy", m->d2h_gbps, copy,
           COPY_REPS);
    printf("%-18s %s\n", "host CPU", cpu);
    printf("%-18s %s (%s)\n", "evicted", e->mode, e->why);
}

static void print_option(const char *var, const char *value, const char *source, const char *doc,
                         void *arg)
{
    (void)arg;
    printf("%-22s %-10s %-8s %s\n", var, value, source, doc);
}

static void print_resolved(const char *var, uint64_t bytes, swap_origin_t from, void *arg)
{
    (void)arg;
    char value[32];
    printf("%-22s %-11s %s\n", var, base_format_size(bytes, value, sizeof value),
           swap_origin_str(from));
}

/* The sizes lms would start with here: the options resolved on the device
 * they choose, as lms_init resolves them. Exit status 1 when the device does
 * not open or lms_init would refuse the settings, with why on stderr. */
static int show_resolved(void)
{
    dev_device_t *dev;
    if (dev_open(NULL, &dev) != LMS_OK) {
        fprintf(stderr, "lms-info: cannot open the device to resolve the sizes: %s\n",
                lms_last_error());
        return 1;
    }
    swap_facts_t facts = {0};
    swap_resolved_t r;
    lms_status_t st = resolve_on(dev, &facts, &r);
    if (st != LMS_OK) {
        fprintf(stderr, "lms-info: the settings do not resolve: %s: %s\n", lms_status_str(st),
                lms_last_error());
        dev_close(dev);
        return 1;
    }
    char free_b[32], total[32], chunk[32];
    printf("\nsizes on %s \"%s\" (%s free of %s, chunks of %s):\n", dev->info.backend,
           dev->info.name, base_format_size(facts.free_bytes, free_b, sizeof free_b),
           base_format_size(facts.total_bytes, total, sizeof total),
           base_format_size(facts.granularity, chunk, sizeof chunk));
    swap_resolved_each(&r, print_resolved, NULL);
    printf("%-22s %-11s %s\n", "LMS_EVICTED", swap_evicted_str(r.evicted), r.evicted_why);
    dev_close(dev);
    return 0;
}

/* ---- docs/settings.md's table (--options --markdown) ------------------------------ */

/* A table cell: s with '|' escaped. */
static void cell(const char *s)
{
    for (; *s; s++) {
        if (*s == '|')
            putchar('\\');
        putchar(*s);
    }
}

/* "lo..hi" as words after a type: " ≥ lo", " ≤ hi", " lo to hi", or "". */
static void range_cell(const char *range)
{
    const char *dots = range != NULL ? strstr(range, "..") : NULL;
    if (dots == NULL)
        return;
    if (dots[2] == '\0')
        printf(" ≥ %.*s", (int)(dots - range), range);
    else if (dots == range)
        printf(" ≤ %s", dots + 2);
    else
        printf(" %.*s to %s", (int)(dots - range), range, dots + 2);
}

/* The words of "a|b|c" as "`a`, `b` or `c`". */
static void choices_cell(const char *choices)
{
    for (const char *w = choices; *w != '\0';) {
        size_t n = strcspn(w, "|");
        printf("`%.*s`", (int)n, w);
        w += n + (w[n] == '|');
        if (*w != '\0')
            printf("%s", strchr(w, '|') != NULL ? ", " : " or ");
    }
}

static void markdown_row(const char *field, const char *type, const char *def,
                         const char *choices, const char *doc)
{
    printf("| `LMS_");
    for (const char *c = field; *c; c++)
        putchar(*c >= 'a' && *c <= 'z' ? *c - 'a' + 'A' : *c);
    printf("` | ");
    if (strcmp(type, "size") == 0)
        printf("size");
    else if (strcmp(type, "double") == 0)
        printf("number");
    else if (strcmp(type, "int") == 0)
        printf("integer");
    else if (strcmp(type, "bool") == 0)
        printf("`0` or `1`");
    else if (strcmp(type, "choice") == 0)
        choices_cell(choices);
    else
        printf("file");
    if (strcmp(type, "double") == 0 || strcmp(type, "int") == 0)
        range_cell(choices);
    printf(" | ");
    if (def[0] != '\0') {
        putchar('`');
        cell(def);
        putchar('`');
    } else {
        printf("(none)");
    }
    printf(" | ");
    cell(doc);
    printf(" |\n");
}

/* The options table, LMS_OPTIONS, as docs/settings.md carries it: a CTest
 * (tools.readme_settings) diffs the two. */
static void print_markdown(void)
{
    printf("| variable | type | default | meaning |\n| --- | --- | --- | --- |\n");
#define MARKDOWN_ROW(field, type, def, choices, doc) markdown_row(#field, #type, def, choices, doc);
    LMS_OPTIONS(MARKDOWN_ROW)
#undef MARKDOWN_ROW
}

static void usage(FILE *out)
{
    fputs("usage: lms-info [--json | --options [--markdown] | --probe]\n"
          "  (no option)  the device lms would use, and its measured copy bandwidth\n"
          "  --json       the same as one JSON line\n"
          "  --options    the LMS_* settings as parsed, with where each came from, then the\n"
          "               sizes lms would start with on this device, with where each came from\n"
          "  --options --markdown\n"
          "               the settings table of docs/settings.md, from the options table\n"
          "  --probe      exit 0 if the device opens, else print why and exit 1\n",
          out);
}

int main(int argc, char **argv)
{
    const char *mode = argc > 1 ? argv[1] : "";
    bool markdown = argc == 3 && strcmp(mode, "--options") == 0 && strcmp(argv[2], "--markdown") == 0;
    if ((argc > 2 && !markdown) ||
        (argc == 2 && strcmp(mode, "--json") && strcmp(mode, "--options") &&
         strcmp(mode, "--probe") && strcmp(mode, "--help"))) {
        usage(stderr);
        return 2;
    }
    if (markdown) {
        print_markdown();
        return 0;
    }
    if (strcmp(mode, "--help") == 0) {
        usage(stdout);
        return 0;
    }
    if (strcmp(mode, "--options") == 0) {
        printf("%-22s %-10s %-8s %s\n", "variable", "value", "from", "meaning");
        base_options_each(print_option, NULL);
        return show_resolved();
    }
    dev_device_t *dev;
    if (dev_open(NULL, &dev) != LMS_OK) {
        fprintf(stderr, "lms-info: cannot open the device: %s\n", lms_last_error());
        return 1;
    }
    if (strcmp(mode, "--probe") == 0) {
        printf("%s: %s\n", dev->info.backend, dev->info.name);
        dev_close(dev);
        return 0;
    }
    measured_t m = {0};
    lms_status_t st = measure(dev, &m);
    if (st != LMS_OK) {
        fprintf(stderr, "lms-info: measuring copies failed: %s: %s\n", lms_status_str(st),
                lms_last_error());
        dev_close(dev);
        return 1;
    }
    char cpu[128];
    base_host_cpu(cpu, sizeof cpu);
    evicted_line_t e = evicted_line(dev);
    if (strcmp(mode, "--json") == 0)
        print_json(&dev->info, &m, cpu, &e);
    else
        print_table(&dev->info, &m, cpu, &e);
    dev_close(dev);
    return 0;
}
