/*
 * lms-report — turns a timeline written with LMS_TRACE=file.json into a
 * one-page HTML report with inline SVG (no script, nothing fetched: it opens
 * offline), or into the charts alone as one SVG file.
 *
 *   lms-report TRACE.json [-o OUT.html]    the page; OUT defaults to TRACE
 *                                          with .json replaced by .html
 *   lms-report TRACE.json --svg [-o OUT]   the charts only (default .svg)
 *
 * It prints the path written on stdout. A file that is missing, is not a
 * timeline, or has a line in the middle that is not a complete event is
 * refused with the file and line on stderr and exit status 2 (nothing is
 * written); a write that fails exits 1.
 *
 * What the page shows: the run's backend, device, limits, chunk and length,
 * whether it finished; the headline stats; resident and host bytes over
 * time against the device limit; the link's H2D and D2H bandwidth used
 * against what was available; a strip of compute, copy and stall activity
 * with the iteration marks; and a table of iterations. Numbers a test (or a
 * script) may want carry stable ids and a data-value attribute holding the
 * exact figure: <span id="stall-share" data-value="0.040000">.
 *
 * Input (the timeline's contract with swap/trace.c): a Chrome trace-event
 * file in JSON Object Format with exactly one event per line,
 *
 *     {"traceEvents":[
 *     {"name":"h2d","cat":"copy","ph":"X","ts":T,"dur":D,"pid":P,"tid":1,"args":{"bytes":N}},
 *     ...
 *     ],
 *     "displayTimeUnit":"ms",
 *     "otherData":{"lms":"timeline 1","backend":...,"stats":{...}}}
 *
 * where ts and dur are microseconds since lms started. A process that died
 * leaves the file cut after some complete event line; that is accepted and
 * reported as a run that did not finish (no otherData, so no stats: the
 * numbers then come from the events). A last line cut mid-way, with no
 * newline after it, is what a write torn by the process's death leaves: it
 * is ignored with a warning. Events of kinds the report does not use are
 * skipped, so a newer writer's additions do not break it.
 *
 * The file is read once, line by line, and what is kept is bounded: bins
 * over time (Note [Bins]), a window of spans per activity for their union
 * (Note [Busy time]), the iteration marks, and the stats. A 1 GB timeline
 * needs a few MB. The program is single-threaded and all its state lives in
 * one report_t.
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

#define LINE_MAX_BYTES (1u << 20) /* a longer line is not one event */
#define FINE_BINS 4096            /* bins kept while reading (Note [Bins]) */
#define TARGET_BINS 200           /* about as many drawn across the run */
#define WINDOW_SPANS 32768        /* spans per activity held for their union */
#define MAX_STATS 64
#define TABLE_ALL_ROWS 24         /* more iterations than this: first and last 12 */
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

/* ---- a small JSON scanner: flat objects, one level of nesting and more ---- */

typedef enum { J_STRING, J_NUMBER, J_BOOL, J_NULL } jkind_t;

typedef struct jvalue {
    jkind_t kind;
    const char *str; /* J_STRING: decoded, NUL-terminated, maybe shortened */
    double num;      /* J_NUMBER */
    uint64_t u;      /* J_NUMBER written as a non-negative integer: exact */
    bool is_uint;
    bool b; /* J_BOOL */
} jvalue_t;

/* Called for every leaf value, with its path: "ts", "args.bytes",
 * "otherData.stats.bytes_h2d". Returns NULL, or why the value is wrong. */
typedef const char *(*jvisit_fn)(void *ctx, const char *path, const jvalue_t *v);

typedef struct jscan {
    const char *line; /* the line being read */
    const char *p;    /* where the scanner is */
    const char *err;  /* the first error, NULL while none */
    const char *err_at;
    char str[512]; /* the last string value, decoded */
} jscan_t;

#define JSON_MAX_DEPTH 8

static bool jfail(jscan_t *js, const char *why)
{
    if (js->err == NULL) {
        js->err = why;
        js->err_at = js->p;
    }
    return false;
}

static void jskip_ws(jscan_t *js)
{
    while (*js->p == ' ' || *js->p == '\t' || *js->p == '\r' || *js->p == '\n')
        js->p++;
}

static void utf8_put(char *out, size_t cap, size_t *n, unsigned cp)
{
    char b[4];
    size_t k;
    if (cp < 0x80) {
        b[0] = (char)cp;
        k = 1;
    } else if (cp < 0x800) {
        b[0] = (char)(0xc0 | cp >> 6);
        b[1] = (char)(0x80 | (cp & 0x3f));
        k = 2;
    } else {
        b[0] = (char)(0xe0 | cp >> 12);
        b[1] = (char)(0x80 | ((cp >> 6) & 0x3f));
        b[2] = (char)(0x80 | (cp & 0x3f));
        k = 3;
    }
    if (*n + k < cap) {
        memcpy(out + *n, b, k);
        *n += k;
    }
}

/* A string at js->p into out (cap bytes, NUL-terminated; longer strings are
 * shortened, whole characters kept only as far as \u escapes go). */
static bool jstring(jscan_t *js, char *out, size_t cap)
{
    size_t n = 0;
    if (*js->p != '"')
        return jfail(js, "expected a string");
    js->p++;
    for (;;) {
        unsigned char c = (unsigned char)*js->p;
        if (c == '\0' || c == '\n')
            return jfail(js, "a string is not closed");
        if (c < 0x20)
            return jfail(js, "a control character in a string");
        js->p++;
        if (c == '"')
            break;
        if (c != '\\') {
            if (n + 1 < cap)
                out[n++] = (char)c;
            continue;
        }
        char e = *js->p++;
        unsigned cp = 0;
        switch (e) {
        case '"': case '\\': case '/': cp = (unsigned char)e; break;
        case 'b': cp = '\b'; break;
        case 'f': cp = '\f'; break;
        case 'n': cp = '\n'; break;
        case 'r': cp = '\r'; break;
        case 't': cp = '\t'; break;
        case 'u':
            for (int i = 0; i < 4; i++) {
                char h = *js->p++;
                unsigned d = h >= '0' && h <= '9'   ? (unsigned)(h - '0')
                             : h >= 'a' && h <= 'f' ? (unsigned)(h - 'a' + 10)
                             : h >= 'A' && h <= 'F' ? (unsigned)(h - 'A' + 10)
                                                    : 16u;
                if (d == 16) {
                    js->p--;
                    return jfail(js, "a bad \\u escape");
                }
                cp = cp << 4 | d;
            }
            if (cp >= 0xd800 && cp < 0xe000)
                cp = '?'; /* a surrogate half: only names carry these */
            break;
        default:
            js->p--;
            return jfail(js, "a bad escape in a string");
        }
        utf8_put(out, cap, &n, cp);
    }
    out[n] = '\0';
    return true;
}

/* A number as JSON writes them (no inf, nan, hex or leading +). */
static bool jnumber(jscan_t *js, jvalue_t *v)
{
    const char *s = js->p, *q = s;
    bool integer = true;
    if (*q == '-')
        q++;
    if (*q == '0')
        q++;
    else if (*q >= '1' && *q <= '9')
        while (*q >= '0' && *q <= '9')
            q++;
    else
        return jfail(js, "expected a value");
    if (*q == '.') {
        integer = false;
        q++;
        if (!(*q >= '0' && *q <= '9'))
            return jfail(js, "a number with nothing after its '.'");
        while (*q >= '0' && *q <= '9')
            q++;
    }
    if (*q == 'e' || *q == 'E') {
        integer = false;
        q++;
        if (*q == '+' || *q == '-')
            q++;
        if (!(*q >= '0' && *q <= '9'))
            return jfail(js, "a number with a bad exponent");
        while (*q >= '0' && *q <= '9')
            q++;
    }
    v->kind = J_NUMBER;
    v->num = strtod(s, NULL);
    v->is_uint = integer && *s != '-';
    if (v->is_uint) {
        errno = 0;
        unsigned long long u = strtoull(s, NULL, 10);
        v->is_uint = errno == 0;
        v->u = u;
    }
    js->p = q;
    return true;
}

