/*
 * bench/remap — what it costs to move a chunk's backing to another address,
 * as a swap does (unmap it, map its blocks, set access), for chunks of 1 to 32
 * blocks, and whether doing so stalls a kernel that runs meanwhile on another
 * stream (issue 4: the input for the default chunk size). Prints JSON lines on
 * stdout, each with "bench":"remap" and the machine it ran on:
 *
 *   build/bench/remap [--quick]
 *
 *   {"bench":"remap","case":"idle|busy","chunk_bytes":N,"blocks":B,
 *    "remaps":R,"remap_us":X,"remap_us_min":..,"remap_us_max":..,
 *    "unmap_us":..,"map_us":..,"set_access_us":..,"us_per_mib":..,...}
 *
 * One remap, through the device layer (device.h) as lms's swap path calls it:
 * dev_unmap of the chunk's whole range (one call), dev_map of each of its B
 * blocks at the other of two addresses (B calls), dev_set_access of the new
 * range (one call). The blocks go back and forth between the two addresses.
 * Each phase is timed with the monotonic clock; the _us fields are medians
 * over the remaps (min and max of the whole remap beside them).
 *
 * idle: remaps back to back, the device otherwise idle.
 * busy: the same remaps, issued for as long as a chain of axpy kernels runs
 *   on a stream of its own over memory in the same reservation (mapped once,
 *   never touched by the remaps). Adds "kernel_ms_alone" (the chain with
 *   nothing beside it), "kernel_ms_busy" (with the remaps), their ratio
 *   "kernel_slowdown", and "kernel_launches". Both chain times run from the
 *   first launch until an event recorded after the last is seen done, polled
 *   between remaps (busy) or in a loop (alone); medians of REPS chains, the
 *   alone ones run just before the busy ones of each row.
 *   A remap that waits for the kernels shows as a busy remap_us_max near the
 *   chain's time; one that slows the kernels shows as kernel_slowdown > 1.
 *
 * parallel: {"case":"parallel","threads":T,"chunk_bytes":G,"remaps":R,
 *   "wall_ms":..,"gbps":..,"speedup":..}: T threads (1, 2, 4, 8) each remap
 *   a one-block chunk of their own R times, all started at once; gbps is
 *   the bytes remapped by all of them over the wall time (decimal GB/s, as
 *   bench/swap's copies), speedup its ratio to one thread's. Says whether
 *   the driver lets remaps on several threads overlap.
 *
 * copying: the same as busy, for one-block chunks, but the chain is of
 *   copies between x and registered host memory (what evictions and fetches
 *   do), of 16 MiB (lms's piece) or of all of x, each way, on a normal or a
 *   high-priority stream (lms's copy streams are high): adds
 *   "copy_ms_alone", "copy_ms_busy", "copy_slowdown", "copies",
 *   "copy_bytes", "copy_direction" and "copy_stream". Says whether remaps slow down, or
 *   slow the link, while a copy engine is busy.
 *
 * uvm (cuda only; on sim a line on stderr says there are none):
 *   {"case":"uvm","direction":"h2d|d2h|both","bytes":N,"gbps":..,...}:
 *   unified memory moved by cuMemPrefetchAsync each way and both at once,
 *   the peer's link rate beside lms's (bench/remap_uvm.c says how).
 *
 * The chain is calibrated to about 200 ms (50 with --quick): one axpy is
 * timed (after one untimed) and repeated. On sim, kernels are host functions on the stream's
 * worker thread, so "busy" there measures the host, not a GPU.
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base/base.h"
#define BENCH_NAME "remap"
#include "bench/bench.h"
#include "bench/remap_uvm.h"
#include "device/device.h"
#include "device/kernels/kernels.h"

#define MAX_BLOCKS 32     /* the largest chunk, in blocks */
#define MAX_SAMPLES 4096  /* remaps kept per row */
#define REPS 3            /* chains per kernel time */
#define MAX_LAUNCHES 4000 /* a chain's length at most */
#define MAX_THREADS 8     /* of the parallel case */

static int quick;
static char machine[512];
static dev_device_t *dev;

/* A chunk's blocks, and the two addresses they alternate between. */
typedef struct chunk {
    dev_block_t block[MAX_BLOCKS];
    dev_addr_t at[2];
    int cur;     /* which of at[] they are mapped at */
    size_t size; /* bytes mapped there, 0 before the first map */
} chunk_t;

static chunk_t chunk; /* the rows' chunk, up to MAX_BLOCKS blocks */

/* Times of the phases of the remaps of one row, in microseconds. */
typedef struct samples {
    int n;
    double unmap[MAX_SAMPLES], map[MAX_SAMPLES], access[MAX_SAMPLES], total[MAX_SAMPLES];
} samples_t;

