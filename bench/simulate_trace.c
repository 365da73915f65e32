/*
 * bench/simulate_trace.c — the simulator's trace format (version 1,
 * docs/trace-format.md): reading a trace into a workload, and writing one.
 *
 * A trace's ids name live tensors and may be reused once freed; the reader
 * maps each id to the tensor its last alloc made (an open-addressing table,
 * linear probing, deletion by backward shift) and checks that every id it
 * meets is live, or, for an alloc, not. Sizes take K/M/G/T suffixes
 * (binary, base_parse_size).
 *
 * Note [What a trace may ask]
 * A trace is input, and a few lines of it can ask for anything: the reader
 * refuses, with its FILE:LINE, what the model cannot run rather than
 * failing inside it (exit 1) or running for minutes.
 * - Chunks. The model keeps a state per chunk id and ranks the evictable
 *   ones at every event, so its memory and time grow with the chunks the
 *   tensors need at once; `chunk 2` and `alloc 1 1G` (40 bytes with a
 *   kernel) asked for 2^29 of them and 12.5 GB. At most SIM_MAX_PLACED
 *   (2^20) are live at once: 2 TiB at lms's 2 MiB chunk, more than any
 *   device the simulator is for times the most oversubscription. A
 *   chunk is at most SIM_MAX_CHUNK_BYTES (1 GiB).
 * - Time. The model's clock is uint64_t ns, and UINT64_MAX means "nothing
 *   due": a kernel of 2^64 - 1 ns wrapped it. The kernels' times add up to
 *   at most SIM_MAX_COMPUTE_NS (2^52 ns, 52 days), which leaves the link
 *   and the VMM queue room: a 1 GiB chunk crosses a 25 GB/s link in 43 ms.
 * - Something to model. A trace whose kernels name no tensor because
 *   nothing is ever allocated has no chunk for a policy to manage.
 * - Text. A NUL byte would end the line early, silently: refused.
 * Ops and accesses are counted in uint32_t: fewer than 2^32 - 1 of each.
 *
 * Note [Gzipped traces]
 * Recorded traces are kept gzipped (bench/traces/NAME.trace.gz, written by
 * tools/lms-trace-torch.py): three steps of GPT-2 are 13 550 lines, 346 KB
 * as text and 54 KB gzipped. The reader looks at the
 * first byte of what it is given: gzip's magic (0x1f, never the start of a
 * text trace) puts zlib's inflate between the FILE and the line reader,
 * through a stdio stream of its own (fopencookie), so that every line goes
 * through the same checks as a plain trace's and a caller passes any
 * FILE (a file, a pipe, fmemopen) as before. Members written one after
 * another (`cat a.gz b.gz`) read as one trace, as gzip -d reads them; a
 * damaged or cut stream is refused with the line it got to.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <zlib.h>

#include "base/base.h"
#include "bench/simulate.h"

/* Words for sim_phase_t ("" for none) and sim_mode_t. */
static const char *const phase_word[] = {"", "fwd", "bwd", "opt"};
static const char mode_letter[] = "rwo";

/* ---- live ids --------------------------------------------------------------- */

typedef struct idmap {
    uint64_t *key;
    uint32_t *val; /* SIM_NONE: empty slot */
    size_t cap, n;
} idmap_t;

static size_t slot_of(uint64_t key, size_t cap)
{
    key ^= key >> 33;
    key *= 0xff51afd7ed558ccdull;
    key ^= key >> 33;
    return (size_t)key & (cap - 1);
}

static bool idmap_grow(idmap_t *m)
{
    size_t cap = m->cap ? 2 * m->cap : 1024;
    uint64_t *key = calloc(cap, sizeof *key);
    uint32_t *val = malloc(cap * sizeof *val);
    if (key == NULL || val == NULL) {
        free(key);
        free(val);
        return false;
    }
    memset(val, 0xff, cap * sizeof *val);
    for (size_t i = 0; i < m->cap; i++) {
        if (m->val[i] == SIM_NONE)
            continue;
        size_t s = slot_of(m->key[i], cap);
        while (val[s] != SIM_NONE)
            s = (s + 1) & (cap - 1);
        key[s] = m->key[i];
        val[s] = m->val[i];
    }
    free(m->key);
    free(m->val);
    m->key = key;
    m->val = val;
    m->cap = cap;
    return true;
}

