/* base/clock.c — the monotonic clock lms measures and throttles with, and
 * the name of the machine it measured on. */
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "base/base.h"

uint64_t base_now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

void base_sleep_until_ns(uint64_t deadline_ns)
{
    struct timespec ts = {.tv_sec = (time_t)(deadline_ns / 1000000000u),
                          .tv_nsec = (long)(deadline_ns % 1000000000u)};
    while (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &ts, NULL) == EINTR) {
    }
}

struct timespec base_deadline_in(uint64_t ns)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    uint64_t nsec = (uint64_t)t.tv_nsec + ns % 1000000000u;
    t.tv_sec += (time_t)(ns / 1000000000u + nsec / 1000000000u);
    t.tv_nsec = (long)(nsec % 1000000000u);
    return t;
}

void base_host_cpu(char *buf, size_t len)
{
    snprintf(buf, len, "unknown");
    FILE *f = fopen("/proc/cpuinfo", "r");
    if (f == NULL)
        return;
    char line[256];
    while (fgets(line, sizeof line, f))
        if (strncmp(line, "model name", 10) == 0 && strchr(line, ':')) {
            snprintf(buf, len, "%s", strchr(line, ':') + 2);
            buf[strcspn(buf, "\n")] = '\0';
            break;
        }
    fclose(f);
}
