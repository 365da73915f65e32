/*
 * tests/device/test_device.c — the device contract (device.h), on whichever
 * backend the run is for: mapping, streams, events, the observer of device
 * work, copies, launches and the kernels table, capacity, and every kind of
 * bad input. Registered for sim and gpu. The test kernels themselves are
 * test_kernels.c's.
 */
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "harness.h"

static dev_device_t *dev;

static void open_dev(void) { dev = test_open_default(); }
static void close_dev(void) { dev_close(dev); }

TestSuite(device, .init = open_dev, .fini = close_dev);

static void *host_alloc(size_t n)
{
    void *p = aligned_alloc(4096, (n + 4095) / 4096 * 4096);
    cr_assert_not_null(p);
    return p;
}

Test(device, info_describes_the_device)
{
    const dev_info_t *i = &dev->info;
    cr_assert(i->granularity >= 4096 && (i->granularity & (i->granularity - 1)) == 0);
    cr_assert(i->total_memory >= i->granularity);
    cr_assert(i->name[0] != '\0');
    size_t free_b, total;
    TEST_OK(dev_mem_info(dev, &free_b, &total));
    cr_assert_eq(total, i->total_memory);
    cr_assert(free_b <= total);
}

Test(device, data_survives_unmap_and_remap_at_another_address)
{
    size_t g = dev->info.granularity;
    test_run_t a = test_run_map(dev, 2);
    dev_stream_t *s;
    TEST_OK(dev_stream_create(dev, DEV_PRIORITY_NORMAL, &s));
    TEST_OK(dev_fill(dev, s, a.base, a.size, 42));
    TEST_OK(dev_stream_synchronize(dev, s));

    /* Unmap both blocks, then map them at another reservation, swapped. */
    TEST_OK(dev_unmap(dev, a.base, a.size));
    dev_addr_t b;
    TEST_OK(dev_va_reserve(dev, 4 * g, &b));
    TEST_OK(dev_map(dev, b + 3 * g, a.blocks[0]));
    TEST_OK(dev_map(dev, b + 1 * g, a.blocks[1]));
    TEST_OK(dev_set_access(dev, b + 3 * g, g));
    TEST_OK(dev_set_access(dev, b + 1 * g, g));

    unsigned char *want = host_alloc(2 * g), *got = host_alloc(2 * g);
    dev_fill_ref(want, 2 * g, 42);
    TEST_OK(dev_copy_d2h(dev, s, got, b + 3 * g, g));
    TEST_OK(dev_copy_d2h(dev, s, got + g, b + 1 * g, g));
    TEST_OK(dev_stream_synchronize(dev, s));
    cr_assert(memcmp(want, got, 2 * g) == 0, "the blocks kept their bytes across the remap");

    TEST_OK(dev_unmap(dev, b + 1 * g, g));
    TEST_OK(dev_unmap(dev, b + 3 * g, g));
    TEST_OK(dev_va_free(dev, b, 4 * g));
    for (size_t i = 0; i < 2; i++)
        TEST_OK(dev_block_release(dev, a.blocks[i]));
    TEST_OK(dev_va_free(dev, a.base, a.size));
    free(a.blocks);
    free(want);
    free(got);
}

Test(device, one_block_mapped_twice_shows_the_same_bytes)
{
    size_t g = dev->info.granularity;
    dev_addr_t va;
    dev_block_t blk;
    TEST_OK(dev_va_reserve(dev, 2 * g, &va));
    TEST_OK(dev_block_create(dev, &blk));
    TEST_OK(dev_map(dev, va, blk));
    TEST_OK(dev_map(dev, va + g, blk));
    TEST_OK(dev_set_access(dev, va, 2 * g));
    dev_stream_t *s;
    TEST_OK(dev_stream_create(dev, DEV_PRIORITY_NORMAL, &s));
    uint64_t sum = 0;
    TEST_OK(dev_fill(dev, s, va, g, 7));
    TEST_OK(dev_checksum(dev, s, va + g, g, &sum));
    TEST_OK(dev_stream_synchronize(dev, s));
    unsigned char *want = host_alloc(g);
    dev_fill_ref(want, g, 7);
    cr_assert_eq(sum, dev_checksum_ref(want, g));
    TEST_FAILS(LMS_ERR_INVALID, dev_block_release(dev, blk));
    TEST_OK(dev_unmap(dev, va, 2 * g));
    TEST_OK(dev_block_release(dev, blk));
    TEST_OK(dev_va_free(dev, va, 2 * g));
    free(want);
}

/* ---- streams and events ---- */

typedef struct order_log {
    atomic_int next;
    int seen[1000];
} order_log_t;

typedef struct order_arg {
    order_log_t *log;
    int id;
} order_arg_t;

static void log_order(void *p)
{
    order_arg_t *a = p;
    a->log->seen[atomic_fetch_add(&a->log->next, 1)] = a->id;
}

Test(device, a_stream_runs_its_work_in_fifo_order)
{
    dev_stream_t *s;
    TEST_OK(dev_stream_create(dev, DEV_PRIORITY_NORMAL, &s));
    static order_log_t log;
    static order_arg_t args[1000];
    for (int i = 0; i < 1000; i++) {
        args[i] = (order_arg_t){&log, i};
        TEST_OK(dev_host_func(dev, s, log_order, &args[i]));
    }
    TEST_OK(dev_stream_synchronize(dev, s));
    cr_assert_eq(atomic_load(&log.next), 1000);
    for (int i = 0; i < 1000; i++)
        cr_assert_eq(log.seen[i], i, "op %d ran at place %d", log.seen[i], i);
}

typedef struct flag {
    atomic_int value;
    int observed;
} flag_t;

static void slow_set(void *p)
{
    usleep(50000);
    atomic_store(&((flag_t *)p)->value, 1);
}

