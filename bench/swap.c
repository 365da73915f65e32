/*
 * bench/swap — how fast lms swaps an allocation out of the device and back
 * in, against plain copies of the same bytes on the same device, measured
 * side by side in one run (issue 4). Prints JSON lines on stdout, each with
 * "bench":"swap", the link settings and the machine they ran on:
 *
 *   build/bench/swap [--quick] [--reps=N] [--link-bound] [--run=SIZE]
 *
 *   {"bench":"swap","direction":"d2h|h2d|both","run_bytes":N,"gbps":X,
 *    "raw_gbps":Y,"fraction_of_raw":X/Y,...}
 *
 * for runs of 2 MiB to 256 MiB (powers of two), after a "case":"settings"
 * line per sweep. GB/s are decimal (1e9 bytes a second, the unit of
 * LMS_SIM_*_GBPS). gbps, raw_gbps and every *_ms are medians over the reps
 * (7 up to 16 MiB, 4 up to 64 MiB, then 3; an untimed warm-up rep first, in
 * which the host pool grows); fraction_of_raw is the ratio of the medians;
 * the _min and _max fields are over the reps. --quick: 3 reps; --reps=N: N
 * (1..32) at every size; --run=64MiB: that size only. Every line also says
 * the policy in effect ("policy": LMS_POLICY, schedule by default), which
 * changes what lms does inside the timed spans (Note [Where a span starts]).
 *
 * Sweeps. On sim, copies are throttled to LMS_SIM_H2D_GBPS / LMS_SIM_D2H_GBPS
 * where the environment sets them ("throttle":"env"), else to 25 and 25
 * (PCIe 4.0 x16-like, "default"), so that a copy takes a link's time and
 * overlap is real. Then 2..8 MiB again unthrottled ("off": memmove speed).
 * --link-bound adds 2..8 MiB at 0.1 GB/s ("link-bound"): slow enough that
 * each copy's link time hides the sim's CPU costs (memmove, page faults),
 * so the rows show how lms schedules copies and nothing else. On cuda there is
 * one sweep over the real link ("none"); the sim settings are then not printed.
 *
 * Raw: the device layer directly, no lms. A reservation of 4 x run_bytes;
 * three sets of run_bytes of blocks (out, in, remapped), mapped and made
 * accessible; two page-aligned host buffers of run_bytes, touched and
 * registered (dev_host_register: pinned on cuda); two high-priority streams.
 * Each raw time runs from enqueuing until dev_stream_synchronize returns:
 *   raw d2h    one dev_copy_d2h of run_bytes from the out blocks;
 *   raw h2d    one dev_copy_h2d of run_bytes into the in blocks;
 *   raw both   one of each at once, on the two streams (2 x run_bytes moved).
 * The out and in blocks stay mapped, so these are pure copies. Besides them,
 * "raw_remap_gbps" (d2h and h2d rows) times what any swap through the
 * device layer must do besides copying, on the remapped blocks: h2d =
 * unmap them, map them at their other VA, set_access, copy in (as a fetch
 * maps blocks that held another chunk); d2h = copy out, unmap, map at the
 * other VA, set_access (as an eviction unmaps what it copied out and the
 * blocks are mapped for their next user). On sim the first touch of a
 * freshly mapped block page-faults once per host page, which is most of a
 * remapped copy in; fraction_of_raw_remap is lms against that.
 *
 * lms: initialized for each run size (swap_init) with the device limit one
 * run plus the low reclaim watermark, device_limit = R + L chunks (R =
 * run_bytes / chunk; reclaim_low L = max(1, R/32) and reclaim_high H =
 * max(L+1, R/16) chunks, the proportions of lms's defaults); every block
 * created at init (preallocate: no rep creates blocks); the host limit two
 * runs plus the reclaim thread's headroom; the fault layer in the device
 * stack with an empty plan, which injects nothing and counts device calls.
 * Two allocations A and B of run_bytes. After each lms_access the bench's
 * thread keeps its access window open until its next timed lms_access: it
 * calls only the device layer meanwhile (dev_fill, dev_checksum,
 * dev_stream_synchronize on swap_stream(NULL), lms's default stream), so the
 * allocation it accessed stays held and what lms evicts is exactly the other
 * one: R - L chunks in the access itself (direct reclaim), the last L by the
 * reclaim thread once free blocks fall below L. A watcher thread polls
 * lms_stats every ~10 us to see when they are out: a chunk leaves
 * resident_bytes only when its copy has finished and it is unmapped. The
 * counters a span starts from are read by the watcher too, never by the
 * bench's thread (Note [Where a span starts]).
 * Each rep starts with A resident and dirty (overwritten and filled) and B
 * on the host (or never used):
 *   d2h   from calling lms_access(B, OVERWRITE) until all of A is out:
 *         bytes_d2h has grown by run_bytes and resident_bytes is one run
 *         (B's) again. B needs no copy in, so only A moves: run_bytes / time.
 *         "access_ms": how long the call blocked (direct reclaim, and B's
 *         maps); "tail_ms": from its return until the last chunk was out (the
 *         reclaim thread's part). B is then filled, untimed.
 *   both  from calling lms_access(A, READ) until A is on the device (the
 *         default stream, which waits for the fetch, synchronized) and all of
 *         dirty B is out, whichever is later: one allocation going out while
 *         another comes in, 2 x run_bytes / time. "in_ms": when A was in;
 *         "access_ms": how long the call blocked. Then, untimed, A is
 *         checksummed (dev_checksum) against dev_fill_ref of its seed.
 *   h2d   from calling lms_access(B, READ) until B is on the device (default
 *         stream synchronized): run_bytes / time. Room is made by evicting A,
 *         which was fetched in "both" and only read since: clean, so evicting
 *         it copies nothing ("clean_drops": chunks dropped; "d2h_bytes": the
 *         most copied out during any rep's h2d, 0 when the row is pure h2d).
 *   then A is made resident and dirty again (OVERWRITE + dev_fill, untimed).
 * So every lms time includes what lms does on the way: direct-reclaim waits,
 * event records and stream waits, unmaps, maps, set_access, the reclaim
 * thread's wake-up; the test kernels never run inside a timed span.
 * copies_d2h, copies_h2d, maps, unmaps, set_access: the device calls lms
 * made during the last rep's timed span (a run moved in one copy shows 1).
 *
 * Note [Where a span starts]
 * Every timed span starts at its lms_access call, and no lms call on the
 * bench's thread may come between the settled state and it: the counters a
 * span starts from are read on the watcher's thread, and the access itself
 * closes the previous window. Under LMS_POLICY=schedule this is what keeps
 * a span whole. The reps are one loop (A overwritten, B overwritten, A
 * read, B read), which policy/ finds as an iteration and follows from the
 * fifth timed rep on (at every size): when a window closes, lms evicts
 * what the next access needs room for and fetches what it reads (Note
 * [Prefetch] in swap/prefetch.c). An lms call that closed the window
 * before the span would move part of the span's bytes outside it (and
 * before its counters were read: the watcher would wait for a copy already
 * counted; issue 24, docs/benchmarks.md). So a span moves the same bytes
 * from the same call under either policy: under lru on demand, under
 * schedule partly as evictions and fetches ahead that the access finds on
 * their way. LMS_POLICY=lru measures demand swapping alone. One cost shows
 * under schedule only: an eviction ahead that no access waits for is
 * unmapped, and leaves resident_bytes, when the reclaim thread next wakes
 * (up to 50 ms later), which a "both" span then includes (at 2 MiB, where
 * A's fetch takes the one free block and nothing waits for B's).
 *
 * The target is fraction_of_raw >= 0.9 on sim with throttling and on
 * a GPU; nothing here asserts it. On cuda (LMS_BACKEND=cuda) the program is
 * the same; the fill and checksum kernels need a build with nvcc (else they
 * are skipped, and the settings line says "kernels":false).
 */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <time.h>
