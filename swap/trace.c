/*
 * swap/trace.c — the LMS_TRACE timeline: see trace.h, and
 * docs/timeline-format.md for the format, which tools/lms-report reads.
 *
 * Owns: the file and its write buffer, the tracks of the program's streams
 * (tid 100 + k, k in order of first use), the count of iterations, and the
 * memory counter's rate limit. One timeline at a time, for the process's one
 * lms state; its state is static, so that a device observer call that comes
 * after the end finds the timeline closed rather than freed memory.
 *
 * Locks: timeline_lock guards the file, the buffer and the tracks, and is a
 * leaf (nothing is called under it but write(2)). Device threads report
 * under it alone. The memory counter's state (T.mem) and timeline_on are
 * swap_lock's: their reports come from swap/ with swap_lock held.
 *
 * Note [Timeline lines]
 * Every event is one line, "{...},\n", composed in the buffer and written
 * to the file (write(2)) only in whole lines: when the buffer is nearly
 * full, once a second from the reclaim thread (timeline_tick), and at the
 * end. So a process that dies leaves a file that ends after a complete
 * event line, as the format promises its readers. JSON allows no comma
 * after the last element of the event array, and which event is last is
 * known only at the end: the end always writes one more event, the final
 * memory counter, without the comma, then the closing lines and otherData.
 * A write that fails (a full disk) stops the timeline: later events are
 * dropped, the end is not written, and the log says so once.
 *
 * Note [Timeline times]
 * ts is microseconds since timeline_open, with 3 decimals (whole
 * nanoseconds of base_now_ns()). Device work is reported with times on the
 * same clock (device.h, set_observer), so a span is when the device ran the
 * work. Lines are written in the order reports arrive, not in order of ts:
 * a device span comes when its work ends, a memory counter held back by
 * the 100 us rule at the time it became due, with the time of its change.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "base/lockorder.h"
#include "swap/trace.h"

#define BUFFER_BYTES (64u << 10)
#define LINE_BYTES 1024u               /* the longest line but otherData */
#define MEMORY_EVERY_NS 100000u        /* 100 us between memory counters */
#define FLUSH_EVERY_NS 1000000000u     /* the buffer reaches the file at least this often */
#define LINK_SPANS 256u                /* copies of each direction kept for the overlap */

bool timeline_on;

static pthread_mutex_t timeline_lock = PTHREAD_MUTEX_INITIALIZER;

static struct {
    /* timeline_lock */
    bool open;            /* taking events */
    bool broken;          /* a write failed: events are dropped, no end is written */
    int fd;
    char *buf;            /* BUFFER_BYTES; whole lines */
    size_t len;
    uint64_t flushed_ns;  /* when buf last reached the file */
    uint64_t t0;          /* base_now_ns() at open: ts 0 */
    long pid;
    char *path;           /* a copy of LMS_TRACE's, for the log */
    dev_stream_t *h2d, *d2h;
    dev_stream_t **tracks; /* the program's streams: tid 100 + index */
    size_t ntracks, captracks, last_track;
    uint64_t iterations;
    /* written into otherData; set at open */
    char backend[16];
    char device[96];
    size_t chunk;
    double h2d_gbps, d2h_gbps;
    const char *link_source;
    /* the links' busy time (Note [Both directions busy]); kept while observing */
    struct {
        uint64_t busy[2], both;   /* ns: [0] H2D, [1] D2H */
        uint64_t end[2];          /* the end of the latest span of each direction */
        struct {
            uint64_t start, end;
        } span[2][LINK_SPANS];    /* a ring of each direction's latest spans */
        size_t next[2], n[2];
    } link;
    /* swap_lock: the memory counter (timeline_memory) */
    struct {
        uint64_t resident, host; /* the latest values reported */
        uint64_t written_resident, written_host; /* those of the last counter written */
        uint64_t written_ns;     /* and its ts */
        uint64_t changed_ns;     /* when the latest values came, if pending */
        bool pending;            /* they are not written yet */
    } mem;
} T;

