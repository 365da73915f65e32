/* tests/base/test_options.c — sizes, the options table, status messages. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "harness.h"

TestSuite(options);

Test(options, sizes_parse_with_binary_suffixes)
{
    struct { const char *text; uint64_t bytes; } ok[] = {
        {"4096", 4096}, {"4096B", 4096}, {"64K", 64 << 10}, {"64KiB", 64 << 10},
        {"2m", 2 << 20}, {"2MB", 2 << 20}, {"4GiB", 4ull << 30}, {"1.5G", 3ull << 29},
        {"16T", 16ull << 40}, {" 8 GiB", 8ull << 30}, {"0", 0},
    };
    for (size_t i = 0; i < sizeof ok / sizeof *ok; i++) {
        uint64_t v = 1;
        cr_assert(base_parse_size(ok[i].text, &v), "\"%s\" should parse", ok[i].text);
        cr_assert_eq(v, ok[i].bytes, "\"%s\" -> %llu", ok[i].text, (unsigned long long)v);
    }
}

Test(options, bad_sizes_are_rejected_and_leave_the_value_alone)
{
    const char *bad[] = {"",     "G",    "-1G",       "4X",   "4GiBx", "nan", "inf", "1e30",
                         "1e3",  "0x1p20", "99999999P", "0.3K", "1.5",  ".",   "+4G", NULL};
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        uint64_t v = 7;
        cr_assert_not(base_parse_size(bad[i], &v), "\"%s\" should not parse", bad[i]);
        cr_assert_eq(v, 7);
    }
}

Test(options, sizes_format_in_binary_units)
{
    char buf[32];
    cr_assert_str_eq(base_format_size(4ull << 30, buf, sizeof buf), "4.00 GiB");
    cr_assert_str_eq(base_format_size(3 << 20, buf, sizeof buf), "3.00 MiB");
    cr_assert_str_eq(base_format_size(100, buf, sizeof buf), "100 B");
}

/* LMS_TRACE's and LMS_TRACE_ACCESSES's file names: "%p" is the process. */
Test(options, file_names_take_the_process_id)
{
    char pid[24], want[64], out[64];
    snprintf(pid, sizeof pid, "%ld", (long)getpid());
    struct { const char *path, *fmt; } cases[] = {
        {"run-%p.json", "run-%s.json"}, {"%p", "%s"}, {"/tmp/%p/%p", "/tmp/%s/%s"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        snprintf(want, sizeof want, cases[i].fmt, pid, pid);
        cr_assert(base_expand_path(cases[i].path, out, sizeof out), "%s fits", cases[i].path);
        cr_assert_str_eq(out, want, "%s", cases[i].path);
    }
    const char *same[][2] = {{"plain.json", "plain.json"}, {"100%%p", "100%p"},
                             {"a%xb%", "a%xb%"}, {"", ""}};
    for (size_t i = 0; i < sizeof same / sizeof *same; i++) {
        cr_assert(base_expand_path(same[i][0], out, sizeof out));
        cr_assert_str_eq(out, same[i][1], "%s", same[i][0]);
    }
    snprintf(want, sizeof want, "%%%s", pid);
    cr_assert(base_expand_path("%%%p", out, sizeof out));
    cr_assert_str_eq(out, want, "%%%%%%p: a percent sign, then the process id");
    /* too long: false, and out as it was */
    strcpy(out, "kept");
    cr_assert_not(base_expand_path("run-%p.json", out, strlen(pid) + 9));
    cr_assert_str_eq(out, "kept");
    cr_assert(base_expand_path("run-%p.json", out, strlen(pid) + 10), "exactly fits");
    cr_assert_str_eq(out + 4 + strlen(pid), ".json");
}

Test(options, defaults_hold_without_environment)
{
    unsetenv("LMS_SIM_MEMORY");
    unsetenv("LMS_BACKEND");
    const base_options_t *o = base_options();
    cr_assert_eq(o->sim_memory, 4 * BASE_GiB);
    cr_assert_eq(o->sim_granularity, 2 * BASE_MiB);
    cr_assert_str_eq(o->backend, "auto");
}

Test(options, environment_overrides_defaults)
{
    setenv("LMS_SIM_MEMORY", "256M", 1);
    setenv("LMS_BACKEND", "SIM", 1);
    setenv("LMS_SIM_H2D_GBPS", "12.5", 1);
    const base_options_t *o = base_options();
    cr_assert_eq(o->sim_memory, 256 * BASE_MiB);
    cr_assert_str_eq(o->backend, "sim", "choices are matched ignoring case, stored as spelled");
    cr_assert_float_eq(o->sim_h2d_gbps, 12.5, 1e-9);
}

Test(options, invalid_values_keep_the_default)
{
    setenv("LMS_SIM_MEMORY", "lots", 1);
    setenv("LMS_BACKEND", "opencl", 1);
    setenv("LMS_DEVICE", "99999999999", 1);
    const base_options_t *o = base_options();
    cr_assert_eq(o->sim_memory, 4 * BASE_GiB);
    cr_assert_str_eq(o->backend, "auto");
    cr_assert_eq(o->device, 0);
}

/* Issue 24: LMS_SWAP=2 and its kind were read as on. */
Test(options, booleans_take_0_1_and_their_words_only)
{
    setenv("LMS_SWAP", "2", 1);            /* default 1 */
    setenv("LMS_STATS", "-1", 1);          /* default 0 */
    setenv("LMS_PREALLOCATE", "99999", 1); /* default 0 */
    setenv("LMS_ENABLE", "Off", 1);        /* default 1 */
    const base_options_t *o = base_options();
    cr_assert_eq(o->swap, true);
    cr_assert_eq(o->stats, false);
    cr_assert_eq(o->preallocate, false);
    cr_assert_eq(o->enable, false, "off, any case, is 0");
}

Test(options, numbers_outside_their_range_keep_the_default)
{
    setenv("LMS_DEVICE", "-1", 1);
    setenv("LMS_SIM_H2D_GBPS", "-1", 1);
    setenv("LMS_SIM_D2H_GBPS", "-0", 1);
    const base_options_t *o = base_options();
    cr_assert_eq(o->device, 0);
    cr_assert_float_eq(o->sim_h2d_gbps, 0, 1e-9);
    cr_assert(o->sim_d2h_gbps == 0 && !signbit(o->sim_d2h_gbps), "-0 is taken as 0");
}

static void find_trace(const char *var, const char *value, const char *source, const char *doc,
                       void *arg)
{
    (void)source;
    (void)doc;
    if (strcmp(var, "LMS_TRACE") == 0)
        *(const char **)arg = value;
}

/* Issue 24: a path of 1024 bytes or more was dropped, with a warning. */
Test(options, a_path_of_any_length_is_kept_whole)
{
    static char path[3000];
    memset(path, 'p', sizeof path - 1);
    path[0] = '/';
    setenv("LMS_TRACE", path, 1);
    const char *shown = NULL;
    cr_assert_str_eq(base_options()->trace, path);
    base_options_each(find_trace, &shown);
    cr_assert_str_eq(shown, path, "lms-info --options shows it whole");
}

static void count_option(const char *var, const char *value, const char *source, const char *doc,
                         void *arg)
{
    cr_assert(strncmp(var, "LMS_", 4) == 0);
    cr_assert(value && source && doc && doc[0]);
    if (strcmp(var, "LMS_SIM_GRANULARITY") == 0)
        cr_assert_str_eq(source, "env");
    ++*(int *)arg;
}

Test(options, every_option_is_listed_with_its_source)
{
    setenv("LMS_SIM_GRANULARITY", "64K", 1);
    int n = 0;
    base_options_each(count_option, &n);
    int table = 0;
#define COUNT_ONE(field, type, def, choices, doc) table++;
    LMS_OPTIONS(COUNT_ONE)
#undef COUNT_ONE
    cr_assert_eq(n, table, "every row of the table is listed once");
}

Test(status, every_status_has_a_name_and_failures_leave_a_message)
{
    for (int s = LMS_OK; s <= LMS_ERR_SYSTEM; s++)
        cr_assert_str_neq(lms_status_str((lms_status_t)s), "unknown status");
    cr_assert_str_eq(lms_status_str((lms_status_t)99), "unknown status");
    cr_assert_eq(base_fail(LMS_ERR_INVALID, "bad %s", "thing"), LMS_ERR_INVALID);
    cr_assert_str_eq(lms_last_error(), "bad thing");
}