static double us_since(uint64_t t0, uint64_t *now)
{
    *now = base_now_ns();
    return (double)(*now - t0) / 1e3;
}

/* Maps c's blocks 0..size/granularity at at[to], with access. */
static void map_at(chunk_t *c, int to, size_t size)
{
    size_t g = dev->info.granularity;
    for (size_t b = 0; b < size / g; b++)
        bench_check(dev_map(dev, c->at[to] + b * g, c->block[b]), "dev_map");
    bench_check(dev_set_access(dev, c->at[to], size), "dev_set_access");
    c->cur = to;
    c->size = size;
}

/* One remap of c to its other address, timed into s (if s and room). */
static void remap_once(chunk_t *c, samples_t *s)
{
    size_t size = c->size, g = dev->info.granularity;
    int to = !c->cur;
    uint64_t t0 = base_now_ns(), t1, t2, t3;
    bench_check(dev_unmap(dev, c->at[c->cur], size), "dev_unmap");
    double unmap = us_since(t0, &t1);
    for (size_t b = 0; b < size / g; b++)
        bench_check(dev_map(dev, c->at[to] + b * g, c->block[b]), "dev_map");
    double map = us_since(t1, &t2);
    bench_check(dev_set_access(dev, c->at[to], size), "dev_set_access");
    double access = us_since(t2, &t3);
    c->cur = to;
    if (s != NULL && s->n < MAX_SAMPLES) {
        s->unmap[s->n] = unmap;
        s->map[s->n] = map;
        s->access[s->n] = access;
        s->total[s->n] = (double)(t3 - t0) / 1e3;
        s->n++;
    }
}

/* The kernels' stream and memory. */
static struct {
    dev_stream_t *stream;
    dev_event_t *done;
    dev_addr_t x, y;
    size_t n;      /* floats in x and in y */
    int launches;  /* a chain's length */
    void *host;    /* registered host memory as large as x, for the copies */
    int copies;    /* a chain's length in copies */
    bool copying;  /* chains are of copies, not of kernels: */
    bool copy_h2d; /* host to x, else x to host */
    size_t copy_bytes;
    dev_stream_t *high; /* a high-priority stream, as lms's copy streams */
    bool on_high;       /* the copies go there */
} k;

/* Runs a chain of k.launches axpys (or k.copies D2H copies of x) and returns
 * its time in ms; with s, remaps the chunk into s until the chain is done. */
static double chain(samples_t *s)
{
    uint64_t t0 = base_now_ns();
    for (int i = 0; i < (k.copying ? k.copies : k.launches); i++)
        if (k.copying && k.copy_h2d)
            bench_check(dev_copy_h2d(dev, k.on_high ? k.high : k.stream, k.x, k.host, k.copy_bytes),
                  "dev_copy_h2d");
        else if (k.copying)
            bench_check(dev_copy_d2h(dev, k.on_high ? k.high : k.stream, k.host, k.x, k.copy_bytes),
                  "dev_copy_d2h");
        else
            bench_check(dev_axpy(dev, k.stream, k.n, 1.0f, k.x, k.y), "dev_axpy");
    bench_check(dev_event_record(dev, k.done, k.copying && k.on_high ? k.high : k.stream),
          "dev_event_record");
    lms_status_t st;
    while ((st = dev_event_query(dev, k.done)) == LMS_NOT_READY)
        if (s != NULL)
            remap_once(&chunk, s);
    bench_check(st, "dev_event_query");
    return (double)(base_now_ns() - t0) / 1e6;
}

/* ---- parallel: remaps on several threads at once --------------------------- */

static struct {
    pthread_barrier_t start;
    chunk_t chunk[MAX_THREADS]; /* one block each */
    int reps;
} par;

static void *par_main(void *arg)
{
    chunk_t *c = arg;
    pthread_barrier_wait(&par.start);
    for (int r = 0; r < par.reps; r++)
        remap_once(c, NULL);
    return NULL;
}

/* Wall time in ms of `threads` threads doing par.reps remaps each. */
static double par_run(int threads)
{
    pthread_t t[MAX_THREADS];
    if (pthread_barrier_init(&par.start, NULL, (unsigned)threads + 1) != 0)
        bench_die("pthread_barrier_init");
    for (int i = 0; i < threads; i++)
        if (pthread_create(&t[i], NULL, par_main, &par.chunk[i]) != 0)
            bench_die("pthread_create");
    pthread_barrier_wait(&par.start);
    uint64_t t0 = base_now_ns();
    for (int i = 0; i < threads; i++)
        pthread_join(t[i], NULL);
    double ms = (double)(base_now_ns() - t0) / 1e6;
    pthread_barrier_destroy(&par.start);
    return ms;
}

