/*
 * tools/report_read.c — lms-report's timeline reader: reads the file once,
 * line by line (the format is in lms-report.c's opening comment), into a
 * report_t: bins over time (Note [Bins]), a window of spans per activity for
 * their union (Note [Busy time]), the iteration marks, the stats and what
 * otherData says of the run. Malformed input is refused at its line and
 * column (Note [Numbers in range]).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <math.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "report.h"

#define LINE_MAX_BYTES (1u << 20) /* a longer line is not one event */
#define MAX_TIME_US 1e15          /* Note [Numbers in range]: 31 years */
#define MAX_WHOLE 9007199254740992.0 /* 2^53: whole numbers a double holds exactly */

/* Note [Bins]
 * ~~~~~~~~~~~
 * How long the run is becomes known only at its end (otherData), or never
 * (a run that died), so the bins cannot be cut to the run up front. The
 * reader keeps FINE_BINS bins starting at t = 0, each width_us wide (1 us
 * at first); when an event ends past the last bin, adjacent pairs are
 * merged and the width doubles, as often as needed. Everything kept in a
 * bin is a sum (bytes, busy time) or a highest, lowest or latest value (the
 * memory counters), so a merge loses nothing but resolution, and the bins
 * always cover the run with at least half of them used. The charts then draw TARGET_BINS or so
 * bins, each a whole number of fine bins, so no fine bin is split.
 *
 * A span (a copy, a kernel, a stall) is spread over the bins it overlaps in
 * proportion to the overlap: a 12 MB copy of 1 ms that straddles two bins
 * puts 6 MB in each. The per-iteration table spreads the same way over
 * iteration boundaries, so its rows add up to the charts.
 *
 * Note [Busy time]
 * ~~~~~~~~~~~~~~~~
 * "Compute busy" is the time any compute stream was running something, so
 * kernels on two streams at once count once: the union of their spans, not
 * the sum. Stalls likewise (two callers blocked together are one stalled
 * stretch of the run). The union of spans needs them in start order, and
 * the file is only roughly in order (a copy's span is written when it has
 * finished). So each activity keeps a window of up to WINDOW_SPANS spans;
 * when it fills, the window is sorted and its older half is swept: runs of
 * overlapping spans are merged, and a run is added to the bins and to the
 * iterations once a later span starts after its end. A span that arrives
 * starting before the last span swept (more than WINDOW_SPANS/2 spans out of
 * order) is "late": its bytes still count exactly, but its busy time is
 * counted only from that point on, and the report says how many were late.
 * An iteration mark that arrives after spans past it were swept makes the
 * table approximate, and the report says so too.
 *
 * Note [Numbers in range]
 * ~~~~~~~~~~~~~~~~~~~~~~~
 * JSON numbers are doubles, and a valid file can hold any of them. A time
 * ("ts", "dur", otherData's duration_us) is at most MAX_TIME_US in
 * magnitude, 31 years of microseconds: a span with ts = dur = 1e308 ended
 * at infinity, and bins_cover doubled its width for ever to reach it. A
 * number kept as an integer ("tid", args.n, args.chunks) is whole and at
 * most 2^53 in magnitude, so converting it is defined (1e30 was not).
 * Anything else refuses the file at that value's line and column, as
 * malformed input is refused.
 */


void die_oom(void)
{
    fprintf(stderr, "lms-report: out of memory\n");
    exit(1);
}

/* ---- bins ---- */

static size_t bin_of(const report_t *r, double t)
{
    if (!(t > 0))
        return 0;
    double i = floor(t / r->width_us);
    return i >= FINE_BINS ? FINE_BINS - 1 : (size_t)i;
}

