/*
 * tests/swap/test_trace.c — the LMS_TRACE timeline (swap/trace.c) against its
 * format, docs/timeline-format.md: a run that swaps writes a file of exactly
 * that shape; its copy spans add up to the bytes lms_stats says moved; its
 * evictions, fetches and prefetches count the chunks lms_stats counts; its
 * stalls add up to stall_ns; its device spans are where the device ran the
 * work, on a track per program stream; its memory counters keep the 100 us
 * rule and end with the residency; otherData holds the stats at shutdown.
 * Without a path nothing is written, a path that cannot be written fails
 * init, and a second start truncates. (A process that exits with lms still
 * running: tests/swap/timeline_probe.c.)
 *
 * Every test starts lms on the sim with a small configuration, as test_swap
 * does, and reads the file back with load(): the lines one by one against
 * the format, each event line and otherData parsed with tests/support/json.c,
 * and the whole file parsed as one JSON value too.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "harness.h"
#include "json.h"
#include "swap/swap.h"

#define LIMIT_CHUNKS 8
#define HOST_CHUNKS 48
#define LOOP 12 /* one-chunk allocations read in turn: 1.5 x the device limit */

static size_t chunk = TEST_SIM_GRANULARITY;
static char path[128];

static void setup(void)
{
    snprintf(path, sizeof path, "/tmp/lms-test-trace-%ld.json", (long)getpid());
}

static void teardown(void)
{
    lms_shutdown();
    unlink(path);
}

TestSuite(trace, .init = setup, .fini = teardown, .timeout = 300);

/* The sim (the timeline's device spans are checked against its timing),
 * with a device of LIMIT_CHUNKS chunks, writing the timeline to `path`. */
static swap_config_t config(void)
{
    swap_config_t cfg;
    swap_config_from_options(&cfg);
    cfg.device = test_config();
    cfg.device.backend = "sim";
    cfg.device_limit = LIMIT_CHUNKS * chunk;
    cfg.host_limit = HOST_CHUNKS * chunk;
    cfg.reclaim_low = chunk;
    cfg.reclaim_high = 2 * chunk;
    cfg.swap_piece = 2 * chunk;
    cfg.trace_path = path;
    return cfg;
}

/* ---- reading the file back ---------------------------------------------------- */

static char *read_file(const char *file, size_t *len)
{
    FILE *f = fopen(file, "rb");
    cr_assert_not_null(f, "the timeline %s exists", file);
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    char *text = malloc((size_t)n + 1);
    cr_assert_not_null(text);
    cr_assert_eq(fread(text, 1, (size_t)n, f), (size_t)n);
    fclose(f);
    text[n] = '\0';
    *len = (size_t)n;
    return text;
}

typedef struct timeline {
    json_t *whole;   /* the file as one value */
    json_t **events; /* each event line, in file order */
    size_t n;
    json_t *other;   /* otherData */
} timeline_t;

static const json_t *field(const json_t *e, const char *key, json_kind_t kind)
{
    const json_t *v = json_get(e, key);
    cr_assert(v != NULL && v->kind == kind, "an event has \"%s\" of kind %d", key, (int)kind);
    return v;
}

static const char *str(const json_t *e, const char *key) { return field(e, key, JSON_STRING)->string; }
static double num(const json_t *e, const char *key) { return field(e, key, JSON_NUMBER)->number; }
static const json_t *args(const json_t *e) { return field(e, "args", JSON_OBJECT); }
static double arg(const json_t *e, const char *key) { return num(args(e), key); }
static bool named(const json_t *e, const char *name) { return strcmp(str(e, "name"), name) == 0; }
static long tid(const json_t *e) { return (long)num(e, "tid"); }

/* A time in us with 3 decimals, as whole nanoseconds. */
static int64_t ns(double us) { return (int64_t)(us * 1000 + (us >= 0 ? 0.5 : -0.5)); }

/* What every event line must be: an object with the common fields, its
 * args flat (numbers, strings, booleans). */
static void check_event(const json_t *e)
{
    cr_assert_eq(e->kind, JSON_OBJECT);
    const char *ph = str(e, "ph");
    cr_assert(strcmp(ph, "M") == 0 || strcmp(ph, "X") == 0 || strcmp(ph, "i") == 0 ||
                  strcmp(ph, "C") == 0,
              "ph \"%s\"", ph);
    str(e, "name");
    cr_assert_eq((long)num(e, "pid"), (long)getpid(), "pid is the process id");
    cr_assert(num(e, "tid") >= 0 && num(e, "tid") == (double)tid(e), "tid is an integer");
    const json_t *a = args(e);
    for (size_t i = 0; i < a->n; i++)
        cr_assert(a->items[i].kind == JSON_NUMBER || a->items[i].kind == JSON_STRING ||
                      a->items[i].kind == JSON_BOOL,
                  "args.%s is a number, string or boolean", a->keys[i]);
    if (strcmp(ph, "M") == 0)
        return;
    str(e, "cat");
    cr_assert_geq(num(e, "ts"), 0);
    if (strcmp(ph, "X") == 0)
        cr_assert_geq(num(e, "dur"), 0);
    if (strcmp(ph, "i") == 0)
        str(e, "s");
}