static void parallel_rows(dev_addr_t va)
{
    size_t g = dev->info.granularity;
    for (int i = 0; i < MAX_THREADS; i++) {
        chunk_t *c = &par.chunk[i];
        bench_check(dev_block_create(dev, &c->block[0]), "dev_block_create");
        c->at[0] = va + (size_t)(2 * i) * g;
        c->at[1] = c->at[0] + g;
        map_at(c, 0, g);
    }
    par.reps = quick ? 50 : 400;
    double one_gbps = 0;
    for (int threads = 1; threads <= MAX_THREADS; threads *= 2) {
        double ms[REPS];
        for (int r = 0; r < REPS; r++)
            ms[r] = par_run(threads);
        double wall = bench_median(ms, REPS);
        double gbps = (double)threads * par.reps * (double)g / (wall * 1e6);
        if (threads == 1)
            one_gbps = gbps;
        printf("{\"bench\":\"remap\",\"case\":\"parallel\",\"threads\":%d,\"chunk_bytes\":%zu,"
               "\"remaps\":%d,\"wall_ms\":%.2f,\"gbps\":%.2f,\"speedup\":%.2f,%s}\n",
               threads, g, par.reps, wall, gbps, gbps / one_gbps, machine);
        fflush(stdout);
    }
}

/* A chain's length from one link's time: about 200 ms (50 with --quick). */
static int chain_length(double one_ms)
{
    double chain_ms = quick ? 50 : 200;
    int n = one_ms > 0 ? (int)(chain_ms / one_ms) : MAX_LAUNCHES;
    return n < 1 ? 1 : n > MAX_LAUNCHES ? MAX_LAUNCHES : n;
}

static double chain_median(samples_t *s)
{
    double t[REPS];
    for (int r = 0; r < REPS; r++)
        t[r] = chain(s);
    return bench_median(t, REPS);
}

static void print_row(const char *which, const samples_t *s, double alone_ms, double busy_ms)
{
    samples_t *c = malloc(sizeof *c); /* sorted copies */
    if (c == NULL)
        bench_die("malloc");
    memcpy(c, s, sizeof *c);
    int n = s->n;
    double total = bench_median(c->total, n);
    printf("{\"bench\":\"remap\",\"case\":\"%s\",\"chunk_bytes\":%zu,\"blocks\":%zu,\"remaps\":%d,"
           "\"remap_us\":%.1f,\"remap_us_min\":%.1f,\"remap_us_max\":%.1f,\"unmap_us\":%.1f,"
           "\"map_us\":%.1f,\"set_access_us\":%.1f,\"us_per_mib\":%.2f",
           which, chunk.size, chunk.size / dev->info.granularity, n, total, c->total[0],
           c->total[n - 1], bench_median(c->unmap, n), bench_median(c->map, n),
           bench_median(c->access, n), total / ((double)chunk.size / (double)BASE_MiB));
    if (busy_ms > 0 && !k.copying)
        printf(",\"kernel_ms_alone\":%.2f,\"kernel_ms_busy\":%.2f,\"kernel_slowdown\":%.3f,"
               "\"kernel_launches\":%d",
               alone_ms, busy_ms, busy_ms / alone_ms, k.launches);
    if (busy_ms > 0 && k.copying)
        printf(",\"copy_ms_alone\":%.2f,\"copy_ms_busy\":%.2f,\"copy_slowdown\":%.3f,"
               "\"copies\":%d,\"copy_bytes\":%zu,\"copy_direction\":\"%s\","
               "\"copy_stream\":\"%s\"",
               alone_ms, busy_ms, busy_ms / alone_ms, k.copies, k.copy_bytes,
               k.copy_h2d ? "h2d" : "d2h", k.on_high ? "high" : "normal");
    printf(",%s}\n", machine);
    fflush(stdout);
    free(c);
}

