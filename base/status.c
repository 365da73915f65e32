/*
 * base/status.c — status names, the per-thread last-error message, logging.
 *
 * The message lives in a thread-local buffer: no lock, no allocation, so a
 * failure path never fails again while reporting.
 */
#include <stdio.h>
#include <string.h>

#include "base/base.h"

static const char *const status_names[] = {
    [LMS_OK] = "success",
    [LMS_NOT_READY] = "not ready",
    [LMS_ERR_INVALID] = "invalid argument",
    [LMS_ERR_OUT_OF_MEMORY] = "out of memory",
    [LMS_ERR_NO_DEVICE] = "no device",
    [LMS_ERR_UNSUPPORTED] = "not supported",
    [LMS_ERR_DEVICE] = "device error",
    [LMS_ERR_SYSTEM] = "system error",
};
_Static_assert(sizeof status_names / sizeof *status_names == LMS_ERR_SYSTEM + 1,
               "every lms_status_t has a name");

static __thread char last_error[512];

const char *lms_status_str(lms_status_t status)
{
    if ((unsigned)status >= sizeof status_names / sizeof *status_names)
        return "unknown status";
    return status_names[status];
}

const char *lms_last_error(void)
{
    return last_error;
}

lms_status_t base_fail(lms_status_t status, const char *fmt, ...)
{
    char message[sizeof last_error]; /* the arguments may include lms_last_error() */
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(message, sizeof message, fmt, ap);
    va_end(ap);
    memcpy(last_error, message, sizeof last_error);
    base_log(BASE_LOG_DEBUG, "%s: %s", lms_status_str(status), last_error);
    return status;
}

static base_log_level_t log_threshold(void)
{
    static const char *const levels[] = {"error", "warn", "info", "debug"};
    const char *word = base_options()->log;
    for (size_t i = 0; i < sizeof levels / sizeof *levels; i++)
        if (strcmp(word, levels[i]) == 0)
            return (base_log_level_t)i;
    return BASE_LOG_WARN;
}

void base_log(base_log_level_t level, const char *fmt, ...)
{
    static const char *const prefix[] = {"error", "warning", "info", "debug"};
    if (level > log_threshold())
        return;
    char line[640];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(line, sizeof line, fmt, ap);
    va_end(ap);
    fprintf(stderr, "lms: %s: %s\n", prefix[level], line);
}