/* slow_set behind the test gate: not done until the test opens it */
static void gated_set(void *p)
{
    test_gate_wait(NULL);
    atomic_store(&((flag_t *)p)->value, 1);
}

static void observe(void *p)
{
    flag_t *f = p;
    f->observed = atomic_load(&f->value);
}

Test(device, an_event_wait_orders_work_across_streams)
{
    dev_stream_t *a, *b;
    dev_event_t *e;
    TEST_OK(dev_stream_create(dev, DEV_PRIORITY_NORMAL, &a));
    TEST_OK(dev_stream_create(dev, DEV_PRIORITY_HIGH, &b));
    TEST_OK(dev_event_create(dev, &e));
    static flag_t f;
    test_gate_close();
    TEST_OK(dev_host_func(dev, a, gated_set, &f));
    TEST_OK(dev_event_record(dev, e, a));
    cr_assert_eq(dev_event_query(dev, e), LMS_NOT_READY, "the held work has not finished");
    TEST_OK(dev_stream_wait_event(dev, b, e));
    TEST_OK(dev_host_func(dev, b, observe, &f));
    test_gate_open();
    TEST_OK(dev_stream_synchronize(dev, b));
    cr_assert_eq(f.observed, 1, "work after the wait saw the work before the event");
    TEST_OK(dev_event_query(dev, e));
}

Test(device, an_event_never_recorded_is_done)
{
    dev_event_t *e;
    dev_stream_t *s;
    TEST_OK(dev_event_create(dev, &e));
    TEST_OK(dev_stream_create(dev, DEV_PRIORITY_NORMAL, &s));
    TEST_OK(dev_event_query(dev, e));
    TEST_OK(dev_event_synchronize(dev, e));
    TEST_OK(dev_stream_wait_event(dev, s, e));
    TEST_OK(dev_stream_synchronize(dev, s));
}

Test(device, a_wait_uses_the_record_made_before_it)
{
    dev_stream_t *a, *b, *c;
    dev_event_t *e;
    TEST_OK(dev_stream_create(dev, DEV_PRIORITY_NORMAL, &a));
    TEST_OK(dev_stream_create(dev, DEV_PRIORITY_NORMAL, &b));
    TEST_OK(dev_stream_create(dev, DEV_PRIORITY_NORMAL, &c));
    TEST_OK(dev_event_create(dev, &e));
    static flag_t f;
    TEST_OK(dev_host_func(dev, a, slow_set, &f));
    TEST_OK(dev_event_record(dev, e, a));
    TEST_OK(dev_stream_wait_event(dev, b, e));
    TEST_OK(dev_event_record(dev, e, c)); /* re-recorded on an idle stream */
    TEST_OK(dev_host_func(dev, b, observe, &f));
    TEST_OK(dev_event_synchronize(dev, e));
    TEST_OK(dev_stream_synchronize(dev, b));
    cr_assert_eq(f.observed, 1, "b waited for a's record, not the later one on c");
}

/* The legacy default stream (0x1) exists in every process with a device. */
Test(device, an_adopted_stream_runs_work_and_destroying_it_leaves_the_native_one)
{
    test_run_t run = test_run_map(dev, 1);
    dev_stream_t *a, *b;
    TEST_OK(dev_stream_adopt(dev, 0x1, &a));
    TEST_OK(dev_stream_adopt(dev, 0x1, &b));
    uint64_t sum = 0;
    TEST_OK(dev_fill(dev, a, run.base, 4096, 9));
    TEST_OK(dev_checksum(dev, a, run.base, 4096, &sum));
    TEST_OK(dev_stream_synchronize(dev, a));
    unsigned char want[4096];
    dev_fill_ref(want, sizeof want, 9);
    cr_assert_eq(sum, dev_checksum_ref(want, sizeof want));
    TEST_OK(dev_stream_destroy(dev, a));
    TEST_FAILS(LMS_ERR_INVALID, dev_stream_destroy(dev, a));
    sum = 0; /* the other adoption of the same stream still works */
    TEST_OK(dev_checksum(dev, b, run.base, 4096, &sum));
    TEST_OK(dev_stream_synchronize(dev, b));
    cr_assert_eq(sum, dev_checksum_ref(want, sizeof want));
    TEST_OK(dev_stream_destroy(dev, b));
    test_run_unmap(dev, &run);
}

Test(device, destroying_a_stream_lets_its_queued_work_finish)
{
    dev_stream_t *s;
    TEST_OK(dev_stream_create(dev, DEV_PRIORITY_NORMAL, &s));
    static flag_t f;
    TEST_OK(dev_host_func(dev, s, slow_set, &f));
    TEST_OK(dev_stream_destroy(dev, s));
    for (int i = 0; i < 200 && !atomic_load(&f.value); i++)
        usleep(10000);
    cr_assert_eq(atomic_load(&f.value), 1);
}

/* ---- the observer ---- */

typedef struct seen {
    pthread_mutex_t lock;
    dev_work_t work[32];
    int n;
} seen_t;

static void record_work(void *ctx, const dev_work_t *w)
{
    seen_t *s = ctx;
    pthread_mutex_lock(&s->lock);
    if (s->n < 32)
        s->work[s->n] = *w;
    s->n++;
    pthread_mutex_unlock(&s->lock);
}

static int seen_count(seen_t *s)
{
    pthread_mutex_lock(&s->lock);
    int n = s->n;
    pthread_mutex_unlock(&s->lock);
    return n;
}

static void nothing(void *arg) { (void)arg; }