#include <unistd.h>

#include "base/base.h"
#define BENCH_NAME "swap"
#include "bench/bench.h"
#include "device/device.h"
#include "device/fault.h"
#include "device/kernels/kernels.h"
#include "swap/swap.h"

#define MIN_RUN (2 * BASE_MiB)
#define MAX_RUN (256 * BASE_MiB)
#define SHORT_MAX_RUN (8 * BASE_MiB) /* the largest run of the unthrottled and link-bound sweeps */
#define LINK_BOUND_GBPS 0.1
#define MAX_REPS 32
#define DEFAULT_GBPS 25.0
#define WATCH_TIMEOUT_NS (60ull * 1000000000ull)

static int quick;
static int reps_forced; /* --reps=N: N reps at every size; 0: by size */
static size_t only_run; /* --run=SIZE: that size only */
static int link_bound; /* --link-bound: the sweep at LINK_BOUND_GBPS too */
static char machine[512];
static dev_info_t info; /* of the device, probed once */

/* The links of one sweep. */
typedef struct throttle {
    const char *source; /* "env", "default", "off", or "none" (cuda) */
    double h2d, d2h;
} throttle_t;

static double median(const double *v, int n)
{
    double s[MAX_REPS];
    memcpy(s, v, (size_t)n * sizeof *s);
    qsort(s, (size_t)n, sizeof *s, bench_cmp_double);
    return n % 2 ? s[n / 2] : (s[n / 2 - 1] + s[n / 2]) / 2;
}

