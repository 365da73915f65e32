/*
 * tools/report.h — lms-report's parts (tools/lms-report.c says what the
 * program does): the JSON scanner (report_json.c), the timeline reader and
 * what it keeps (report_read.c), and the charts (report_svg.c); the page and
 * main are lms-report.c. Private to lms-report: nothing of lms's library.
 */
#ifndef LMS_TOOLS_REPORT_H
#define LMS_TOOLS_REPORT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#define FINE_BINS 4096            /* bins kept while reading (Note [Bins]) */
#define TARGET_BINS 200           /* about as many drawn across the run */
#define WINDOW_SPANS 32768        /* spans per activity held for their union */
#define MAX_STATS 64

/* ---- a small JSON scanner (report_json.c) ---- */

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

/* Records the first error (why, and where the scanner is); returns false. */
bool jfail(jscan_t *js, const char *why);
void jskip_ws(jscan_t *js);
/* A string at js->p into out (cap bytes, NUL-terminated, maybe shortened). */
bool jstring(jscan_t *js, char *out, size_t cap);
/* An object at js->p; its members' paths are path + "." + key (path has
 * room for 256 bytes), each leaf value given to visit. */
bool jobject(jscan_t *js, char *path, size_t plen, int depth, jvisit_fn visit, void *ctx);
/* Any value at js->p, as jobject. */
bool jvalue(jscan_t *js, char *path, size_t plen, int depth, jvisit_fn visit, void *ctx);

/* ---- what the report keeps (report_read.c) ---- */

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
    const char *caption; /* --caption: a line under a standalone SVG's heading, or NULL */
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

/* Says so on stderr and exits 1. */
void die_oom(void);
/* A report to read the timeline at path into (path is kept, not copied). */
report_t *report_new(const char *path);
void report_free(report_t *r);
/* Reads the whole timeline from f (named r->path in messages). Returns 0,
 * or 2 after saying why on stderr. */
int read_timeline_from(report_t *r, FILE *f);
/* The same from the file at r->path. */
int read_timeline(report_t *r);
/* Merges adjacent pairs of bins until t lies inside them (Note [Bins]). */
void bins_cover(report_t *r, double t);
/* The stats field called name, or NULL. */
const stat_field_t *stat_find(const report_t *r, const char *name);
/* The backend the run was on: otherData's, else (a run that did not finish)
 * the one its process name gives ("lms (sim)") in buf, else "". */
const char *report_backend(const report_t *r, char *buf, size_t n);

/* ---- text and charts (report_svg.c) ---- */

/* Text for HTML and XML: markup escaped, control characters as spaces,
 * bytes that are not UTF-8 as U+FFFD (a device name comes from the file). */
void put_escaped(FILE *o, const char *text);
/* Decimal bytes: GB = 1e9, as the GB/s of the link. */
const char *fmt_bytes(char *b, size_t n, double v);
/* Binary sizes, for limits and the chunk, which are set in KiB/MiB/GiB. */
const char *fmt_size(char *b, size_t n, double v);
const char *fmt_duration(char *b, size_t n, double us);

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

/* The view of the bins of r over [0, run_us]; view_free frees it. */
void view_make(const report_t *r, double run_us, view_t *v);
void view_free(view_t *v);
/* The three charts as one <svg>; standalone: a file of its own, headed by
 * what the run was on (Note [The SVG on its own]). */
void write_svg(FILE *o, const report_t *r, const view_t *v, bool standalone);

#endif