Test(device, an_observer_is_told_of_each_copy_and_kernel_once_it_has_run)
{
    if (!dev->info.has_kernels)
        cr_skip_test("the test kernels are not built (no nvcc)");
    size_t g = dev->info.granularity;
    test_run_t run = test_run_map(dev, 2);
    unsigned char *host = host_alloc(g);
    memset(host, 1, g);
    TEST_OK(dev_host_register(dev, host, g));
    dev_stream_t *a, *b;
    TEST_OK(dev_stream_create(dev, DEV_PRIORITY_HIGH, &a));
    TEST_OK(dev_stream_create(dev, DEV_PRIORITY_NORMAL, &b));
    static seen_t seen = {PTHREAD_MUTEX_INITIALIZER};
    uint64_t before = base_now_ns(), sum = 0;
    TEST_OK(dev_set_observer(dev, record_work, &seen));
    /* a: copy in, fill, copy out; b: a copy on the device, a host function, kernels */
    TEST_OK(dev_copy_h2d(dev, a, run.base, host, g));
    TEST_OK(dev_fill(dev, a, run.base + g, g, 5));
    TEST_OK(dev_copy_d2h(dev, a, host, run.base + g, g));
    TEST_OK(dev_copy_d2d(dev, b, run.base + g - 8192, run.base + g, 4096));
    TEST_OK(dev_host_func(dev, b, nothing, NULL));
    TEST_OK(dev_checksum(dev, b, run.base + g, 4096, &sum));
    TEST_OK(dev_axpy(dev, b, 16, 2.f, run.base + g, run.base + g + 64));
    TEST_OK(dev_stream_synchronize(dev, a));
    TEST_OK(dev_stream_synchronize(dev, b));
    uint64_t after = base_now_ns();
    cr_assert_eq(seen_count(&seen), 7, "once its stream is synchronized, work has been reported");

    static const struct {
        int stream; /* 0: a, 1: b */
        dev_work_kind_t kind;
        const char *name;
        size_t bytes;
    } want[] = {{0, DEV_WORK_H2D, "copy_h2d", 0}, {0, DEV_WORK_COMPUTE, "fill", 0},
                {0, DEV_WORK_D2H, "copy_d2h", 0}, {1, DEV_WORK_D2D, "copy_d2d", 4096},
                {1, DEV_WORK_COMPUTE, "host_func", 0}, {1, DEV_WORK_COMPUTE, "checksum", 0},
                {1, DEV_WORK_COMPUTE, "axpy", 0}};
    /* the sim reads the host's clock around the work; a GPU's event times are
     * mapped onto it within a synchronize's latency */
    uint64_t slack = test_is_sim(dev) ? 0 : 1000000;
    size_t next[2] = {0, 3};
    uint64_t last_end[2] = {0, 0};
    for (int i = 0; i < 7; i++) {
        const dev_work_t *w = &seen.work[i];
        int st = w->stream == a ? 0 : w->stream == b ? 1 : -1;
        cr_assert_neq(st, -1, "work %d (%s) names a stream as the caller named it", i, w->name);
        size_t k = next[st]++;
        cr_assert(k < (st == 0 ? 3u : 7u), "more work on stream %d than was enqueued", st);
        size_t bytes = want[k].bytes != 0 ? want[k].bytes : want[k].kind == DEV_WORK_COMPUTE ? 0 : g;
        cr_assert(w->kind == want[k].kind && strcmp(w->name, want[k].name) == 0 &&
                      w->bytes == bytes,
                  "work %d: %s of %zu bytes, expected %s of %zu (each stream's in its order)", i,
                  w->name, w->bytes, want[k].name, bytes);
        cr_assert(w->start_ns <= w->end_ns && w->start_ns + slack >= before &&
                      w->end_ns <= after + slack,
                  "%s ran within the test, from start to end", w->name);
        cr_assert_geq(w->start_ns + slack / 1000, last_end[st], "%s started after the work "
                      "before it on its stream ended", w->name);
        last_end[st] = w->end_ns;
    }
    /* without an observer, nothing more is told */
    TEST_OK(dev_set_observer(dev, NULL, NULL));
    TEST_OK(dev_fill(dev, a, run.base, g, 6));
    TEST_OK(dev_stream_synchronize(dev, a));
    cr_assert_eq(seen_count(&seen), 7);
    TEST_OK(dev_host_unregister(dev, host));
    test_run_unmap(dev, &run);
    free(host);
}

/* ---- launches and the kernels table ---- */

static atomic_int launched; /* what the probe launches added */

/* The probe's work, on sim: adds the int its arguments carry. */
static void probe_run(const void *args)
{
    int v;
    memcpy(&v, args, sizeof v);
    atomic_fetch_add(&launched, v);
}

/* On cuda: enqueues nothing, and adds the int at once. */
static lms_status_t probe_enqueue(void *ctx, uint64_t native, const void *args)
{
    (void)native;
    if (ctx != &launched)
        return base_fail(LMS_ERR_INVALID, "probe: enqueued with ctx %p", ctx);
    probe_run(args);
    return LMS_OK;
}

static dev_launch_t probe(const test_run_t *run, int add)
{
    dev_launch_t l = {.name = "probe", .nranges = 1, .ranges = {{run->base, run->size}},
                      .run = probe_run, .enqueue = probe_enqueue, .ctx = &launched};
    memcpy(l.args, &add, sizeof add);
    return l;
}