int main(int argc, char **argv)
{
    if (argc > 1 && strcmp(argv[1], "--quick") == 0) {
        quick = 1;
    } else if (argc > 1) {
        fprintf(stderr, "usage: %s [--quick]\n", argv[0]);
        return 2;
    }
    dev_config_t dc;
    dev_config_from_options(&dc);
    bench_check(dev_open(&dc, &dev), "dev_open");
    if (!dev->info.has_kernels) {
        fprintf(stderr, "bench/remap: the device has no test kernels\n");
        return 1;
    }
    bool sim = strcmp(dev->info.backend, "sim") == 0;
    size_t g = dev->info.granularity;
    char cpu[128];
    base_host_cpu(cpu, sizeof cpu);
    snprintf(machine, sizeof machine,
             "\"backend\":\"%s\",\"device\":\"%s\",\"granularity\":%zu,\"host_cpu\":\"%s\","
             "\"host_cores\":%ld",
             dev->info.backend, dev->info.name, g, cpu, sysconf(_SC_NPROCESSORS_ONLN));

    /* One reservation: the chunk's two addresses, then x and y. */
    size_t vec = sim ? 8 * BASE_MiB : 256 * BASE_MiB; /* bytes of x and of y */
    vec = (vec + g - 1) / g * g;
    size_t span = MAX_BLOCKS * g, total = 2 * span + 2 * vec + 2 * MAX_THREADS * g;
    dev_addr_t base;
    bench_check(dev_va_reserve(dev, total, &base), "dev_va_reserve");
    chunk.at[0] = base;
    chunk.at[1] = base + span;
    for (int b = 0; b < MAX_BLOCKS; b++)
        bench_check(dev_block_create(dev, &chunk.block[b]), "dev_block_create");
    k.x = base + 2 * span;
    k.y = k.x + vec;
    size_t kblocks = 2 * vec / g;
    dev_block_t *kb = calloc(kblocks, sizeof *kb);
    if (kb == NULL)
        bench_die("calloc");
    for (size_t b = 0; b < kblocks; b++) {
        bench_check(dev_block_create(dev, &kb[b]), "dev_block_create");
        bench_check(dev_map(dev, k.x + b * g, kb[b]), "dev_map");
    }
    bench_check(dev_set_access(dev, k.x, 2 * vec), "dev_set_access");
    bench_check(dev_stream_create(dev, DEV_PRIORITY_NORMAL, &k.stream), "dev_stream_create");
    bench_check(dev_event_create(dev, &k.done), "dev_event_create");
    k.n = vec / sizeof(float);
    bench_check(dev_fill(dev, k.stream, k.x, 2 * vec, 1), "dev_fill"); /* no NaNs from garbage */
    bench_check(dev_stream_synchronize(dev, k.stream), "dev_stream_synchronize");

    k.host = aligned_alloc(BASE_MiB, vec);
    if (k.host == NULL)
        bench_die("aligned_alloc");
    memset(k.host, 0, vec);
    bench_check(dev_host_register(dev, k.host, vec), "dev_host_register");

    /* Calibrate the kernel chain: one axpy, after an untimed one. */
    k.launches = 1;
    chain(NULL);
    k.launches = chain_length(chain(NULL));

    samples_t *s = malloc(sizeof *s);
    if (s == NULL)
        bench_die("malloc");
    int idle_reps = quick ? 20 : 200;
    for (int blocks = 1; blocks <= MAX_BLOCKS; blocks *= 2) {
        if (chunk.size != 0)
            bench_check(dev_unmap(dev, chunk.at[chunk.cur], chunk.size), "dev_unmap");
        map_at(&chunk, 0, (size_t)blocks * g);
        s->n = 0;
        for (int r = 0; r < idle_reps; r++)
            remap_once(&chunk, s);
        print_row("idle", s, 0, 0);
        double alone = chain_median(NULL); /* beside each busy one: clocks drift */
        s->n = 0;
        double busy = chain_median(s);
        if (s->n == 0) /* the chain ended before a remap did: never on a GPU */
            remap_once(&chunk, s);
        print_row("busy", s, alone, busy);
    }
    /* copying: one-block chunks beside copies of 16 MiB and of all of x,
     * each way, on a normal and a high-priority stream */
    bench_check(dev_stream_create(dev, DEV_PRIORITY_HIGH, &k.high), "dev_stream_create");
    bench_check(dev_unmap(dev, chunk.at[chunk.cur], chunk.size), "dev_unmap");
    map_at(&chunk, 0, g);
    k.copying = true;
    for (int high = 0; high < 2; high++)
        for (int h2d = 0; h2d < 2; h2d++)
            for (int big = 0; big < 2; big++) {
                k.on_high = high;
                k.copy_h2d = h2d;
                k.copy_bytes = big ? vec : vec < 16 * BASE_MiB ? vec : 16 * BASE_MiB;
                k.copies = 1;
                chain(NULL);
                k.copies = chain_length(chain(NULL));
                double alone = chain_median(NULL);
                s->n = 0;
                double busy = chain_median(s);
                if (s->n == 0)
                    remap_once(&chunk, s);
                print_row("copying", s, alone, busy);
            }
    k.copying = false;
    free(s);
    parallel_rows(k.y + vec);
    if (sim)
        fprintf(stderr, "bench/remap: no uvm rows on sim: unified memory needs the cuda backend\n");
    else
        remap_uvm_rows(machine, quick);
    free(kb);
    bench_check(dev_host_unregister(dev, k.host), "dev_host_unregister");
    free(k.host);
    dev_close(dev); /* unmaps, releases the blocks and the reservation */
    return 0;
}