void bins_cover(report_t *r, double t)
{
    while (t >= r->width_us * FINE_BINS) {
        for (size_t i = 0; i < FINE_BINS / 2; i++) {
            for (int s = 0; s < SUM_N; s++)
                r->sum[s][i] = r->sum[s][2 * i] + r->sum[s][2 * i + 1];
            mem_bin_t a = r->mem[2 * i], b = r->mem[2 * i + 1], m = a.has ? a : b;
            if (a.has && b.has) {
                for (int c = 0; c < MEM_N; c++) {
                    m.max[c] = fmax(a.max[c], b.max[c]);
                    m.min[c] = fmin(a.min[c], b.min[c]);
                }
                if (b.last_ts >= a.last_ts) {
                    memcpy(m.last, b.last, sizeof m.last);
                    m.last_ts = b.last_ts;
                }
            }
            r->mem[i] = m;
        }
        for (int s = 0; s < SUM_N; s++)
            memset(&r->sum[s][FINE_BINS / 2], 0, FINE_BINS / 2 * sizeof(double));
        memset(&r->mem[FINE_BINS / 2], 0, FINE_BINS / 2 * sizeof(mem_bin_t));
        r->width_us *= 2;
    }
}

/* Adds amount, spread evenly over [t0, t1), to the bins and to the
 * iterations it overlaps (all of it to the point t0 when t1 <= t0). */
static void spread(report_t *r, int s, double t0, double t1, double amount)
{
    if (amount == 0)
        return;
    if (t0 < 0)
        t0 = 0;
    if (t1 < t0)
        t1 = t0;
    double len = t1 - t0;
    if (len <= 0) {
        r->sum[s][bin_of(r, t0)] += amount;
    } else {
        for (size_t i = bin_of(r, t0); i < FINE_BINS; i++) {
            double b0 = (double)i * r->width_us, b1 = b0 + r->width_us;
            if (b0 >= t1)
                break;
            double o = fmin(b1, t1) - fmax(b0, t0);
            if (o > 0)
                r->sum[s][i] += amount * o / len;
        }
    }
    /* the iterations: marks[j] ends the iteration [marks[j-1].ts, marks[j].ts) */
    size_t lo = 0, hi = r->nmarks; /* the first mark after t0 */
    while (lo < hi) {
        size_t mid = (lo + hi) / 2;
        if (r->marks[mid].ts <= t0)
            lo = mid + 1;
        else
            hi = mid;
    }
    for (size_t j = lo; j <= r->nmarks; j++) {
        double a = j == 0 ? 0 : r->marks[j - 1].ts;
        double b = j == r->nmarks ? INFINITY : r->marks[j].ts;
        double *into = j == r->nmarks ? r->tail : r->marks[j].sum;
        if (len <= 0) {
            into[s] += amount;
            break;
        }
        if (a >= t1)
            break;
        double o = fmin(b, t1) - fmax(a, t0);
        if (o > 0)
            into[s] += amount * o / len;
    }
    if (t1 > r->attributed_t1)
        r->attributed_t1 = t1;
}

/* ---- spans and their union (Note [Busy time]) ---- */

static void lane_close_run(report_t *r, lane_t *l)
{
    if (!l->in_run)
        return;
    l->busy_us += l->run_t1 - l->run_t0;
    spread(r, l->busy_sum, l->run_t0, l->run_t1, l->run_t1 - l->run_t0);
    l->in_run = false;
}

static void lane_sweep_one(report_t *r, lane_t *l, const span_t *sp)
{
    if (l->bytes_sum >= 0)
        spread(r, l->bytes_sum, sp->t0, sp->t1, sp->bytes);
    if (l->in_run && sp->t0 <= l->run_t1) {
        l->run_t1 = fmax(l->run_t1, sp->t1);
        return;
    }
    lane_close_run(r, l);
    l->in_run = true;
    l->run_t0 = sp->t0;
    l->run_t1 = sp->t1;
}

static int span_cmp(const void *a, const void *b)
{
    const span_t *x = a, *y = b;
    return (x->t0 > y->t0) - (x->t0 < y->t0);
}

/* Sorts the window and sweeps its first k spans (all of them with k = n). */
static void lane_sweep(report_t *r, lane_t *l, size_t k)
{
    if (l->n == 0)
        return;
    qsort(l->win, l->n, sizeof *l->win, span_cmp);
    for (size_t i = 0; i < k; i++)
        lane_sweep_one(r, l, &l->win[i]);
    if (k > 0) {
        l->swept_any = true;
        l->swept_t0 = l->win[k - 1].t0;
    }
    memmove(l->win, l->win + k, (l->n - k) * sizeof *l->win);
    l->n -= k;
}

