/*
 * interpose/trace.c — LMS_TRACE_ACCESSES: the interposer's allocations,
 * frees and accesses written as a trace for bench/simulate (internal.h).
 *
 * Note [Access trace]
 * With LMS_TRACE_ACCESSES=file, the interposer writes what the program
 * asks of lms's memory in the trace format of bench/simulate
 * (docs/trace-format.md), so that a real run can be replayed against the
 * policies at any device size: an `alloc` for each allocation the hooks
 * make (ids count up from 0 and are not reused), a `free` for each free
 * of one, and a `kernel` for each launch, copy, memset or collective that
 * touches one, naming what it touches (a launch writes all it points to:
 * `w`; a copy reads its source, `r`, and writes its destination, `o` when
 * it overwrites whole chunks). Kernel times are not measured (the host
 * does not see them): each `kernel` says 0 ns, and `iteration` marks are
 * not written (the policy finds iterations in the repeating accesses).
 * Lines are written under one lock, in the order the hooks saw the calls,
 * and the file is flushed at exit. A file that cannot be opened, or that
 * cannot take the first lines (written at once, so that /dev/full or a
 * full disk shows at the start), is said once in the log, naming the file
 * and the error, and nothing is traced; a write that fails later (a disk
 * that fills) is said once the same way, and tracing stops there, leaving
 * the lines before it. The program goes on either way: the trace records
 * what it does and changes none of it, so a failure to write it is not
 * the program's. A fork flushes it first, and the
 * child traces nothing: else the child, a DataLoader worker say, would
 * write the lines still in the parent's buffer a second time at its exit.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/base.h"
#include "base/lockorder.h"
#include "interpose/internal.h"

static pthread_mutex_t trace_lock = PTHREAD_MUTEX_INITIALIZER;
static int state; /* 0 not looked at yet, 1 off, 2 on (atomic) */
static FILE *out;
static uint64_t next_id;

/* base -> id of the live allocations, open addressing, grown at 1/2 full */
typedef struct entry {
    uintptr_t base; /* 0: empty; 1: removed */
    uint64_t id;
} entry_t;
static entry_t *table;
static size_t cap, used, live; /* used: live and removed slots */

static size_t slot(uintptr_t base) { return (size_t)((base >> 8) * 0x9e3779b97f4a7c15ull >> 20); }

static entry_t *lookup(uintptr_t base)
{
    for (size_t i = slot(base) & (cap - 1), k = 0; cap != 0 && k < cap; k++, i = (i + 1) & (cap - 1)) {
        if (table[i].base == base)
            return &table[i];
        if (table[i].base == 0)
            return NULL;
    }
    return NULL;
}

static bool insert(uintptr_t base, uint64_t id)
{
    if (2 * (used + 1) > cap) { /* rebuilt without the removed, larger if live needs it */
        size_t ncap = cap == 0 ? 1024 : 4 * (live + 1) > cap ? 2 * cap : cap;
        entry_t *t = base_meta_calloc(ncap, sizeof *t), *old = table;
        if (t == NULL)
            return false;
        size_t ocap = cap;
        table = t, cap = ncap, used = live = 0;
        for (size_t i = 0; i < ocap; i++)
            if (old[i].base > 1)
                (void)insert(old[i].base, old[i].id);
        base_meta_free(old);
    }
    size_t i = slot(base) & (cap - 1);
    while (table[i].base > 1)
        i = (i + 1) & (cap - 1);
    table[i] = (entry_t){base, id};
    used++;
    live++;
    return true;
}

/* A write to the file failed with err (trace_lock held): said once, and
 * nothing more is traced (Note [Access trace]). */
static void write_failed(int err)
{
    base_log(BASE_LOG_WARN, "LMS_TRACE_ACCESSES=%s: writing the trace failed (%s): nothing more "
             "is traced, and the file ends at the last line written",
             base_options()->trace_accesses, strerror(err));
    fclose(out); /* its buffer cannot be written either */
    out = NULL;
    __atomic_store_n(&state, 1, __ATOMIC_RELEASE);
}

/* After lines were written (trace_lock held): a failure is said, and ends the trace. */
static void check_written(int printed)
{
    if (out != NULL && (printed < 0 || ferror(out)))
        write_failed(errno != 0 ? errno : EIO);
}

static void flush_or_fail(void)
{
    if (out != NULL && fflush(out) != 0)
        write_failed(errno != 0 ? errno : EIO);
}

static void close_at_exit(void)
{
    lo_lock(&trace_lock, LO_ACCESS_TRACE);
    flush_or_fail();
    lo_unlock(&trace_lock, LO_ACCESS_TRACE);
}

/* Around a fork (pthread_atfork): nothing half-written, nothing buffered
 * twice; the child's copy of the file is not its to write. */
static void before_fork(void)
{
    lo_lock(&trace_lock, LO_ACCESS_TRACE);
    flush_or_fail();
}