static json_t *parse(const char *text, size_t len, const char *what)
{
    char error[128] = "";
    json_t *v = json_parse(text, len, error, sizeof error);
    cr_assert_not_null(v, "%s is JSON: %s: %.*s", what, error, (int)(len < 300 ? len : 300), text);
    return v;
}

/* Reads the timeline, checking its lines against the format:
 *     {"traceEvents":[
 *     {event},            (each line but the last event's ends with a comma)
 *     {event}
 *     ],
 *     "displayTimeUnit":"ms",
 *     "otherData":{...}}
 */
static timeline_t load(void)
{
    size_t len;
    char *text = read_file(path, &len);
    timeline_t tl = {.whole = parse(text, len, "the whole file")};
    cr_assert(len > 0 && text[len - 1] == '\n', "the file ends with a newline");
    char **lines = calloc(len + 1, sizeof *lines);
    cr_assert_not_null(lines);
    size_t nlines = 0;
    for (char *p = text, *nl; p < text + len; p = nl + 1) {
        nl = strchr(p, '\n');
        *nl = '\0';
        lines[nlines++] = p;
    }
    cr_assert_geq(nlines, 5);
    cr_assert_str_eq(lines[0], "{\"traceEvents\":[");
    tl.events = calloc(nlines, sizeof *tl.events);
    cr_assert_not_null(tl.events);
    size_t i = 1;
    for (bool last = false; !last; i++) {
        cr_assert_lt(i, nlines - 3, "the event lines end before the closing lines");
        size_t n = strlen(lines[i]);
        cr_assert_gt(n, 1, "line %zu is not empty", i + 1);
        last = lines[i][n - 1] != ',';
        cr_assert(lines[i][0] == '{' && lines[i][n - 1 - !last] == '}',
                  "line %zu is one event: %s", i + 1, lines[i]);
        json_t *e = parse(lines[i], n - !last, "an event line");
        check_event(e);
        tl.events[tl.n++] = e;
    }
    cr_assert_str_eq(lines[i], "],");
    cr_assert_str_eq(lines[i + 1], "\"displayTimeUnit\":\"ms\",");
    const char *o = lines[i + 2], *prefix = "\"otherData\":";
    size_t n = strlen(o);
    cr_assert(strncmp(o, prefix, strlen(prefix)) == 0 && n > strlen(prefix) + 2 &&
                  strcmp(o + n - 2, "}}") == 0,
              "the otherData line: %s", o);
    tl.other = parse(o + strlen(prefix), n - strlen(prefix) - 1, "otherData");
    cr_assert_eq(tl.other->kind, JSON_OBJECT);
    cr_assert_eq(i + 3, nlines, "nothing follows otherData");
    free(lines);
    free(text);
    return tl;
}

static void unload(timeline_t *tl)
{
    for (size_t i = 0; i < tl->n; i++)
        json_free(tl->events[i]);
    free(tl->events);
    json_free(tl->other);
    json_free(tl->whole);
}

static const struct {
    const char *name;
    size_t offset;
} stats_fields[] = {
#define STATS_FIELD(f) {#f, offsetof(lms_stats_t, f)},
    LMS_STATS_FIELDS(STATS_FIELD)
#undef STATS_FIELD
};
_Static_assert(sizeof stats_fields / sizeof *stats_fields * sizeof(uint64_t) == sizeof(lms_stats_t),
               "lms_stats_t is its uint64_t fields, no padding or other member");

/* otherData.stats is exactly st: every field of lms_stats_t, by name, as an integer. */
static void expect_stats(const timeline_t *tl, const lms_stats_t *st)
{
    const json_t *s = json_get(tl->other, "stats");
    cr_assert(s != NULL && s->kind == JSON_OBJECT, "otherData has stats");
    cr_assert_eq(s->n, sizeof stats_fields / sizeof *stats_fields, "stats has every field, once");
    for (size_t i = 0; i < sizeof stats_fields / sizeof *stats_fields; i++) {
        uint64_t want = *(const uint64_t *)((const char *)st + stats_fields[i].offset);
        double got = num(s, stats_fields[i].name);
        cr_assert_eq(got, (double)want, "stats.%s: %.0f in the file, %llu from lms_stats",
                     stats_fields[i].name, got, (unsigned long long)want);
    }
}

/* ---- running lms ------------------------------------------------------------------ */

static void start(swap_config_t cfg) { TEST_OK(swap_init(&cfg)); }

static dev_addr_t addr(const void *p) { return (dev_addr_t)(uintptr_t)p; }

static void *must_malloc(size_t size)
{
    void *p = NULL;
    TEST_OK(lms_malloc(&p, size, NULL));
    return p;
}

static void fill(void *p, uint64_t seed)
{
    dev_device_t *dev = swap_device();
    dev_stream_t *ds = swap_stream(NULL);
    TEST_OK(lms_access(p, chunk, LMS_OVERWRITE, NULL));
    TEST_OK(dev_fill(dev, ds, addr(p), chunk, seed));
}