static bool jvalue(jscan_t *js, char *path, size_t plen, int depth, jvisit_fn visit, void *ctx);

/* An object at js->p; its members' paths are path + "." + key. */
static bool jobject(jscan_t *js, char *path, size_t plen, int depth, jvisit_fn visit, void *ctx)
{
    if (depth >= JSON_MAX_DEPTH)
        return jfail(js, "objects nested too deep");
    js->p++; /* '{' */
    jskip_ws(js);
    if (*js->p == '}') {
        js->p++;
        return true;
    }
    for (;;) {
        char key[128];
        jskip_ws(js);
        if (!jstring(js, key, sizeof key))
            return false;
        jskip_ws(js);
        if (*js->p != ':')
            return jfail(js, "expected ':' after a key");
        js->p++;
        jskip_ws(js);
        size_t klen = strlen(key);
        size_t sep = plen > 0 ? 1 : 0;
        if (plen + sep + klen + 1 > 256)
            return jfail(js, "a key path too long");
        if (sep)
            path[plen] = '.';
        memcpy(path + plen + sep, key, klen + 1);
        if (!jvalue(js, path, plen + sep + klen, depth + 1, visit, ctx))
            return false;
        path[plen] = '\0';
        jskip_ws(js);
        if (*js->p == ',') {
            js->p++;
            continue;
        }
        if (*js->p == '}') {
            js->p++;
            return true;
        }
        return jfail(js, "expected ',' or '}' in an object");
    }
}

/* An array: its elements are read and left unvisited (the format has none). */
static bool jarray(jscan_t *js, char *path, size_t plen, int depth, jvisit_fn visit, void *ctx)
{
    (void)visit;
    if (depth >= JSON_MAX_DEPTH)
        return jfail(js, "arrays nested too deep");
    js->p++; /* '[' */
    jskip_ws(js);
    if (*js->p == ']') {
        js->p++;
        return true;
    }
    for (;;) {
        jskip_ws(js);
        if (!jvalue(js, path, plen, depth + 1, NULL, ctx))
            return false;
        jskip_ws(js);
        if (*js->p == ',') {
            js->p++;
            continue;
        }
        if (*js->p == ']') {
            js->p++;
            return true;
        }
        return jfail(js, "expected ',' or ']' in an array");
    }
}

static bool jvalue(jscan_t *js, char *path, size_t plen, int depth, jvisit_fn visit, void *ctx)
{
    jvalue_t v = {0};
    const char *at = js->p;
    switch (*js->p) {
    case '{': return jobject(js, path, plen, depth, visit, ctx);
    case '[': return jarray(js, path, plen, depth, visit, ctx);
    case '"':
        if (!jstring(js, js->str, sizeof js->str))
            return false;
        v.kind = J_STRING;
        v.str = js->str;
        break;
    case 't':
    case 'f':
    case 'n': {
        static const struct { const char *word; jkind_t kind; bool b; } words[] = {
            {"true", J_BOOL, true}, {"false", J_BOOL, false}, {"null", J_NULL, false}};
        size_t i;
        for (i = 0; i < 3; i++)
            if (strncmp(js->p, words[i].word, strlen(words[i].word)) == 0)
                break;
        if (i == 3)
            return jfail(js, "expected a value");
        js->p += strlen(words[i].word);
        v.kind = words[i].kind;
        v.b = words[i].b;
        break;
    }
    default:
        if (!jnumber(js, &v))
            return false;
    }
    if (visit != NULL) {
        const char *why = visit(ctx, path, &v);
        if (why != NULL) {
            js->p = at;
            return jfail(js, why);
        }
    }
    return true;
}

/* ---- what the report keeps ---- */

/* Sums kept per bin and per iteration; the busy ones are unions of spans. */
enum {
    SUM_H2D_BYTES,
    SUM_D2H_BYTES,
    SUM_BUSY_COMPUTE,
    SUM_BUSY_H2D,
    SUM_BUSY_D2H,
    SUM_BUSY_STALL,
    SUM_N
};

/* The "memory" counters: resident bytes, host bytes. */
enum { MEM_RES, MEM_HOST, MEM_N };

typedef struct mem_bin {
    double max[MEM_N], min[MEM_N]; /* of the samples in the bin */
    double last[MEM_N];            /* the sample with the latest ts */
    double last_ts;
    bool has; /* any sample in the bin */
} mem_bin_t;

typedef struct span {
    double t0, t1; /* us */
    double bytes;  /* copies; 0 otherwise */
} span_t;

/* One activity's spans, held for their union (Note [Busy time]). */
typedef struct lane {
    int busy_sum;  /* SUM_BUSY_*: where the union goes */
    int bytes_sum; /* SUM_*_BYTES, or -1 */
    span_t *win;   /* the window: up to WINDOW_SPANS, unsorted until swept */
    size_t n;
    bool swept_any;
    double swept_t0;   /* the start of the last span swept */
    bool in_run;       /* a run of overlapping spans is open */
    double run_t0, run_t1;
    double busy_us;    /* the union, of the runs closed */
    double total_us;   /* the plain sum of durations */
    double bytes;      /* of every span */
    uint64_t count;
    uint64_t late;     /* spans that came after the window had passed them */
} lane_t;

enum { LANE_COMPUTE, LANE_H2D, LANE_D2H, LANE_STALL, LANE_N };

typedef struct mark {
    double ts;
    long long n;       /* its args.n, or its index when it had none */
    double sum[SUM_N]; /* the iteration that ends at this mark */
} mark_t;

typedef struct stat_field {
    char name[48];
    uint64_t u;
    double d;
    bool is_uint;
} stat_field_t;

typedef struct report {
    const char *path;    /* the timeline's file name, for messages */
    unsigned long lines; /* read so far */

    /* bins (Note [Bins]) */
    double width_us;
    double sum[SUM_N][FINE_BINS];
    mem_bin_t mem[FINE_BINS];

    lane_t lane[LANE_N];
    mark_t *marks; /* sorted by ts */
    size_t nmarks, marks_cap;
    double tail[SUM_N];    /* after the last mark */
    double attributed_t1;  /* the latest time anything was added to an iteration */
    uint64_t late_marks;

    /* events of note */
    double t_end;          /* the latest ts + dur seen */
    uint64_t events, ignored;
    uint64_t evict_events, evict_chunks, fetch_events, fetch_chunks, prefetch_events,
        prefetch_chunks;
    uint64_t evict_copied_chunks; /* evictions with a copy, as stats.evictions counts */
    long long compute_tids[64]; /* distinct compute tracks, up to 64 told apart */
    size_t ncompute_tids;
    bool compute_tids_overflow;
    double mem_now[MEM_N]; /* the counters' values as last read */
    double mem_peak[MEM_N];
    bool has_mem;
    char process_name[128];

    /* otherData */
    bool finished;   /* the file ended with otherData */
    bool has_other;
    char format[64]; /* "lms": "timeline 1" */
    char backend[32], device[256], link_source[64];
    double chunk, device_limit, host_limit, duration_us, h2d_gbps, d2h_gbps;
    bool has_link;
    stat_field_t stats[MAX_STATS];
    size_t nstats;

    /* how the file ended */
    bool torn_last_line;
    unsigned long last_line; /* the last line that was read whole */
} report_t;

static void die_oom(void)
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

/* Merges adjacent pairs of bins until t lies inside them (Note [Bins]). */
static void bins_cover(report_t *r, double t)
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

static const stat_field_t *stat(const report_t *r, const char *name)
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