static void lane_add(report_t *r, lane_t *l, double t0, double dur, double bytes)
{
    if (t0 < 0)
        t0 = 0;
    double t1 = t0 + dur;
    l->count++;
    l->total_us += dur;
    l->bytes += bytes;
    if (l->win == NULL && (l->win = malloc(WINDOW_SPANS * sizeof *l->win)) == NULL)
        die_oom();
    if (l->swept_any && t0 < l->swept_t0) {
        /* late: the bytes count in full now; the busy time from swept_t0 on */
        l->late++;
        if (l->bytes_sum >= 0)
            spread(r, l->bytes_sum, t0, t1, bytes);
        bytes = 0;
        if (t1 <= l->swept_t0)
            return;
        t0 = l->swept_t0;
    }
    l->win[l->n++] = (span_t){t0, t1, bytes};
    if (l->n == WINDOW_SPANS)
        lane_sweep(r, l, WINDOW_SPANS / 2);
}

/* ---- events ---- */

typedef struct event {
    char name[64], cat[32], ph[8];
    double ts, dur;
    bool has_ts, has_dur, has_tid;
    long long tid;
    double bytes, chunks, resident, host, n;
    bool has_resident, has_host, has_n, copied;
    char arg_name[128];
} event_t;

static const char *need_number(const jvalue_t *v, double *out, bool *has)
{
    if (v->kind != J_NUMBER)
        return "expected a number";
    if (!isfinite(v->num))
        return "a number out of range";
    *out = v->num;
    if (has != NULL)
        *has = true;
    return NULL;
}

/* A time in microseconds (Note [Numbers in range]). */
static const char *need_time(const jvalue_t *v, double *out, bool *has)
{
    const char *why = need_number(v, out, has);
    if (why == NULL && fabs(*out) > MAX_TIME_US)
        return "a time of more than 1e15 us (31 years): not one lms writes";
    return why;
}

/* A whole number kept as an integer (Note [Numbers in range]). */
static const char *need_whole(const jvalue_t *v, double *out, bool *has)
{
    const char *why = need_number(v, out, has);
    if (why == NULL && (fabs(*out) > MAX_WHOLE || *out != floor(*out)))
        return "expected a whole number of at most 2^53";
    return why;
}

static void copy_str(char *dst, size_t cap, const char *src)
{
    snprintf(dst, cap, "%s", src);
}

static const char *visit_event(void *ctx, const char *path, const jvalue_t *v)
{
    event_t *e = ctx;
    if (strcmp(path, "name") == 0 || strcmp(path, "cat") == 0 || strcmp(path, "ph") == 0) {
        if (v->kind != J_STRING)
            return "expected a string";
        char *dst = path[0] == 'n' ? e->name : path[0] == 'c' ? e->cat : e->ph;
        size_t cap = path[0] == 'n' ? sizeof e->name : path[0] == 'c' ? sizeof e->cat : sizeof e->ph;
        copy_str(dst, cap, v->str);
        return NULL;
    }
    if (strcmp(path, "ts") == 0)
        return need_time(v, &e->ts, &e->has_ts);
    if (strcmp(path, "dur") == 0)
        return need_time(v, &e->dur, &e->has_dur);
    if (strcmp(path, "tid") == 0) {
        double t = 0;
        const char *why = need_whole(v, &t, &e->has_tid);
        e->tid = why == NULL ? (long long)t : 0;
        return why;
    }
    if (strncmp(path, "args.", 5) != 0)
        return NULL; /* pid, s, and what a newer writer adds */
    const char *a = path + 5;
    if (strcmp(a, "bytes") == 0)
        return need_number(v, &e->bytes, NULL);
    if (strcmp(a, "chunks") == 0)
        return need_whole(v, &e->chunks, NULL);
    if (strcmp(a, "resident") == 0)
        return need_number(v, &e->resident, &e->has_resident);
    if (strcmp(a, "host") == 0)
        return need_number(v, &e->host, &e->has_host);
    if (strcmp(a, "n") == 0)
        return need_whole(v, &e->n, &e->has_n);
    if (strcmp(a, "copied") == 0) {
        if (v->kind != J_BOOL)
            return "expected true or false";
        e->copied = v->b;
        return NULL;
    }
    if (strcmp(a, "name") == 0 && v->kind == J_STRING)
        copy_str(e->arg_name, sizeof e->arg_name, v->str);
    return NULL;
}