static void expect_filled(void *p, uint64_t seed)
{
    static uint64_t want[LOOP + 1];
    static unsigned char *ref;
    if (ref == NULL) {
        ref = malloc(chunk);
        cr_assert_not_null(ref);
        for (size_t i = 0; i <= LOOP; i++) {
            dev_fill_ref(ref, chunk, 100 + i);
            want[i] = dev_checksum_ref(ref, chunk);
        }
    }
    cr_assert_leq(seed - 100, LOOP);
    dev_device_t *dev = swap_device();
    dev_stream_t *ds = swap_stream(NULL);
    uint64_t sum = 0;
    TEST_OK(lms_access(p, chunk, LMS_READ, NULL));
    TEST_OK(dev_checksum(dev, ds, addr(p), chunk, &sum));
    TEST_OK(lms_stream_synchronize(NULL));
    cr_assert_eq(sum, want[seed - 100], "the chunk at %p holds what seed %llu wrote", p,
                 (unsigned long long)seed);
}

/* n one-chunk allocations, the i-th filled with seed 100 + i. */
static void filled_chunks(void **a, int n)
{
    for (int i = 0; i < n; i++) {
        a[i] = must_malloc(chunk);
        fill(a[i], 100 + (uint64_t)i);
    }
}

/* LOOP one-chunk allocations, written, then read in turn `iterations` times
 * (with a mark after each when `marks`): lms copies out what was written,
 * drops what was read unchanged, fetches on demand and, once it follows a
 * schedule, fetches ahead. */
static void loop(int iterations, bool marks)
{
    void *a[LOOP];
    filled_chunks(a, LOOP);
    for (int it = 0; it < iterations; it++) {
        for (int i = 0; i < LOOP; i++)
            expect_filled(a[i], 100 + (uint64_t)i);
        if (marks)
            TEST_OK(lms_mark_iteration());
    }
}

/* READS one-chunk allocations read in turn, then FILLERS more written, read
 * and freed, `iterations` times with a mark after each. The fillers are read
 * again before the reads are, so MIN evicts reads for them (written ones
 * copied out the first time, dropped unchanged after), and the frees leave
 * blocks to fetch them ahead into: 10 to 24 are in six iterations, though
 * how many depends on timing (tests/swap
 * what_is_read_next_is_fetched_ahead_into_free_blocks). */
static void reads_and_fillers(int iterations)
{
    enum { READS = 4, FILLERS = 6 };
    void *a[READS], *b[FILLERS];
    filled_chunks(a, READS);
    for (int it = 0; it < iterations; it++) {
        for (int i = 0; i < READS; i++)
            expect_filled(a[i], 100 + (uint64_t)i);
        for (int i = 0; i < FILLERS; i++) {
            b[i] = must_malloc(chunk);
            fill(b[i], 100 + READS + (uint64_t)i);
        }
        for (int i = 0; i < FILLERS; i++)
            expect_filled(b[i], 100 + READS + (uint64_t)i);
        for (int i = 0; i < FILLERS; i++)
            TEST_OK(lms_free(b[i], NULL));
        TEST_OK(lms_mark_iteration());
    }
}

/* Shuts lms down once idle; its stats then, and the timeline. */
static timeline_t finish(lms_stats_t *st)
{
    *st = test_settled_stats();
    TEST_OK(lms_shutdown());
    timeline_t tl = load();
    expect_stats(&tl, st);
    return tl;
}

/* Sums over the events named `name` of args.key (NULL: count them). */
static double sum(const timeline_t *tl, const char *name, const char *key)
{
    double total = 0;
    for (size_t i = 0; i < tl->n; i++)
        if (named(tl->events[i], name))
            total += key != NULL ? arg(tl->events[i], key) : 1;
    return total;
}

/* ---- the shape ------------------------------------------------------------------ */