/* Reads the whole timeline from f (named r->path in messages). Returns 0,
 * or 2 after saying why on stderr. */
static int read_timeline_from(report_t *r, FILE *f)
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

static int read_timeline(report_t *r)
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

/* ---- formatting ---- */

/* The length of the well-formed UTF-8 sequence at s (1 to 4), or 0. */
static size_t utf8_len(const unsigned char *s)
{
    size_t n = s[0] >= 0xf0 && s[0] <= 0xf4 ? 4 : s[0] >= 0xe0 ? 3 : s[0] >= 0xc2 ? 2 : 0;
    for (size_t i = 1; i < n; i++)
        if ((s[i] & 0xc0) != 0x80)
            return 0;
    return n;
}

/* Text for HTML and XML: markup escaped, control characters as spaces,
 * bytes that are not UTF-8 as U+FFFD (a device name comes from the file). */
static void put_escaped(FILE *o, const char *text)
{
    const unsigned char *s = (const unsigned char *)text;
    while (*s) {
        size_t n = 1;
        switch (*s) {
        case '&': fputs("&amp;", o); break;
        case '<': fputs("&lt;", o); break;
        case '>': fputs("&gt;", o); break;
        case '"': fputs("&quot;", o); break;
        case '\'': fputs("&#39;", o); break;
        default:
            if (*s < 0x20)
                fputc(' ', o);
            else if (*s < 0x80)
                fputc(*s, o);
            else if ((n = utf8_len(s)) > 0)
                fwrite(s, 1, n, o);
            else {
                fputs("\xef\xbf\xbd", o);
                n = 1;
            }
        }
        s += n;
    }
}

/* Decimal bytes: GB = 1e9, as the GB/s of the link. */
static const char *fmt_bytes(char *b, size_t n, double v)
{
    if (v >= 1e9)
        snprintf(b, n, "%.2f GB", v / 1e9);
    else if (v >= 1e6)
        snprintf(b, n, "%.1f MB", v / 1e6);
    else if (v >= 1e3)
        snprintf(b, n, "%.1f kB", v / 1e3);
    else
        snprintf(b, n, "%.0f B", v);
    return b;
}

/* Binary sizes, for limits and the chunk, which are set in KiB/MiB/GiB. */
static const char *fmt_size(char *b, size_t n, double v)
{
    static const char *unit[] = {"B", "KiB", "MiB", "GiB", "TiB"};
    int u = 0;
    while (v >= 1024 && u < 4) {
        v /= 1024;
        u++;
    }
    if (v == floor(v))
        snprintf(b, n, "%.0f %s", v, unit[u]);
    else
        snprintf(b, n, "%.2f %s", v, unit[u]);
    return b;
}

static const char *fmt_duration(char *b, size_t n, double us)
{
    if (us >= 1e6)
        snprintf(b, n, "%.3f s", us / 1e6);
    else if (us >= 1e3)
        snprintf(b, n, "%.2f ms", us / 1e3);
    else
        snprintf(b, n, "%.0f \xc2\xb5s", us);
    return b;
}

/* ---- the charts ---- */

/* What the charts draw: the fine bins gathered into display bins. */
typedef struct view {
    double run_us;   /* the run's length: the charts' time axis */
    size_t nb, g;    /* display bins, fine bins in each */
    double bin_us;   /* a display bin's width */
    double *sum[SUM_N];
    double *mem_max[MEM_N], *mem_min[MEM_N]; /* over the bin, the value it
                                                 started with included */
    bool *mem_known; /* a counter was written in or before the bin */
    /* the time axis's unit */
    double unit_us;
    const char *unit;
} view_t;

static void view_make(const report_t *r, double run_us, view_t *v)
{
    v->run_us = run_us > 0 ? run_us : 1;
    size_t used = (size_t)ceil(v->run_us / r->width_us);
    if (used < 1)
        used = 1;
    if (used > FINE_BINS)
        used = FINE_BINS;
    v->g = (used + TARGET_BINS - 1) / TARGET_BINS;
    v->nb = (used + v->g - 1) / v->g;
    v->bin_us = r->width_us * (double)v->g;
    for (int s = 0; s < SUM_N; s++)
        if ((v->sum[s] = calloc(v->nb, sizeof(double))) == NULL)
            die_oom();
    for (int c = 0; c < MEM_N; c++)
        if ((v->mem_max[c] = calloc(v->nb, sizeof(double))) == NULL ||
            (v->mem_min[c] = calloc(v->nb, sizeof(double))) == NULL)
            die_oom();
    if ((v->mem_known = calloc(v->nb, sizeof(bool))) == NULL)
        die_oom();
    bool known = false;
    double now[MEM_N] = {0}; /* the counters' values where the bin starts */
    for (size_t b = 0; b < v->nb; b++) {
        double hi[MEM_N], lo[MEM_N];
        bool k = known;
        memcpy(hi, now, sizeof hi);
        memcpy(lo, now, sizeof lo);
        for (size_t i = b * v->g; i < (b + 1) * v->g && i < FINE_BINS; i++) {
            for (int s = 0; s < SUM_N; s++)
                v->sum[s][b] += r->sum[s][i];
            const mem_bin_t *m = &r->mem[i];
            if (!m->has)
                continue;
            for (int c = 0; c < MEM_N; c++) {
                hi[c] = k ? fmax(hi[c], m->max[c]) : m->max[c];
                lo[c] = k ? fmin(lo[c], m->min[c]) : m->min[c];
                now[c] = m->last[c];
            }
            k = known = true;
        }
        for (int c = 0; c < MEM_N; c++) {
            v->mem_max[c][b] = hi[c];
            v->mem_min[c][b] = lo[c];
        }
        v->mem_known[b] = k;
    }
    if (v->run_us >= 2e6) {
        v->unit_us = 1e6;
        v->unit = "s";
    } else if (v->run_us >= 2e3) {
        v->unit_us = 1e3;
        v->unit = "ms";
    } else {
        v->unit_us = 1;
        v->unit = "\xc2\xb5s";
    }
}

static void view_free(view_t *v)
{
    for (int s = 0; s < SUM_N; s++)
        free(v->sum[s]);
    for (int c = 0; c < MEM_N; c++) {
        free(v->mem_max[c]);
        free(v->mem_min[c]);
    }
    free(v->mem_known);
}

/* The part of display bin b inside the run, in us. */
static double bin_span(const view_t *v, size_t b)
{
    double t0 = (double)b * v->bin_us;
    return fmin(t0 + v->bin_us, v->run_us) - t0;
}

/* A step of 1, 2 or 5 times a power of ten giving about `ticks` ticks. */
static double nice_step(double range, int ticks)
{
    if (!(range > 0))
        return 1;
    double raw = range / ticks, p = pow(10, floor(log10(raw))), m = raw / p;
    return (m < 1.5 ? 1 : m < 3.5 ? 2 : m < 7.5 ? 5 : 10) * p;
}

static int decimals_for(double step)
{
    int d = (int)ceil(-log10(step) - 1e-9);
    return d < 0 ? 0 : d > 6 ? 6 : d;
}

/* A plot area: x over [0, run_us], y over [0, ymax]. */
typedef struct frame {
    double x0, y0, w, h;
    double run_us, ymax;
} frame_t;

static double fx(const frame_t *f, double t_us) { return f->x0 + f->w * t_us / f->run_us; }
static double fy(const frame_t *f, double y) { return f->y0 + f->h - f->h * fmin(y, f->ymax) / f->ymax; }

#define FONT "font-family=\"Helvetica, Arial, sans-serif\""
#define PLOT_X 78.0
#define PLOT_W 850.0
#define SVG_W 960.0