/* ---- the buffer (timeline_lock held) ----------------------------------------- */

/* Writes the buffer to the file; on failure the timeline breaks (Note
 * [Timeline lines]). */
static void flush(void)
{
    for (size_t done = 0; done < T.len && !T.broken;) {
        ssize_t n = write(T.fd, T.buf + done, T.len - done);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0) {
            T.broken = true;
            base_log(BASE_LOG_WARN, "LMS_TRACE: writing the timeline %s failed (%s): it stops "
                     "here, unfinished", T.path, n < 0 ? strerror(errno) : "nothing written");
            break;
        }
        done += (size_t)n;
    }
    T.len = 0;
    T.flushed_ns = base_now_ns();
}

/* Closes the file and frees the buffers (the lock held, or no other thread). */
static void release(void)
{
    close(T.fd);
    base_meta_free(T.buf);
    base_meta_free(T.tracks);
    base_meta_free(T.path);
    T.buf = NULL;
    T.tracks = NULL;
    T.path = NULL;
    T.open = false;
}

static void append(const char *text, size_t n)
{
    if (!T.open || T.broken)
        return;
    if (T.len + n > BUFFER_BYTES)
        flush();
    if (n > BUFFER_BYTES) { /* never: lines are short */
        base_log(BASE_LOG_DEBUG, "LMS_TRACE: a %zu-byte line is dropped", n);
        return;
    }
    memcpy(T.buf + T.len, text, n);
    T.len += n;
}