/* The slot that holds key, or the empty one where it would go. */
static size_t idmap_find(const idmap_t *m, uint64_t key)
{
    size_t s = slot_of(key, m->cap);
    while (m->val[s] != SIM_NONE && m->key[s] != key)
        s = (s + 1) & (m->cap - 1);
    return s;
}

static uint32_t idmap_get(const idmap_t *m, uint64_t key)
{
    return m->cap == 0 ? SIM_NONE : m->val[idmap_find(m, key)];
}

static bool idmap_put(idmap_t *m, uint64_t key, uint32_t val)
{
    if (2 * (m->n + 1) > m->cap && !idmap_grow(m))
        return false;
    size_t s = idmap_find(m, key);
    m->key[s] = key;
    m->val[s] = val;
    m->n++;
    return true;
}

static void idmap_del(idmap_t *m, uint64_t key)
{
    size_t hole = idmap_find(m, key), mask = m->cap - 1;
    m->val[hole] = SIM_NONE;
    m->n--;
    for (size_t s = (hole + 1) & mask; m->val[s] != SIM_NONE; s = (s + 1) & mask) {
        size_t home = slot_of(m->key[s], m->cap);
        /* moves back unless its home lies cyclically in (hole, s] */
        if (((s - home) & mask) >= ((s - hole) & mask)) {
            m->key[hole] = m->key[s];
            m->val[hole] = m->val[s];
            m->val[s] = SIM_NONE;
            hole = s;
        }
    }
}

/* ---- reading ------------------------------------------------------------------ */

typedef struct reader {
    const char *path;
    size_t line;
    char *err;
    size_t errlen;
    sim_workload_t *w;
    idmap_t ids;
    char **tok; /* the words of the line */
    size_t captok;
    bool header, ops, chunk, device;
    uint64_t live_chunks; /* of the live tensors, at the chunk size (Note [What a trace may ask]) */
    uint64_t compute_ns;  /* the kernels' times so far */
    size_t first_kernel;  /* its line; 0: none yet */
} reader_t;