static void time_axis(FILE *o, const frame_t *f, const view_t *v)
{
    double step = nice_step(v->run_us / v->unit_us, 8);
    int dec = decimals_for(step);
    double yb = f->y0 + f->h;
    fprintf(o, "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"#444\"/>\n",
            f->x0, yb, f->x0 + f->w, yb);
    for (int k = 0; k * step <= v->run_us / v->unit_us * (1 + 1e-9); k++) {
        double t = k * step, x = fx(f, t * v->unit_us);
        fprintf(o, "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"#444\"/>\n", x,
                yb, x, yb + 4);
        fprintf(o, "<text x=\"%.1f\" y=\"%.1f\" text-anchor=\"middle\">%.*f</text>\n", x, yb + 17,
                dec, t);
    }
    fprintf(o, "<text x=\"%.1f\" y=\"%.1f\" text-anchor=\"middle\">time (%s)</text>\n",
            f->x0 + f->w / 2, yb + 32, v->unit);
}

/* Horizontal grid lines and labels; values divided by `scale` for them. */
static void value_axis(FILE *o, const frame_t *f, double scale, const char *unit)
{
    double step = nice_step(f->ymax / scale, 5);
    int dec = decimals_for(step);
    for (int k = 0; k * step <= f->ymax / scale * (1 + 1e-9); k++) {
        double y = k * step, py = fy(f, y * scale);
        fprintf(o, "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"#ddd\"/>\n",
                f->x0, py, f->x0 + f->w, py);
        fprintf(o, "<text x=\"%.1f\" y=\"%.1f\" text-anchor=\"end\">%.*f</text>\n", f->x0 - 6,
                py + 4, dec, y);
    }
    fprintf(o,
            "<text x=\"%.1f\" y=\"%.1f\" text-anchor=\"middle\" "
            "transform=\"rotate(-90 %.1f %.1f)\">%s</text>\n",
            f->x0 - 52, f->y0 + f->h / 2, f->x0 - 52, f->y0 + f->h / 2, unit);
}

/* A step line through per-bin values, broken where known[b] is false. */
static void step_path(FILE *o, const frame_t *f, const view_t *v, const double *val,
                      const bool *known, const char *attrs)
{
    bool open = false;
    fputs("<path d=\"", o);
    for (size_t b = 0; b < v->nb; b++) {
        if (known != NULL && !known[b]) {
            open = false;
            continue;
        }
        double y = fy(f, val[b]);
        if (!open)
            fprintf(o, "M%.1f %.1f", fx(f, (double)b * v->bin_us), y);
        else
            fprintf(o, "V%.1f", y);
        fprintf(o, "H%.1f", fx(f, (double)b * v->bin_us + bin_span(v, b)));
        open = true;
    }
    fprintf(o, "\" %s/>\n", attrs);
}

/* The area between two step lines, lo (NULL: the axis) and hi, in the
 * stretches where known[b] is true. */
static void band_path(FILE *o, const frame_t *f, const view_t *v, const double *lo,
                      const double *hi, const bool *known, const char *attrs)
{
    fputs("<path d=\"", o);
    for (size_t b0 = 0; b0 < v->nb;) {
        if (!known[b0]) {
            b0++;
            continue;
        }
        size_t b1 = b0; /* the stretch [b0, b1] */
        while (b1 + 1 < v->nb && known[b1 + 1])
            b1++;
        fprintf(o, "M%.1f %.1f", fx(f, (double)b0 * v->bin_us), fy(f, hi[b0]));
        for (size_t b = b0; b <= b1; b++)
            fprintf(o, "V%.1fH%.1f", fy(f, hi[b]), fx(f, (double)b * v->bin_us + bin_span(v, b)));
        for (size_t b = b1 + 1; b-- > b0;)
            fprintf(o, "V%.1fH%.1f", fy(f, lo ? lo[b] : 0), fx(f, (double)b * v->bin_us));
        fputs("Z", o);
        b0 = b1 + 1;
    }
    fprintf(o, "\" %s/>\n", attrs);
}

/* A legend entry at (x, y): a swatch (a filled box, or a line dashed as
 * dash says) and its label. Returns where the next entry may start. */
static double legend_item(FILE *o, double x, double y, const char *stroke, const char *dash,
                          const char *fill, const char *label)
{
    if (fill != NULL)
        fprintf(o, "<rect x=\"%.1f\" y=\"%.1f\" width=\"18\" height=\"10\" fill=\"%s\" "
                   "stroke=\"%s\"/>\n", x, y - 9, fill, stroke);
    else
        fprintf(o, "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"%s\" "
                   "stroke-width=\"2\"%s%s%s/>\n", x, y - 4, x + 18, y - 4, stroke,
                dash ? " stroke-dasharray=\"" : "", dash ? dash : "", dash ? "\"" : "");
    fprintf(o, "<text x=\"%.1f\" y=\"%.1f\">", x + 24, y);
    put_escaped(o, label);
    fputs("</text>\n", o);
    return x + 24 + 6.7 * (double)strlen(label) + 22; /* 12 px text: ~6.7 px a character */
}

/* Colours (Okabe-Ito, for colour-blind readers) told apart by dashes and
 * shapes too, so that a grey print still reads. */
#define C_H2D "#0072B2"
#define C_D2H "#D55E00"
#define C_HOST "#E69F00"
#define C_COMPUTE "#009E73"
#define C_STALL "#222222"

static double bytes_scale(double max, const char **unit)
{
    if (max >= 1e9) {
        *unit = "GB";
        return 1e9;
    }
    if (max >= 1e6) {
        *unit = "MB";
        return 1e6;
    }
    *unit = "kB";
    return 1e3;
}

static void chart_title(FILE *o, double y, const char *title)
{
    fprintf(o, "<text x=\"%.1f\" y=\"%.1f\" font-size=\"15\" font-weight=\"bold\">", PLOT_X, y);
    put_escaped(o, title);
    fputs("</text>\n", o);
}

/* Resident bytes as a band from the lowest to the highest value in each bin
 * over a solid area up to the lowest; host bytes as the highest. */
static void chart_memory(FILE *o, const report_t *r, const view_t *v, double y)
{
    frame_t f = {PLOT_X, y + 44, PLOT_W, 190, v->run_us, 0};
    double top = fmax(r->device_limit, fmax(r->mem_peak[MEM_RES], r->mem_peak[MEM_HOST]));
    f.ymax = top > 0 ? top * 1.08 : 1e9;
    const char *unit;
    double scale = bytes_scale(f.ymax, &unit);
    char label[160], b1[32], b2[32];
    fprintf(o, "<g id=\"chart-memory\" data-peak-resident=\"%.0f\" data-peak-host=\"%.0f\">\n",
            r->mem_peak[MEM_RES], r->mem_peak[MEM_HOST]);
    chart_title(o, y + 16, "Memory: resident on the device, and held in host memory");
    value_axis(o, &f, scale, unit);
    if (r->has_mem) {
        band_path(o, &f, v, NULL, v->mem_min[MEM_RES], v->mem_known,
                  "fill=\"" C_H2D "\" fill-opacity=\"0.35\" stroke=\"none\"");
        band_path(o, &f, v, v->mem_min[MEM_RES], v->mem_max[MEM_RES], v->mem_known,
                  "fill=\"" C_H2D "\" fill-opacity=\"0.15\" stroke=\"none\"");
        step_path(o, &f, v, v->mem_max[MEM_RES], v->mem_known,
                  "fill=\"none\" stroke=\"" C_H2D "\" stroke-width=\"1.5\"");
        step_path(o, &f, v, v->mem_max[MEM_HOST], v->mem_known,
                  "fill=\"none\" stroke=\"" C_HOST "\" stroke-width=\"2\" stroke-dasharray=\"6 3\"");
    } else {
        fprintf(o, "<text x=\"%.1f\" y=\"%.1f\" text-anchor=\"middle\" fill=\"#666\">"
                   "no memory counters in the timeline</text>\n", f.x0 + f.w / 2, f.y0 + f.h / 2);
    }
    snprintf(label, sizeof label, "resident (peak %s)", fmt_bytes(b1, sizeof b1, r->mem_peak[MEM_RES]));
    double lx = legend_item(o, PLOT_X, y + 36, C_H2D, NULL, "#a6c8e0", label);
    lx = legend_item(o, lx, y + 36, C_H2D, NULL, "#dae8f2", "its range within a bin");
    snprintf(label, sizeof label, "host (peak %s)", fmt_bytes(b1, sizeof b1, r->mem_peak[MEM_HOST]));
    lx = legend_item(o, lx, y + 36, C_HOST, "6 3", NULL, label);
    if (r->device_limit > 0) {
        double ly = fy(&f, r->device_limit);
        fprintf(o, "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"#000\" "
                   "stroke-width=\"1.5\" stroke-dasharray=\"2 3\"/>\n", f.x0, ly, f.x0 + f.w, ly);
        snprintf(label, sizeof label, "device limit %s (%s)",
                 fmt_bytes(b1, sizeof b1, r->device_limit), fmt_size(b2, sizeof b2, r->device_limit));
        legend_item(o, lx, y + 36, "#000", "2 3", NULL, label);
    } else {
        legend_item(o, lx, y + 36, "#000", "2 3", NULL,
                    r->finished ? "device limit: not written" : "device limit: unknown (run did not finish)");
    }
    time_axis(o, &f, v);
    fprintf(o, "</g>\n");
}

