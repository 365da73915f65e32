/*
 * tests/base/settings_probe.c — the program tests/base/settings_sweep.c runs
 * under each setting it tries: lms as a program uses it, on whatever the
 * environment says (the sweep gives it the sim).
 *
 * Prints, on stdout:
 *   option VAR SOURCE VALUE     every option as resolved (base_options_each),
 *                               before lms starts; VALUE is the rest of the line
 *   observed NAME BYTES         what lms says it made of the limits, once started
 *                               (device_limit, host_limit, va_reserve)
 * then allocates past the device limit when it may swap (half the limit when
 * it may not), in 2 MiB blocks (the sim's chunk, unless the sweep changes it:
 * so that LMS_LARGE_THRESHOLD does not change what fits), touching each and
 * the first again, frees it all, and shuts lms down.
 *
 * Exit: 0 all went well; 3 lms did not start (lms_last_error() on stderr);
 * 4 a call after the start failed (its message on stderr).
 */
#include <stdio.h>
#include <stdlib.h>

#include "base/base.h"
#include "lms.h"

enum { BLOCK = 2 << 20, MAX_BLOCKS = 512 };

static void print_option(const char *var, const char *value, const char *source, const char *doc,
                         void *arg)
{
    (void)doc;
    (void)arg;
    printf("option %s %s %s\n", var, source, value);
}

static int failed(const char *call)
{
    fprintf(stderr, "settings_probe: %s failed: %s\n", call, lms_last_error());
    return 4;
}

int main(void)
{
    base_options_each(print_option, NULL);
    fflush(stdout);
    lms_status_t st = lms_init();
    if (st != LMS_OK) {
        fprintf(stderr, "settings_probe: lms_init failed: %s: %s\n", lms_status_str(st),
                lms_last_error());
        return 3;
    }
    lms_stats_t s;
    void *va;
    size_t va_bytes, free_b, total;
    if (lms_stats(&s) != LMS_OK)
        return failed("lms_stats");
    if (lms_reserved_range(&va, &va_bytes) != LMS_OK)
        return failed("lms_reserved_range");
    if (lms_memory_info(&free_b, &total) != LMS_OK)
        return failed("lms_memory_info");
    printf("observed device_limit %llu\nobserved host_limit %llu\nobserved va_reserve %zu\n",
           (unsigned long long)s.device_limit, (unsigned long long)s.host_limit, va_bytes);
    fflush(stdout);

    /* past the device limit by half, or by half the host limit if that is less */
    uint64_t want = s.host_limit == 0 ? s.device_limit / 2
                    : s.host_limit / 2 < s.device_limit / 2 ? s.device_limit + s.host_limit / 2
                                                            : s.device_limit + s.device_limit / 2;
    size_t n = (size_t)(want / BLOCK) < MAX_BLOCKS ? (size_t)(want / BLOCK) : MAX_BLOCKS;
    static void *blocks[MAX_BLOCKS];
    for (size_t i = 0; i < n; i++) {
        if (lms_malloc(&blocks[i], BLOCK, NULL) != LMS_OK)
            return failed("lms_malloc");
        if (lms_access(blocks[i], BLOCK, LMS_OVERWRITE, NULL) != LMS_OK)
            return failed("lms_access");
    }
    if (n > 0 && lms_access(blocks[0], BLOCK, LMS_READ, NULL) != LMS_OK)
        return failed("lms_access (again)");
    for (size_t i = 0; i < n; i++)
        if (lms_free(blocks[i], NULL) != LMS_OK)
            return failed("lms_free");
    if (lms_stats(&s) != LMS_OK)
        return failed("lms_stats");
    if (lms_shutdown() != LMS_OK)
        return failed("lms_shutdown");
    return 0;
}