Test(trace, a_run_that_swaps_writes_a_timeline_of_exactly_the_documented_shape)
{
    start(config());
    char device[96];
    snprintf(device, sizeof device, "%s", swap_device()->info.name);
    loop(4, true);
    lms_stats_t st;
    timeline_t tl = finish(&st);

    /* the metadata first, in the documented order */
    static const char *const tracks[] = {"H2D", "D2H", "lms", "stalls"};
    cr_assert_geq(tl.n, 5);
    cr_assert(named(tl.events[0], "process_name") && tid(tl.events[0]) == 0);
    cr_assert_str_eq(str(args(tl.events[0]), "name"), "lms (sim)");
    for (int t = 1; t <= 4; t++) {
        cr_assert(named(tl.events[t], "thread_name") && tid(tl.events[t]) == t);
        cr_assert_str_eq(str(args(tl.events[t]), "name"), tracks[t - 1]);
    }

    /* every event is one the format names, on its track, with its args */
    size_t compute_tracks = 0;
    for (size_t i = 5; i < tl.n; i++) {
        const json_t *e = tl.events[i];
        const char *name = str(e, "name"), *ph = str(e, "ph");
        long t = tid(e);
        if (strcmp(ph, "M") == 0) { /* a compute track's name, before its first span */
            char want[32];
            snprintf(want, sizeof want, "compute %zu", compute_tracks);
            cr_assert(named(e, "thread_name") && t == (long)(100 + compute_tracks++));
            cr_assert_str_eq(str(args(e), "name"), want);
        } else if (named(e, "h2d") || named(e, "d2h")) {
            cr_assert_str_eq(str(e, "cat"), "copy");
            cr_assert_str_eq(ph, "X");
            cr_assert_eq(t, named(e, "h2d") ? 1 : 2);
            cr_assert_gt(arg(e, "bytes"), 0);
        } else if (named(e, "evict")) {
            cr_assert(strcmp(str(e, "cat"), "swap") == 0 && strcmp(ph, "i") == 0 &&
                      strcmp(str(e, "s"), "t") == 0 && t == 3);
            cr_assert_gt(arg(e, "chunks"), 0);
            cr_assert_eq(arg(e, "bytes"), arg(e, "chunks") * (double)chunk);
            cr_assert_eq(json_get(args(e), "copied")->kind, JSON_BOOL);
            const char *by = str(args(e), "by");
            cr_assert(strcmp(by, "reclaim") == 0 || strcmp(by, "direct") == 0 ||
                          strcmp(by, "prefetch") == 0,
                      "by \"%s\"", by);
        } else if (named(e, "fetch") || named(e, "prefetch")) {
            cr_assert(strcmp(str(e, "cat"), "swap") == 0 && strcmp(ph, "i") == 0 &&
                      strcmp(str(e, "s"), "t") == 0 && t == 3);
            cr_assert_gt(arg(e, "chunks"), 0);
            cr_assert_eq(arg(e, "bytes"), arg(e, "chunks") * (double)chunk);
        } else if (named(e, "stall")) {
            cr_assert(strcmp(str(e, "cat"), "stall") == 0 && strcmp(ph, "X") == 0 && t == 4);
        } else if (named(e, "iteration")) {
            cr_assert(strcmp(str(e, "cat"), "mark") == 0 && strcmp(ph, "i") == 0 &&
                      strcmp(str(e, "s"), "p") == 0 && t == 3);
            cr_assert_geq(arg(e, "n"), 1);
        } else if (named(e, "memory")) {
            cr_assert(strcmp(str(e, "cat"), "memory") == 0 && strcmp(ph, "C") == 0 && t == 0);
            cr_assert_eq(args(e)->n, 2);
            cr_assert_leq(arg(e, "resident"), (double)st.device_limit);
            arg(e, "host");
        } else {
            cr_assert(strcmp(str(e, "cat"), "compute") == 0 && strcmp(ph, "X") == 0,
                      "\"%s\" is device work on a program's stream", name);
            cr_assert(t >= 100 && t < (long)(100 + compute_tracks), "%s on a named track", name);
            cr_assert(strcmp(name, "fill") == 0 || strcmp(name, "checksum") == 0, "%s", name);
        }
    }
    cr_assert_eq(compute_tracks, 1, "the test ran kernels on the default stream only");
    cr_assert(named(tl.events[tl.n - 1], "memory"), "the last event is the final memory counter");

    /* otherData */
    const json_t *o = tl.other, *link = field(o, "link", JSON_OBJECT);
    cr_assert_str_eq(str(o, "lms"), "timeline 1");
    cr_assert_str_eq(str(o, "backend"), "sim");
    cr_assert_str_eq(str(o, "device"), device);
    cr_assert_eq(num(o, "chunk"), (double)chunk);
    cr_assert_eq(num(o, "device_limit"), (double)(LIMIT_CHUNKS * chunk));
    cr_assert_eq(num(o, "host_limit"), (double)(HOST_CHUNKS * chunk));
    cr_assert_eq(num(link, "h2d_gbps"), 0);
    cr_assert_eq(num(link, "d2h_gbps"), 0);
    cr_assert_str_eq(str(link, "source"), "unthrottled sim");
    cr_assert_gt(num(o, "duration_us"), 0);
    cr_assert_eq(o->n, 9, "otherData has the documented fields and no others");

    /* and the whole file says the same as its lines */
    const json_t *all = field(tl.whole, "traceEvents", JSON_ARRAY);
    cr_assert_eq(all->n, tl.n);
    cr_assert_str_eq(str(tl.whole, "displayTimeUnit"), "ms");
    unload(&tl);
}