/* Bytes of the copy spans per bin over the bin's length, each way, with
 * what the link offers as dashed lines. */
static void chart_link(FILE *o, const report_t *r, const view_t *v, double y)
{
    frame_t f = {PLOT_X, y + 44, PLOT_W, 190, v->run_us, 0};
    double *h2d = malloc(v->nb * sizeof(double)), *d2h = malloc(v->nb * sizeof(double));
    if (h2d == NULL || d2h == NULL)
        die_oom();
    double peak_h2d = 0, peak_d2h = 0;
    for (size_t b = 0; b < v->nb; b++) {
        double s = bin_span(v, b) / 1e6;
        h2d[b] = s > 0 ? v->sum[SUM_H2D_BYTES][b] / s : 0; /* bytes/s */
        d2h[b] = s > 0 ? v->sum[SUM_D2H_BYTES][b] / s : 0;
        peak_h2d = fmax(peak_h2d, h2d[b]);
        peak_d2h = fmax(peak_d2h, d2h[b]);
    }
    double top = fmax(fmax(peak_h2d, peak_d2h), 1e9 * fmax(r->h2d_gbps, r->d2h_gbps));
    const char *unit = "GB/s";
    double scale = 1e9;
    if (top < 1e9) {
        unit = "MB/s";
        scale = 1e6;
    }
    f.ymax = top > 0 ? top * 1.1 : scale;
    char label[200], b1[32];
    fprintf(o, "<g id=\"chart-link\" data-peak-h2d-bps=\"%.0f\" data-peak-d2h-bps=\"%.0f\">\n",
            peak_h2d, peak_d2h);
    snprintf(label, sizeof label, "Link: bandwidth the copies used, averaged over %s",
             fmt_duration(b1, sizeof b1, v->bin_us));
    chart_title(o, y + 16, label);
    value_axis(o, &f, scale, unit);
    step_path(o, &f, v, h2d, NULL, "fill=\"none\" stroke=\"" C_H2D "\" stroke-width=\"1.5\"");
    step_path(o, &f, v, d2h, NULL,
              "fill=\"none\" stroke=\"" C_D2H "\" stroke-width=\"1.5\" stroke-dasharray=\"5 2\"");
    snprintf(label, sizeof label, "H2D, fetches (peak %.2f %s)", peak_h2d / scale, unit);
    double lx = legend_item(o, PLOT_X, y + 36, C_H2D, NULL, NULL, label);
    snprintf(label, sizeof label, "D2H, evictions (peak %.2f %s)", peak_d2h / scale, unit);
    lx = legend_item(o, lx, y + 36, C_D2H, "5 2", NULL, label);
    /* what the link offers */
    const char *src = r->link_source;
    if (!r->has_link) {
        legend_item(o, lx, y + 36, "#444", "8 4", NULL,
                    r->finished ? "available: not written" : "available: unknown (run did not finish)");
    } else if (r->h2d_gbps <= 0 && r->d2h_gbps <= 0) {
        snprintf(label, sizeof label, "available: not measured%s%s%s", src[0] ? " (" : "", src,
                 src[0] ? ")" : "");
        legend_item(o, lx, y + 36, "#444", "8 4", NULL, label);
    } else {
        struct { double gbps; const char *dir, *colour; } av[2] = {
            {r->h2d_gbps, "H2D", C_H2D}, {r->d2h_gbps, "D2H", C_D2H}};
        bool same = r->h2d_gbps == r->d2h_gbps;
        for (int i = 0; i < (same ? 1 : 2); i++) {
            const char *colour = same ? "#444" : av[i].colour;
            if (av[i].gbps <= 0) {
                snprintf(label, sizeof label, "available %s: not measured", av[i].dir);
                lx = legend_item(o, lx, y + 36, colour, "8 4", NULL, label);
                continue;
            }
            double ly = fy(&f, av[i].gbps * 1e9);
            fprintf(o, "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"%s\" "
                       "stroke-width=\"1.5\" stroke-dasharray=\"8 4\"/>\n",
                    f.x0, ly, f.x0 + f.w, ly, colour);
            snprintf(label, sizeof label, "available %s %g GB/s%s%s%s", same ? "each way" : av[i].dir,
                     av[i].gbps, src[0] ? " (" : "", src, src[0] ? ")" : "");
            fprintf(o, "<text x=\"%.1f\" y=\"%.1f\" text-anchor=\"end\" fill=\"%s\">",
                    f.x0 + f.w - 4, ly - 5 + (i == 1 ? 16 : 0), colour);
            put_escaped(o, label);
            fputs("</text>\n", o);
        }
    }
    time_axis(o, &f, v);
    fprintf(o, "</g>\n");
    free(h2d);
    free(d2h);
}

/* Four lanes of bars, each bar as tall as the share of its bin that the
 * lane was busy (neighbours of the same height drawn as one), and the
 * iteration marks as ticks above them. */
