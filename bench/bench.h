/*
 * bench/bench.h — what the benchmarks share: order statistics over a run's
 * samples, JSON strings, and, for a bench on lms that defines BENCH_NAME
 * ("alloc") before including it, dying with lms's message. Header-only; each bench is one
 * program.
 */
#ifndef LMS_BENCH_H
#define LMS_BENCH_H

#include <stdio.h>
#include <stdlib.h>

#ifdef BENCH_NAME
#include "lms.h"

/* Exits with what failed and lms's last error. */
static inline void bench_die(const char *what)
{
    fprintf(stderr, "bench/" BENCH_NAME ": %s: %s\n", what, lms_last_error());
    exit(1);
}

static inline void bench_check(lms_status_t st, const char *what)
{
    if (st != LMS_OK)
        bench_die(what);
}
#endif

/* s as a JSON string on stdout. */
static inline void bench_json_string(const char *s)
{
    putchar('"');
    for (; *s; s++) {
        if (*s == '"' || *s == '\\')
            printf("\\%c", *s);
        else if ((unsigned char)*s < 0x20)
            printf("\\u%04x", *s);
        else
            putchar(*s);
    }
    putchar('"');
}

static inline int bench_cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* The p-quantile (0..1, the lower neighbour) of v[0..n); sorts v. */
static inline double bench_quantile(double *v, int n, double p)
{
    qsort(v, (size_t)n, sizeof *v, bench_cmp_double);
    return v[(int)(p * (n - 1))];
}

/* The median of v[0..n) (the mean of the middle two for even n); sorts v. */
static inline double bench_median(double *v, int n)
{
    qsort(v, (size_t)n, sizeof *v, bench_cmp_double);
    return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

#endif