static double min_of(const double *v, int n)
{
    double m = v[0];
    for (int i = 1; i < n; i++)
        m = v[i] < m ? v[i] : m;
    return m;
}

static double max_of(const double *v, int n)
{
    double m = v[0];
    for (int i = 1; i < n; i++)
        m = v[i] > m ? v[i] : m;
    return m;
}

/* ---- the watcher: sees when evicted chunks are out ------------------------ */

/* Its own thread, so that the bench's thread keeps its access window open
 * (lms_stats would close it) while the watcher polls. */
static struct {
    pthread_mutex_t lock;
    pthread_cond_t cond;
    pthread_t thread;
    enum { IDLE, ARMED, DONE, STOP } state;
    uint64_t d2h_min;      /* done when bytes_d2h >= this */
    uint64_t resident_max; /* and resident_bytes <= this */
    uint64_t t;            /* when it saw that */
    lms_stats_t seen;
    char error[256];       /* "" or why it gave up */
} watch = {PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER};

static void *watch_main(void *arg)
{
    (void)arg;
    prctl(PR_SET_TIMERSLACK, 1UL); /* this thread's sleeps only: 10 us, not 60 */
    pthread_mutex_lock(&watch.lock);
    for (;;) {
        while (watch.state != ARMED && watch.state != STOP)
            pthread_cond_wait(&watch.cond, &watch.lock);
        if (watch.state == STOP)
            break;
        uint64_t d2h_min = watch.d2h_min, resident_max = watch.resident_max;
        pthread_mutex_unlock(&watch.lock);
        lms_stats_t s = {0};
        uint64_t t, deadline = base_now_ns() + WATCH_TIMEOUT_NS;
        char error[256] = "";
        for (;;) {
            lms_status_t st = lms_stats(&s);
            t = base_now_ns();
            if (st != LMS_OK) {
                snprintf(error, sizeof error, "lms_stats: %s", lms_last_error());
                break;
            }
            if (s.bytes_d2h >= d2h_min && s.resident_bytes <= resident_max)
                break;
            if (t > deadline) {
                snprintf(error, sizeof error,
                         "waited 60 s for bytes_d2h >= %llu and resident_bytes <= %llu; "
                         "saw %llu and %llu",
                         (unsigned long long)d2h_min, (unsigned long long)resident_max,
                         (unsigned long long)s.bytes_d2h, (unsigned long long)s.resident_bytes);
                break;
            }
            nanosleep(&(struct timespec){0, 10000}, NULL);
        }
        pthread_mutex_lock(&watch.lock);
        watch.seen = s;
        watch.t = t;
        snprintf(watch.error, sizeof watch.error, "%s", error);
        watch.state = DONE;
        pthread_cond_broadcast(&watch.cond);
    }
    pthread_mutex_unlock(&watch.lock);
    return NULL;
}

static void watch_arm(uint64_t d2h_min, uint64_t resident_max)
{
    pthread_mutex_lock(&watch.lock);
    watch.d2h_min = d2h_min;
    watch.resident_max = resident_max;
    watch.state = ARMED;
    pthread_cond_broadcast(&watch.cond);
    pthread_mutex_unlock(&watch.lock);
}

/* Waits until the armed condition was seen; returns when, and the stats. */
static uint64_t watch_wait(lms_stats_t *seen)
{
    pthread_mutex_lock(&watch.lock);
    while (watch.state != DONE)
        pthread_cond_wait(&watch.cond, &watch.lock);
    watch.state = IDLE;
    uint64_t t = watch.t;
    if (seen != NULL)
        *seen = watch.seen;
    if (watch.error[0] != '\0') {
        fprintf(stderr, "bench/swap: watcher: %s\n", watch.error);
        exit(1);
    }
    pthread_mutex_unlock(&watch.lock);
    return t;
}

/* ---- device calls lms makes, counted by the fault layer ------------------- */

typedef struct calls {
    uint64_t d2h, h2d, map, unmap, set_access;
} calls_t;

static calls_t calls_now(dev_device_t *dev)
{
    return (calls_t){dev_fault_calls(dev, DEV_OP_copy_d2h), dev_fault_calls(dev, DEV_OP_copy_h2d),
                     dev_fault_calls(dev, DEV_OP_map), dev_fault_calls(dev, DEV_OP_unmap),
                     dev_fault_calls(dev, DEV_OP_set_access)};
}

static calls_t calls_since(dev_device_t *dev, calls_t a)
{
    calls_t b = calls_now(dev);
    return (calls_t){b.d2h - a.d2h, b.h2d - a.h2d, b.map - a.map, b.unmap - a.unmap,
                     b.set_access - a.set_access};
}