static void chart_strip(FILE *o, const report_t *r, const view_t *v, double y)
{
    static const struct { int sum; const char *label, *colour; } lanes[] = {
        {SUM_BUSY_COMPUTE, "compute", C_COMPUTE},
        {SUM_BUSY_H2D, "H2D copies", C_H2D},
        {SUM_BUSY_D2H, "D2H copies", C_D2H},
        {SUM_BUSY_STALL, "stalls", C_STALL},
    };
    const double lane_h = 20, bar_h = 16, top = y + 44;
    frame_t f = {PLOT_X, top, PLOT_W, lane_h * 4, v->run_us, 1};
    fprintf(o, "<g id=\"chart-strip\" data-bins=\"%zu\">\n", v->nb);
    chart_title(o, y + 16, "Activity: how much of each bin was busy");
    for (int l = 0; l < 4; l++) {
        double ly = top + lane_h * l;
        fprintf(o, "<rect x=\"%.1f\" y=\"%.1f\" width=\"%.1f\" height=\"%.1f\" fill=\"%s\"/>\n",
                f.x0, ly, f.w, lane_h, l % 2 ? "#ffffff" : "#f0f0f0");
        fprintf(o, "<text x=\"%.1f\" y=\"%.1f\" text-anchor=\"end\">%s</text>\n", f.x0 - 6,
                ly + 14, lanes[l].label);
        const double *busy = v->sum[lanes[l].sum];
        for (size_t b = 0; b < v->nb;) {
            double span = bin_span(v, b);
            double h = span > 0 ? round(2 * bar_h * fmin(1, busy[b] / span)) / 2 : 0;
            size_t e = b + 1;
            while (e < v->nb && bin_span(v, e) > 0 &&
                   round(2 * bar_h * fmin(1, busy[e] / bin_span(v, e))) / 2 == h)
                e++;
            if (h > 0) {
                double x0 = fx(&f, (double)b * v->bin_us);
                double x1 = fx(&f, (double)(e - 1) * v->bin_us + bin_span(v, e - 1));
                fprintf(o, "<rect x=\"%.1f\" y=\"%.1f\" width=\"%.1f\" height=\"%.1f\" "
                           "fill=\"%s\"/>\n", x0, ly + lane_h - 2 - h, fmax(x1 - x0, 0.5), h,
                        lanes[l].colour);
            }
            b = e;
        }
    }
    /* the marks: a tick above the lanes per pixel column that has one; a
     * line through the lanes too and the mark's number while they are few */
    bool few = r->nmarks <= 40;
    long last_px = -1;
    double labelled_x = -1e9;
    for (size_t i = 0; i < r->nmarks; i++) {
        double x = fx(&f, fmin(r->marks[i].ts, v->run_us));
        if ((long)x == last_px)
            continue;
        last_px = (long)x;
        fprintf(o, "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"#000\"/>\n", x,
                top - 8, x, few ? top + f.h : top);
        if (few && x - labelled_x > 30) {
            fprintf(o, "<text x=\"%.1f\" y=\"%.1f\" font-size=\"10\" text-anchor=\"middle\">%lld"
                       "</text>\n", x, top - 10, r->marks[i].n);
            labelled_x = x;
        }
    }
    if (r->nmarks > 0)
        fprintf(o, "<text x=\"%.1f\" y=\"%.1f\" text-anchor=\"end\" font-size=\"10\">"
                   "iterations</text>\n", f.x0 - 6, top - 2);
    time_axis(o, &f, v);
    fprintf(o, "</g>\n");
}

#define SVG_H 740

static void write_svg(FILE *o, const report_t *r, const view_t *v, bool standalone)
{
    fprintf(o, "<svg xmlns=\"http://www.w3.org/2000/svg\" id=\"charts\" width=\"%.0f\" "
               "height=\"%d\" viewBox=\"0 0 %.0f %d\" " FONT " font-size=\"12\" "
               "data-bin-us=\"%.3f\">\n", SVG_W, SVG_H, SVG_W, SVG_H, v->bin_us);
    fputs("<title>lms timeline: ", o);
    put_escaped(o, r->path);
    fputs("</title>\n", o);
    if (standalone)
        fprintf(o, "<rect width=\"100%%\" height=\"100%%\" fill=\"#fff\"/>\n");
    chart_memory(o, r, v, 0);
    chart_link(o, r, v, 285);
    chart_strip(o, r, v, 570);
    fputs("</svg>\n", o);
}

/* ---- the page ---- */

static void card(FILE *o, const char *id, const char *value_attr, const char *shown,
                 const char *label, const char *note, const char *source)
{
    fprintf(o, "<div class=\"card\"><div class=\"v\" id=\"%s\" data-value=\"%s\" "
               "data-source=\"%s\">", id, value_attr, source);
    put_escaped(o, shown);
    fputs("</div><div class=\"k\">", o);
    put_escaped(o, label);
    fputs("</div>", o);
    if (note != NULL && note[0]) {
        fputs("<div class=\"n\">", o);
        put_escaped(o, note);
        fputs("</div>", o);
    }
    fputs("</div>\n", o);
}

/* A stats field as a card; missing (a run that did not finish): what the
 * events say instead, when they say it, else a dash. */
static void stat_card(FILE *o, const report_t *r, const char *id, const char *field,
                      bool bytes, const char *label, double from_events, bool events_know,
                      const char *note)
{
    const stat_field_t *s = stat(r, field);
    char attr[48], shown[48];
    if (s != NULL) {
        double d = s->is_uint ? (double)s->u : s->d;
        if (s->is_uint)
            snprintf(attr, sizeof attr, "%llu", (unsigned long long)s->u);
        else
            snprintf(attr, sizeof attr, "%.0f", d);
        if (bytes)
            fmt_bytes(shown, sizeof shown, d);
        else
            snprintf(shown, sizeof shown, "%s", attr);
        card(o, id, attr, shown, label, note, "stats");
    } else if (events_know) {
        snprintf(attr, sizeof attr, "%.0f", from_events);
        if (bytes)
            fmt_bytes(shown, sizeof shown, from_events);
        else
            snprintf(shown, sizeof shown, "%s", attr);
        card(o, id, attr, shown, label, "from the events (no stats)", "events");
    } else {
        card(o, id, "", "\xe2\x80\x94", label, "no stats: the run did not finish", "none");
    }
}

static void meta_item(FILE *o, const char *id, const char *value_attr, const char *label,
                      const char *shown)
{
    fprintf(o, "<div><dt>%s</dt><dd id=\"%s\" data-value=\"", label, id);
    put_escaped(o, value_attr);
    fputs("\">", o);
    put_escaped(o, shown);
    fputs("</dd></div>\n", o);
}

static const char STYLE[] =
    "body{font-family:Helvetica,Arial,sans-serif;font-size:14px;color:#111;margin:24px auto;"
    "max-width:980px;padding:0 12px}\n"
    "h1{font-size:21px;margin:0 0 6px}h2{font-size:16px;margin:22px 0 6px}\n"
    "dl.meta{display:flex;flex-wrap:wrap;gap:4px 22px;margin:6px 0 12px}\n"
    "dl.meta dt{font-size:11px;color:#555;text-transform:uppercase;letter-spacing:.04em}\n"
    "dl.meta dd{margin:0;font-weight:bold}\n"
    ".cards{display:grid;grid-template-columns:repeat(4,1fr);gap:8px;margin:8px 0 16px}\n"
    ".card{border:1px solid #bbb;border-radius:4px;padding:8px 10px}\n"
    ".card .v{font-size:22px;font-weight:bold}.card .k{color:#333}\n"
    ".card .n{font-size:11px;color:#666}\n"
    ".warn{border:2px solid #D55E00;padding:8px 10px;border-radius:4px;font-weight:bold}\n"
    "table{border-collapse:collapse;font-variant-numeric:tabular-nums}\n"
    "td,th{padding:3px 10px;border-bottom:1px solid #ddd;text-align:right}\n"
    "th{background:#f0f0f0}td:first-child,th:first-child{text-align:left}\n"
    "tr.gap td{text-align:center;color:#666}tr.tail td{color:#555;font-style:italic}\n"
    ".foot{font-size:12px;color:#555}\n"
    "table.stats td{font-size:12px}\n"
    "svg{display:block;max-width:100%;height:auto}\n"
    "@media print{body{margin:0}.card,.warn{break-inside:avoid}}\n";

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static void iteration_row(FILE *o, const char *id, const char *label,
                          const char *cls, double t0, double t1, const double *s)
{
    char b[5][40];
    double dur = t1 - t0;
    fprintf(o, "<tr id=\"%s\"%s%s%s data-start-us=\"%.3f\" data-duration-us=\"%.3f\" "
               "data-h2d-bytes=\"%.0f\" data-d2h-bytes=\"%.0f\" data-stall-us=\"%.3f\" "
               "data-compute-us=\"%.3f\">",
            id, cls ? " class=\"" : "", cls ? cls : "", cls ? "\"" : "", t0, dur,
            s[SUM_H2D_BYTES], s[SUM_D2H_BYTES], s[SUM_BUSY_STALL], s[SUM_BUSY_COMPUTE]);
    fputs("<td>", o);
    put_escaped(o, label);
    fprintf(o, "</td><td>%s</td><td>%s</td><td>%s</td><td>%s</td><td>%s</td><td>%.0f %%</td></tr>\n",
            fmt_duration(b[0], sizeof b[0], t0), fmt_duration(b[1], sizeof b[1], dur),
            fmt_bytes(b[2], sizeof b[2], s[SUM_H2D_BYTES]),
            fmt_bytes(b[3], sizeof b[3], s[SUM_D2H_BYTES]),
            fmt_duration(b[4], sizeof b[4], s[SUM_BUSY_STALL]),
            dur > 0 ? 100 * s[SUM_BUSY_COMPUTE] / dur : 0);
}