static void add_mark(report_t *r, double ts, const event_t *e)
{
    if (ts < r->attributed_t1)
        r->late_marks++;
    if (r->nmarks == r->marks_cap) {
        size_t cap = r->marks_cap ? 2 * r->marks_cap : 64;
        mark_t *m = realloc(r->marks, cap * sizeof *m);
        if (m == NULL)
            die_oom();
        r->marks = m;
        r->marks_cap = cap;
    }
    size_t i = r->nmarks;
    while (i > 0 && r->marks[i - 1].ts > ts)
        i--;
    memmove(r->marks + i + 1, r->marks + i, (r->nmarks - i) * sizeof *r->marks);
    r->marks[i] = (mark_t){.ts = ts, .n = e->has_n ? (long long)e->n : (long long)r->nmarks};
    r->nmarks++;
}

static void add_memory(report_t *r, double ts, const event_t *e)
{
    if (e->has_resident)
        r->mem_now[MEM_RES] = e->resident;
    if (e->has_host)
        r->mem_now[MEM_HOST] = e->host;
    r->has_mem = true;
    mem_bin_t *b = &r->mem[bin_of(r, ts)];
    bool first = !b->has, latest = first || ts >= b->last_ts;
    for (int c = 0; c < MEM_N; c++) {
        double now = r->mem_now[c];
        r->mem_peak[c] = fmax(r->mem_peak[c], now);
        b->max[c] = first ? now : fmax(b->max[c], now);
        b->min[c] = first ? now : fmin(b->min[c], now);
        if (latest)
            b->last[c] = now;
    }
    if (latest)
        b->last_ts = ts;
    b->has = true;
}

static void note_compute_tid(report_t *r, long long tid)
{
    for (size_t i = 0; i < r->ncompute_tids; i++)
        if (r->compute_tids[i] == tid)
            return;
    if (r->ncompute_tids < sizeof r->compute_tids / sizeof *r->compute_tids)
        r->compute_tids[r->ncompute_tids++] = tid;
    else
        r->compute_tids_overflow = true;
}

/* Takes in one parsed event. Returns NULL, or why the line is refused. */
static const char *take_event(report_t *r, const event_t *e)
{
    r->events++;
    if (e->ph[0] == '\0')
        return "an event without \"ph\"";
    if (strcmp(e->ph, "M") == 0) {
        if (strcmp(e->name, "process_name") == 0)
            copy_str(r->process_name, sizeof r->process_name, e->arg_name);
        else if (strcmp(e->name, "thread_name") == 0 && e->has_tid && e->tid >= 100)
            note_compute_tid(r, e->tid);
        return NULL;
    }
    if (!e->has_ts)
        return "an event without \"ts\"";
    double ts = e->ts < 0 ? 0 : e->ts;
    if (strcmp(e->ph, "X") == 0) {
        if (!e->has_dur)
            return "a span (\"ph\":\"X\") without \"dur\"";
        if (e->dur < 0)
            return "a span with a negative \"dur\"";
        lane_t *l = NULL;
        if (strcmp(e->cat, "copy") == 0 && strcmp(e->name, "h2d") == 0)
            l = &r->lane[LANE_H2D];
        else if (strcmp(e->cat, "copy") == 0 && strcmp(e->name, "d2h") == 0)
            l = &r->lane[LANE_D2H];
        else if (strcmp(e->cat, "compute") == 0)
            l = &r->lane[LANE_COMPUTE];
        else if (strcmp(e->cat, "stall") == 0)
            l = &r->lane[LANE_STALL];
        if (l == NULL) {
            r->ignored++;
            return NULL;
        }
        if (l == &r->lane[LANE_COMPUTE] && e->has_tid)
            note_compute_tid(r, e->tid);
        bins_cover(r, ts + e->dur);
        r->t_end = fmax(r->t_end, ts + e->dur);
        lane_add(r, l, ts, e->dur, l->bytes_sum >= 0 ? e->bytes : 0);
        return NULL;
    }
    bins_cover(r, ts);
    r->t_end = fmax(r->t_end, ts);
    if (strcmp(e->ph, "C") == 0 && strcmp(e->name, "memory") == 0) {
        add_memory(r, ts, e);
        return NULL;
    }
    if (strcmp(e->ph, "i") == 0 || strcmp(e->ph, "I") == 0) {
        if (strcmp(e->name, "iteration") == 0) {
            add_mark(r, ts, e);
            return NULL;
        }
        if (strcmp(e->cat, "swap") == 0) {
            uint64_t chunks = e->chunks > 0 ? (uint64_t)e->chunks : 0;
            if (strcmp(e->name, "evict") == 0) {
                r->evict_events++;
                r->evict_chunks += chunks;
                r->evict_copied_chunks += e->copied ? chunks : 0;
                return NULL;
            }
            if (strcmp(e->name, "fetch") == 0) {
                r->fetch_events++;
                r->fetch_chunks += chunks;
                return NULL;
            }
            if (strcmp(e->name, "prefetch") == 0) {
                r->prefetch_events++;
                r->prefetch_chunks += chunks;
                return NULL;
            }
        }
    }
    r->ignored++;
    return NULL;
}