Test(device, a_launch_runs_once_in_stream_order_as_work_of_its_name)
{
    test_run_t run = test_run_map(dev, 1);
    dev_stream_t *s;
    TEST_OK(dev_stream_create(dev, DEV_PRIORITY_NORMAL, &s));
    static seen_t seen = {PTHREAD_MUTEX_INITIALIZER};
    TEST_OK(dev_set_observer(dev, record_work, &seen));
    test_gate_close();
    TEST_OK(dev_host_func(dev, s, test_gate_wait, NULL));
    dev_launch_t l = probe(&run, 3);
    TEST_OK(dev_launch(dev, s, &l));
    memset(&l, 0, sizeof l); /* the op has taken what it needs */
    if (test_is_sim(dev))
        cr_assert_eq(atomic_load(&launched), 0, "the work waits for the gate before it");
    test_gate_open();
    TEST_OK(dev_stream_synchronize(dev, s));
    cr_assert_eq(atomic_load(&launched), 3);
    cr_assert_eq(seen_count(&seen), 2);
    cr_assert(seen.work[1].kind == DEV_WORK_COMPUTE && strcmp(seen.work[1].name, "probe") == 0,
              "the observer saw %s", seen.work[1].name);
    TEST_OK(dev_set_observer(dev, NULL, NULL));
    TEST_OK(dev_stream_destroy(dev, s));
    test_run_unmap(dev, &run);
}

Test(device, bad_launches_are_rejected_and_run_nothing)
{
    test_run_t run = test_run_map(dev, 1);
    dev_stream_t *s, *gone;
    TEST_OK(dev_stream_create(dev, DEV_PRIORITY_NORMAL, &s));
    TEST_OK(dev_stream_create(dev, DEV_PRIORITY_NORMAL, &gone));
    TEST_OK(dev_stream_destroy(dev, gone));
    const dev_launch_t ok = probe(&run, 1);
    dev_launch_t bad;
    TEST_FAILS(LMS_ERR_INVALID, dev_launch(dev, s, NULL));
    bad = ok, bad.name = NULL;
    TEST_FAILS(LMS_ERR_INVALID, dev_launch(dev, s, &bad));
    bad = ok, bad.run = NULL;
    TEST_FAILS(LMS_ERR_INVALID, dev_launch(dev, s, &bad));
    bad = ok, bad.enqueue = NULL;
    TEST_FAILS(LMS_ERR_INVALID, dev_launch(dev, s, &bad));
    bad = ok, bad.nranges = DEV_LAUNCH_RANGES + 1;
    TEST_FAILS(LMS_ERR_INVALID, dev_launch(dev, s, &bad));
    bad = ok, bad.ranges[0].bytes = 0;
    TEST_FAILS(LMS_ERR_INVALID, dev_launch(dev, s, &bad));
    bad = ok, bad.ranges[0].addr = 0;
    TEST_FAILS(LMS_ERR_INVALID, dev_launch(dev, s, &bad));
    TEST_FAILS(LMS_ERR_INVALID, dev_launch(dev, gone, &ok));
    TEST_FAILS(LMS_ERR_INVALID, dev_launch(dev, NULL, &ok));
    TEST_OK(dev_stream_synchronize(dev, s));
    cr_assert_eq(atomic_load(&launched), 0, "nothing refused ran");
    TEST_OK(dev_launch(dev, s, &ok));
    TEST_OK(dev_stream_synchronize(dev, s));
    cr_assert_eq(atomic_load(&launched), 1);
    TEST_OK(dev_stream_destroy(dev, s));
    test_run_unmap(dev, &run);
}

static atomic_int table_opens, table_closes;

static void count_open(dev_device_t *d)
{
    atomic_fetch_add(&table_opens, 1);
    d->info.has_kernels = true;
    d->kernels = &table_opens;
}

static void count_close(dev_device_t *d)
{
    if (d->kernels == &table_opens)
        atomic_fetch_add(&table_closes, 1);
}

Test(device, a_device_is_opened_and_closed_with_the_kernels_table_set_at_its_open)
{
    static const dev_kernels_t counting = {.open = count_open, .close = count_close};
    dev_set_kernels(&counting);
    dev_device_t *d = test_open_default();
    cr_assert(atomic_load(&table_opens) == 1 && d->info.has_kernels && d->kernels == &table_opens);
    dev_set_kernels(NULL); /* d keeps its table; a device opened now has none */
    dev_device_t *e = test_open_default();
    cr_assert(!e->info.has_kernels && e->kernels == NULL);
    dev_close(e);
    cr_assert_eq(atomic_load(&table_closes), 0);
    dev_close(d);
    cr_assert_eq(atomic_load(&table_closes), 1);
    cr_assert_eq(atomic_load(&table_opens), 1);
}

/* ---- copies ---- */

Test(device, copies_are_exact_for_any_size_and_offset)
{
    /* Two halves of one run: upload into the first at an offset, copy on the
     * device to the second (D2D ranges must not overlap), download from there. */
    size_t g = dev->info.granularity;
    size_t max = 64 * BASE_MiB;
    if (2 * (max + g) > dev->info.total_memory / 2)
        max = dev->info.total_memory / 4 - g;
    size_t half_blocks = (max + 4096 + g - 1) / g;
    test_run_t run = test_run_map(dev, 2 * half_blocks);
    size_t half = half_blocks * g;
    unsigned char *src = host_alloc(max + 64), *back = host_alloc(max + 64);
    TEST_OK(dev_host_register(dev, src, max + 64));
    dev_stream_t *s;
    TEST_OK(dev_stream_create(dev, DEV_PRIORITY_HIGH, &s));
    const size_t sizes[] = {1, 3, 7, 8, 255, 4096, 65537, 1 << 20, (2 << 20) + 13, max};
    const size_t offsets[] = {0, 1, 13, 4095};
    for (size_t si = 0; si < sizeof sizes / sizeof *sizes; si++) {
        for (size_t oi = 0; oi < sizeof offsets / sizeof *offsets; oi++) {
            size_t n = sizes[si], off = offsets[oi];
            unsigned char *h = src + off % 64;
            dev_addr_t d1 = run.base + off, d2 = run.base + half + (off ^ 7);
            dev_fill_ref(h, n, n ^ off);
            memset(back, 0, n + 1);
            TEST_OK(dev_copy_h2d(dev, s, d1, h, n));
            TEST_OK(dev_copy_d2d(dev, s, d2, d1, n));
            TEST_OK(dev_copy_d2h(dev, s, back + 1, d2, n));
            uint64_t sum = 0;
            TEST_OK(dev_checksum(dev, s, d2, n, &sum));
            TEST_OK(dev_stream_synchronize(dev, s));
            cr_assert(memcmp(h, back + 1, n) == 0, "n=%zu offset=%zu", n, off);
            cr_assert_eq(sum, dev_checksum_ref(h, n), "checksum n=%zu offset=%zu", n, off);
        }
    }
    TEST_OK(dev_host_unregister(dev, src));
    test_run_unmap(dev, &run);
    free(src);
    free(back);
}