/* ---- raw copies through the device layer ---------------------------------- */

typedef struct raw {
    dev_device_t *dev;
    size_t bytes, chunk, n;   /* n: blocks per region */
    dev_addr_t va;            /* 4 x bytes: out, in, and two for the remapped blocks */
    dev_addr_t remap_va;      /* where the remapped blocks are mapped now */
    dev_block_t *blocks;      /* 3n: n out, n in, n remapped */
    size_t created;
    size_t mapped[3];         /* blocks mapped of out, in, remapped */
    void *host_out, *host_in; /* each bytes, page-aligned, registered */
    bool out_registered, in_registered;
    dev_stream_t *s_out, *s_in;
} raw_t;

static void *host_buffer(size_t bytes)
{
    void *p = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED) {
        fprintf(stderr, "bench/swap: mmap of %zu bytes failed\n", bytes);
        exit(1);
    }
    memset(p, 0x5a, bytes); /* commit the pages before registering */
    return p;
}

/* Maps the n blocks of set k (0 out, 1 in, 2 remapped) at va, accessible. */
static void raw_map(raw_t *r, int k, dev_addr_t va)
{
    for (r->mapped[k] = 0; r->mapped[k] < r->n; r->mapped[k]++)
        bench_check(dev_map(r->dev, va + r->mapped[k] * r->chunk, r->blocks[k * r->n + r->mapped[k]]),
              "raw: dev_map");
    bench_check(dev_set_access(r->dev, va, r->bytes), "raw: dev_set_access");
}

/* Moves the remapped blocks to their other VA: unmap, map, set_access. */
static void raw_remap(raw_t *r)
{
    dev_addr_t to = r->remap_va == r->va + 2 * r->bytes ? r->va + 3 * r->bytes : r->va + 2 * r->bytes;
    bench_check(dev_unmap(r->dev, r->remap_va, r->bytes), "raw: dev_unmap");
    r->mapped[2] = 0;
    raw_map(r, 2, to);
    r->remap_va = to;
}

/* ns for one copy out, one copy in, or both at once, between the host
 * buffers and blocks that stay mapped. With remap, one direction, on the
 * remapped blocks and with what a swap must do besides copying: a copy in
 * first moves them to their other VA (as a fetch maps blocks that held
 * another chunk), a copy out then moves them (as an eviction unmaps what it
 * copied out, and the blocks are mapped for their next user). */
static uint64_t raw_time(raw_t *r, bool out, bool in, bool remap)
{
    uint64_t t0 = base_now_ns();
    if (in && remap)
        raw_remap(r);
    if (out)
        bench_check(dev_copy_d2h(r->dev, r->s_out, r->host_out, remap ? r->remap_va : r->va, r->bytes),
              "raw: copy_d2h");
    if (in)
        bench_check(dev_copy_h2d(r->dev, r->s_in, remap ? r->remap_va : r->va + r->bytes, r->host_in,
                           r->bytes),
              "raw: copy_h2d");
    if (in)
        bench_check(dev_stream_synchronize(r->dev, r->s_in), "raw: synchronize");
    if (out)
        bench_check(dev_stream_synchronize(r->dev, r->s_out), "raw: synchronize");
    if (out && remap)
        raw_remap(r);
    return base_now_ns() - t0;
}

static void raw_open(raw_t *r, dev_device_t *dev, size_t bytes, size_t chunk)
{
    *r = (raw_t){.dev = dev, .bytes = bytes, .chunk = chunk, .n = bytes / chunk};
    r->blocks = calloc(3 * r->n, sizeof *r->blocks);
    bench_check(dev_va_reserve(dev, 4 * bytes, &r->va), "raw: dev_va_reserve");
    for (; r->created < 3 * r->n; r->created++)
        bench_check(dev_block_create(dev, &r->blocks[r->created]), "raw: dev_block_create");
    raw_map(r, 0, r->va);
    raw_map(r, 1, r->va + bytes);
    r->remap_va = r->va + 2 * bytes;
    raw_map(r, 2, r->remap_va);
    r->host_out = host_buffer(bytes);
    r->host_in = host_buffer(bytes);
    bench_check(dev_host_register(dev, r->host_out, bytes), "raw: dev_host_register");
    r->out_registered = true;
    bench_check(dev_host_register(dev, r->host_in, bytes), "raw: dev_host_register");
    r->in_registered = true;
    bench_check(dev_stream_create(dev, DEV_PRIORITY_HIGH, &r->s_out), "raw: dev_stream_create");
    bench_check(dev_stream_create(dev, DEV_PRIORITY_HIGH, &r->s_in), "raw: dev_stream_create");
    raw_time(r, true, true, false); /* first touches, untimed */
}