/* One event line: fmt's text, then ",\n" (last: "\n"; Note [Timeline lines]). */
static void line(bool last, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void line(bool last, const char *fmt, ...)
{
    char text[LINE_BYTES];
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(text, sizeof text - 2, fmt, ap);
    va_end(ap);
    if (n < 0 || (size_t)n >= sizeof text - 2) {
        base_log(BASE_LOG_DEBUG, "LMS_TRACE: an event longer than %u bytes is dropped", LINE_BYTES);
        return;
    }
    if (!last)
        text[n++] = ',';
    text[n++] = '\n';
    append(text, (size_t)n);
}

/* Microseconds since open, "%llu.%03u": an argument for "%s". */
typedef struct us {
    char s[32];
} us_t;

static us_t us(uint64_t ns)
{
    uint64_t t = ns > T.t0 ? ns - T.t0 : 0;
    us_t u;
    snprintf(u.s, sizeof u.s, "%" PRIu64 ".%03u", t / 1000, (unsigned)(t % 1000));
    return u;
}

static us_t us_between(uint64_t start_ns, uint64_t end_ns)
{
    return us(T.t0 + (end_ns > start_ns ? end_ns - start_ns : 0));
}

/* s as the inside of a JSON string (quotes, backslashes, control characters escaped). */
static void json_text(char *out, size_t len, const char *s)
{
    size_t o = 0;
    for (; *s != '\0' && o + 7 < len; s++) {
        unsigned char ch = (unsigned char)*s;
        if (ch == '"' || ch == '\\')
            o += (size_t)snprintf(out + o, len - o, "\\%c", ch);
        else if (ch < 0x20)
            o += (size_t)snprintf(out + o, len - o, "\\u%04x", ch);
        else
            out[o++] = (char)ch;
    }
    out[o] = '\0';
}

/* ---- open --------------------------------------------------------------------- */

lms_status_t timeline_open(const char *setting, const dev_info_t *info, const dev_config_t *dev)
{
    char path[4096]; /* "%p": this process's own file (base_expand_path) */
    if (!base_expand_path(setting, path, sizeof path))
        return base_fail(LMS_ERR_INVALID, "lms_init: LMS_TRACE: \"%.200s%s\" is too long a file "
                         "name", setting, strlen(setting) > 200 ? "..." : "");
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (fd < 0)
        return base_fail(LMS_ERR_SYSTEM,
                         "lms_init: LMS_TRACE: cannot write the timeline to \"%.200s%s\": %s; set "
                         "LMS_TRACE to a file that can be written, or unset it",
                         path, strlen(path) > 200 ? "..." : "", strerror(errno));
    char *buf = base_meta_alloc(BUFFER_BYTES), *name = base_meta_alloc(strlen(path) + 1);
    if (buf == NULL || name == NULL) {
        close(fd);
        base_meta_free(buf);
        base_meta_free(name);
        return base_fail(LMS_ERR_OUT_OF_MEMORY, "lms_init: no host memory for the timeline");
    }
    strcpy(name, path);
    lo_lock(&timeline_lock, LO_TIMELINE);
    bool sim = strcmp(info->backend, "sim") == 0;
    bool throttled = sim && (dev->sim_h2d_gbps > 0 || dev->sim_d2h_gbps > 0);
    uint64_t now = base_now_ns();
    T.open = true;
    T.broken = false;
    T.fd = fd;
    T.buf = buf;
    T.len = 0;
    T.flushed_ns = now;
    T.t0 = now;
    T.pid = (long)getpid();
    T.path = name;
    T.h2d = T.d2h = NULL;
    T.tracks = NULL;
    T.ntracks = T.captracks = T.last_track = 0;
    T.iterations = 0;
    snprintf(T.backend, sizeof T.backend, "%s", info->backend);
    snprintf(T.device, sizeof T.device, "%s", info->name);
    T.chunk = info->granularity;
    T.h2d_gbps = sim ? dev->sim_h2d_gbps : 0;
    T.d2h_gbps = sim ? dev->sim_d2h_gbps : 0;
    T.link_source = !sim ? "not measured" : throttled ? "sim throttle" : "unthrottled sim";
    T.mem.resident = T.mem.host = 0;
    T.mem.written_resident = T.mem.written_host = 0;
    T.mem.written_ns = now;
    T.mem.pending = false;

    static const char *const tracks[] = {NULL, "H2D", "D2H", "lms", "stalls"};
    char backend[32];
    json_text(backend, sizeof backend, T.backend);
    append("{\"traceEvents\":[\n", 17);
    line(false, "{\"name\":\"process_name\",\"ph\":\"M\",\"pid\":%ld,\"tid\":0,"
                "\"args\":{\"name\":\"lms (%s)\"}}", T.pid, backend);
    for (int tid = 1; tid <= 4; tid++)
        line(false, "{\"name\":\"thread_name\",\"ph\":\"M\",\"pid\":%ld,\"tid\":%d,"
                    "\"args\":{\"name\":\"%s\"}}", T.pid, tid, tracks[tid]);
    line(false, "{\"name\":\"memory\",\"cat\":\"memory\",\"ph\":\"C\",\"ts\":%s,\"pid\":%ld,"
                "\"tid\":0,\"args\":{\"resident\":0,\"host\":0}}", us(now).s, T.pid);
    flush(); /* the head now: a file that cannot take it fails init */
    bool broken = T.broken;
    if (broken) {
        T.open = false;
        close(fd);
        base_meta_free(buf);
        base_meta_free(name);
        T.buf = NULL;
        T.path = NULL;
    }
    lo_unlock(&timeline_lock, LO_TIMELINE);
    if (broken)
        return base_fail(LMS_ERR_SYSTEM, "lms_init: LMS_TRACE: cannot write the timeline to "
                         "\"%.200s%s\": the first write failed", path,
                         strlen(path) > 200 ? "..." : "");
    timeline_on = true;
    return LMS_OK;
}

void timeline_copy_streams(dev_stream_t *h2d, dev_stream_t *d2h)
{
    lo_lock(&timeline_lock, LO_TIMELINE);
    T.h2d = h2d;
    T.d2h = d2h;
    memset(&T.link, 0, sizeof T.link);
    lo_unlock(&timeline_lock, LO_TIMELINE);
}

/* ---- the links' busy time ------------------------------------------------------- */

/*
 * Note [Both directions busy]
 * A full-duplex link is used well when copies in and out run at once, and
 * that is measured from the device's own account of each copy (its span,
 * as the observer reports it: on sim its slot on the throttled link), not
 * from when lms queued it: an eviction's copy may wait long on its stream
 * for the work that used its chunks. Each direction's copies run one at a
 * time on its stream and are reported in order, so its busy time is the
 * sum of its spans (clipped to start after the last one's end), and the
 * time both were busy is the sum of each pair's overlap, counted once, by
 * whichever of the two is reported later: against the other direction's
 * latest LINK_SPANS spans, newest first, as far back as one ends after the
 * new one starts. The two streams report in any interleaving, but never
 * hundreds of copies apart.
 */
static void link_span(int dir, uint64_t start, uint64_t end)
{
    if (start < T.link.end[dir])
        start = T.link.end[dir];
    if (end <= start)
        return;
    T.link.busy[dir] += end - start;
    T.link.end[dir] = end;
    int other = !dir;
    for (size_t k = 0; k < T.link.n[other]; k++) {
        size_t i = (T.link.next[other] + LINK_SPANS - 1 - k) % LINK_SPANS;
        uint64_t s = T.link.span[other][i].start, e = T.link.span[other][i].end;
        if (e <= start)
            break; /* and every older one ends earlier still */
        uint64_t lo = s > start ? s : start, hi = e < end ? e : end;
        T.link.both += hi > lo ? hi - lo : 0;
    }
    T.link.span[dir][T.link.next[dir]].start = start;
    T.link.span[dir][T.link.next[dir]].end = end;
    T.link.next[dir] = (T.link.next[dir] + 1) % LINK_SPANS;
    T.link.n[dir] += T.link.n[dir] < LINK_SPANS;
}

void timeline_link_busy(uint64_t *h2d_ns, uint64_t *d2h_ns, uint64_t *both_ns)
{
    lo_lock(&timeline_lock, LO_TIMELINE);
    *h2d_ns = T.link.busy[0];
    *d2h_ns = T.link.busy[1];
    *both_ns = T.link.both;
    lo_unlock(&timeline_lock, LO_TIMELINE);
}

/* ---- device work ---------------------------------------------------------------- */

/* The compute track of stream s (its k), a new one written to the file on
 * first use; SIZE_MAX when there is no memory for another. */
static size_t track_of(dev_stream_t *s)
{
    if (T.last_track < T.ntracks && T.tracks[T.last_track] == s)
        return T.last_track;
    for (size_t k = 0; k < T.ntracks; k++)
        if (T.tracks[k] == s)
            return T.last_track = k;
    if (T.ntracks == T.captracks) {
        size_t cap = T.captracks ? 2 * T.captracks : 16;
        dev_stream_t **a = base_meta_realloc(T.tracks, cap * sizeof *a);
        if (a == NULL)
            return SIZE_MAX;
        T.tracks = a;
        T.captracks = cap;
    }
    size_t k = T.ntracks++;
    T.tracks[k] = s;
    line(false, "{\"name\":\"thread_name\",\"ph\":\"M\",\"pid\":%ld,\"tid\":%zu,"
                "\"args\":{\"name\":\"compute %zu\"}}", T.pid, 100 + k, k);
    return T.last_track = k;
}

void timeline_device_work(void *ctx, const dev_work_t *w)
{
    (void)ctx;
    lo_lock(&timeline_lock, LO_TIMELINE);
    if (w->stream == NULL) /* a stream gone since; never lms's */
        goto out;
    bool h2d = w->stream == T.h2d, d2h = w->stream == T.d2h;
    if (h2d || d2h)
        link_span(d2h, w->start_ns, w->end_ns);
    if (!T.open || T.broken)
        goto out;
    if (h2d || d2h) { /* lms's copies */
        line(false, "{\"name\":\"%s\",\"cat\":\"copy\",\"ph\":\"X\",\"ts\":%s,\"dur\":%s,"
                    "\"pid\":%ld,\"tid\":%d,\"args\":{\"bytes\":%zu}}",
             h2d ? "h2d" : "d2h", us(w->start_ns).s, us_between(w->start_ns, w->end_ns).s, T.pid,
             h2d ? 1 : 2, w->bytes);
        goto out;
    }
    size_t k = track_of(w->stream);
    char name[64];
    json_text(name, sizeof name, w->name);
    if (k != SIZE_MAX)
        line(false, "{\"name\":\"%s\",\"cat\":\"compute\",\"ph\":\"X\",\"ts\":%s,\"dur\":%s,"
                    "\"pid\":%ld,\"tid\":%zu,\"args\":{}}",
             name, us(w->start_ns).s, us_between(w->start_ns, w->end_ns).s, T.pid, 100 + k);
out:
    lo_unlock(&timeline_lock, LO_TIMELINE);
}

/* ---- decisions ------------------------------------------------------------------- */

void timeline_evict(uint64_t at_ns, size_t chunks, size_t bytes, bool copied, timeline_by_t by)
{
    static const char *const who[] = {"reclaim", "direct", "prefetch"};
    lo_lock(&timeline_lock, LO_TIMELINE);
    line(false, "{\"name\":\"evict\",\"cat\":\"swap\",\"ph\":\"i\",\"s\":\"t\",\"ts\":%s,"
                "\"pid\":%ld,\"tid\":3,\"args\":{\"chunks\":%zu,\"bytes\":%zu,\"copied\":%s,"
                "\"by\":\"%s\"}}",
         us(at_ns).s, T.pid, chunks, bytes, copied ? "true" : "false", who[by]);
    lo_unlock(&timeline_lock, LO_TIMELINE);
}

void timeline_fetch(uint64_t at_ns, bool ahead, size_t chunks, size_t bytes)
{
    lo_lock(&timeline_lock, LO_TIMELINE);
    line(false, "{\"name\":\"%s\",\"cat\":\"swap\",\"ph\":\"i\",\"s\":\"t\",\"ts\":%s,"
                "\"pid\":%ld,\"tid\":3,\"args\":{\"chunks\":%zu,\"bytes\":%zu}}",
         ahead ? "prefetch" : "fetch", us(at_ns).s, T.pid, chunks, bytes);
    lo_unlock(&timeline_lock, LO_TIMELINE);
}

void timeline_stall(uint64_t start_ns, uint64_t end_ns)
{
    lo_lock(&timeline_lock, LO_TIMELINE);
    line(false, "{\"name\":\"stall\",\"cat\":\"stall\",\"ph\":\"X\",\"ts\":%s,\"dur\":%s,"
                "\"pid\":%ld,\"tid\":4,\"args\":{}}",
         us(start_ns).s, us_between(start_ns, end_ns).s, T.pid);
    lo_unlock(&timeline_lock, LO_TIMELINE);
}

void timeline_iteration(void)
{
    uint64_t now = base_now_ns();
    lo_lock(&timeline_lock, LO_TIMELINE);
    line(false, "{\"name\":\"iteration\",\"cat\":\"mark\",\"ph\":\"i\",\"s\":\"p\",\"ts\":%s,"
                "\"pid\":%ld,\"tid\":3,\"args\":{\"n\":%" PRIu64 "}}",
         us(now).s, T.pid, ++T.iterations);
    lo_unlock(&timeline_lock, LO_TIMELINE);
}

/* ---- the memory counter (swap_lock held) ------------------------------------------ */

/* timeline_lock held. */
static void memory_line(bool last, uint64_t at_ns, uint64_t resident, uint64_t host)
{
    line(last, "{\"name\":\"memory\",\"cat\":\"memory\",\"ph\":\"C\",\"ts\":%s,\"pid\":%ld,"
               "\"tid\":0,\"args\":{\"resident\":%" PRIu64 ",\"host\":%" PRIu64 "}}",
         us(at_ns).s, T.pid, resident, host);
}

static void write_memory(uint64_t at_ns, uint64_t resident, uint64_t host)
{
    lo_lock(&timeline_lock, LO_TIMELINE);
    memory_line(false, at_ns, resident, host);
    lo_unlock(&timeline_lock, LO_TIMELINE);
    T.mem.written_resident = resident;
    T.mem.written_host = host;
    T.mem.written_ns = at_ns;
}

/* Writes the pending values if 100 us have passed since the last counter,
 * at the time they came or when the 100 us were up, whichever is later:
 * they held from then until now. Values that came back to the last ones
 * written are not written again. */
static void memory_due(uint64_t now)
{
    uint64_t due = T.mem.written_ns + MEMORY_EVERY_NS;
    if (!T.mem.pending || now < due)
        return;
    T.mem.pending = false;
    if (T.mem.resident != T.mem.written_resident || T.mem.host != T.mem.written_host)
        write_memory(T.mem.changed_ns > due ? T.mem.changed_ns : due, T.mem.resident, T.mem.host);
}

void timeline_memory(uint64_t resident, uint64_t host)
{
    if (resident == T.mem.resident && host == T.mem.host)
        return;
    uint64_t now = base_now_ns();
    memory_due(now); /* the values before these, if their time has come */
    T.mem.resident = resident;
    T.mem.host = host;
    if (!T.mem.pending && now >= T.mem.written_ns + MEMORY_EVERY_NS) {
        write_memory(now, resident, host);
        return;
    }
    T.mem.pending = true;
    T.mem.changed_ns = now;
}

void timeline_tick(void)
{
    uint64_t now = base_now_ns();
    memory_due(now);
    lo_lock(&timeline_lock, LO_TIMELINE);
    if (T.len > 0 && now - T.flushed_ns >= FLUSH_EVERY_NS)
        flush();
    lo_unlock(&timeline_lock, LO_TIMELINE);
}

/* ---- the end ------------------------------------------------------------------------ */

void timeline_finish(const lms_stats_t *st)
{
    uint64_t now = base_now_ns();
    memory_due(now);
    /* The last line and the end in one hold of the lock: a device thread's
     * report between them would follow the line without a comma. */
    lo_lock(&timeline_lock, LO_TIMELINE);
    memory_line(true, now, st->resident_bytes, st->host_bytes);
    char device[sizeof T.device * 6], stats[LINE_BYTES], other[2 * LINE_BYTES];
    json_text(device, sizeof device, T.device);
    size_t n = 0;
#define STATS_FIELD(f)                                                                       \
    n += (size_t)snprintf(stats + n, sizeof stats - n, "%s\"" #f "\":%" PRIu64,              \
                          n == 0 ? "" : ",", st->f);
    LMS_STATS_FIELDS(STATS_FIELD)
#undef STATS_FIELD
    int len = snprintf(other, sizeof other,
                       "],\n\"displayTimeUnit\":\"ms\",\n\"otherData\":{\"lms\":\"timeline 1\","
                       "\"backend\":\"%s\",\"device\":\"%s\",\"chunk\":%zu,\"device_limit\":%" PRIu64
                       ",\"host_limit\":%" PRIu64 ",\"link\":{\"h2d_gbps\":%.15g,\"d2h_gbps\":%.15g,"
                       "\"source\":\"%s\"},\"duration_us\":%s,\"stats\":{%s}}}\n",
                       T.backend, device, T.chunk, st->device_limit, st->host_limit, T.h2d_gbps,
                       T.d2h_gbps, T.link_source, us(now).s, stats);
    if (len > 0 && (size_t)len < sizeof other)
        append(other, (size_t)len);
    flush();
    release();
    lo_unlock(&timeline_lock, LO_TIMELINE);
    timeline_on = false;
}

void timeline_forget(void)
{
    /* single-threaded now: the lock may have been held by a thread the fork left behind */
    pthread_mutex_init(&timeline_lock, NULL);
    if (T.open)
        release();
    T.len = 0;
    timeline_on = false;
}
