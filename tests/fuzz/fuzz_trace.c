/*
 * tests/fuzz/fuzz_trace.c — fuzzes bench/simulate's trace reader
 * (bench/simulate_trace.c) and what runs a trace it accepts: the input is
 * a trace file. Built from bench/simulate.c itself (its main renamed), so
 * that an accepted trace runs through the program's own run_workload and
 * --check's assertions under every policy.
 *
 * What must hold, for any input:
 * - the reader accepts it, or refuses it with "FILE:LINE: what";
 * - an accepted trace written back (sim_trace_write) reads back the same;
 * - run as the program runs it, no invariant of the model breaks (sim_die
 *   exits, which the fuzzer counts as a crash) and every row passes
 *   check_rows. Runs are kept small (FUZZ_MAX_CHUNKS), and the input
 *   the program refuses after reading (no kernel, a device too small for
 *   a kernel) is skipped, as those exits say what is wrong.
 */
#include <stdio.h>

#include "fuzz.h"

#define main simulate_main
#include "bench/simulate.c"
#undef main

#define FUZZ_MAX_CHUNKS 1024 /* chunk ids of a run: fast enough to fuzz */
#define NAME "fuzz.trace"

int LLVMFuzzerInitialize(int *argc, char **argv[])
{
    (void)argc, (void)argv;
    if (freopen("/dev/null", "w", stdout) == NULL) /* the rows */
        abort();
    return 0;
}

static bool read_from(const char *text, size_t size, sim_workload_t *w, char *err, size_t errlen)
{
    FILE *f = fmemopen((void *)text, size, "r");
    FUZZ_CHECK(f != NULL, "fmemopen: %s", strerror(errno));
    sim_init(w, NAME, DEFAULT_CHUNK);
    bool ok = sim_trace_read(f, NAME, w, err, errlen);
    fclose(f);
    return ok;
}

/* Written as a trace and read back, w is the same workload. */
static void check_written_back(const sim_workload_t *w)
{
    char *text = NULL, err[512];
    size_t len = 0;
    FILE *f = open_memstream(&text, &len);
    FUZZ_CHECK(f != NULL, "open_memstream: %s", strerror(errno));
    sim_trace_write(f, w, w->device_bytes);
    fclose(f);
    sim_workload_t b;
    FUZZ_CHECK(read_from(text, len, &b, err, sizeof err), "written back, refused: %s", err);
    FUZZ_CHECK(b.chunk_bytes == w->chunk_bytes && b.device_bytes == w->device_bytes &&
                   b.ntensors == w->ntensors && b.nops == w->nops && b.nacc == w->nacc,
               "written back, a different workload");
    for (size_t i = 0; i < w->ntensors; i++) {
        const sim_tensor_t *x = &w->tensors[i], *y = &b.tensors[i];
        FUZZ_CHECK(x->bytes == y->bytes && x->act == y->act && x->layer == y->layer &&
                       x->alloc_op == y->alloc_op && x->free_op == y->free_op,
                   "written back, tensor %zu differs", i);
    }
    for (size_t j = 0; j < w->nops; j++) {
        const sim_op_t *x = &w->ops[j], *y = &b.ops[j];
        FUZZ_CHECK(x->kind == y->kind && x->phase == y->phase && x->layer == y->layer &&
                       x->tensor == y->tensor && x->ns == y->ns && x->acc == y->acc &&
                       x->nacc == y->nacc,
                   "written back, op %zu differs", j);
    }
    for (size_t i = 0; i < w->nacc; i++)
        FUZZ_CHECK(w->acc[i].tensor == b.acc[i].tensor && w->acc[i].mode == b.acc[i].mode,
                   "written back, access %zu differs", i);
    sim_release(&b);
    free(text);
}

/* Runs w as `bench/simulate --check --trace` would, at its device line if
 * that holds every kernel, else at 1.5x, else at its largest kernel. */
static void run(sim_workload_t *w)
{
    uint64_t all = 0;
    for (size_t i = 0; i < w->ntensors; i++)
        all += sim_chunks_of(w, w->tensors[i].bytes);
    if (all > FUZZ_MAX_CHUNKS)
        return;
    sim_place(w, sim_lms_places(w) ? SIM_PLACE_LMS : SIM_PLACE_CHUNKS);
    sim_iters_t its = sim_iters_of(w);
    if (its.n == 0) {
        free(its.it);
        return;
    }
    uint64_t foot = sim_chunks_in_use(w, &its.it[its.n - 1]);
    free(its.it);
    options_t o = {.cfg = {.h2d_gbps = 25, .d2h_gbps = 25, .both = 0.5, .map_us = 10,
                           .iterations = 3, .check = true}};
    o.pol[SIM_SCHEDULE] = o.pol[SIM_LRU] = o.pol[SIM_VDNN] = true;
    o.cfg.vmm_defer = w->ntensors % 2 == 1; /* both orders of the VMM calls, by the input */
    uint64_t dev = w->device_bytes / w->chunk_bytes;
    if (dev == 0 || dev < w->max_kernel || dev > SIM_MAX_CHUNKS) {
        o.oversub[o.noversub++] = 1.5;
        if (floor((double)foot / 1.5 + 0.5) < w->max_kernel)
            o.device = (uint64_t)(w->max_kernel ? w->max_kernel : 1) * w->chunk_bytes, o.noversub = 0;
    }
    failures = 0;
    run_t r = run_workload(w, &o);
    check_rows(w, &r);
    free(r.rows);
    FUZZ_CHECK(failures == 0, "check_rows: %d failures (above)", failures);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    sim_workload_t w;
    char err[512];
    if (!read_from((const char *)data, size, &w, err, sizeof err)) {
        FUZZ_CHECK(strncmp(err, NAME ":", strlen(NAME ":")) == 0, "not FILE:LINE: '%s'", err);
        sim_release(&w);
        return 0;
    }
    check_written_back(&w);
    run(&w);
    sim_release(&w);
    return 0;
}