static void raw_close(raw_t *r)
{
    dev_device_t *dev = r->dev;
    if (r->s_out != NULL) {
        dev_stream_synchronize(dev, r->s_out);
        dev_stream_destroy(dev, r->s_out);
    }
    if (r->s_in != NULL) {
        dev_stream_synchronize(dev, r->s_in);
        dev_stream_destroy(dev, r->s_in);
    }
    if (r->out_registered)
        dev_host_unregister(dev, r->host_out);
    if (r->in_registered)
        dev_host_unregister(dev, r->host_in);
    if (r->host_out != NULL)
        munmap(r->host_out, r->bytes);
    if (r->host_in != NULL)
        munmap(r->host_in, r->bytes);
    dev_addr_t at[3] = {r->va, r->va + r->bytes, r->remap_va};
    for (int k = 0; k < 3; k++)
        if (r->mapped[k] > 0)
            dev_unmap(dev, at[k], r->mapped[k] * r->chunk);
    for (size_t i = 0; i < r->created; i++)
        dev_block_release(dev, r->blocks[i]);
    if (r->va != 0)
        dev_va_free(dev, r->va, 4 * r->bytes);
    free(r->blocks);
    *r = (raw_t){0};
}

/* ---- one run size ---------------------------------------------------------- */

enum { D2H, BOTH, H2D, NDIR };
static const char *const dir_name[NDIR] = {"d2h", "both", "h2d"};

typedef struct samples {
    double lms[NDIR][MAX_REPS], raw[NDIR][MAX_REPS]; /* GB/s */
    double remap[NDIR][MAX_REPS];                    /* raw with remap: d2h, h2d */
    double lms_ms[NDIR][MAX_REPS], raw_ms[NDIR][MAX_REPS];
    double access_ms[NDIR][MAX_REPS]; /* how long the lms_access call blocked */
    double in_ms[MAX_REPS];           /* both: when the incoming run was in */
    double tail_ms[MAX_REPS];         /* d2h: from the access's return to the last chunk out */
    calls_t calls[NDIR];              /* of the last rep */
    uint64_t clean_drops;             /* h2d: chunks dropped in the last rep */
    uint64_t h2d_d2h_bytes;           /* h2d: bytes copied out meanwhile, most of any rep */
    int reps;
} samples_t;

static double gbps(size_t bytes, uint64_t ns) { return (double)bytes / (double)ns; }
static double ms(uint64_t ns) { return (double)ns / 1e6; }

/* The reclaim watermarks and device limit for a run of R chunks, in chunks. */
static void watermarks(size_t R, size_t *L, size_t *H)
{
    *L = R / 32 > 1 ? R / 32 : 1;
    *H = R / 16 > *L + 1 ? R / 16 : *L + 1;
}

/* The stats now, read by the watcher: an lms call on the bench's thread
 * would close its window, and with it start what the schedule moves ahead
 * of the next access before that access's timed span (Note [Where a span
 * starts]). Called only once everything is settled. */
static lms_stats_t stats_now(void)
{
    lms_stats_t s;
    watch_arm(0, UINT64_MAX);
    watch_wait(&s);
    return s;
}

/* Makes p resident and dirty: overwritten and filled, the other run evicted.
 * Returns with the calling thread's window open (p held). */
static void make_dirty(void *p, size_t run, uint64_t seed, dev_device_t *dev, dev_stream_t *ds)
{
    bench_check(lms_access(p, run, LMS_OVERWRITE, NULL), "lms_access(OVERWRITE)");
    if (info.has_kernels)
        bench_check(dev_fill(dev, ds, (dev_addr_t)(uintptr_t)p, run, seed), "dev_fill");
    bench_check(dev_stream_synchronize(dev, ds), "dev_stream_synchronize");
    watch_arm(0, run); /* until the reclaim thread has done its part */
    watch_wait(NULL);
}

static void verify(void *p, size_t run, uint64_t expected, dev_device_t *dev, dev_stream_t *ds)
{
    static uint64_t sum;
    if (!info.has_kernels)
        return;
    bench_check(dev_checksum(dev, ds, (dev_addr_t)(uintptr_t)p, run, &sum), "dev_checksum");
    bench_check(dev_stream_synchronize(dev, ds), "dev_stream_synchronize");
    if (sum != expected) {
        fprintf(stderr, "bench/swap: the run came back wrong: checksum %016llx, expected %016llx\n",
                (unsigned long long)sum, (unsigned long long)expected);
        exit(1);
    }
}

