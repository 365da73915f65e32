/*
 * base/lockorder.c — the lock-order witness: see lockorder.h, Note [Lock
 * order].
 *
 * Owns, per thread, the locks it holds (rank and address) in the order it
 * took them, in a fixed thread-local array: nothing is allocated, and a
 * forked child keeps the forking thread's copy. No lock: each thread reads
 * and writes only its own.
 *
 * Called only by the wrappers in lockorder.h built with LMS_LOCK_ORDER; its
 * messages are written with write(2) from a stack buffer, since the witness
 * runs under any lock, stdio's and host metadata's included.
 */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include "base/lockorder.h"

typedef struct held {
    lo_rank_t rank;
    const void *lock;
} held_t;

static __thread held_t held[LO_MAX_HELD];
static __thread unsigned nheld;

static const char *const names[LO_RANK_COUNT] = {
    [LO_NONE] = "no lock",
#define LO_NAME(rank, what) [rank] = what,
    LO_RANKS(LO_NAME)
#undef LO_NAME
};

const char *lo_name(lo_rank_t rank)
{
    return (unsigned)rank < LO_RANK_COUNT ? names[rank] : "a lock of no known rank";
}

unsigned lo_depth(void) { return nheld; }

static __attribute__((noreturn, format(printf, 1, 2))) void violated(const char *fmt, ...)
{
    char msg[512];
    int n = snprintf(msg, sizeof msg, "lms: lock order: ");
    va_list ap;
    va_start(ap, fmt);
    n += vsnprintf(msg + n, sizeof msg - (size_t)n, fmt, ap);
    va_end(ap);
    if ((size_t)n >= sizeof msg - 1)
        n = (int)sizeof msg - 2;
    msg[n++] = '\n';
    ssize_t w = write(STDERR_FILENO, msg, (size_t)n);
    (void)w; /* aborting either way */
    abort();
}

void lo_check(lo_rank_t rank, const void *lock)
{
    for (unsigned i = 0; i < nheld; i++)
        if (held[i].rank >= rank)
            violated("taking %s, rank %d at %p, while holding %s, rank %d at %p: locks are "
                     "taken in rising rank (Note [Lock order], base/lockorder.h)",
                     lo_name(rank), (int)rank, lock, lo_name(held[i].rank), (int)held[i].rank,
                     held[i].lock);
}

void lo_held(lo_rank_t rank, const void *lock)
{
    if (nheld == LO_MAX_HELD)
        violated("taking %s, rank %d at %p, with %d locks held already, the most there can be",
                 lo_name(rank), (int)rank, lock, LO_MAX_HELD);
    held[nheld++] = (held_t){rank, lock};
}

void lo_released(lo_rank_t rank, const void *lock)
{
    unsigned i = nheld;
    while (i > 0 && (held[i - 1].lock != lock || held[i - 1].rank != rank))
        i--;
    if (i == 0)
        violated("releasing %s, rank %d at %p, which this thread does not hold", lo_name(rank),
                 (int)rank, lock);
    for (; i < nheld; i++) /* released out of order: the later ones move down */
        held[i - 1] = held[i];
    nheld--;
}