/* ---- otherData ---- */

static const char *visit_tail(void *ctx, const char *path, const jvalue_t *v)
{
    report_t *r = ctx;
    if (strncmp(path, "otherData", 9) != 0 || (path[9] != '.' && path[9] != '\0'))
        return NULL; /* displayTimeUnit, and what a newer writer adds */
    r->has_other = true;
    if (path[9] == '\0')
        return "\"otherData\" is not an object";
    const char *k = path + 10;
    if (strncmp(k, "stats.", 6) == 0) {
        if (v->kind != J_NUMBER)
            return "a stats field that is not a number";
        if (r->nstats == MAX_STATS)
            return NULL;
        stat_field_t *f = &r->stats[r->nstats++];
        copy_str(f->name, sizeof f->name, k + 6);
        f->u = v->u;
        f->d = v->num;
        f->is_uint = v->is_uint;
        return NULL;
    }
    static const struct { const char *key; size_t off, cap; } strings[] = {
        {"lms", offsetof(report_t, format), sizeof ((report_t *)0)->format},
        {"backend", offsetof(report_t, backend), sizeof ((report_t *)0)->backend},
        {"device", offsetof(report_t, device), sizeof ((report_t *)0)->device},
        {"link.source", offsetof(report_t, link_source), sizeof ((report_t *)0)->link_source},
    };
    for (size_t i = 0; i < sizeof strings / sizeof *strings; i++)
        if (strcmp(k, strings[i].key) == 0) {
            if (v->kind != J_STRING)
                return "expected a string";
            copy_str((char *)r + strings[i].off, strings[i].cap, v->str);
            return NULL;
        }
    static const struct { const char *key; size_t off; } numbers[] = {
        {"chunk", offsetof(report_t, chunk)},
        {"device_limit", offsetof(report_t, device_limit)},
        {"host_limit", offsetof(report_t, host_limit)},
        {"duration_us", offsetof(report_t, duration_us)},
        {"link.h2d_gbps", offsetof(report_t, h2d_gbps)},
        {"link.d2h_gbps", offsetof(report_t, d2h_gbps)},
    };
    for (size_t i = 0; i < sizeof numbers / sizeof *numbers; i++)
        if (strcmp(k, numbers[i].key) == 0) {
            if (strncmp(k, "link.", 5) == 0)
                r->has_link = true;
            double *field = (double *)((char *)r + numbers[i].off);
            return strcmp(k, "duration_us") == 0 ? need_time(v, field, NULL)
                                                 : need_number(v, field, NULL);
        }
    return NULL;
}

const stat_field_t *stat_find(const report_t *r, const char *name)
{
    for (size_t i = 0; i < r->nstats; i++)
        if (strcmp(r->stats[i].name, name) == 0)
            return &r->stats[i];
    return NULL;
}

/* ---- reading the file ---- */

/* One line into *buf (grown as needed). Returns its length, -1 at the end
 * of the file, -2 when it is longer than LINE_MAX_BYTES. *newline says
 * whether the line ended with one (only the file's last line may not). */