Test(trace, every_span_lasts_zero_or_more_and_every_event_lies_within_the_run)
{
    start(config());
    loop(3, true);
    lms_stats_t st;
    timeline_t tl = finish(&st);
    int64_t duration = ns(num(tl.other, "duration_us"));
    size_t spans = 0;
    for (size_t i = 0; i < tl.n; i++) {
        const json_t *e = tl.events[i];
        const char *ph = str(e, "ph");
        if (strcmp(ph, "M") == 0)
            continue;
        int64_t ts = ns(num(e, "ts")), dur = strcmp(ph, "X") == 0 ? ns(num(e, "dur")) : 0;
        cr_assert(ts >= 0 && dur >= 0 && ts + dur <= duration,
                  "%s at %lld ns for %lld ns, in a run of %lld ns", str(e, "name"),
                  (long long)ts, (long long)dur, (long long)duration);
        spans += strcmp(ph, "X") == 0;
    }
    cr_assert_gt(spans, 0);
    unload(&tl);
}

/* ---- what the events add up to ------------------------------------------------------- */

Test(trace, copy_spans_add_up_to_the_bytes_lms_moved_each_way)
{
    start(config());
    loop(4, true);
    lms_stats_t st;
    timeline_t tl = finish(&st);
    cr_assert_gt(st.bytes_h2d, 0);
    cr_assert_gt(st.bytes_d2h, 0);
    cr_assert_eq(sum(&tl, "h2d", "bytes"), (double)st.bytes_h2d);
    cr_assert_eq(sum(&tl, "d2h", "bytes"), (double)st.bytes_d2h);
    unload(&tl);
}

Test(trace, evictions_fetches_and_prefetches_count_the_chunks_lms_stats_counts)
{
    start(config());
    loop(6, true);
    lms_stats_t st;
    timeline_t tl = finish(&st);
    double copied = 0, dropped = 0;
    for (size_t i = 0; i < tl.n; i++)
        if (named(tl.events[i], "evict"))
            *(json_get(args(tl.events[i]), "copied")->boolean ? &copied : &dropped) +=
                arg(tl.events[i], "chunks");
    cr_assert_gt(st.evictions, 0);
    cr_assert_gt(st.clean_drops, 0, "chunks read and evicted unchanged are dropped");
    cr_assert_eq(copied, (double)st.evictions);
    cr_assert_eq(dropped, (double)st.clean_drops);
    /* how many of the fetches were ahead depends on when the reclaim thread
     * ran (prefetches_are_on_the_timeline makes some certain) */
    double fetched = sum(&tl, "fetch", "chunks"), ahead = sum(&tl, "prefetch", "chunks");
    cr_assert_gt(fetched + ahead, 0);
    cr_assert_eq(fetched + ahead, (double)st.fetches, "%.0f fetched + %.0f prefetched, %llu fetches",
                 fetched, ahead, (unsigned long long)st.fetches);
    /* runs moved as one operation are one event: fewer events than chunks */
    cr_assert_lt(sum(&tl, "evict", NULL) + sum(&tl, "fetch", NULL) + sum(&tl, "prefetch", NULL),
                 copied + dropped + fetched + ahead);
    unload(&tl);
}

Test(trace, prefetches_are_on_the_timeline)
{
    start(config());
    reads_and_fillers(6);
    lms_stats_t st;
    timeline_t tl = finish(&st);
    double fetched = sum(&tl, "fetch", "chunks"), ahead = sum(&tl, "prefetch", "chunks");
    cr_assert_gt(st.prefetch_hits, 0, "the schedule fetched ahead");
    cr_assert_geq(ahead, (double)st.prefetch_hits, "%.0f prefetched, %llu found fetched ahead",
                  ahead, (unsigned long long)st.prefetch_hits);
    cr_assert_eq(fetched + ahead, (double)st.fetches, "%.0f fetched + %.0f prefetched, %llu fetches",
                 fetched, ahead, (unsigned long long)st.fetches);
    unload(&tl);
}

Test(trace, stall_spans_add_up_to_the_stall_time_lms_stats_counts)
{
    swap_config_t cfg = config();
    cfg.device.sim_d2h_gbps = 1; /* 2 ms per chunk copied out: writers wait for room */
    start(cfg);
    loop(1, false);
    lms_stats_t st;
    timeline_t tl = finish(&st);
    int64_t stalled = 0;
    for (size_t i = 0; i < tl.n; i++)
        if (named(tl.events[i], "stall"))
            stalled += ns(num(tl.events[i], "dur"));
    cr_assert_gt(st.stall_ns, 0, "no stall while filling 1.5 x the device over a slow link");
    cr_assert_eq(stalled, (int64_t)st.stall_ns, "stall spans %lld ns, stall_ns %llu",
                 (long long)stalled, (unsigned long long)st.stall_ns);
    unload(&tl);
}

/* ---- device spans ------------------------------------------------------------------ */

