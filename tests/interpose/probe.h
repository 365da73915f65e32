/*
 * tests/interpose/probe.h — what the interposer's probe programs share: they
 * are plain programs (run under LD_PRELOAD, where Criterion's runner would
 * be in the way), which count failed checks and exit non-zero on any.
 */
#ifndef LMS_TESTS_PROBE_H
#define LMS_TESTS_PROBE_H

#include <stdio.h>

static int failures;

#define CHECK(cond, ...)                                                                     \
    do {                                                                                     \
        if (!(cond)) {                                                                       \
            fprintf(stderr, "FAIL: %s:%d: ", __FILE__, __LINE__);                           \
            fprintf(stderr, __VA_ARGS__);                                                    \
            fputc('\n', stderr);                                                             \
            failures++;                                                                      \
        }                                                                                    \
    } while (0)

#endif /* LMS_TESTS_PROBE_H */
