/*
 * tests/swap/stress.c — the swap stress (issue 4): threads, each with its own
 * streams, do random malloc / free / fill / checksum / access_many / pin over
 * 2x, 4x and 8x the device limit of a small sim device, and every byte is
 * checked against a host shadow. Any mismatch, any SIGSEGV (a kernel that
 * touched memory lms had not mapped), no progress for two minutes, or a
 * broken stats invariant fails the run. An access may find the device full
 * (other threads' open accesses and pins): that is counted, not a failure.
 * A plain program, not a Criterion suite, so that it also runs under
 * ThreadSanitizer (`make test-tsan`).
 *
 *   stress [--ops N] [--threads T] [--ratios 2,4,8] [--seed S] [--limit-mib M]
 *          [--loop PERCENT] [--marks 0|1] [--default-stream 0|1]
 *
 * Once allocations reach the ratio, --loop percent of the operations (10 by
 * default) read a thread's allocations whole, in turn: a loop, which repeats while the thread's allocations stay
 * the same, so that policy/ finds a schedule to follow and to lose again
 * (the stress runs under LMS_POLICY=schedule, the default, and lru). With
 * --marks 1 thread 0 also calls lms_mark_iteration every 256 operations.
 * With --default-stream 1 every thread works on the default stream (NULL),
 * as a framework's threads do (PyTorch's autograd threads share it): waits
 * on it cross threads (issue 24: a shared sync event made them fail).
 *
 * --ops is the total over all threads and ratios. The seed comes from --seed,
 * else $LMS_STRESS_SEED, else the clock, and is printed first: each thread's
 * sequence of operations is a function of it (the interleaving of threads is
 * not), so a failure is replayed with LMS_STRESS_SEED=<seed>.
 *
 * The shadow. Each allocation is cut into regions (the whole of a small one,
 * 64 KiB pieces of a larger one); a fill covers whole regions, so each region
 * holds dev_fill_ref(seed) for its own seed (a fill of several regions with
 * seed s gives region k the seed s + offset_k / 8), and the shadow keeps per
 * region two sums of its bytes b_i (the seed itself is not needed):
 *     s0 = sum (b_i + 1),  s1 = sum (b_i + 1) (2 A i + 1)    (mod 2^64)
 * The checksum of a range made of regions at offsets o_k (from the range's
 * start) is then sum s1_k + 2 A o_k s0_k: the composed image's checksum,
 * checked against dev_checksum_ref over a composed host image at startup.
 *
 * Ownership: an allocation belongs to the thread that made it, and its work
 * goes to one of the thread's streams at a time; moving it to the other
 * stream first synchronizes the old one (lms orders nothing between a
 * program's streams). Before lms_unpin the stream is synchronized too: lms
 * cannot know which streams used pinned memory. Small allocations of
 * different threads share chunks, so eviction crosses threads and streams.
 */
#define _GNU_SOURCE
#include <inttypes.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "base/base.h"
#include "device/kernels/kernels.h"
#include "swap/swap.h"

#define REGION (64 * 1024) /* bytes; a multiple of 8 */
#define MAX_ALLOCS 48      /* live allocations per thread */
#define MAX_CHECKS 160     /* checksums in flight per thread */
#define STREAMS 2          /* per thread */
#define WATCHDOG_S 120     /* no operation finished for this long: a hang */

/* ---- the run ---------------------------------------------------------------- */

static struct {
    uint64_t seed;
    long ops;
    int threads;
    int marks, loop;
    int default_stream; /* every thread on the default stream */
    int ratios[8];
    int nratios;
    size_t limit;      /* the device limit */
    size_t chunk;
    int ratio;         /* of the phase running */
    dev_device_t *dev;
    atomic_long progress;   /* operations done, all threads */
    atomic_long mismatches; /* wrong checksums */
    atomic_long errors;     /* calls that failed when they must not */
    atomic_long noted;      /* out-of-memory messages printed */
    uint64_t peak_allocated; /* allocated_bytes seen by thread 0, this phase */
    _Atomic uint64_t allocated; /* allocated_bytes as last sampled by any thread */
    atomic_int stop;        /* a failure: threads finish early */
    char fatal_msg[256];    /* written by the signal handler */
} run = {.ops = 20000, .threads = 4, .ratios = {2, 4, 8}, .nratios = 3, .limit = 16 * BASE_MiB,
          .loop = 10};