static long read_line(FILE *f, char **buf, size_t *cap, bool *newline)
{
    size_t n = 0;
    *newline = false;
    for (;;) {
        if (n > LINE_MAX_BYTES)
            return -2;
        if (*cap - n < 2) {
            size_t c = *cap ? 2 * *cap : 4096;
            char *b = realloc(*buf, c);
            if (b == NULL)
                die_oom();
            *buf = b;
            *cap = c;
        }
        if (fgets(*buf + n, (int)(*cap - n), f) == NULL)
            return n > 0 ? (long)n : -1;
        n += strlen(*buf + n);
        if (n > 0 && (*buf)[n - 1] == '\n') {
            *newline = true;
            return (long)n;
        }
        if (feof(f))
            return (long)n;
    }
}

enum { IN_HEAD, IN_EVENTS, IN_TAIL, IN_DONE };

static bool at_line_end(jscan_t *js)
{
    jskip_ws(js);
    return *js->p == '\0';
}

/* Refuses the file: the message names it, the line and the column. */
static int refuse(const report_t *r, const jscan_t *js, const char *why)
{
    if (js != NULL && js->err_at != NULL)
        fprintf(stderr, "lms-report: %s:%lu:%ld: %s\n", r->path, r->lines,
                (long)(js->err_at - js->line) + 1, why);
    else
        fprintf(stderr, "lms-report: %s:%lu: %s\n", r->path, r->lines, why);
    return 2;
}

/* The first line: the opening of the object and of its event array. */
static int read_head(jscan_t *js, const char **why)
{
    if (strncmp(js->p, "{\"traceEvents\":[", 16) != 0 || (js->p += 16, !at_line_end(js))) {
        *why = "not an lms timeline: its first line is not {\"traceEvents\":[ alone "
               "(LMS_TRACE writes one event per line)";
        return 2;
    }
    return 0;
}

/* A line of the event array: one event and its comma, or the array's end. */
static int read_event_line(report_t *r, int *state, jscan_t *js, const char **why)
{
    char path[256] = "";
    event_t e = {0};
    if (*js->p == '\0')
        return 0; /* a blank line */
    if (*js->p == ']') {
        js->p++;
        jskip_ws(js);
        if (*js->p == ',')
            js->p++;
        if (!at_line_end(js)) {
            jfail(js, "expected the end of the line after ']'");
            *why = js->err;
            return 2;
        }
        *state = IN_TAIL;
        return 0;
    }
    if (*js->p != '{') {
        jfail(js, "not a complete event: expected '{'");
        *why = js->err;
        return 2;
    }
    if (!jobject(js, path, 0, 0, visit_event, &e)) {
        *why = js->err;
        return 2;
    }
    jskip_ws(js);
    if (*js->p == ',')
        js->p++;
    if (!at_line_end(js)) {
        jfail(js, "not one event: expected ',' and the end of the line after it");
        *why = js->err;
        return 2;
    }
    if ((*why = take_event(r, &e)) != NULL)
        return 2;
    return 0;
}

/* A line after the event array: "key":value members of the top object
 * (displayTimeUnit, otherData), then its closing '}'. */
static int read_tail_line(report_t *r, int *state, jscan_t *js, const char **why)
{
    char path[256];
    for (;;) {
        jskip_ws(js);
        if (*js->p == '\0')
            return 0;
        if (*js->p == ',') {
            js->p++;
            continue;
        }
        if (*js->p == '}') {
            js->p++;
            *state = IN_DONE;
            if (!at_line_end(js)) {
                jfail(js, "text after the end of the timeline");
                *why = js->err;
                return 2;
            }
            return 0;
        }
        if (!jstring(js, path, sizeof path)) {
            *why = js->err;
            return 2;
        }
        jskip_ws(js);
        if (*js->p != ':') {
            jfail(js, "expected ':' after a key");
            *why = js->err;
            return 2;
        }
        js->p++;
        jskip_ws(js);
        if (!jvalue(js, path, strlen(path), 0, visit_tail, r)) {
            *why = js->err;
            return 2;
        }
    }
}

/* One line, read as the state says; returns 0, or 2 with *why set (and
 * js->err_at where the line went wrong, when it is known). */