/* ---- capacity ---- */

Test(device, exhausting_device_memory_is_out_of_memory_and_recoverable, .timeout = 120)
{
    size_t g = dev->info.granularity;
    size_t cap = dev->info.total_memory / g + 1;
    dev_block_t *blocks = calloc(cap, sizeof *blocks);
    size_t n = 0;
    lms_status_t st;
    while ((st = dev_block_create(dev, &blocks[n])) == LMS_OK) {
        n++;
        cr_assert(n < cap, "created more blocks than the device holds");
    }
    cr_assert_eq(st, LMS_ERR_OUT_OF_MEMORY, "%s", lms_last_error());
    cr_assert(n > 0);
    TEST_OK(dev_block_release(dev, blocks[--n]));
    TEST_OK(dev_block_create(dev, &blocks[n++]));
    while (n > 0)
        TEST_OK(dev_block_release(dev, blocks[--n]));
    free(blocks);
}

Test(device, free_memory_counts_blocks)
{
    size_t g = dev->info.granularity, f0, f1, t;
    if (!test_is_sim(dev))
        cr_skip_test("a real device's free memory moves with other processes");
    TEST_OK(dev_mem_info(dev, &f0, &t));
    dev_block_t b;
    TEST_OK(dev_block_create(dev, &b));
    TEST_OK(dev_mem_info(dev, &f1, &t));
    cr_assert_eq(f0 - f1, g);
    TEST_OK(dev_block_release(dev, b));
}

/* ---- bad input: a clean LMS_ERR_INVALID and nothing changed ---- */

static void assert_live(size_t res, size_t blocks, size_t mapped)
{
    dev_live_t l;
    dev_live(dev, &l);
    cr_assert_eq(l.reservations, res);
    cr_assert_eq(l.blocks, blocks);
    cr_assert_eq(l.mapped_blocks, mapped);
}

Test(device, bad_vmm_calls_are_rejected_and_change_nothing)
{
    size_t g = dev->info.granularity;
    test_run_t run = test_run_map(dev, 2);
    dev_block_t spare;
    dev_addr_t va;
    TEST_OK(dev_block_create(dev, &spare));
    assert_live(1, 3, 2);

    TEST_FAILS(LMS_ERR_INVALID, dev_va_reserve(dev, 0, &va));
    TEST_FAILS(LMS_ERR_INVALID, dev_va_reserve(dev, g + 1, &va));
    TEST_FAILS(LMS_ERR_INVALID, dev_va_reserve(dev, g, NULL));
    TEST_FAILS(LMS_ERR_INVALID, dev_block_create(dev, NULL));
    TEST_FAILS(LMS_ERR_INVALID, dev_mem_info(dev, NULL, NULL));
    /* map: over a mapped block, misaligned, outside any reservation, bad block */
    TEST_FAILS(LMS_ERR_INVALID, dev_map(dev, run.base, spare));
    TEST_FAILS(LMS_ERR_INVALID, dev_map(dev, run.base + 1, spare));
    TEST_FAILS(LMS_ERR_INVALID, dev_map(dev, run.base + run.size, spare));
    TEST_FAILS(LMS_ERR_INVALID, dev_map(dev, 0, spare));
    TEST_FAILS(LMS_ERR_INVALID, dev_block_release(dev, 0));
    TEST_FAILS(LMS_ERR_INVALID, dev_block_release(dev, spare ^ 0x1234));
    /* set_access / unmap: zero, misaligned, not a multiple, past the end */
    TEST_FAILS(LMS_ERR_INVALID, dev_set_access(dev, run.base, 0));
    TEST_FAILS(LMS_ERR_INVALID, dev_set_access(dev, run.base, g / 2));
    TEST_FAILS(LMS_ERR_INVALID, dev_unmap(dev, run.base + g / 2, g));
    TEST_FAILS(LMS_ERR_INVALID, dev_unmap(dev, run.base, 3 * g));
    /* release a mapped block; free a reservation that still has mappings */
    TEST_FAILS(LMS_ERR_INVALID, dev_block_release(dev, run.blocks[0]));
    TEST_FAILS(LMS_ERR_INVALID, dev_va_free(dev, run.base, run.size));
    TEST_FAILS(LMS_ERR_INVALID, dev_va_free(dev, run.base + g, g));
    assert_live(1, 3, 2);

    /* double unmap, and unmap / set_access of a range that is partly unmapped */
    TEST_OK(dev_unmap(dev, run.base + g, g));
    TEST_FAILS(LMS_ERR_INVALID, dev_unmap(dev, run.base + g, g));
    TEST_FAILS(LMS_ERR_INVALID, dev_unmap(dev, run.base, 2 * g));
    TEST_FAILS(LMS_ERR_INVALID, dev_set_access(dev, run.base, 2 * g));
    assert_live(1, 3, 1);

    /* double release */
    TEST_OK(dev_block_release(dev, spare));
    TEST_FAILS(LMS_ERR_INVALID, dev_block_release(dev, spare));
    TEST_FAILS(LMS_ERR_INVALID, dev_map(dev, run.base + g, spare));
    assert_live(1, 2, 1);

    /* the first block still holds data */
    dev_stream_t *s;
    uint64_t sum = 0;
    unsigned char *want = host_alloc(g);
    dev_fill_ref(want, g, 5);
    TEST_OK(dev_stream_create(dev, DEV_PRIORITY_NORMAL, &s));
    TEST_OK(dev_fill(dev, s, run.base, g, 5));
    TEST_OK(dev_checksum(dev, s, run.base, g, &sum));
    TEST_OK(dev_stream_synchronize(dev, s));
    cr_assert_eq(sum, dev_checksum_ref(want, g));
    free(want);

    TEST_OK(dev_map(dev, run.base + g, run.blocks[1]));
    test_run_unmap(dev, &run);
    assert_live(0, 0, 0);
}