static void iteration_table(FILE *o, const report_t *r, double run_us)
{
    fputs("<h2>Iterations</h2>\n", o);
    if (r->nmarks == 0) {
        fputs("<p id=\"iterations\" data-value=\"0\">No iteration marks in the timeline "
              "(lms_mark_iteration was not called).</p>\n", o);
        return;
    }
    double *durs = malloc(r->nmarks * sizeof *durs);
    if (durs == NULL)
        die_oom();
    for (size_t i = 0; i < r->nmarks; i++)
        durs[i] = r->marks[i].ts - (i ? r->marks[i - 1].ts : 0);
    qsort(durs, r->nmarks, sizeof *durs, cmp_double);
    char med[32];
    fprintf(o, "<p id=\"iterations\" data-value=\"%zu\">%zu iteration marks; each row ends at "
               "its mark (the first starts when lms did), median length %s. Bytes and stall time "
               "are spread over the time they took, so a copy that straddles a mark is shared "
               "between its rows.", r->nmarks, r->nmarks,
            fmt_duration(med, sizeof med, durs[r->nmarks / 2]));
    free(durs);
    if (r->late_marks > 0)
        fprintf(o, " %llu marks were written after work past them had been counted: rows near "
                   "them are approximate.", (unsigned long long)r->late_marks);
    fputs("</p>\n<table id=\"iteration-table\"><tr><th>iteration</th><th>starts</th>"
          "<th>length</th><th>H2D</th><th>D2H</th><th>stalled</th><th>compute busy</th></tr>\n",
          o);
    for (size_t i = 0; i < r->nmarks; i++) {
        if (r->nmarks > TABLE_ALL_ROWS && i == TABLE_ALL_ROWS / 2) {
            fprintf(o, "<tr class=\"gap\"><td colspan=\"7\">\xe2\x80\xa6 %zu more \xe2\x80\xa6"
                       "</td></tr>\n", r->nmarks - TABLE_ALL_ROWS);
            i = r->nmarks - TABLE_ALL_ROWS / 2;
        }
        char id[40], label[40];
        snprintf(id, sizeof id, "iter-%lld", r->marks[i].n);
        snprintf(label, sizeof label, "%lld", r->marks[i].n);
        iteration_row(o, id, label, NULL, i ? r->marks[i - 1].ts : 0, r->marks[i].ts,
                      r->marks[i].sum);
    }
    double last = r->marks[r->nmarks - 1].ts;
    if (run_us > last)
        iteration_row(o, "iter-tail", "after the last mark", "tail", last, run_us, r->tail);
    fputs("</table>\n", o);
}

static void stats_table(FILE *o, const report_t *r)
{
    if (r->nstats == 0)
        return;
    fputs("<h2>All stats (lms_stats at the end)</h2>\n<table class=\"stats\">", o);
    for (size_t i = 0; i < r->nstats; i++) {
        if (i % 3 == 0)
            fputs(i ? "</tr>\n<tr>" : "<tr>", o);
        fputs("<td>", o);
        put_escaped(o, r->stats[i].name);
        if (r->stats[i].is_uint)
            fprintf(o, "</td><td>%llu</td>", (unsigned long long)r->stats[i].u);
        else
            fprintf(o, "</td><td>%g</td>", r->stats[i].d);
    }
    fputs("</tr></table>\n", o);
}