static void after_fork_parent(void) { lo_unlock(&trace_lock, LO_ACCESS_TRACE); }

static void after_fork_child(void)
{
    out = NULL; /* its buffer is empty: flushed before the fork */
    __atomic_store_n(&state, 1, __ATOMIC_RELEASE);
    lo_unlock(&trace_lock, LO_ACCESS_TRACE);
}

/* Outside trace_lock: a fork under way holds glibc's lock of these handlers
 * while before_fork waits for trace_lock. */
static void register_fork_handlers(void)
{
    if (pthread_atfork(before_fork, after_fork_parent, after_fork_child) != 0)
        base_log(BASE_LOG_WARN, "LMS_TRACE_ACCESSES: a forked child may write the parent's "
                 "last lines again");
}

bool trace_on(void)
{
    int s = __atomic_load_n(&state, __ATOMIC_ACQUIRE);
    if (s != 0)
        return s == 2;
    lo_lock(&trace_lock, LO_ACCESS_TRACE);
    if ((s = state) == 0) {
        char path[4096]; /* "%p": this process's own file (base_expand_path) */
        if (!base_expand_path(base_options()->trace_accesses, path, sizeof path)) {
            base_log(BASE_LOG_WARN, "LMS_TRACE_ACCESSES: too long a file name: nothing is traced");
            path[0] = '\0';
        }
        if (path[0] != '\0')
            out = fopen(path, "w");
        if (path[0] != '\0' && out == NULL)
            base_log(BASE_LOG_WARN,
                     "LMS_TRACE_ACCESSES=%s cannot be opened (%s): nothing is traced", path,
                     strerror(errno));
        if (out != NULL) {
            errno = 0;
            fprintf(out, "lms-trace 1\n# written by liblms.so (LMS_TRACE_ACCESSES): kernel times "
                         "are not measured\n");
            flush_or_fail(); /* a file that takes nothing is found now */
        }
        if (out != NULL)
            atexit(close_at_exit);
        s = out != NULL ? 2 : 1;
        __atomic_store_n(&state, s, __ATOMIC_RELEASE);
    }
    lo_unlock(&trace_lock, LO_ACCESS_TRACE);
    static pthread_once_t fork_once = PTHREAD_ONCE_INIT;
    if (s == 2)
        pthread_once(&fork_once, register_fork_handlers);
    return s == 2;
}

void trace_alloc(const void *ptr, size_t size)
{
    if (ptr == NULL || !trace_on())
        return;
    lo_lock(&trace_lock, LO_ACCESS_TRACE);
    uint64_t id = next_id++;
    if (out != NULL && insert((uintptr_t)ptr, id))
        check_written(fprintf(out, "alloc %llu %zu\n", (unsigned long long)id, size));
    lo_unlock(&trace_lock, LO_ACCESS_TRACE);
}

void trace_free(const void *ptr)
{
    if (ptr == NULL || !trace_on())
        return;
    lo_lock(&trace_lock, LO_ACCESS_TRACE);
    entry_t *e = out != NULL ? lookup((uintptr_t)ptr) : NULL;
    if (e != NULL) {
        check_written(fprintf(out, "free %llu\n", (unsigned long long)e->id));
        e->base = 1;
        live--;
    }
    lo_unlock(&trace_lock, LO_ACCESS_TRACE);
}

void trace_access(const lms_range_t *r, size_t n)
{
    if (n == 0 || !trace_on())
        return;
    static const char mode[] = {[LMS_READ] = 'r', [LMS_WRITE] = 'w', [LMS_OVERWRITE] = 'o'};
    lo_lock(&trace_lock, LO_ACCESS_TRACE);
    bool any = false;
    for (size_t i = 0; i < n && out != NULL; i++) {
        void *base;
        size_t size;
        entry_t *e = lms_allocation_of(r[i].ptr, &base, &size) == LMS_OK ? lookup((uintptr_t)base)
                                                                          : NULL;
        if (e == NULL)
            continue;
        check_written(fprintf(out, "%s %llu:%c", any ? "" : "kernel 0", (unsigned long long)e->id,
                              (unsigned)r[i].mode < sizeof mode ? mode[r[i].mode] : 'w'));
        any = true;
    }
    if (any && out != NULL)
        check_written(fputc('\n', out) == EOF ? -1 : 0);
    lo_unlock(&trace_lock, LO_ACCESS_TRACE);
}

void trace_access_pointers(const void *const *ptrs, const lms_access_mode_t *modes, size_t n)
{
    if (n == 0 || !trace_on())
        return;
    lms_range_t stack[64], *r = n <= 64 ? stack : base_meta_alloc(n * sizeof *r);
    if (r == NULL)
        return;
    for (size_t i = 0; i < n; i++)
        r[i] = (lms_range_t){.ptr = ptrs[i], .bytes = 1,
                             .mode = modes != NULL ? modes[i] : LMS_WRITE};
    trace_access(r, n);
    if (r != stack)
        base_meta_free(r);
}