Test(device, bad_stream_calls_are_rejected)
{
    test_run_t run = test_run_map(dev, 1);
    dev_stream_t *s;
    dev_event_t *e;
    uint64_t out;
    char host[64];
    TEST_OK(dev_stream_create(dev, DEV_PRIORITY_NORMAL, &s));
    TEST_OK(dev_event_create(dev, &e));
    TEST_FAILS(LMS_ERR_INVALID, dev_stream_create(dev, DEV_PRIORITY_NORMAL, NULL));
    TEST_FAILS(LMS_ERR_INVALID, dev_stream_create(dev, (dev_priority_t)7, &s));
    TEST_FAILS(LMS_ERR_INVALID, dev_stream_adopt(dev, 0x1, NULL));
    TEST_FAILS(LMS_ERR_INVALID, dev_stream_adopt(dev, 0, &s));
    TEST_FAILS(LMS_ERR_INVALID, dev_event_create(dev, NULL));
    TEST_FAILS(LMS_ERR_INVALID, dev_stream_synchronize(dev, NULL));
    TEST_FAILS(LMS_ERR_INVALID, dev_event_record(dev, NULL, s));
    TEST_FAILS(LMS_ERR_INVALID, dev_event_record(dev, e, NULL));
    TEST_FAILS(LMS_ERR_INVALID, dev_stream_wait_event(dev, s, NULL));
    TEST_FAILS(LMS_ERR_INVALID, dev_event_query(dev, NULL));
    TEST_FAILS(LMS_ERR_INVALID, dev_host_func(dev, s, NULL, NULL));
    /* copies: zero size, NULL host, device address outside the reservations */
    TEST_FAILS(LMS_ERR_INVALID, dev_copy_h2d(dev, s, run.base, host, 0));
    TEST_FAILS(LMS_ERR_INVALID, dev_copy_h2d(dev, s, run.base, NULL, 8));
    TEST_FAILS(LMS_ERR_INVALID, dev_copy_d2h(dev, s, NULL, run.base, 8));
    TEST_FAILS(LMS_ERR_INVALID, dev_copy_h2d(dev, s, 0, host, 8));
    TEST_FAILS(LMS_ERR_INVALID, dev_copy_h2d(dev, s, run.base + run.size - 4, host, 8));
    TEST_FAILS(LMS_ERR_INVALID, dev_copy_d2h(dev, s, host, (dev_addr_t)(uintptr_t)host, 8));
    TEST_FAILS(LMS_ERR_INVALID, dev_copy_d2d(dev, s, run.base, run.base + run.size, 8));
    TEST_FAILS(LMS_ERR_INVALID, dev_copy_h2d(dev, s, UINT64_MAX - 3, host, 8));
    TEST_FAILS(LMS_ERR_INVALID, dev_checksum(dev, s, run.base, 8, NULL));
    TEST_FAILS(LMS_ERR_INVALID, dev_fill(dev, s, run.base, 0, 1));
    TEST_FAILS(LMS_ERR_INVALID, dev_axpy(dev, s, 4, 1.f, run.base + 2, run.base + 64));
    TEST_FAILS(LMS_ERR_INVALID, dev_axpy(dev, s, SIZE_MAX / 2, 1.f, run.base, run.base));
    /* host registration: NULL, zero, overlap, unknown */
    TEST_FAILS(LMS_ERR_INVALID, dev_host_register(dev, NULL, 64));
    TEST_FAILS(LMS_ERR_INVALID, dev_host_register(dev, host, 0));
    TEST_OK(dev_host_register(dev, host, 64));
    TEST_FAILS(LMS_ERR_INVALID, dev_host_register(dev, host + 32, 64));
    TEST_FAILS(LMS_ERR_INVALID, dev_host_unregister(dev, host + 1));
    TEST_OK(dev_host_unregister(dev, host));
    TEST_FAILS(LMS_ERR_INVALID, dev_host_unregister(dev, host));
    /* the stream still works */
    TEST_OK(dev_checksum(dev, s, run.base, 8, &out));
    TEST_OK(dev_stream_synchronize(dev, s));
    test_run_unmap(dev, &run);
}