static void measure(size_t run, int reps, const throttle_t *th, samples_t *out)
{
    size_t chunk = info.granularity, R = run / chunk, L, H;
    watermarks(R, &L, &H);
    swap_config_t cfg;
    swap_config_from_options(&cfg);
    cfg.device.sim_h2d_gbps = th->h2d;
    cfg.device.sim_d2h_gbps = th->d2h;
    cfg.device.fault_injection = true; /* counts device calls; injects nothing */
    size_t sim_need = (4 * R + L + 8) * chunk; /* lms's blocks and the raw ones */
    if (cfg.device.sim_memory < sim_need)
        cfg.device.sim_memory = (sim_need + cfg.device.sim_granularity - 1) /
                                cfg.device.sim_granularity * cfg.device.sim_granularity;
    cfg.device_limit = (R + L) * chunk;
    cfg.reclaim_low = L * chunk;
    cfg.reclaim_high = H * chunk;
    /* two runs' host copies and the reclaim thread's headroom; the pool
     * registers pieces of min(limit, 256 MiB) and rounds the limit down to them */
    size_t host = (2 * R + 4 * H) * chunk, piece = 256 * BASE_MiB;
    cfg.host_limit = host <= piece ? host : (host + piece - 1) / piece * piece;
    cfg.preallocate = true;
    cfg.swap = true;
    bench_check(swap_init(&cfg), "swap_init");
    dev_device_t *dev = swap_device();
    bench_check(dev_fault_set(dev, &(dev_fault_plan_t){.op = DEV_OP_COUNT}), "dev_fault_set");
    dev_stream_t *ds = swap_stream(NULL);

    raw_t raw;
    raw_open(&raw, dev, run, chunk);
    const uint64_t seed_a = 0xa11ce + run, seed_b = 0xb0b + run;
    uint64_t expected = 0;
    if (info.has_kernels) {
        void *ref = host_buffer(run);
        dev_fill_ref(ref, run, seed_a);
        expected = dev_checksum_ref(ref, run);
        munmap(ref, run);
    }

    void *a, *b;
    bench_check(lms_malloc(&a, run, NULL), "lms_malloc");
    bench_check(lms_malloc(&b, run, NULL), "lms_malloc");
    make_dirty(a, run, seed_a, dev, ds);

    *out = (samples_t){.reps = reps};
    for (int rep = -1; rep < reps; rep++) { /* rep -1 warms up (the host pool grows) */
        int i = rep < 0 ? 0 : rep;
        uint64_t t;

        t = raw_time(&raw, true, false, false);
        out->raw[D2H][i] = gbps(run, t), out->raw_ms[D2H][i] = ms(t);
        t = raw_time(&raw, false, true, false);
        out->raw[H2D][i] = gbps(run, t), out->raw_ms[H2D][i] = ms(t);
        t = raw_time(&raw, true, true, false);
        out->raw[BOTH][i] = gbps(2 * run, t), out->raw_ms[BOTH][i] = ms(t);
        out->remap[H2D][i] = gbps(run, raw_time(&raw, false, true, true));
        out->remap[D2H][i] = gbps(run, raw_time(&raw, true, false, true));

        /* d2h: B overwritten, A (dirty) must go out */
        uint64_t d2h0 = stats_now().bytes_d2h;
        calls_t c0 = calls_now(dev);
        uint64_t t0 = base_now_ns();
        bench_check(lms_access(b, run, LMS_OVERWRITE, NULL), "lms_access(B, OVERWRITE)");
        uint64_t t_access = base_now_ns();
        watch_arm(d2h0 + run, run); /* the reclaim thread's part runs after the access */
        uint64_t t1 = watch_wait(NULL);
        out->calls[D2H] = calls_since(dev, c0);
        out->lms[D2H][i] = gbps(run, t1 - t0), out->lms_ms[D2H][i] = ms(t1 - t0);
        out->access_ms[D2H][i] = ms(t_access - t0);
        out->tail_ms[i] = ms(t1 - t_access);
        if (info.has_kernels)
            bench_check(dev_fill(dev, ds, (dev_addr_t)(uintptr_t)b, run, seed_b), "dev_fill");
        bench_check(dev_stream_synchronize(dev, ds), "dev_stream_synchronize");

        /* both: A (on the host) read back in, B (dirty) goes out */
        d2h0 = stats_now().bytes_d2h;
        c0 = calls_now(dev);
        t0 = base_now_ns();
        bench_check(lms_access(a, run, LMS_READ, NULL), "lms_access(A, READ)");
        t_access = base_now_ns();
        bench_check(dev_stream_synchronize(dev, ds), "dev_stream_synchronize");
        uint64_t t_in = base_now_ns();
        watch_arm(d2h0 + run, run); /* seen at once if B was out before A was in */
        t1 = watch_wait(NULL);
        t1 = t1 > t_in ? t1 : t_in;
        out->calls[BOTH] = calls_since(dev, c0);
        out->lms[BOTH][i] = gbps(2 * run, t1 - t0), out->lms_ms[BOTH][i] = ms(t1 - t0);
        out->access_ms[BOTH][i] = ms(t_access - t0);
        out->in_ms[i] = ms(t_in - t0);
        verify(a, run, expected, dev, ds); /* every rep: the schedule moves it differently */

        /* h2d: B (on the host) read back in; A is clean, dropped with no copy */
        lms_stats_t s0 = stats_now(), s1;
        c0 = calls_now(dev);
        t0 = base_now_ns();
        bench_check(lms_access(b, run, LMS_READ, NULL), "lms_access(B, READ)");
        t_access = base_now_ns();
        bench_check(dev_stream_synchronize(dev, ds), "dev_stream_synchronize");
        t1 = base_now_ns();
        watch_arm(0, run);
        watch_wait(&s1);
        out->calls[H2D] = calls_since(dev, c0);
        out->lms[H2D][i] = gbps(run, t1 - t0), out->lms_ms[H2D][i] = ms(t1 - t0);
        out->access_ms[H2D][i] = ms(t_access - t0);
        out->clean_drops = s1.clean_drops - s0.clean_drops;
        if (rep >= 0 && s1.bytes_d2h - s0.bytes_d2h > out->h2d_d2h_bytes)
            out->h2d_d2h_bytes = s1.bytes_d2h - s0.bytes_d2h;

        /* back to the start: A resident and dirty, B on the host */
        make_dirty(a, run, seed_a, dev, ds);
    }
    bench_check(lms_stats(&(lms_stats_t){0}), "lms_stats"); /* ends the window */
    raw_close(&raw);
    bench_check(lms_free(a, NULL), "lms_free");
    bench_check(lms_free(b, NULL), "lms_free");
    bench_check(lms_shutdown(), "lms_shutdown");
}

