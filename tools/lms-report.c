/*
 * lms-report — turns a timeline written with LMS_TRACE=file.json into a
 * one-page HTML report with inline SVG (no script, nothing fetched: it opens
 * offline), or into the charts alone as one SVG file.
 *
 *   lms-report TRACE.json [-o OUT.html]    the page; OUT defaults to TRACE
 *                                          with .json replaced by .html
 *   lms-report TRACE.json --svg [-o OUT]   the charts only (default .svg),
 *              [--caption TEXT]            headed by what the run was on and
 *                                          TEXT (Note [The SVG on its own])
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
 * one report_t. The reader is report_read.c (its JSON scanner report_json.c),
 * the charts report_svg.c, all behind tools/report.h; this file writes the
 * page and has main.
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

#include "report.h"

#define TABLE_ALL_ROWS 24 /* more iterations than this: first and last 12 */

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
    const stat_field_t *s = stat_find(r, field);
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
    char guessed[64];
    const char *backend = report_backend(r, guessed, sizeof guessed);
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
    const stat_field_t *drops = stat_find(r, "clean_drops");
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
    fputs("usage: lms-report TRACE.json [-o OUT] [--svg [--caption TEXT]]\n"
          "  turns a timeline written with LMS_TRACE=TRACE.json into a one-page HTML\n"
          "  report (default OUT: TRACE with .json replaced by .html), or with --svg\n"
          "  into the charts alone as one SVG file (default: .svg), headed by what the\n"
          "  run was on and a line of TEXT; prints OUT.\n",
          o);
}

int main(int argc, char **argv)
{
    const char *in = NULL, *out = NULL, *caption = NULL;
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
        } else if (strcmp(argv[i], "--caption") == 0) {
            if (++i == argc) {
                fprintf(stderr, "lms-report: --caption needs a line of text\n");
                return 2;
            }
            caption = argv[i];
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
    if (caption != NULL && !svg) {
        fprintf(stderr, "lms-report: --caption heads the SVG: it needs --svg\n");
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
    else {
        r = report_new(in);
        r->caption = caption;
        if ((rc = read_timeline(r)) == 0)
            rc = write_report(r, out, svg);
    }
    report_free(r);
    free(out_buf);
    return rc;
}
