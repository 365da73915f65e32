/*
 * bench/simulate_exit.c — the program's exits and memory (simulate.h) for
 * a program built from the simulator's files beside its own main, such as
 * bench/simulate_bound_check: each message starts with the program's name.
 */
#define _GNU_SOURCE /* program_invocation_short_name */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>

#include "bench/simulate.h"

static void sim_exit(int status, const char *fmt, va_list ap) __attribute__((noreturn));
static void sim_exit(int status, const char *fmt, va_list ap)
{
    fprintf(stderr, "%s: ", program_invocation_short_name);
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
    exit(status);
}

void sim_die(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    sim_exit(1, fmt, ap);
}

void sim_bad(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    sim_exit(2, fmt, ap);
}

void *sim_grow(void *p, size_t *cap, size_t need, size_t size)
{
    if (need <= *cap)
        return p;
    size_t c = *cap ? *cap : 64;
    while (c < need)
        c *= 2;
    p = realloc(p, c * size);
    if (p == NULL)
        sim_die("no host memory for %zu x %zu bytes", c, size);
    *cap = c;
    return p;
}

void *sim_zalloc(size_t n, size_t size)
{
    void *p = calloc(n ? n : 1, size);
    if (p == NULL)
        sim_die("no host memory for %zu x %zu bytes", n, size);
    return p;
}