static void print_row(int dir, size_t run, const throttle_t *th, const samples_t *s)
{
    size_t chunk = info.granularity, R = run / chunk, L, H;
    watermarks(R, &L, &H);
    int n = s->reps;
    double g = median(s->lms[dir], n), rg = median(s->raw[dir], n);
    printf("{\"bench\":\"swap\",\"direction\":\"%s\",\"run_bytes\":%zu,\"gbps\":%.2f,"
           "\"raw_gbps\":%.2f,\"fraction_of_raw\":%.3f,\"gbps_min\":%.2f,\"gbps_max\":%.2f,"
           "\"raw_gbps_min\":%.2f,\"raw_gbps_max\":%.2f",
           dir_name[dir], run, g, rg, g / rg, min_of(s->lms[dir], n), max_of(s->lms[dir], n),
           min_of(s->raw[dir], n), max_of(s->raw[dir], n));
    if (dir != BOTH) {
        double mg = median(s->remap[dir], n);
        printf(",\"raw_remap_gbps\":%.2f,\"fraction_of_raw_remap\":%.3f", mg, g / mg);
    }
    printf(",\"lms_ms\":%.3f,\"raw_ms\":%.3f,\"access_ms\":%.3f,\"reps\":%d",
           median(s->lms_ms[dir], n), median(s->raw_ms[dir], n), median(s->access_ms[dir], n), n);
    if (dir == D2H)
        printf(",\"tail_ms\":%.3f", median(s->tail_ms, n));
    if (dir == BOTH)
        printf(",\"in_ms\":%.3f", median(s->in_ms, n));
    if (dir == H2D)
        printf(",\"clean_drops\":%llu,\"d2h_bytes\":%llu", (unsigned long long)s->clean_drops,
               (unsigned long long)s->h2d_d2h_bytes);
    const calls_t *c = &s->calls[dir];
    printf(",\"copies_d2h\":%llu,\"copies_h2d\":%llu,\"maps\":%llu,\"unmaps\":%llu,"
           "\"set_access\":%llu",
           (unsigned long long)c->d2h, (unsigned long long)c->h2d, (unsigned long long)c->map,
           (unsigned long long)c->unmap, (unsigned long long)c->set_access);
    const base_options_t *o = base_options();
    printf(",\"device_limit\":%zu,\"reclaim_low\":%zu,\"reclaim_high\":%zu,\"swap_piece\":%llu,"
           "\"policy\":\"%s\",\"throttle\":\"%s\"",
           (R + L) * chunk, L * chunk, H * chunk, (unsigned long long)o->swap_piece, o->policy,
           th->source);
    if (strcmp(info.backend, "sim") == 0)
        printf(",\"sim_h2d_gbps\":%g,\"sim_d2h_gbps\":%g,\"sim_vmm_us_per_mib\":%g", th->h2d,
               th->d2h, o->sim_vmm_us_per_mib);
    printf(",%s}\n", machine);
    fflush(stdout);
}