Test(trace, throttled_copies_last_as_long_as_the_link_takes_and_the_link_is_recorded)
{
    swap_config_t cfg = config();
    cfg.device.sim_h2d_gbps = 4;
    cfg.device.sim_d2h_gbps = 2;
    start(cfg);
    loop(2, true);
    lms_stats_t st;
    timeline_t tl = finish(&st);
    const json_t *link = field(tl.other, "link", JSON_OBJECT);
    cr_assert_eq(num(link, "h2d_gbps"), 4);
    cr_assert_eq(num(link, "d2h_gbps"), 2);
    cr_assert_str_eq(str(link, "source"), "sim throttle");
    size_t copies = 0;
    for (size_t i = 0; i < tl.n; i++) {
        const json_t *e = tl.events[i];
        if (!named(e, "h2d") && !named(e, "d2h"))
            continue;
        double gbps = named(e, "h2d") ? 4 : 2; /* bytes per ns */
        int64_t least = (int64_t)(arg(e, "bytes") / gbps);
        cr_assert_geq(ns(num(e, "dur")), least, "a %s of %.0f bytes took %.3f us at %g GB/s",
                      str(e, "name"), arg(e, "bytes"), num(e, "dur"), gbps);
        copies++;
    }
    cr_assert_gt(copies, 0);
    unload(&tl);
}

/* The time the spans of tl named `name` (one stream's, so one after another)
 * cover, into busy; their starts and ends into se[0..2n). How many. */
static size_t copy_spans(const timeline_t *tl, const char *name, double *se, double *busy)
{
    size_t n = 0;
    *busy = 0;
    for (size_t i = 0; i < tl->n; i++)
        if (named(tl->events[i], name)) {
            se[2 * n] = num(tl->events[i], "ts");
            se[2 * n + 1] = se[2 * n] + num(tl->events[i], "dur");
            *busy += se[2 * n + 1] - se[2 * n];
            n++;
        }
    return n;
}

/* Note [Both directions busy] (swap/trace.c): what swap_link_busy says is
 * what the timeline's copy spans say: each direction's time, and the time
 * both had a copy running. */
Test(trace, the_links_busy_time_is_what_the_copy_spans_cover_each_way_and_both_at_once)
{
    swap_config_t cfg = config();
    cfg.device.sim_h2d_gbps = cfg.device.sim_d2h_gbps = 1;
    swap_link_busy_t b;
    /* the copies overlap or not as the threads run: a run with no overlap
     * checks nothing of "both at once", so the run is made again (a few
     * times at most: on a loaded machine, or under a sanitizer, one may not) */
    for (int tries = 0;; tries++) {
        start(cfg);
        reads_and_fillers(6);
        lms_stats_t st = test_settled_stats();
        TEST_OK(swap_link_busy(&b));
        TEST_OK(lms_shutdown());
        timeline_t tl = load();
        double *h = calloc(2 * tl.n, sizeof *h), *d = calloc(2 * tl.n, sizeof *d), hb, db;
        double both = 0;
        cr_assert(h != NULL && d != NULL);
        size_t nh = copy_spans(&tl, "h2d", h, &hb), nd = copy_spans(&tl, "d2h", d, &db);
        for (size_t i = 0; i < nh; i++) /* each direction's spans are disjoint */
            for (size_t k = 0; k < nd; k++)
                both += fmax(0, fmin(h[2 * i + 1], d[2 * k + 1]) - fmax(h[2 * i], d[2 * k]));
        double slack = 0.002 * (double)(nh + nd); /* us: each span rounded to its ns */
        uint64_t bytes_h2d = (uint64_t)sum(&tl, "h2d", "bytes");
        free(h);
        free(d);
        unload(&tl);
        cr_assert(fabs(hb - (double)b.h2d_ns / 1e3) <= slack &&
                      fabs(db - (double)b.d2h_ns / 1e3) <= slack,
                  "H2D %.3f us (spans %.3f), D2H %.3f us (spans %.3f)",
                  (double)b.h2d_ns / 1e3, hb, (double)b.d2h_ns / 1e3, db);
        cr_assert(fabs(both - (double)b.both_ns / 1e3) <= slack,
                  "both at once %.3f us, the spans' overlap %.3f us", (double)b.both_ns / 1e3,
                  both);
        cr_assert_eq(st.bytes_h2d, bytes_h2d);
        if (both > 0)
            break;
        cr_assert(tries < 4, "no two copies overlapped in %d runs", tries + 1);
    }
    cfg.trace_path = NULL; /* and with neither a timeline nor measure_links, nothing is kept */
    start(cfg);
    TEST_FAILS(LMS_ERR_INVALID, swap_link_busy(&b));
}

/* The compute spans of tl named `name`, at most `max`, into out; how many. */
static size_t spans_named(const timeline_t *tl, const char *name, const json_t **out, size_t max)
{
    size_t n = 0;
    for (size_t i = 0; i < tl->n && n < max; i++)
        if (named(tl->events[i], name) && strcmp(str(tl->events[i], "ph"), "X") == 0)
            out[n++] = tl->events[i];
    return n;
}