static bool fail(reader_t *r, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static bool fail(reader_t *r, const char *fmt, ...)
{
    int n = snprintf(r->err, r->errlen, "%s:%zu: ", r->path, r->line);
    va_list ap;
    va_start(ap, fmt);
    if (n >= 0 && (size_t)n < r->errlen)
        vsnprintf(r->err + n, r->errlen - (size_t)n, fmt, ap);
    va_end(ap);
    return false;
}

static bool parse_u64(const char *s, uint64_t *out)
{
    if (s == NULL || *s < '0' || *s > '9')
        return false;
    char *end;
    errno = 0;
    unsigned long long v = strtoull(s, &end, 10);
    if (errno != 0 || *end != '\0')
        return false;
    *out = v;
    return true;
}

static bool parse_layer(reader_t *r, const char *s, int32_t *out)
{
    uint64_t v;
    if (!parse_u64(s, &v) || v > INT32_MAX)
        return fail(r, "a layer is a number from 0 to %d, not '%s'", INT32_MAX, s ? s : "");
    *out = (int32_t)v;
    return true;
}

/* The tensor a live id names, and the id. */
static bool live_tensor(reader_t *r, const char *s, uint32_t *t, uint64_t *id)
{
    if (!parse_u64(s, id))
        return fail(r, "an id is a non-negative integer, not '%s'", s);
    *t = idmap_get(&r->ids, *id);
    if (*t == SIM_NONE)
        return fail(r, "id %llu is not live (never allocated, or freed)", (unsigned long long)*id);
    return true;
}

/* "alloc <id> <bytes> [act <layer>]" */
static bool read_alloc(reader_t *r, char **tok, int n)
{
    uint64_t id, bytes;
    int32_t layer = -1;
    if (n != 3 && !(n == 5 && strcmp(tok[3], "act") == 0))
        return fail(r, "expected 'alloc <id> <bytes> [act <layer>]'");
    if (!parse_u64(tok[1], &id))
        return fail(r, "an id is a non-negative integer, not '%s'", tok[1]);
    if (!base_parse_size(tok[2], &bytes) || bytes == 0)
        return fail(r, "'%s' is not a size of at least one byte", tok[2]);
    if (n == 5 && !parse_layer(r, tok[4], &layer))
        return false;
    if (idmap_get(&r->ids, id) != SIM_NONE)
        return fail(r, "id %llu is already live", (unsigned long long)id);
    uint64_t chunks = sim_chunks_of(r->w, bytes);
    if (chunks > SIM_MAX_PLACED - r->live_chunks)
        return fail(r, "the tensors live at once would need more than %u chunks of %llu bytes, "
                       "the most the simulator models: a larger 'chunk' line, or a smaller trace",
                    SIM_MAX_PLACED, (unsigned long long)r->w->chunk_bytes);
    r->live_chunks += chunks;
    if (!idmap_put(&r->ids, id, (uint32_t)r->w->ntensors))
        return fail(r, "no host memory");
    sim_alloc(r->w, bytes, n == 5, layer);
    return true;
}

static bool read_free(reader_t *r, char **tok, int n)
{
    uint32_t t;
    uint64_t id;
    if (n != 2)
        return fail(r, "expected 'free <id>'");
    if (!live_tensor(r, tok[1], &t, &id))
        return false;
    idmap_del(&r->ids, id);
    r->live_chunks -= sim_chunks_of(r->w, r->w->tensors[t].bytes);
    sim_free(r->w, t);
    return true;
}

/* "kernel <compute_ns> [layer <l> fwd|bwd|opt] <id>:r|w|o ..." */
static bool read_kernel(reader_t *r, char **tok, int n)
{
    uint64_t ns;
    int32_t layer = -1;
    sim_phase_t phase = SIM_PHASE_NONE;
    int i = 2;
    if (n < 2 || !parse_u64(tok[1], &ns))
        return fail(r, "expected 'kernel <compute_ns> ...' with the time in whole ns");
    if (n > 2 && strcmp(tok[2], "layer") == 0) {
        if (n < 5 || !parse_layer(r, tok[3], &layer))
            return n < 5 ? fail(r, "expected 'layer <l> fwd|bwd|opt'") : false;
        for (int p = SIM_FWD; p <= SIM_OPT; p++)
            phase = strcmp(tok[4], phase_word[p]) == 0 ? (sim_phase_t)p : phase;
        if (phase == SIM_PHASE_NONE)
            return fail(r, "a phase is fwd, bwd or opt, not '%s'", tok[4]);
        i = 5;
    }
    if (ns > SIM_MAX_COMPUTE_NS - r->compute_ns)
        return fail(r, "the kernels' times add up to more than 2^52 ns (52 days), the most the "
                       "simulator's clock takes");
    r->compute_ns += ns;
    r->first_kernel = r->first_kernel ? r->first_kernel : r->line;
    sim_kernel(r->w, ns, layer, phase);
    for (; i < n; i++) {
        char *colon = strrchr(tok[i], ':');
        const char *mode = colon != NULL && colon[1] != '\0' && colon[2] == '\0'
                               ? strchr(mode_letter, colon[1])
                               : NULL;
        uint32_t t;
        uint64_t id;
        if (mode == NULL)
            return fail(r, "an access is <id>:r, <id>:w or <id>:o, not '%s'", tok[i]);
        if (r->w->nacc >= SIM_NONE - 1)
            return fail(r, "more than 2^32 - 2 accesses");
        *colon = '\0';
        if (!live_tensor(r, tok[i], &t, &id))
            return false;
        sim_touch(r->w, t, (sim_mode_t)(mode - mode_letter));
    }
    return true;
}

/* "chunk <bytes>" and "device <bytes>", before any op. */
static bool read_setting(reader_t *r, char **tok, int n)
{
    bool chunk = strcmp(tok[0], "chunk") == 0;
    uint64_t v;
    if (n != 2 || !base_parse_size(tok[1], &v) || v == 0)
        return fail(r, "expected '%s <bytes>' with a size of at least one byte", tok[0]);
    if (chunk && v > SIM_MAX_CHUNK_BYTES)
        return fail(r, "a chunk of %s bytes: the simulator models chunks of at most 1 GiB", tok[1]);
    if (r->ops)
        return fail(r, "'%s' must come before the first alloc, free, kernel or iteration", tok[0]);
    if (chunk ? r->chunk : r->device)
        return fail(r, "a second '%s' line", tok[0]);
    if (chunk) {
        r->chunk = true;
        r->w->chunk_bytes = v;
    } else {
        r->device = true;
        r->w->device_bytes = v;
    }
    return true;
}

static bool read_line(reader_t *r, char *line)
{
    char *hash = strchr(line, '#');
    if (hash != NULL)
        *hash = '\0';
    char *save = NULL;
    int n = 0;
    for (char *t = strtok_r(line, " \t\r\n", &save); t != NULL;
         t = strtok_r(NULL, " \t\r\n", &save)) {
        if ((size_t)n == r->captok) {
            size_t cap = r->captok ? 2 * r->captok : 64;
            char **tok = realloc(r->tok, cap * sizeof *tok);
            if (tok == NULL)
                return fail(r, "no host memory");
            r->tok = tok;
            r->captok = cap;
        }
        r->tok[n++] = t;
    }
    char **tok = r->tok;
    if (n == 0)
        return true;
    if (!r->header) {
        if (n != 2 || strcmp(tok[0], "lms-trace") != 0)
            return fail(r, "a trace starts with 'lms-trace 1'");
        if (strcmp(tok[1], "1") != 0)
            return fail(r, "trace format version %s; this simulator reads version 1", tok[1]);
        r->header = true;
        return true;
    }
    if (strcmp(tok[0], "chunk") == 0 || strcmp(tok[0], "device") == 0)
        return read_setting(r, tok, n);
    r->ops = true;
    if (r->w->nops >= SIM_NONE - 1)
        return fail(r, "more than 2^32 - 2 allocs, frees, kernels and iterations");
    if (strcmp(tok[0], "alloc") == 0)
        return read_alloc(r, tok, n);
    if (strcmp(tok[0], "free") == 0)
        return read_free(r, tok, n);
    if (strcmp(tok[0], "kernel") == 0)
        return read_kernel(r, tok, n);
    if (strcmp(tok[0], "iteration") == 0) {
        if (n != 1)
            return fail(r, "expected 'iteration' alone");
        sim_iteration(r->w);
        return true;
    }
    return fail(r, "unknown line '%s': expected alloc, free, kernel, iteration, chunk or device",
                tok[0]);
}

/* ---- gzip (Note [Gzipped traces]) ------------------------------------------------ */

typedef struct gunzip {
    FILE *in;
    z_stream z;
    unsigned char buf[1 << 16];
    bool end;         /* the last member ended where the input did */
    const char *what; /* why the stream cannot be read; NULL: it can */
} gunzip_t;

/* Reads more of the compressed input; false at its end or on an error (g->what says which). */
static bool gunzip_fill(gunzip_t *g)
{
    g->z.next_in = g->buf;
    g->z.avail_in = (uInt)fread(g->buf, 1, sizeof g->buf, g->in);
    if (g->z.avail_in == 0 && ferror(g->in))
        g->what = strerror(errno);
    return g->z.avail_in != 0;
}

static ssize_t gunzip_read(void *cookie, char *out, size_t size)
{
    gunzip_t *g = cookie;
    g->z.next_out = (unsigned char *)out;
    g->z.avail_out = (uInt)(size < UINT32_MAX ? size : UINT32_MAX);
    /* until something comes out: to stdio, a read of nothing is the end */
    while (g->z.next_out == (unsigned char *)out && !g->end) {
        if (g->z.avail_in == 0 && !gunzip_fill(g)) {
            g->what = g->what != NULL ? g->what : "the gzip stream is cut short";
            errno = EIO;
            return -1;
        }
        int rc = inflate(&g->z, Z_NO_FLUSH);
        if (rc == Z_STREAM_END) {
            /* the input's end, or another member */
            g->end = g->z.avail_in == 0 && !gunzip_fill(g);
            if (g->what != NULL) {
                errno = EIO;
                return -1;
            }
            if (!g->end)
                inflateReset(&g->z);
        } else if (rc != Z_OK && rc != Z_BUF_ERROR) {
            g->what = g->z.msg != NULL ? g->z.msg : "zlib could not inflate it";
            errno = EIO;
            return -1;
        }
    }
    return (ssize_t)((char *)g->z.next_out - out);
}

static int gunzip_close(void *cookie)
{
    gunzip_t *g = cookie;
    inflateEnd(&g->z);
    free(g);
    return 0;
}

/* f's contents inflated, as a stream of its own (f stays the caller's), or NULL with errno. */
static FILE *gunzip_open(FILE *f, gunzip_t **out)
{
    gunzip_t *g = calloc(1, sizeof *g);
    if (g == NULL)
        return NULL;
    g->in = f;
    if (inflateInit2(&g->z, 16 + MAX_WBITS) != Z_OK) { /* 16: a gzip header, not zlib's */
        free(g);
        errno = ENOMEM;
        return NULL;
    }
    FILE *z = fopencookie(g, "r", (cookie_io_functions_t){.read = gunzip_read,
                                                          .close = gunzip_close});
    if (z == NULL)
        gunzip_close(g);
    else
        *out = g;
    return z;
}

static bool read_lines(reader_t *r, FILE *f);

void sim_trace_load(const char *path, uint64_t chunk_bytes, sim_placement_t placement,
                    sim_workload_t *w)
{
    const char *base = strrchr(path, '/');
    char err[512];
    sim_init(w, base != NULL ? base + 1 : path, chunk_bytes);
    FILE *f = fopen(path, "r");
    if (f == NULL)
        sim_bad("%s: %s", path, strerror(errno));
    if (!sim_trace_read(f, path, w, err, sizeof err))
        sim_bad("%s", err);
    fclose(f);
    sim_place(w, placement);
}

bool sim_trace_read(FILE *f, const char *path, sim_workload_t *w, char *err, size_t errlen)
{
    reader_t r = {.path = path, .err = err, .errlen = errlen, .w = w};
    int first = getc(f);
    if (first != EOF)
        ungetc(first, f);
    bool ok;
    if (first == 0x1f) {
        gunzip_t *g = NULL;
        FILE *z = gunzip_open(f, &g);
        if (z == NULL)
            return fail(&r, "cannot inflate a gzipped trace: %s", strerror(errno));
        ok = read_lines(&r, z);
        if (!ok && g->what != NULL) {
            snprintf(err, errlen, "%s:%zu: not a gzipped trace, or a damaged one: %s", path,
                     r.line + 1, g->what);
        }
        fclose(z);
    } else {
        ok = read_lines(&r, f);
    }
    free(r.tok);
    free(r.ids.key);
    free(r.ids.val);
    return ok;
}

/* The trace's lines from f, into r's workload. */
static bool read_lines(reader_t *r, FILE *f)
{
    sim_workload_t *w = r->w;
    char *line = NULL;
    size_t cap = 0;
    bool ok = true;
    ssize_t len;
    while (ok && (len = getline(&line, &cap, f)) >= 0) {
        r->line++;
        const char *nul = memchr(line, '\0', (size_t)len);
        ok = nul != NULL ? fail(r, "a NUL byte at column %zu: a trace is text",
                                     (size_t)(nul - line) + 1)
                         : read_line(r, line);
    }
    if (ok && ferror(f))
        ok = fail(r, "read error: %s", strerror(errno));
    else if (ok && !r->header)
        ok = fail(r, "empty: a trace starts with 'lms-trace 1'");
    else if (ok && w->ntensors == 0 && r->first_kernel != 0) {
        r->line = r->first_kernel;
        ok = fail(r, "a kernel, and no alloc in the whole trace: the simulator has no chunk "
                      "to model");
    }
    free(line);
    return ok;
}

/* ---- writing ------------------------------------------------------------------ */

void sim_trace_write(FILE *f, const sim_workload_t *w, uint64_t device_bytes)
{
    fprintf(f, "lms-trace 1\n# %s, written by bench/simulate --dump-trace\nchunk %llu\n", w->name,
            (unsigned long long)w->chunk_bytes);
    if (device_bytes != 0)
        fprintf(f, "device %llu\n", (unsigned long long)device_bytes);
    for (size_t j = 0; j < w->nops; j++) {
        const sim_op_t *op = &w->ops[j];
        const sim_tensor_t *t = op->tensor != SIM_NONE ? &w->tensors[op->tensor] : NULL;
        switch (op->kind) {
        case SIM_ALLOC:
            fprintf(f, "alloc %u %llu", op->tensor, (unsigned long long)t->bytes);
            if (t->act)
                fprintf(f, " act %d", t->layer);
            fputc('\n', f);
            break;
        case SIM_FREE:
            fprintf(f, "free %u\n", op->tensor);
            break;
        case SIM_KERNEL:
            fprintf(f, "kernel %llu", (unsigned long long)op->ns);
            if (op->layer >= 0)
                fprintf(f, " layer %d %s", op->layer, phase_word[op->phase]);
            for (uint32_t i = op->acc; i < op->acc + op->nacc; i++)
                fprintf(f, " %u:%c", w->acc[i].tensor, mode_letter[w->acc[i].mode]);
            fputc('\n', f);
            break;
        case SIM_ITERATION:
            fputs("iteration\n", f);
            break;
        }
    }
}