Test(device, objects_of_another_device_are_rejected)
{
    dev_config_t cfg = test_config();
    dev_device_t *other = test_open(&cfg);
    dev_stream_t *mine, *theirs;
    dev_event_t *my_event, *their_event;
    dev_block_t their_block;
    TEST_OK(dev_stream_create(dev, DEV_PRIORITY_NORMAL, &mine));
    TEST_OK(dev_stream_create(other, DEV_PRIORITY_NORMAL, &theirs));
    TEST_OK(dev_event_create(dev, &my_event));
    TEST_OK(dev_event_create(other, &their_event));
    TEST_OK(dev_block_create(other, &their_block));
    test_run_t run = test_run_map(dev, 1);
    TEST_OK(dev_unmap(dev, run.base, run.size));

    TEST_FAILS(LMS_ERR_INVALID, dev_stream_synchronize(dev, theirs));
    TEST_FAILS(LMS_ERR_INVALID, dev_event_record(dev, my_event, theirs));
    TEST_FAILS(LMS_ERR_INVALID, dev_event_record(dev, their_event, mine));
    TEST_FAILS(LMS_ERR_INVALID, dev_stream_wait_event(dev, mine, their_event));
    TEST_FAILS(LMS_ERR_INVALID, dev_event_query(dev, their_event));
    TEST_FAILS(LMS_ERR_INVALID, dev_stream_destroy(dev, theirs));
    TEST_FAILS(LMS_ERR_INVALID, dev_event_destroy(dev, their_event));
    TEST_FAILS(LMS_ERR_INVALID, dev_map(dev, run.base, their_block));
    TEST_FAILS(LMS_ERR_INVALID, dev_block_release(dev, their_block));

    TEST_OK(dev_stream_synchronize(other, theirs));
    TEST_OK(dev_block_release(other, their_block));
    dev_live_t l;
    dev_live(other, &l);
    cr_assert_eq(l.streams, 1);
    cr_assert_eq(l.events, 1);
    dev_close(other);
    TEST_OK(dev_map(dev, run.base, run.blocks[0]));
    test_run_unmap(dev, &run);
}

Test(device, destroyed_and_made_up_handles_are_rejected)
{
    dev_stream_t *s, *s2;
    dev_event_t *e;
    dev_block_t b;
    TEST_OK(dev_stream_create(dev, DEV_PRIORITY_NORMAL, &s));
    TEST_OK(dev_event_create(dev, &e));
    TEST_OK(dev_block_create(dev, &b));
    TEST_OK(dev_stream_destroy(dev, s));
    TEST_OK(dev_event_destroy(dev, e));
    TEST_OK(dev_block_release(dev, b));

    TEST_FAILS(LMS_ERR_INVALID, dev_stream_synchronize(dev, s));
    TEST_FAILS(LMS_ERR_INVALID, dev_stream_destroy(dev, s));
    TEST_FAILS(LMS_ERR_INVALID, dev_event_query(dev, e));
    TEST_FAILS(LMS_ERR_INVALID, dev_event_destroy(dev, e));
    TEST_FAILS(LMS_ERR_INVALID, dev_block_release(dev, b));
    /* the freed slot is reused; the old handle still names nothing */
    TEST_OK(dev_stream_create(dev, DEV_PRIORITY_NORMAL, &s2));
    cr_assert_neq(s2, s);
    TEST_FAILS(LMS_ERR_INVALID, dev_stream_synchronize(dev, s));
    /* made-up values, and a handle of one kind passed as another */
    TEST_FAILS(LMS_ERR_INVALID, dev_stream_synchronize(dev, (dev_stream_t *)(uintptr_t)0x10));
    TEST_FAILS(LMS_ERR_INVALID, dev_event_query(dev, (dev_event_t *)(uintptr_t)~0ull));
    TEST_FAILS(LMS_ERR_INVALID, dev_event_query(dev, (dev_event_t *)s2));
    TEST_FAILS(LMS_ERR_INVALID, dev_block_release(dev, (dev_block_t)(uintptr_t)s2));
    TEST_OK(dev_stream_synchronize(dev, s2));
}

Test(device, a_released_block_handle_stays_invalid_however_often_its_slot_is_reused,
     .timeout = 300)
{
    dev_block_t old, b;
    TEST_OK(dev_block_create(dev, &old));
    TEST_OK(dev_block_release(dev, old));
    for (int i = 0; i < (1 << 18) + 100; i++) { /* past every generation of a slot */
        TEST_OK(dev_block_create(dev, &b));
        cr_assert_neq(b, old, "iteration %d handed out the released handle again", i);
        TEST_OK(dev_block_release(dev, b));
    }
    TEST_FAILS(LMS_ERR_INVALID, dev_block_release(dev, old));
}

Test(device, close_releases_what_is_still_alive)
{
    /* On every backend; test_sim checks what the OS sees after it. */
    dev_config_t cfg = test_config();
    dev_device_t *d = test_open(&cfg);
    size_t g = d->info.granularity;
    dev_addr_t va;
    dev_block_t b;
    dev_stream_t *s;
    dev_event_t *e;
    static flag_t f;
    static char host[4096];
    TEST_OK(dev_va_reserve(d, 4 * g, &va));
    TEST_OK(dev_block_create(d, &b));
    TEST_OK(dev_map(d, va, b));
    TEST_OK(dev_host_register(d, host, sizeof host));
    TEST_OK(dev_stream_create(d, DEV_PRIORITY_NORMAL, &s));
    TEST_OK(dev_event_create(d, &e));
    TEST_OK(dev_host_func(d, s, slow_set, &f));
    TEST_OK(dev_event_record(d, e, s));
    dev_close(d);
    cr_assert_eq(atomic_load(&f.value), 1, "queued work ran before the device closed");
}

/* ---- the two levels of checking (Note [Two levels of checking] in check.c) ---- */

static dev_device_t *open_checking(dev_checks_t checks)
{
    dev_config_t cfg = test_config();
    cfg.checks = checks;
    return test_open(&cfg);
}