static void write_html(FILE *o, const report_t *r, const view_t *v)
{
    char b1[64], b2[64], attr[64], shown[160];
    const char *base = strrchr(r->path, '/');
    base = base ? base + 1 : r->path;
    fputs("<!DOCTYPE html>\n<html xmlns=\"http://www.w3.org/1999/xhtml\" lang=\"en\">\n<head>\n"
          "<meta charset=\"utf-8\"/>\n<title>lms timeline: ", o);
    put_escaped(o, base);
    fprintf(o, "</title>\n<style>\n%s</style>\n</head>\n<body>\n<h1>lms timeline: ", STYLE);
    put_escaped(o, base);
    fputs("</h1>\n", o);

    /* the run */
    const char *backend = r->backend;
    char guessed[64] = "";
    if (!backend[0]) {
        /* a run that did not finish: the process name says "lms (sim)" */
        const char *p = strchr(r->process_name, '('), *q = p ? strchr(p, ')') : NULL;
        if (p && q && q - p - 1 < (long)sizeof guessed)
            snprintf(guessed, sizeof guessed, "%.*s", (int)(q - p - 1), p + 1);
        backend = guessed;
    }
    fputs("<dl class=\"meta\">\n", o);
    meta_item(o, "backend", backend, "backend", backend[0] ? backend : "unknown");
    meta_item(o, "device", r->device, "device", r->device[0] ? r->device : "unknown");
    snprintf(attr, sizeof attr, "%.0f", r->device_limit);
    meta_item(o, "device-limit", attr, "device limit",
              r->device_limit > 0 ? fmt_size(b1, sizeof b1, r->device_limit) : "unknown");
    snprintf(attr, sizeof attr, "%.0f", r->host_limit);
    meta_item(o, "host-limit", attr, "host limit",
              r->host_limit > 0 ? fmt_size(b1, sizeof b1, r->host_limit) : "unknown");
    snprintf(attr, sizeof attr, "%.0f", r->chunk);
    meta_item(o, "chunk", attr, "chunk", r->chunk > 0 ? fmt_size(b1, sizeof b1, r->chunk) : "unknown");
    snprintf(attr, sizeof attr, "%.3f", v->run_us);
    meta_item(o, "duration", attr, "duration", fmt_duration(b1, sizeof b1, v->run_us));
    meta_item(o, "finished", r->finished ? "1" : "0", "finished",
              r->finished ? "yes" : "no: run did not finish");
    snprintf(attr, sizeof attr, "%zu", r->ncompute_tids);
    snprintf(shown, sizeof shown, "%zu%s", r->ncompute_tids, r->compute_tids_overflow ? "+" : "");
    meta_item(o, "streams", attr, "compute streams", shown);
    fputs("</dl>\n", o);
    if (!r->finished)
        fprintf(o, "<p class=\"warn\" id=\"run-status\" data-value=\"unfinished\">The run did not "
                   "finish: the timeline stops after line %lu%s, with no otherData, so there are "
                   "no stats. The numbers below come from the events up to there.</p>\n",
                r->last_line, r->torn_last_line ? " (the line after it was cut off)" : "");

    uint64_t late = 0;
    for (int i = 0; i < LANE_N; i++)
        late += r->lane[i].late;
    if (late > 0)
        fprintf(o, "<p class=\"warn\" id=\"late-spans\" data-value=\"%llu\">%llu spans were "
                   "written far out of order (more than %d behind): their bytes count, but their "
                   "busy time before the point already counted is left out, so the shares and the "
                   "activity strip are low.</p>\n",
                (unsigned long long)late, (unsigned long long)late, WINDOW_SPANS / 2);

    /* the headline */
    double run = v->run_us;
    const lane_t *stall = &r->lane[LANE_STALL], *compute = &r->lane[LANE_COMPUTE];
    fputs("<div class=\"cards\">\n", o);
    stat_card(o, r, "bytes-h2d", "bytes_h2d", true, "fetched (H2D)",
              r->lane[LANE_H2D].bytes, true, NULL);
    stat_card(o, r, "bytes-d2h", "bytes_d2h", true, "evicted (D2H)",
              r->lane[LANE_D2H].bytes, true, NULL);
    const stat_field_t *drops = stat(r, "clean_drops");
    char note[96] = "";
    if (drops != NULL)
        snprintf(note, sizeof note, "and %llu clean drops (no copy)", (unsigned long long)drops->u);
    stat_card(o, r, "evictions", "evictions", false, "evictions (chunks)",
              (double)r->evict_copied_chunks, r->evict_events > 0, note);
    stat_card(o, r, "prefetch-hits", "prefetch_hits", false, "prefetch hits (chunks)", 0, false,
              NULL);
    stat_card(o, r, "ooms", "ooms", false, "out-of-memory failures", 0, false, NULL);
    stat_card(o, r, "peak-resident", "peak_resident_bytes", true, "peak resident", r->mem_peak[MEM_RES],
              r->has_mem, NULL);
    snprintf(attr, sizeof attr, "%.6f", run > 0 ? stall->busy_us / run : 0);
    snprintf(shown, sizeof shown, "%.1f %%", run > 0 ? 100 * stall->busy_us / run : 0);
    snprintf(note, sizeof note, "%s with a caller waiting in lms for device memory (%llu stalls)",
             fmt_duration(b1, sizeof b1, stall->busy_us), (unsigned long long)stall->count);
    card(o, "stall-share", attr, shown, "stall share (callers)", note, "events");
    snprintf(attr, sizeof attr, "%.6f", run > 0 ? compute->busy_us / run : 0);
    snprintf(shown, sizeof shown, "%.1f %%", run > 0 ? 100 * compute->busy_us / run : 0);
    snprintf(note, sizeof note, "%s with a compute stream busy",
             fmt_duration(b1, sizeof b1, compute->busy_us));
    card(o, "compute-share", attr, shown, "compute share", note, "events");
    fputs("</div>\n", o);

    /* what the copy spans add up to, beside the stats */
    fprintf(o, "<p>Copies in the timeline: <span id=\"copied-h2d\" data-value=\"%.0f\">%s</span> "
               "H2D in %llu copies, <span id=\"copied-d2h\" data-value=\"%.0f\">%s</span> D2H in "
               "%llu; stalls add up to <span id=\"stall-time\" data-value=\"%.3f\">%s</span> over "
               "all callers.</p>\n",
            r->lane[LANE_H2D].bytes, fmt_bytes(b1, sizeof b1, r->lane[LANE_H2D].bytes),
            (unsigned long long)r->lane[LANE_H2D].count, r->lane[LANE_D2H].bytes,
            fmt_bytes(b2, sizeof b2, r->lane[LANE_D2H].bytes),
            (unsigned long long)r->lane[LANE_D2H].count, stall->total_us,
            fmt_duration(shown, sizeof shown, stall->total_us));

    write_svg(o, r, v, false);
    iteration_table(o, r, run);
    stats_table(o, r);

    /* how it was read */
    fprintf(o, "<p class=\"foot\">From %s: %lu lines, %llu events (%llu of kinds not shown); "
               "swap decisions: %llu evictions (%llu chunks), %llu fetches (%llu chunks), %llu "
               "prefetches (%llu chunks). Charts in %zu bins of %s.",
            base, r->lines, (unsigned long long)r->events, (unsigned long long)r->ignored,
            (unsigned long long)r->evict_events, (unsigned long long)r->evict_chunks,
            (unsigned long long)r->fetch_events, (unsigned long long)r->fetch_chunks,
            (unsigned long long)r->prefetch_events, (unsigned long long)r->prefetch_chunks, v->nb,
            fmt_duration(b1, sizeof b1, v->bin_us));
    if (r->finished && r->t_end > r->duration_us + 1)
        fprintf(o, " Events run %s past the duration otherData gives.",
                fmt_duration(b1, sizeof b1, r->t_end - r->duration_us));
    fputs(" Written by lms-report.</p>\n</body>\n</html>\n", o);
}

/* ---- main ---- */

static report_t *report_new(const char *path)
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

static void report_free(report_t *r)
{
    if (r == NULL)
        return;
    for (int i = 0; i < LANE_N; i++)
        free(r->lane[i].win);
    free(r->marks);
    free(r);
}


/* Writes the page (or with svg the charts) of the timeline read into o. */
static void write_to(report_t *r, FILE *o, bool svg)
{
    double run_us = r->t_end;
    if (r->finished && r->duration_us > run_us)
        run_us = r->duration_us;
    bins_cover(r, run_us);
    view_t v = {0};
    view_make(r, run_us, &v);
    if (svg) {
        fputs("<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n", o);
        write_svg(o, r, &v, true);
    } else {
        write_html(o, r, &v);
    }
    view_free(&v);
}

/* Writes the page (or with svg the charts) to out. Returns 0, or 1 after
 * saying why on stderr (and removing what it began to write). */
static int write_report(report_t *r, const char *out, bool svg)
{
    FILE *o = fopen(out, "w");
    if (o == NULL) {
        fprintf(stderr, "lms-report: %s: %s\n", out, strerror(errno));
        return 1;
    }
    write_to(r, o, svg);
    if (ferror(o) | (fclose(o) != 0)) {
        fprintf(stderr, "lms-report: %s: could not write it\n", out);
        remove(out);
        return 1;
    }
    printf("%s\n", out);
    return 0;
}

static void usage(FILE *o)
{
    fputs("usage: lms-report TRACE.json [-o OUT] [--svg]\n"
          "  turns a timeline written with LMS_TRACE=TRACE.json into a one-page HTML\n"
          "  report (default OUT: TRACE with .json replaced by .html), or with --svg\n"
          "  into the charts alone as one SVG file (default: .svg); prints OUT.\n",
          o);
}

int main(int argc, char **argv)
{
    const char *in = NULL, *out = NULL;
    bool svg = false;
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "-h") == 0 || strcmp(argv[i], "--help") == 0) {
            usage(stdout);
            return 0;
        } else if (strcmp(argv[i], "--svg") == 0) {
            svg = true;
        } else if (strcmp(argv[i], "-o") == 0 || strcmp(argv[i], "--output") == 0) {
            if (++i == argc) {
                fprintf(stderr, "lms-report: %s needs a file name\n", argv[i - 1]);
                return 2;
            }
            out = argv[i];
        } else if (argv[i][0] == '-' && argv[i][1] != '\0') {
            fprintf(stderr, "lms-report: unknown option %s\n", argv[i]);
            usage(stderr);
            return 2;
        } else if (in == NULL) {
            in = argv[i];
        } else {
            fprintf(stderr, "lms-report: one timeline at a time (%s and %s)\n", in, argv[i]);
            return 2;
        }
    }
    if (in == NULL) {
        usage(stderr);
        return 2;
    }
    char *out_buf = NULL;
    if (out == NULL) {
        size_t n = strlen(in);
        if ((out_buf = malloc(n + 6)) == NULL)
            die_oom();
        if (n > 5 && strcmp(in + n - 5, ".json") == 0)
            n -= 5;
        snprintf(out_buf, n + 6, "%.*s%s", (int)n, in, svg ? ".svg" : ".html");
        out = out_buf;
    }
    int rc = 2;
    report_t *r = NULL;
    if (strcmp(in, out) == 0)
        fprintf(stderr, "lms-report: %s: the report would overwrite the timeline\n", in);
    else if ((rc = read_timeline(r = report_new(in))) == 0)
        rc = write_report(r, out, svg);
    report_free(r);
    free(out_buf);
    return rc;
}