static int read_one(report_t *r, int *state, jscan_t *js, const char **why)
{
    jskip_ws(js);
    switch (*state) {
    case IN_HEAD:
        if (read_head(js, why) != 0)
            return 2;
        *state = IN_EVENTS;
        return 0;
    case IN_EVENTS:
        return read_event_line(r, state, js, why);
    case IN_TAIL:
        return read_tail_line(r, state, js, why);
    default:
        if (at_line_end(js))
            return 0;
        jfail(js, "text after the end of the timeline");
        *why = js->err;
        return 2;
    }
}

int read_timeline_from(report_t *r, FILE *f)
{
    char *buf = NULL;
    size_t cap = 0;
    int state = IN_HEAD, rc = 0;
    for (;;) {
        bool newline;
        long n = read_line(f, &buf, &cap, &newline);
        if (n == -1)
            break;
        r->lines++;
        if (n == -2) {
            rc = refuse(r, NULL, "a line longer than 1 MiB: not an lms timeline "
                                 "(LMS_TRACE writes one event per line)");
            break;
        }
        jscan_t js = {.line = buf, .p = buf};
        const char *why = NULL;
        if (read_one(r, &state, &js, &why) != 0) {
            if (!newline && state != IN_HEAD) {
                /* the last line, cut where the process died */
                fprintf(stderr,
                        "lms-report: %s:%lu: the last line is cut off (%s); read up to the "
                        "line before it\n",
                        r->path, r->lines, why);
                r->torn_last_line = true;
                r->nstats = 0; /* a cut otherData: stats only when whole */
                break;
            }
            rc = refuse(r, &js, why);
            break;
        }
        r->last_line = r->lines;
    }
    if (rc == 0 && ferror(f)) {
        fprintf(stderr, "lms-report: %s: %s\n", r->path, strerror(errno));
        rc = 2;
    }
    if (rc == 0 && state == IN_HEAD) {
        fprintf(stderr, "lms-report: %s: empty: not an lms timeline\n", r->path);
        rc = 2;
    }
    free(buf);
    if (rc != 0)
        return rc;
    r->finished = state == IN_DONE && r->has_other;
    if (r->has_other && strncmp(r->format, "timeline ", 9) != 0)
        fprintf(stderr, "lms-report: %s: otherData says \"lms\":\"%s\", not \"timeline 1\"; "
                        "read as timeline 1\n", r->path, r->format);
    /* the spans still in the windows, then the runs they leave open */
    for (int i = 0; i < LANE_N; i++) {
        lane_sweep(r, &r->lane[i], r->lane[i].n);
        lane_close_run(r, &r->lane[i]);
    }
    return 0;
}

int read_timeline(report_t *r)
{
    FILE *f = fopen(r->path, "r");
    if (f == NULL) {
        fprintf(stderr, "lms-report: %s: %s\n", r->path, strerror(errno));
        return 2;
    }
    int rc = read_timeline_from(r, f);
    fclose(f);
    return rc;
}

/* ---- the report ---- */

const char *report_backend(const report_t *r, char *buf, size_t n)
{
    if (r->backend[0])
        return r->backend;
    const char *p = strchr(r->process_name, '('), *q = p ? strchr(p, ')') : NULL;
    if (p && q && q - p - 1 < (long)n)
        snprintf(buf, n, "%.*s", (int)(q - p - 1), p + 1);
    else if (n > 0)
        buf[0] = '\0';
    return buf;
}

report_t *report_new(const char *path)
{
    static const struct { int busy, bytes; } lanes[LANE_N] = {
        [LANE_COMPUTE] = {SUM_BUSY_COMPUTE, -1},
        [LANE_H2D] = {SUM_BUSY_H2D, SUM_H2D_BYTES},
        [LANE_D2H] = {SUM_BUSY_D2H, SUM_D2H_BYTES},
        [LANE_STALL] = {SUM_BUSY_STALL, -1},
    };
    report_t *r = calloc(1, sizeof *r);
    if (r == NULL)
        die_oom();
    r->path = path;
    r->width_us = 1;
    for (int i = 0; i < LANE_N; i++)
        r->lane[i] = (lane_t){.busy_sum = lanes[i].busy, .bytes_sum = lanes[i].bytes};
    return r;
}

void report_free(report_t *r)
{
    if (r == NULL)
        return;
    for (int i = 0; i < LANE_N; i++)
        free(r->lane[i].win);
    free(r->marks);
    free(r);
}