Test(device, the_handle_check_alone_rejects_destroyed_foreign_and_made_up_handles)
{
    dev_device_t *d = open_checking(DEV_CHECKS_HANDLES);
    dev_stream_t *s, *alive;
    dev_event_t *e;
    dev_block_t b;
    TEST_OK(dev_stream_create(d, DEV_PRIORITY_NORMAL, &s));
    TEST_OK(dev_stream_create(d, DEV_PRIORITY_NORMAL, &alive));
    TEST_OK(dev_event_create(d, &e));
    TEST_OK(dev_block_create(d, &b));
    test_run_t run = test_run_map(d, 1);
    char host[64] = {0};
    TEST_OK(dev_copy_h2d(d, alive, run.base, host, sizeof host));
    TEST_OK(dev_stream_destroy(d, s));
    TEST_OK(dev_event_destroy(d, e));
    TEST_OK(dev_block_release(d, b));

    /* destroyed: on the copy path too, which takes no lock */
    TEST_FAILS(LMS_ERR_INVALID, dev_copy_h2d(d, s, run.base, host, sizeof host));
    TEST_FAILS(LMS_ERR_INVALID, dev_copy_d2h(d, s, host, run.base, sizeof host));
    TEST_FAILS(LMS_ERR_INVALID, dev_event_record(d, e, alive));
    TEST_FAILS(LMS_ERR_INVALID, dev_stream_wait_event(d, alive, e));
    TEST_FAILS(LMS_ERR_INVALID, dev_block_release(d, b));
    TEST_FAILS(LMS_ERR_INVALID, dev_map(d, run.base + run.size, b));
    /* made up, of another kind, of another device */
    TEST_FAILS(LMS_ERR_INVALID, dev_copy_h2d(d, (dev_stream_t *)(uintptr_t)0x10, run.base, host, 8));
    TEST_FAILS(LMS_ERR_INVALID, dev_stream_synchronize(d, (dev_stream_t *)e));
    TEST_FAILS(LMS_ERR_INVALID, dev_stream_synchronize(d, NULL));
    dev_stream_t *theirs;
    TEST_OK(dev_stream_create(dev, DEV_PRIORITY_NORMAL, &theirs));
    TEST_FAILS(LMS_ERR_INVALID, dev_copy_h2d(d, theirs, run.base, host, sizeof host));
    /* what needs no bookkeeping is still checked */
    TEST_FAILS(LMS_ERR_INVALID, dev_copy_h2d(d, alive, run.base, host, 0));
    TEST_FAILS(LMS_ERR_INVALID, dev_copy_h2d(d, alive, run.base, NULL, 8));
    TEST_FAILS(LMS_ERR_INVALID, dev_map(d, run.base + 1, run.blocks[0]));
    TEST_FAILS(LMS_ERR_INVALID, dev_unmap(d, run.base, 0));

    /* the bookkeeping that close and dev_live need is kept all the same */
    dev_live_t l;
    dev_live(d, &l);
    cr_assert_eq(l.streams, 1);
    cr_assert_eq(l.events, 0);
    cr_assert_eq(l.blocks, run.size / d->info.granularity);
    cr_assert_eq(l.mapped_blocks, run.size / d->info.granularity);
    cr_assert_eq(l.reservations, 1);
    TEST_OK(dev_stream_synchronize(d, alive));
    test_run_unmap(d, &run);
    dev_live(d, &l);
    cr_assert_eq(l.mapped_blocks, 0);
    TEST_OK(dev_stream_synchronize(dev, theirs));
    dev_close(d);
}

/* Each misuse here reaches the layer below only without full validation;
 * with it, the check layer refuses it and nothing changes. */
Test(device, full_validation_catches_what_only_the_bookkeeping_shows)
{
    dev_device_t *d = open_checking(DEV_CHECKS_FULL);
    dev_stream_t *s;
    TEST_OK(dev_stream_create(d, DEV_PRIORITY_NORMAL, &s));
    test_run_t run = test_run_map(d, 2);
    size_t g = d->info.granularity;
    char host[64] = {0};
    dev_block_t spare;
    TEST_OK(dev_block_create(d, &spare));
    TEST_FAILS(LMS_ERR_INVALID, dev_map(d, run.base, spare));                /* mapped already */
    TEST_FAILS(LMS_ERR_INVALID, dev_block_release(d, run.blocks[0]));       /* still mapped */
    TEST_FAILS(LMS_ERR_INVALID, dev_map(d, 0x1000 * g, spare));             /* not reserved */
    TEST_FAILS(LMS_ERR_INVALID, dev_copy_h2d(d, s, 0x1000 * g, host, 8));   /* not reserved */
    TEST_FAILS(LMS_ERR_INVALID, dev_copy_d2h(d, s, host, run.base + run.size, 8));
    TEST_FAILS(LMS_ERR_INVALID, dev_va_free(d, run.base, run.size));        /* blocks mapped */
    TEST_OK(dev_unmap(d, run.base + g, g));
    TEST_FAILS(LMS_ERR_INVALID, dev_unmap(d, run.base + g, g));             /* not mapped */
    TEST_FAILS(LMS_ERR_INVALID, dev_set_access(d, run.base, 2 * g));        /* half unmapped */
    TEST_OK(dev_map(d, run.base + g, run.blocks[1]));
    TEST_OK(dev_set_access(d, run.base, 2 * g));
    TEST_OK(dev_copy_h2d(d, s, run.base, host, sizeof host));
    TEST_OK(dev_stream_synchronize(d, s));
    TEST_OK(dev_block_release(d, spare));
    dev_live_t l;
    dev_live(d, &l);
    cr_assert_eq(l.mapped_blocks, 2);
    test_run_unmap(d, &run);
    dev_close(d);
}

/* The suites run with LMS_DEVICE_CHECKS=full (tests/CMakeLists.txt): a
 * device opened with the default level validates fully there. */
Test(device, the_default_level_follows_lms_device_checks)
{
    if (strcmp(getenv("LMS_DEVICE_CHECKS") ? getenv("LMS_DEVICE_CHECKS") : "", "full") != 0)
        cr_skip_test("LMS_DEVICE_CHECKS is not full in this run");
    test_run_t run = test_run_map(dev, 1);
    dev_block_t spare;
    TEST_OK(dev_block_create(dev, &spare));
    TEST_FAILS(LMS_ERR_INVALID, dev_map(dev, run.base, spare));
    TEST_OK(dev_block_release(dev, spare));
    test_run_unmap(dev, &run);
}