/* Reps per size: fewer for large runs, whose reps take long (on sim every
 * fetch and fill first-touches freshly mapped memory). */
static int reps_for(size_t run)
{
    if (reps_forced > 0)
        return reps_forced;
    if (quick)
        return 3;
    return run <= 16 * BASE_MiB ? 7 : run <= 64 * BASE_MiB ? 4 : 3;
}

static void sweep(const throttle_t *th, size_t max_run)
{
    printf("{\"bench\":\"swap\",\"case\":\"settings\",\"policy\":\"%s\",\"throttle\":\"%s\"",
           base_options()->policy, th->source);
    if (strcmp(info.backend, "sim") == 0)
        printf(",\"sim_h2d_gbps\":%g,\"sim_d2h_gbps\":%g", th->h2d, th->d2h);
    printf(",\"kernels\":%s,\"max_run_bytes\":%zu,%s}\n", info.has_kernels ? "true" : "false",
           max_run, machine);
    fflush(stdout);
    for (size_t run = MIN_RUN; run <= max_run; run *= 2) {
        if (run < info.granularity || run % info.granularity != 0 ||
            (only_run != 0 && run != only_run))
            continue;
        samples_t *s = malloc(sizeof *s);
        measure(run, reps_for(run), th, s);
        for (int dir = 0; dir < NDIR; dir++)
            print_row(dir, run, th, s);
        free(s);
    }
}

static void describe_machine(void)
{
    dev_config_t dc;
    dev_config_from_options(&dc);
    dev_device_t *dev;
    bench_check(dev_open(&dc, &dev), "dev_open");
    info = dev->info;
    static char backend[16];
    snprintf(backend, sizeof backend, "%s", dev->info.backend);
    info.backend = backend;
    dev_close(dev);
    char cpu[128];
    base_host_cpu(cpu, sizeof cpu);
    long cores = sysconf(_SC_NPROCESSORS_ONLN);
    snprintf(machine, sizeof machine,
             "\"backend\":\"%s\",\"device\":\"%s\",\"chunk\":%zu,\"host_cpu\":\"%s\","
             "\"host_cores\":%ld",
             info.backend, info.name, info.granularity, cpu, cores);
}

int main(int argc, char **argv)
{
    for (int i = 1; i < argc; i++) {
        uint64_t v;
        long n;
        char *end;
        if (strcmp(argv[i], "--quick") == 0) {
            quick = 1;
        } else if (strcmp(argv[i], "--link-bound") == 0) {
            link_bound = 1;
        } else if (strncmp(argv[i], "--run=", 6) == 0 && base_parse_size(argv[i] + 6, &v)) {
            only_run = v;
        } else if (strncmp(argv[i], "--reps=", 7) == 0 &&
                   (n = strtol(argv[i] + 7, &end, 10)) >= 1 && n <= MAX_REPS && *end == '\0' &&
                   end != argv[i] + 7) {
            reps_forced = (int)n;
        } else {
            fprintf(stderr, "usage: %s [--quick] [--reps=1..%d] [--link-bound] [--run=SIZE]\n",
                    argv[0], MAX_REPS);
            return 2;
        }
    }
    describe_machine();
    if (pthread_create(&watch.thread, NULL, watch_main, NULL) != 0) {
        fprintf(stderr, "bench/swap: cannot start the watcher thread\n");
        return 1;
    }
    if (strcmp(info.backend, "sim") == 0) {
        const base_options_t *o = base_options();
        bool env_h2d = getenv("LMS_SIM_H2D_GBPS") != NULL, env_d2h = getenv("LMS_SIM_D2H_GBPS") != NULL;
        throttle_t th = {env_h2d || env_d2h ? "env" : "default",
                         env_h2d ? o->sim_h2d_gbps : DEFAULT_GBPS,
                         env_d2h ? o->sim_d2h_gbps : DEFAULT_GBPS};
        sweep(&th, MAX_RUN);
        if (th.h2d != 0 || th.d2h != 0)
            sweep(&(throttle_t){"off", 0, 0}, SHORT_MAX_RUN);
        if (link_bound)
            sweep(&(throttle_t){"link-bound", LINK_BOUND_GBPS, LINK_BOUND_GBPS}, SHORT_MAX_RUN);
    } else {
        sweep(&(throttle_t){"none", 0, 0}, MAX_RUN);
    }
    pthread_mutex_lock(&watch.lock);
    watch.state = STOP;
    pthread_cond_broadcast(&watch.cond);
    pthread_mutex_unlock(&watch.lock);
    pthread_join(watch.thread, NULL);
    return 0;
}