Test(trace, compute_spans_show_when_the_work_ran_on_a_track_per_program_stream)
{
    start(config());
    lms_stream_t a;
    TEST_OK(lms_stream_create(&a));
    dev_device_t *dev = swap_device();
    dev_stream_t *da = swap_stream(a), *d0 = swap_stream(NULL);
    void *x = must_malloc(chunk), *y = must_malloc(chunk);
    /* on a: a host function held until the gate opens, then a fill behind it */
    test_gate_close();
    TEST_OK(dev_host_func(dev, da, test_gate_wait, NULL));
    TEST_OK(lms_access(x, chunk, LMS_OVERWRITE, a));
    TEST_OK(dev_fill(dev, da, addr(x), chunk, 7));
    /* on the default stream, meanwhile: an axpy */
    TEST_OK(lms_access(y, chunk, LMS_WRITE, NULL));
    TEST_OK(dev_axpy(dev, d0, chunk / sizeof(float), 2.f, addr(y), addr(y)));
    TEST_OK(lms_stream_synchronize(NULL));
    usleep(50000);
    test_gate_open();
    TEST_OK(lms_stream_synchronize(a));
    lms_stats_t st;
    timeline_t tl = finish(&st);

    const json_t *gate[2], *filled[2], *axpy[2];
    cr_assert_eq(spans_named(&tl, "host_func", gate, 2), 1);
    cr_assert_eq(spans_named(&tl, "fill", filled, 2), 1);
    cr_assert_eq(spans_named(&tl, "axpy", axpy, 2), 1);
    int64_t gate_start = ns(num(gate[0], "ts")), gate_end = gate_start + ns(num(gate[0], "dur"));
    int64_t axpy_end = ns(num(axpy[0], "ts")) + ns(num(axpy[0], "dur"));
    cr_assert_leq(gate_start, gate_end);
    cr_assert_geq(gate_end - axpy_end, 45000000, "the host function ran until the gate opened, "
                  "50 ms after the axpy was done (however late its worker started it)");
    cr_assert_geq(ns(num(filled[0], "ts")), gate_end,
                  "the fill, enqueued before the gate opened, ran after it (device time, not "
                  "enqueue time)");
    cr_assert_lt(axpy_end, gate_end,
                 "the default stream's axpy ran while stream a was held");
    /* a track per stream: the host function and the fill on one, the axpy on
     * another; tracks are numbered as their first work is reported, each
     * named before its first span */
    cr_assert_eq(tid(gate[0]), tid(filled[0]));
    cr_assert_neq(tid(gate[0]), tid(axpy[0]));
    cr_assert_eq(tid(axpy[0]), 100, "the axpy's stream's work ended first");
    cr_assert_eq(tid(gate[0]), 101);
    for (long t = 100; t <= 101; t++) {
        size_t named_at = SIZE_MAX, first_span = SIZE_MAX;
        for (size_t i = 0; i < tl.n; i++) {
            const json_t *e = tl.events[i];
            if (tid(e) != t)
                continue;
            if (named(e, "thread_name") && named_at == SIZE_MAX)
                named_at = i;
            if (strcmp(str(e, "ph"), "X") == 0 && first_span == SIZE_MAX)
                first_span = i;
        }
        char want[32];
        snprintf(want, sizeof want, "compute %ld", t - 100);
        cr_assert_lt(named_at, first_span, "track %ld is named before its first span", t);
        cr_assert_str_eq(str(args(tl.events[named_at]), "name"), want);
    }
    unload(&tl);
}

/* ---- iterations and memory ------------------------------------------------------------ */

/* The iteration marks of tl, numbered 1, 2, ... in file order; how many. */
static size_t iterations(const timeline_t *tl)
{
    size_t n = 0;
    for (size_t i = 0; i < tl->n; i++)
        if (named(tl->events[i], "iteration"))
            cr_assert_eq(arg(tl->events[i], "n"), (double)++n, "iteration marks count from 1");
    return n;
}

static uint64_t found_by_policy(void)
{
    swap_probe_t pr;
    TEST_OK(swap_probe(&pr));
    return pr.policy.found;
}

Test(trace, the_programs_marks_are_iterations_numbered_from_one)
{
    start(config());
    loop(3, true);
    uint64_t found = found_by_policy();
    lms_stats_t st;
    timeline_t tl = finish(&st);
    /* policy/ may find an iteration before the first mark, never after it */
    cr_assert_eq(iterations(&tl), 3 + found);
    unload(&tl);
}

Test(trace, iterations_found_without_marks_are_marked_too)
{
    start(config());
    loop(8, false);
    uint64_t found = found_by_policy();
    lms_stats_t st;
    timeline_t tl = finish(&st);
    cr_assert_gt(found, 0, "policy/ found the loop's iterations");
    cr_assert_eq(iterations(&tl), found);
    unload(&tl);
}