static pthread_mutex_t print_lock = PTHREAD_MUTEX_INITIALIZER;

static void report(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void report(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    pthread_mutex_lock(&print_lock);
    fprintf(stderr, "stress: ");
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
    pthread_mutex_unlock(&print_lock);
    va_end(ap);
}

/* A failure: printed (the first few of each kind), counted, and the run ends
 * early but cleanly. */
#define FAIL(counter, ...)                                                                  \
    do {                                                                                    \
        long n_ = atomic_fetch_add(&run.counter, 1);                                        \
        if (n_ < 10)                                                                        \
            report(__VA_ARGS__);                                                            \
        atomic_store(&run.stop, 1);                                                         \
    } while (0)

static void on_fatal(int sig)
{
    ssize_t r = write(2, run.fatal_msg, strlen(run.fatal_msg));
    (void)r;
    signal(sig, SIG_DFL); /* the access faults again, or the abort is redone */
    if (sig != SIGSEGV && sig != SIGBUS)
        raise(sig);
}

static void *watchdog(void *arg)
{
    (void)arg;
    long last = -1;
    int idle = 0;
    for (;;) {
        sleep(1);
        long now = atomic_load(&run.progress);
        idle = now == last ? idle + 1 : 0;
        last = now;
        if (idle >= WATCHDOG_S) {
            report("no operation finished for %d s at ratio %dx: a hang (seed %" PRIu64 ")",
                   WATCHDOG_S, run.ratio, run.seed);
            abort();
        }
    }
    return NULL;
}

/* ---- random numbers ---------------------------------------------------------- */

static uint64_t splitmix(uint64_t *s)
{
    uint64_t z = (*s += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

static uint64_t below(uint64_t *s, uint64_t n) { return splitmix(s) % n; }

/* ---- the shadow ---------------------------------------------------------------- */

typedef struct region {
    uint64_t s0, s1; /* sums of its bytes, see the top of the file */
    bool known;      /* filled since the allocation was made */
} region_t;

/* The sums of n bytes of dev_fill_ref(seed), computed word by word: with
 * v_k = byte k of word j plus 1, word j adds sum v_k to s0 and
 * sum v_k (2 A (8j + k) + 1) = (2 A 8j + 1) sum v_k + 2 A sum k v_k to s1. */
static void fill_sums(size_t n, uint64_t seed, uint64_t *s0, uint64_t *s1)
{
    uint64_t a = 0, b = 0;
    for (size_t j = 0; j * 8 < n; j++) {
        uint64_t w = dev_mix64(seed + j), sum = 0, moment = 0;
        size_t bytes = n - j * 8 < 8 ? n - j * 8 : 8;
        for (size_t k = 0; k < bytes; k++) {
            uint64_t v = (w >> (8 * k) & 0xff) + 1;
            sum += v;
            moment += k * v;
        }
        a += sum;
        b += (2 * DEV_CHECKSUM_A * 8 * j + 1) * sum + 2 * DEV_CHECKSUM_A * moment;
    }
    *s0 = a;
    *s1 = b;
}

typedef struct allocation {
    char *p;
    size_t size, nreg;
    size_t usable; /* its size class, or its chunks when large */
    region_t *reg;
    int stream; /* the thread's stream its work goes to */
    int pins;
} allocation_t;

static size_t region_len(const allocation_t *a, size_t k)
{
    size_t off = k * REGION;
    return a->size - off < REGION ? a->size - off : REGION;
}

/* The expected checksum of regions [r0, r1), or false if one is unknown. */
static bool expected(const allocation_t *a, size_t r0, size_t r1, uint64_t *out)
{
    uint64_t sum = 0;
    for (size_t k = r0; k < r1; k++) {
        if (!a->reg[k].known)
            return false;
        sum += a->reg[k].s1 + 2 * DEV_CHECKSUM_A * (uint64_t)((k - r0) * REGION) * a->reg[k].s0;
    }
    *out = sum;
    return true;
}

static void shadow_fill(allocation_t *a, size_t r0, size_t r1, uint64_t seed)
{
    for (size_t k = r0; k < r1; k++) {
        region_t *g = &a->reg[k];
        fill_sums(region_len(a, k), seed + (k - r0) * REGION / 8, &g->s0, &g->s1);
        g->known = true;
    }
}

static bool self_test(void)
{
    allocation_t a = {.size = 3 * REGION + 1234};
    a.nreg = 4;
    region_t reg[4];
    a.reg = reg;
    unsigned char *image = malloc(a.size);
    shadow_fill(&a, 0, 4, 77);
    dev_fill_ref(image, a.size, 77);
    shadow_fill(&a, 1, 2, 5);
    dev_fill_ref(image + REGION, REGION, 5);
    shadow_fill(&a, 2, 4, 9);
    dev_fill_ref(image + 2 * REGION, a.size - 2 * REGION, 9);
    bool ok = true;
    for (size_t r0 = 0; r0 < 4; r0++)
        for (size_t r1 = r0 + 1; r1 <= 4; r1++) {
            uint64_t want = 0;
            size_t end = r1 == 4 ? a.size : r1 * REGION;
            ok &= expected(&a, r0, r1, &want) &&
                  want == dev_checksum_ref(image + r0 * REGION, end - r0 * REGION);
        }
    free(image);
    return ok;
}

/* ---- a thread ---------------------------------------------------------------- */

typedef struct check {
    uint64_t got, want;
    bool compare; /* every region was known */
    int stream;
    const char *what;
    void *p;
    size_t off, n;
    long op;
} check_t;

typedef struct worker {
    int id;
    uint64_t rng;
    long ops, op;
    lms_stream_t s[STREAMS];
    dev_stream_t *ds[STREAMS];
    allocation_t a[MAX_ALLOCS];
    int n;
    check_t checks[MAX_CHECKS];
    int nchecks;
    int pinned; /* index of the allocation this thread has pinned, or -1 */
    long count[10];
    long malloc_ooms, access_ooms;
    unsigned loop; /* the next allocation the loop reads */
} worker_t;

enum { OP_MALLOC, OP_FREE, OP_FILL, OP_CHECK, OP_MANY, OP_PIN, OP_UNPIN, OP_PINNED_USE };
static const char *op_names[] = {"malloc", "free", "fill", "check", "access_many",
                                 "pin", "unpin", "pinned use"};

static dev_addr_t addr(const void *p) { return (dev_addr_t)(uintptr_t)p; }

/* The first few out-of-memory messages are shown (they are allowed). */
static void note(const char *call)
{
    if (atomic_fetch_add(&run.noted, 1) < 6)
        report("note: %s: out of memory: %s", call, lms_last_error());
}

/* A call that must succeed (or, for an access, may find the device full). */
static bool ok(worker_t *w, lms_status_t st, const char *call)
{
    if (st == LMS_OK)
        return true;
    FAIL(errors, "thread %d op %ld: %s -> %s: %s (seed %" PRIu64 ")", w->id, w->op, call,
         lms_status_str(st), lms_last_error(), run.seed);
    return false;
}

static bool access_ok(worker_t *w, lms_status_t st, const char *call)
{
    if (st == LMS_ERR_OUT_OF_MEMORY) {
        w->access_ooms++; /* other threads' windows and pins may fill the device */
        note(call);
        return false;
    }
    return ok(w, st, call);
}

static void verify(worker_t *w)
{
    for (int i = 0; i < w->nchecks; i++) {
        check_t *c = &w->checks[i];
        if (c->compare && c->got != c->want)
            FAIL(mismatches,
                 "MISMATCH thread %d op %ld (%s): [%p +%zu, %zu bytes) read %016" PRIx64
                 ", expected %016" PRIx64 " (ratio %dx, seed %" PRIu64 ")",
                 w->id, c->op, c->what, c->p, c->off, c->n, c->got, c->want, run.ratio, run.seed);
    }
    w->nchecks = 0;
}

static void sync_all(worker_t *w)
{
    for (int s = 0; s < STREAMS; s++)
        ok(w, lms_stream_synchronize(w->s[s]), "lms_stream_synchronize");
    verify(w);
}

/* Moves a's work to stream s: what was queued for it on the old one first
 * finishes. */
static void use_stream(worker_t *w, allocation_t *a, int s)
{
    if (a->stream != s) {
        ok(w, lms_stream_synchronize(w->s[a->stream]), "lms_stream_synchronize");
        a->stream = s;
    }
}

/* A range of regions of a: the whole allocation if it is at most 1 MiB (or
 * at times a larger one), else up to 16 regions. */
static void pick_range(worker_t *w, const allocation_t *a, size_t *r0, size_t *r1)
{
    if (a->nreg == 1 || (below(&w->rng, 4) == 0 && (a->nreg <= 16 || below(&w->rng, 4) == 0))) {
        *r0 = 0;
        *r1 = a->nreg;
        return;
    }
    *r0 = below(&w->rng, a->nreg);
    size_t max = a->nreg - *r0 < 16 ? a->nreg - *r0 : 16;
    *r1 = *r0 + 1 + below(&w->rng, max);
}

static size_t range_off(size_t r0) { return r0 * REGION; }
static size_t range_len(const allocation_t *a, size_t r0, size_t r1)
{
    return (r1 == a->nreg ? a->size : r1 * REGION) - r0 * REGION;
}

/* Enqueues a fill of regions [r0, r1) on the allocation's stream; the range
 * is resident (accessed or pinned). */
static void enqueue_fill(worker_t *w, allocation_t *a, size_t r0, size_t r1)
{
    uint64_t seed = splitmix(&w->rng);
    size_t off = range_off(r0), n = range_len(a, r0, r1);
    if (ok(w, dev_fill(run.dev, w->ds[a->stream], addr(a->p + off), n, seed), "dev_fill"))
        shadow_fill(a, r0, r1, seed);
}

/* Enqueues a checksum of regions [r0, r1) into a slot kept until the next
 * flush (the kernel writes it when it runs); compared then if every region
 * of the range is known. */
static void enqueue_check(worker_t *w, allocation_t *a, size_t r0, size_t r1, const char *what)
{
    check_t *c = &w->checks[w->nchecks];
    size_t off = range_off(r0), n = range_len(a, r0, r1);
    *c = (check_t){.stream = a->stream, .what = what, .p = a->p, .off = off, .n = n, .op = w->op};
    c->compare = expected(a, r0, r1, &c->want);
    if (ok(w, dev_checksum(run.dev, w->ds[a->stream], addr(a->p + off), n, &c->got),
           "dev_checksum"))
        w->nchecks++;
}

static void room_for_checks(worker_t *w, int n)
{
    if (w->nchecks + n > MAX_CHECKS)
        sync_all(w);
}

/* Sizes from a few small and medium classes (so that slabs fill rather than
 * each class holding a chunk of its own), odd ones among them, and large
 * runs of any length. */
static size_t pick_size(worker_t *w)
{
    static const size_t small[] = {1, 200, 1000, 1001, 4096, 9000, 16000, 40000};
    static const size_t medium[] = {100000, 250001, 700000};
    uint64_t r = below(&w->rng, 100);
    if (r < 55)
        return small[below(&w->rng, sizeof small / sizeof *small)];
    if (r < 85)
        return medium[below(&w->rng, sizeof medium / sizeof *medium)];
    return run.chunk / 2 + 1 + below(&w->rng, 3 * run.chunk);
}

static void op_malloc(worker_t *w)
{
    if (w->n == MAX_ALLOCS)
        return;
    w->count[OP_MALLOC]++;
    size_t size = pick_size(w);
    int s = (int)below(&w->rng, STREAMS);
    void *p = NULL;
    lms_status_t st = lms_malloc(&p, size, w->s[s]);
    if (st == LMS_ERR_OUT_OF_MEMORY) {
        w->malloc_ooms++;
        note("lms_malloc");
        if (p != NULL)
            FAIL(errors, "thread %d op %ld: a failed lms_malloc set the pointer", w->id, w->op);
        return;
    }
    if (!ok(w, st, "lms_malloc"))
        return;
    allocation_t *a = &w->a[w->n++];
    *a = (allocation_t){.p = p, .size = size, .stream = s};
    a->nreg = (size + REGION - 1) / REGION;
    a->reg = calloc(a->nreg, sizeof *a->reg);
    void *base;
    ok(w, lms_allocation_of(p, &base, &a->usable), "lms_allocation_of");
    /* usually written whole at once; else its regions stay unknown until filled */
    if (below(&w->rng, 10) < 8) {
        lms_access_mode_t mode = below(&w->rng, 4) ? LMS_OVERWRITE : LMS_WRITE;
        if (access_ok(w, lms_access(p, size, mode, w->s[s]), "lms_access (new)"))
            enqueue_fill(w, a, 0, a->nreg);
    }
}

/* Checks every known byte of a (one access, a checksum per run of known
 * regions), then frees it on its stream. */
static void op_free(worker_t *w, int i)
{
    allocation_t *a = &w->a[i];
    w->count[OP_FREE]++;
    room_for_checks(w, (int)(a->nreg + 1) / 2);
    if (access_ok(w, lms_access(a->p, a->size, LMS_READ, w->s[a->stream]), "lms_access (free)")) {
        for (size_t r0 = 0; r0 < a->nreg;) {
            if (!a->reg[r0].known) {
                r0++;
                continue;
            }
            size_t r1 = r0;
            while (r1 < a->nreg && a->reg[r1].known)
                r1++;
            enqueue_check(w, a, r0, r1, "before free");
            r0 = r1;
        }
    }
    ok(w, lms_free(a->p, w->s[a->stream]), "lms_free");
    free(a->reg);
    *a = w->a[--w->n];
    if (w->pinned == w->n)
        w->pinned = i; /* the pinned one moved into slot i */
}

static void op_fill_or_check(worker_t *w, int i, bool fill)
{
    allocation_t *a = &w->a[i];
    w->count[fill ? OP_FILL : OP_CHECK]++;
    room_for_checks(w, 1);
    use_stream(w, a, (int)below(&w->rng, 4) == 0 ? (a->stream + 1) % STREAMS : a->stream);
    size_t r0, r1;
    pick_range(w, a, &r0, &r1);
    lms_access_mode_t mode = !fill ? LMS_READ : below(&w->rng, 2) ? LMS_OVERWRITE : LMS_WRITE;
    if (!access_ok(w, lms_access(a->p + range_off(r0), range_len(a, r0, r1), mode,
                                 w->s[a->stream]),
                   fill ? "lms_access (fill)" : "lms_access (check)"))
        return;
    if (fill)
        enqueue_fill(w, a, r0, r1);
    else
        enqueue_check(w, a, r0, r1, "check");
}

/* The loop: the next allocation, read whole on its stream. */
static void op_loop(worker_t *w)
{
    allocation_t *a = &w->a[w->loop++ % (unsigned)w->n];
    w->count[OP_CHECK]++;
    room_for_checks(w, 1);
    if (access_ok(w, lms_access(a->p, a->size, LMS_READ, w->s[a->stream]), "lms_access (loop)"))
        enqueue_check(w, a, 0, a->nreg, "loop");
}

/* Up to four allocations' ranges of at most 256 KiB in one lms_access_many,
 * then a kernel on each: read or written. */
static void op_many(worker_t *w)
{
    if (w->n < 2)
        return;
    w->count[OP_MANY]++;
    room_for_checks(w, 4);
    int k = 2 + (int)below(&w->rng, 3), idx[4], n = 0;
    for (int t = 0; t < k; t++) {
        int i = (int)below(&w->rng, (uint64_t)w->n);
        bool dup = false;
        for (int u = 0; u < n; u++)
            dup |= idx[u] == i;
        if (!dup)
            idx[n++] = i;
    }
    int s = (int)below(&w->rng, STREAMS);
    lms_range_t r[4];
    size_t r0[4], r1[4];
    bool fill[4];
    for (int t = 0; t < n; t++) {
        allocation_t *a = &w->a[idx[t]];
        use_stream(w, a, s);
        r0[t] = below(&w->rng, a->nreg);
        r1[t] = r0[t] + 1 + below(&w->rng, a->nreg - r0[t] < 4 ? a->nreg - r0[t] : 4);
        fill[t] = below(&w->rng, 2);
        r[t] = (lms_range_t){a->p + range_off(r0[t]), range_len(a, r0[t], r1[t]),
                             fill[t] ? (below(&w->rng, 2) ? LMS_OVERWRITE : LMS_WRITE)
                                     : LMS_READ};
    }
    if (!access_ok(w, lms_access_many(r, (size_t)n, w->s[s]), "lms_access_many"))
        return;
    for (int t = 0; t < n; t++) {
        if (fill[t])
            enqueue_fill(w, &w->a[idx[t]], r0[t], r1[t]);
        else
            enqueue_check(w, &w->a[idx[t]], r0[t], r1[t], "access_many");
    }
}

/* Pins a small or medium allocation (at most one per thread, so that pins
 * never fill the device), uses it with no lms_access, and unpins it later. */
static void op_pin(worker_t *w)
{
    if (w->pinned >= 0) {
        allocation_t *a = &w->a[w->pinned];
        if (below(&w->rng, 3)) { /* use it, on either stream, with no access */
            w->count[OP_PINNED_USE]++;
            room_for_checks(w, 1);
            use_stream(w, a, (int)below(&w->rng, STREAMS));
            if (below(&w->rng, 2))
                enqueue_fill(w, a, 0, a->nreg);
            else
                enqueue_check(w, a, 0, a->nreg, "pinned");
            return;
        }
        w->count[OP_UNPIN]++;
        /* lms cannot know which streams used pinned memory: the work on it
         * finishes before it may move */
        ok(w, lms_stream_synchronize(w->s[a->stream]), "lms_stream_synchronize");
        if (ok(w, lms_unpin(a->p, a->size), "lms_unpin") && --a->pins == 0)
            w->pinned = -1;
        return;
    }
    if (w->n == 0)
        return;
    int i = (int)below(&w->rng, (uint64_t)w->n);
    allocation_t *a = &w->a[i];
    if (a->size > run.chunk / 2)
        return;
    w->count[OP_PIN]++;
    lms_status_t st = lms_pin(a->p, a->size);
    if (st == LMS_ERR_OUT_OF_MEMORY) {
        w->access_ooms++;
        note("lms_pin");
        return;
    }
    if (ok(w, st, "lms_pin")) {
        a->pins++;
        w->pinned = i;
    }
}

static void check_stats(worker_t *w, const char *when)
{
    lms_stats_t st;
    if (!ok(w, lms_stats(&st), "lms_stats"))
        return;
    uint64_t c = run.chunk;
    if (w->id == 0 && st.allocated_bytes > run.peak_allocated)
        run.peak_allocated = st.allocated_bytes;
    if (st.resident_bytes > st.device_limit || st.peak_resident_bytes > st.device_limit ||
        st.pinned_bytes > st.resident_bytes || st.bytes_h2d != st.fetches * c ||
        st.bytes_d2h != st.evictions * c || st.host_bytes > st.host_limit ||
        st.allocated_bytes > st.device_limit + st.host_limit)
        FAIL(errors,
             "thread %d %s: stats inconsistent: resident %" PRIu64 " peak %" PRIu64
             " pinned %" PRIu64 " limit %" PRIu64 "; h2d %" PRIu64 " for %" PRIu64
             " fetches; d2h %" PRIu64 " for %" PRIu64 " evictions; host %" PRIu64
             " of %" PRIu64 "; allocated %" PRIu64,
             w->id, when, st.resident_bytes, st.peak_resident_bytes, st.pinned_bytes,
             st.device_limit, st.bytes_h2d, st.fetches, st.bytes_d2h, st.evictions,
             st.host_bytes, st.host_limit, st.allocated_bytes);
}

static void *work(void *arg)
{
    worker_t *w = arg;
    w->pinned = -1;
    for (int s = 0; s < STREAMS; s++) {
        if (!run.default_stream && !ok(w, lms_stream_create(&w->s[s]), "lms_stream_create"))
            return NULL;
        w->ds[s] = swap_stream(w->s[s]); /* NULL's is the default stream's */
    }
    for (w->op = 0; w->op < w->ops && !atomic_load(&run.stop); w->op++) {
        uint64_t r = below(&w->rng, 100);
        if (w->op % 4 == 0) {
            lms_stats_t st;
            if (ok(w, lms_stats(&st), "lms_stats"))
                atomic_store(&run.allocated, st.allocated_bytes);
        }
        /* the room allocations take (slabs included) stays near ratio x the limit */
        bool want_more = atomic_load(&run.allocated) < (uint64_t)run.ratio * run.limit;
        if (w->n > 0 && !want_more && below(&w->rng, 100) < (uint64_t)run.loop)
            op_loop(w); /* once the allocations are there */
        else if (w->n == 0 || (want_more && r < 20))
            op_malloc(w);
        else if (r < (want_more ? 24 : 32)) {
            int i = (int)below(&w->rng, (uint64_t)w->n);
            if (i == w->pinned)
                op_pin(w); /* uses or unpins it: a pinned allocation is not freed */
            else
                op_free(w, i);
        }
        else if (r < 55)
            op_fill_or_check(w, (int)below(&w->rng, (uint64_t)w->n), true);
        else if (r < 82)
            op_fill_or_check(w, (int)below(&w->rng, (uint64_t)w->n), false);
        else if (r < 92)
            op_many(w);
        else
            op_pin(w);
        if (w->op % 64 == 63)
            sync_all(w);
        if (run.marks && w->id == 0 && w->op % 256 == 255)
            ok(w, lms_mark_iteration(), "lms_mark_iteration");
        if (w->id == 0 && w->op % 97 == 0)
            check_stats(w, "during the run");
        atomic_fetch_add(&run.progress, 1);
    }
    /* the end: unpin, check every known byte, free everything */
    if (w->pinned >= 0) {
        allocation_t *a = &w->a[w->pinned];
        ok(w, lms_stream_synchronize(w->s[a->stream]), "lms_stream_synchronize");
        while (a->pins > 0 && ok(w, lms_unpin(a->p, a->size), "lms_unpin"))
            a->pins--;
        w->pinned = -1;
    }
    while (w->n > 0 && !atomic_load(&run.stop))
        op_free(w, w->n - 1);
    sync_all(w);
    while (w->n > 0) { /* after a failure elsewhere: freed unchecked */
        allocation_t *a = &w->a[--w->n];
        lms_free(a->p, w->s[a->stream]);
        free(a->reg);
    }
    for (int s = 0; s < STREAMS && !run.default_stream; s++)
        ok(w, lms_stream_destroy(w->s[s]), "lms_stream_destroy");
    return NULL;
}

/* ---- phases ------------------------------------------------------------------ */

/* How many one-chunk allocations fit (allocated, then freed). */
static size_t room_chunks(void)
{
    size_t cap = 4096, n = 0;
    void **all = calloc(cap, sizeof *all);
    while (n < cap && lms_malloc(&all[n], run.chunk, NULL) == LMS_OK)
        n++;
    for (size_t i = 0; i < n; i++)
        lms_free(all[i], NULL);
    free(all);
    return n;
}

static bool phase(int ratio, long ops)
{
    swap_config_t cfg;
    swap_config_from_options(&cfg);
    cfg.device.sim_memory = run.limit < 16 * BASE_MiB ? 64 * BASE_MiB : 4 * run.limit;
    cfg.device.sim_granularity = 2 * BASE_MiB;
    cfg.device_limit = run.limit;
    /* the room for allocations is (ratio + 1) x the limit, less the reclaim
     * watermark (lms.h); the threads keep them near ratio x the limit */
    cfg.host_limit = (size_t)ratio * run.limit;
    lms_status_t st = swap_init(&cfg);
    if (st != LMS_OK) {
        report("swap_init: %s: %s", lms_status_str(st), lms_last_error());
        return false;
    }
    run.dev = swap_device();
    run.ratio = ratio;
    run.peak_allocated = 0;
    atomic_store(&run.allocated, 0);
    swap_layout_t layout;
    swap_layout(&layout);
    run.chunk = layout.chunk_size;
    if (!run.dev->info.has_kernels) {
        report("SKIP: the %s backend has no test kernels", run.dev->info.backend);
        lms_shutdown();
        exit(77);
    }
    size_t room = room_chunks(); /* fresh: what allocations may occupy */
    int t = run.threads;
    worker_t *w = calloc((size_t)t, sizeof *w);
    pthread_t *tid = calloc((size_t)t, sizeof *tid);
    uint64_t t0 = base_now_ns();
    for (int i = 0; i < t; i++) {
        w[i].id = i;
        w[i].rng = run.seed ^ ((uint64_t)ratio << 56) ^ ((uint64_t)i * 0x9e3779b97f4a7c15ull);
        w[i].ops = ops / t;
        pthread_create(&tid[i], NULL, work, &w[i]);
    }
    long count[10] = {0}, malloc_ooms = 0, access_ooms = 0;
    for (int i = 0; i < t; i++) {
        pthread_join(tid[i], NULL);
        for (int k = 0; k < 10; k++)
            count[k] += w[i].count[k];
        malloc_ooms += w[i].malloc_ooms;
        access_ooms += w[i].access_ooms;
    }
    double secs = (double)(base_now_ns() - t0) / 1e9;
    worker_t main_w = {.id = -1};
    check_stats(&main_w, "at the end");
    lms_stats_t s = {0};
    lms_stats(&s);
    if (s.pinned_bytes != 0)
        FAIL(errors, "%dx: everything was unpinned, yet %" PRIu64 " bytes are pinned", ratio,
             s.pinned_bytes);
    /* everything was freed: the whole room can be allocated again (alloc/
     * keeps an empty slab per class, counted in allocated_bytes, until then) */
    if (!atomic_load(&run.stop)) {
        size_t got = room_chunks();
        if (got != room)
            FAIL(errors, "%dx: after freeing everything, %zu of the %zu chunks of room could be "
                         "allocated: %s", ratio, got, room, lms_last_error());
    }
    char line[512];
    int len = snprintf(line, sizeof line, "%dx: %ld ops in %.1f s:", ratio, ops, secs);
    for (int k = 0; k <= OP_PINNED_USE; k++)
        len += snprintf(line + len, sizeof line - (size_t)len, " %s %ld", op_names[k], count[k]);
    report("%s", line);
    report("%dx: allocations reached %.1fx the device limit; %" PRIu64 " fetches, %" PRIu64
           " evictions, %" PRIu64 " clean drops, %" PRIu64 " prefetch hits, peak resident %" PRIu64
           " MiB of %zu; %ld mallocs and %ld accesses found no room",
           ratio, (double)run.peak_allocated / (double)run.limit, s.fetches, s.evictions,
           s.clean_drops, s.prefetch_hits, s.peak_resident_bytes / BASE_MiB,
           run.limit / BASE_MiB, malloc_ooms, access_ooms);
    free(w);
    free(tid);
    st = lms_shutdown();
    if (st != LMS_OK)
        FAIL(errors, "lms_shutdown: %s", lms_last_error());
    return !atomic_load(&run.stop);
}

static void usage(void)
{
    fprintf(stderr, "usage: stress [--ops N] [--threads T] [--ratios 2,4,8] [--seed S] "
                    "[--limit-mib M] [--loop PERCENT] [--marks 0|1] "
                    "[--default-stream 0|1]\n");
    exit(2);
}

int main(int argc, char **argv)
{
    const char *env = getenv("LMS_STRESS_SEED");
    bool seeded = false;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (v == NULL)
            usage();
        if (strcmp(a, "--ops") == 0)
            run.ops = atol(v);
        else if (strcmp(a, "--threads") == 0)
            run.threads = atoi(v);
        else if (strcmp(a, "--seed") == 0)
            run.seed = strtoull(v, NULL, 0), seeded = true;
        else if (strcmp(a, "--loop") == 0)
            run.loop = atoi(v);
        else if (strcmp(a, "--marks") == 0)
            run.marks = atoi(v);
        else if (strcmp(a, "--default-stream") == 0)
            run.default_stream = atoi(v);
        else if (strcmp(a, "--limit-mib") == 0)
            run.limit = (size_t)atol(v) * BASE_MiB;
        else if (strcmp(a, "--ratios") == 0) {
            run.nratios = 0;
            for (char *p = (char *)v; *p && run.nratios < 8; p += *p == ',') {
                run.ratios[run.nratios++] = (int)strtol(p, &p, 10);
                if (*p != ',' && *p != '\0')
                    usage();
            }
        } else
            usage();
        i++;
    }
    if (run.ops <= 0 || run.threads <= 0 || run.threads > 64 || run.nratios == 0)
        usage();
    if (!seeded)
        run.seed = env && *env ? strtoull(env, NULL, 0)
                               : (uint64_t)time(NULL) ^ ((uint64_t)getpid() << 32);
    printf("stress: seed %" PRIu64 " (replay: LMS_STRESS_SEED=%" PRIu64 "), %ld ops, %d threads\n",
           run.seed, run.seed, run.ops, run.threads);
    fflush(stdout);
    snprintf(run.fatal_msg, sizeof run.fatal_msg,
             "stress: fatal signal (a kernel touched memory lms had not made resident?); "
             "replay with LMS_STRESS_SEED=%" PRIu64 "\n", run.seed);
    signal(SIGSEGV, on_fatal);
    signal(SIGBUS, on_fatal);
    signal(SIGABRT, on_fatal);
    if (!self_test()) {
        report("the shadow's composed checksum disagrees with dev_checksum_ref");
        return 1;
    }
    pthread_t dog;
    pthread_create(&dog, NULL, watchdog, NULL);
    pthread_detach(dog);
    for (int k = 0; k < run.nratios && !atomic_load(&run.stop); k++)
        phase(run.ratios[k], run.ops / run.nratios);
    long bad = atomic_load(&run.mismatches), err = atomic_load(&run.errors);
    if (bad || err) {
        report("FAILED: %ld mismatches, %ld errors (replay: LMS_STRESS_SEED=%" PRIu64 ")", bad,
               err, run.seed);
        return 1;
    }
    report("passed: zero mismatches");
    return 0;
}