Test(trace, memory_counters_keep_100_us_apart_and_end_with_the_residency_at_shutdown)
{
    start(config());
    loop(3, true);
    lms_stats_t st;
    timeline_t tl = finish(&st);
    const json_t *mem[4096];
    size_t n = 0;
    for (size_t i = 0; i < tl.n && n < 4096; i++)
        if (named(tl.events[i], "memory"))
            mem[n++] = tl.events[i];
    cr_assert_gt(n, 3, "the counter moved as chunks came and went");
    cr_assert_eq(ns(num(mem[0], "ts")), 0);
    cr_assert_eq(arg(mem[0], "resident") + arg(mem[0], "host"), 0, "nothing at the start");
    for (size_t i = 1; i + 1 < n; i++)
        cr_assert_geq(ns(num(mem[i], "ts")) - ns(num(mem[i - 1], "ts")), 100000,
                      "counters %zu and %zu are 100 us apart or more", i - 1, i);
    cr_assert_geq(ns(num(mem[n - 1], "ts")), ns(num(mem[n - 2], "ts")));
    cr_assert_eq(mem[n - 1], tl.events[tl.n - 1], "the last counter ends the events");
    cr_assert_eq(arg(mem[n - 1], "resident"), (double)st.resident_bytes);
    cr_assert_eq(arg(mem[n - 1], "host"), (double)st.host_bytes);
    cr_assert_eq(ns(num(mem[n - 1], "ts")), ns(num(tl.other, "duration_us")));
    unload(&tl);
}

/* ---- no path, a bad path, a second start ---------------------------------------------- */

Test(trace, without_a_path_nothing_is_written_and_the_last_timeline_is_left_alone)
{
    if (getenv("LMS_TRACE") == NULL) {
        swap_config_t from_env;
        swap_config_from_options(&from_env);
        cr_assert_str_eq(from_env.trace_path, "", "LMS_TRACE unset: no timeline");
    }
    start(config());
    loop(1, false);
    TEST_OK(lms_shutdown());
    size_t len0, len;
    char *before = read_file(path, &len0);
    struct stat st0, st1;
    cr_assert_eq(stat(path, &st0), 0);
    for (int empty = 0; empty < 2; empty++) { /* "" and NULL */
        swap_config_t cfg = config();
        cfg.trace_path = empty ? "" : NULL;
        start(cfg);
        loop(1, false);
        TEST_OK(lms_shutdown());
        char *after = read_file(path, &len);
        cr_assert(len == len0 && memcmp(before, after, len) == 0,
                  "a start without a path changed the last timeline");
        free(after);
    }
    cr_assert_eq(stat(path, &st1), 0);
    cr_assert(st1.st_mtim.tv_sec == st0.st_mtim.tv_sec && st1.st_mtim.tv_nsec == st0.st_mtim.tv_nsec,
              "nothing wrote the file");
    free(before);
}

Test(trace, a_path_that_cannot_be_written_fails_init_with_a_message_naming_it)
{
    static const char *const bad[] = {"/nonexistent-lms-test-dir/timeline.json", "/"};
    for (size_t i = 0; i < 2; i++) {
        swap_config_t cfg = config();
        cfg.trace_path = bad[i];
        TEST_FAILS(LMS_ERR_SYSTEM, swap_init(&cfg));
        cr_assert(strstr(lms_last_error(), bad[i]) != NULL && strstr(lms_last_error(), "LMS_TRACE"),
                  "the message names the path and the variable: %s", lms_last_error());
        cr_assert_null(swap_device(), "lms did not start");
    }
    start(config()); /* and a good one starts */
    TEST_OK(lms_shutdown());
    timeline_t tl = load();
    unload(&tl);
}

/* "%p" in the name: this process's file (base_expand_path); a name that
 * does not fit once expanded fails init, saying so, and starts nothing. */
Test(trace, a_percent_p_in_the_path_names_this_processs_file)
{
    char pattern[96], mine[96];
    snprintf(pattern, sizeof pattern, "/tmp/lms-trace-test-%%p-%ld.json", (long)getpid());
    snprintf(mine, sizeof mine, "/tmp/lms-trace-test-%ld-%ld.json", (long)getpid(),
             (long)getpid());
    unlink(mine);
    swap_config_t cfg = config();
    cfg.trace_path = pattern;
    start(cfg);
    TEST_OK(lms_shutdown());
    struct stat st;
    cr_assert_eq(stat(mine, &st), 0, "%s names %s", pattern, mine);
    cr_assert_gt(st.st_size, 0, "the timeline was written there");
    unlink(mine);
    static char longer[5000];
    memset(longer, 'a', sizeof longer - 1);
    longer[0] = '/';
    cfg.trace_path = longer;
    TEST_FAILS(LMS_ERR_INVALID, swap_init(&cfg));
    cr_assert(strstr(lms_last_error(), "too long") && strstr(lms_last_error(), "LMS_TRACE"),
              "the message says why: %s", lms_last_error());
    cr_assert_null(swap_device(), "lms did not start");
}

Test(trace, a_second_start_truncates_the_timeline)
{
    start(config());
    loop(3, true);
    lms_stats_t first;
    timeline_t tl = finish(&first);
    size_t events_first = tl.n;
    unload(&tl);

    start(config());
    void *p = must_malloc(chunk);
    fill(p, 100);
    lms_stats_t second;
    tl = finish(&second); /* one file of the second run's shape, with its stats */
    cr_assert_lt(tl.n, events_first);
    cr_assert_eq(sum(&tl, "iteration", NULL), 0, "no mark of the first run is left");
    cr_assert_eq(second.evictions, 0);
    unload(&tl);
}
