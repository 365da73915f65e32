/*
 * tools/report_svg.c — lms-report's charts: the bins a report_t kept,
 * gathered into about TARGET_BINS display bins (a view_t), drawn as SVG:
 * memory over time against the device limit, the link's bandwidth each way
 * against what was available, and a strip of activity with the iteration
 * marks. Also the text formatting the page shares.
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
/* ---- formatting ---- */

/* The length of the well-formed UTF-8 sequence at s (1 to 4), or 0. */
static size_t utf8_len(const unsigned char *s)
{
    size_t n = s[0] >= 0xf0 && s[0] <= 0xf4 ? 4 : s[0] >= 0xe0 ? 3 : s[0] >= 0xc2 ? 2 : 0;
    for (size_t i = 1; i < n; i++)
        if ((s[i] & 0xc0) != 0x80)
            return 0;
    return n;
}

void put_escaped(FILE *o, const char *text)
{
    const unsigned char *s = (const unsigned char *)text;
    while (*s) {
        size_t n = 1;
        switch (*s) {
        case '&': fputs("&amp;", o); break;
        case '<': fputs("&lt;", o); break;
        case '>': fputs("&gt;", o); break;
        case '"': fputs("&quot;", o); break;
        case '\'': fputs("&#39;", o); break;
        default:
            if (*s < 0x20)
                fputc(' ', o);
            else if (*s < 0x80)
                fputc(*s, o);
            else if ((n = utf8_len(s)) > 0)
                fwrite(s, 1, n, o);
            else {
                fputs("\xef\xbf\xbd", o);
                n = 1;
            }
        }
        s += n;
    }
}

const char *fmt_bytes(char *b, size_t n, double v)
{
    if (v >= 1e9)
        snprintf(b, n, "%.2f GB", v / 1e9);
    else if (v >= 1e6)
        snprintf(b, n, "%.1f MB", v / 1e6);
    else if (v >= 1e3)
        snprintf(b, n, "%.1f kB", v / 1e3);
    else
        snprintf(b, n, "%.0f B", v);
    return b;
}

const char *fmt_size(char *b, size_t n, double v)
{
    static const char *unit[] = {"B", "KiB", "MiB", "GiB", "TiB"};
    int u = 0;
    while (v >= 1024 && u < 4) {
        v /= 1024;
        u++;
    }
    if (v == floor(v))
        snprintf(b, n, "%.0f %s", v, unit[u]);
    else
        snprintf(b, n, "%.2f %s", v, unit[u]);
    return b;
}

const char *fmt_duration(char *b, size_t n, double us)
{
    if (us >= 1e6)
        snprintf(b, n, "%.3f s", us / 1e6);
    else if (us >= 1e3)
        snprintf(b, n, "%.2f ms", us / 1e3);
    else
        snprintf(b, n, "%.0f \xc2\xb5s", us);
    return b;
}


void view_make(const report_t *r, double run_us, view_t *v)
{
    v->run_us = run_us > 0 ? run_us : 1;
    size_t used = (size_t)ceil(v->run_us / r->width_us);
    if (used < 1)
        used = 1;
    if (used > FINE_BINS)
        used = FINE_BINS;
    v->g = (used + TARGET_BINS - 1) / TARGET_BINS;
    v->nb = (used + v->g - 1) / v->g;
    v->bin_us = r->width_us * (double)v->g;
    for (int s = 0; s < SUM_N; s++)
        if ((v->sum[s] = calloc(v->nb, sizeof(double))) == NULL)
            die_oom();
    for (int c = 0; c < MEM_N; c++)
        if ((v->mem_max[c] = calloc(v->nb, sizeof(double))) == NULL ||
            (v->mem_min[c] = calloc(v->nb, sizeof(double))) == NULL)
            die_oom();
    if ((v->mem_known = calloc(v->nb, sizeof(bool))) == NULL)
        die_oom();
    bool known = false;
    double now[MEM_N] = {0}; /* the counters' values where the bin starts */
    for (size_t b = 0; b < v->nb; b++) {
        double hi[MEM_N], lo[MEM_N];
        bool k = known;
        memcpy(hi, now, sizeof hi);
        memcpy(lo, now, sizeof lo);
        for (size_t i = b * v->g; i < (b + 1) * v->g && i < FINE_BINS; i++) {
            for (int s = 0; s < SUM_N; s++)
                v->sum[s][b] += r->sum[s][i];
            const mem_bin_t *m = &r->mem[i];
            if (!m->has)
                continue;
            for (int c = 0; c < MEM_N; c++) {
                hi[c] = k ? fmax(hi[c], m->max[c]) : m->max[c];
                lo[c] = k ? fmin(lo[c], m->min[c]) : m->min[c];
                now[c] = m->last[c];
            }
            k = known = true;
        }
        for (int c = 0; c < MEM_N; c++) {
            v->mem_max[c][b] = hi[c];
            v->mem_min[c][b] = lo[c];
        }
        v->mem_known[b] = k;
    }
    if (v->run_us >= 2e6) {
        v->unit_us = 1e6;
        v->unit = "s";
    } else if (v->run_us >= 2e3) {
        v->unit_us = 1e3;
        v->unit = "ms";
    } else {
        v->unit_us = 1;
        v->unit = "\xc2\xb5s";
    }
}

void view_free(view_t *v)
{
    for (int s = 0; s < SUM_N; s++)
        free(v->sum[s]);
    for (int c = 0; c < MEM_N; c++) {
        free(v->mem_max[c]);
        free(v->mem_min[c]);
    }
    free(v->mem_known);
}

/* The part of display bin b inside the run, in us. */
static double bin_span(const view_t *v, size_t b)
{
    double t0 = (double)b * v->bin_us;
    return fmin(t0 + v->bin_us, v->run_us) - t0;
}

/* A step of 1, 2 or 5 times a power of ten giving about `ticks` ticks. */
static double nice_step(double range, int ticks)
{
    if (!(range > 0))
        return 1;
    double raw = range / ticks, p = pow(10, floor(log10(raw))), m = raw / p;
    return (m < 1.5 ? 1 : m < 3.5 ? 2 : m < 7.5 ? 5 : 10) * p;
}

static int decimals_for(double step)
{
    int d = (int)ceil(-log10(step) - 1e-9);
    return d < 0 ? 0 : d > 6 ? 6 : d;
}

/* A plot area: x over [0, run_us], y over [0, ymax]. */
typedef struct frame {
    double x0, y0, w, h;
    double run_us, ymax;
} frame_t;

static double fx(const frame_t *f, double t_us) { return f->x0 + f->w * t_us / f->run_us; }
static double fy(const frame_t *f, double y) { return f->y0 + f->h - f->h * fmin(y, f->ymax) / f->ymax; }

#define FONT "font-family=\"Helvetica, Arial, sans-serif\""
#define PLOT_X 78.0
#define PLOT_W 850.0
#define SVG_W 960.0

static void time_axis(FILE *o, const frame_t *f, const view_t *v)
{
    double step = nice_step(v->run_us / v->unit_us, 8);
    int dec = decimals_for(step);
    double yb = f->y0 + f->h;
    fprintf(o, "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"#444\"/>\n",
            f->x0, yb, f->x0 + f->w, yb);
    for (int k = 0; k * step <= v->run_us / v->unit_us * (1 + 1e-9); k++) {
        double t = k * step, x = fx(f, t * v->unit_us);
        fprintf(o, "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"#444\"/>\n", x,
                yb, x, yb + 4);
        fprintf(o, "<text x=\"%.1f\" y=\"%.1f\" text-anchor=\"middle\">%.*f</text>\n", x, yb + 17,
                dec, t);
    }
    fprintf(o, "<text x=\"%.1f\" y=\"%.1f\" text-anchor=\"middle\">time (%s)</text>\n",
            f->x0 + f->w / 2, yb + 32, v->unit);
}

/* Horizontal grid lines and labels; values divided by `scale` for them. */
static void value_axis(FILE *o, const frame_t *f, double scale, const char *unit)
{
    double step = nice_step(f->ymax / scale, 5);
    int dec = decimals_for(step);
    for (int k = 0; k * step <= f->ymax / scale * (1 + 1e-9); k++) {
        double y = k * step, py = fy(f, y * scale);
        fprintf(o, "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"#ddd\"/>\n",
                f->x0, py, f->x0 + f->w, py);
        fprintf(o, "<text x=\"%.1f\" y=\"%.1f\" text-anchor=\"end\">%.*f</text>\n", f->x0 - 6,
                py + 4, dec, y);
    }
    fprintf(o,
            "<text x=\"%.1f\" y=\"%.1f\" text-anchor=\"middle\" "
            "transform=\"rotate(-90 %.1f %.1f)\">%s</text>\n",
            f->x0 - 52, f->y0 + f->h / 2, f->x0 - 52, f->y0 + f->h / 2, unit);
}

/* A step line through per-bin values, broken where known[b] is false. */
static void step_path(FILE *o, const frame_t *f, const view_t *v, const double *val,
                      const bool *known, const char *attrs)
{
    bool open = false;
    fputs("<path d=\"", o);
    for (size_t b = 0; b < v->nb; b++) {
        if (known != NULL && !known[b]) {
            open = false;
            continue;
        }
        double y = fy(f, val[b]);
        if (!open)
            fprintf(o, "M%.1f %.1f", fx(f, (double)b * v->bin_us), y);
        else
            fprintf(o, "V%.1f", y);
        fprintf(o, "H%.1f", fx(f, (double)b * v->bin_us + bin_span(v, b)));
        open = true;
    }
    fprintf(o, "\" %s/>\n", attrs);
}

/* The area between two step lines, lo (NULL: the axis) and hi, in the
 * stretches where known[b] is true. */
static void band_path(FILE *o, const frame_t *f, const view_t *v, const double *lo,
                      const double *hi, const bool *known, const char *attrs)
{
    fputs("<path d=\"", o);
    for (size_t b0 = 0; b0 < v->nb;) {
        if (!known[b0]) {
            b0++;
            continue;
        }
        size_t b1 = b0; /* the stretch [b0, b1] */
        while (b1 + 1 < v->nb && known[b1 + 1])
            b1++;
        fprintf(o, "M%.1f %.1f", fx(f, (double)b0 * v->bin_us), fy(f, hi[b0]));
        for (size_t b = b0; b <= b1; b++)
            fprintf(o, "V%.1fH%.1f", fy(f, hi[b]), fx(f, (double)b * v->bin_us + bin_span(v, b)));
        for (size_t b = b1 + 1; b-- > b0;)
            fprintf(o, "V%.1fH%.1f", fy(f, lo ? lo[b] : 0), fx(f, (double)b * v->bin_us));
        fputs("Z", o);
        b0 = b1 + 1;
    }
    fprintf(o, "\" %s/>\n", attrs);
}

/* A legend entry at (x, y): a swatch (a filled box, or a line dashed as
 * dash says) and its label. Returns where the next entry may start. */
static double legend_item(FILE *o, double x, double y, const char *stroke, const char *dash,
                          const char *fill, const char *label)
{
    if (fill != NULL)
        fprintf(o, "<rect x=\"%.1f\" y=\"%.1f\" width=\"18\" height=\"10\" fill=\"%s\" "
                   "stroke=\"%s\"/>\n", x, y - 9, fill, stroke);
    else
        fprintf(o, "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"%s\" "
                   "stroke-width=\"2\"%s%s%s/>\n", x, y - 4, x + 18, y - 4, stroke,
                dash ? " stroke-dasharray=\"" : "", dash ? dash : "", dash ? "\"" : "");
    fprintf(o, "<text x=\"%.1f\" y=\"%.1f\">", x + 24, y);
    put_escaped(o, label);
    fputs("</text>\n", o);
    return x + 24 + 6.7 * (double)strlen(label) + 22; /* 12 px text: ~6.7 px a character */
}

/* Colours (Okabe-Ito, for colour-blind readers) told apart by dashes and
 * shapes too, so that a grey print still reads. */
#define C_H2D "#0072B2"
#define C_D2H "#D55E00"
#define C_HOST "#E69F00"
#define C_COMPUTE "#009E73"
#define C_STALL "#222222"

static double bytes_scale(double max, const char **unit)
{
    if (max >= 1e9) {
        *unit = "GB";
        return 1e9;
    }
    if (max >= 1e6) {
        *unit = "MB";
        return 1e6;
    }
    *unit = "kB";
    return 1e3;
}

static void chart_title(FILE *o, double y, const char *title)
{
    fprintf(o, "<text x=\"%.1f\" y=\"%.1f\" font-size=\"15\" font-weight=\"bold\">", PLOT_X, y);
    put_escaped(o, title);
    fputs("</text>\n", o);
}

/* Resident bytes as a band from the lowest to the highest value in each bin
 * over a solid area up to the lowest; host bytes as the highest. */
static void chart_memory(FILE *o, const report_t *r, const view_t *v, double y)
{
    frame_t f = {PLOT_X, y + 44, PLOT_W, 190, v->run_us, 0};
    double top = fmax(r->device_limit, fmax(r->mem_peak[MEM_RES], r->mem_peak[MEM_HOST]));
    f.ymax = top > 0 ? top * 1.08 : 1e9;
    const char *unit;
    double scale = bytes_scale(f.ymax, &unit);
    char label[160], b1[32], b2[32];
    fprintf(o, "<g id=\"chart-memory\" data-peak-resident=\"%.0f\" data-peak-host=\"%.0f\">\n",
            r->mem_peak[MEM_RES], r->mem_peak[MEM_HOST]);
    chart_title(o, y + 16, "Memory: resident on the device, and held in host memory");
    value_axis(o, &f, scale, unit);
    if (r->has_mem) {
        band_path(o, &f, v, NULL, v->mem_min[MEM_RES], v->mem_known,
                  "fill=\"" C_H2D "\" fill-opacity=\"0.35\" stroke=\"none\"");
        band_path(o, &f, v, v->mem_min[MEM_RES], v->mem_max[MEM_RES], v->mem_known,
                  "fill=\"" C_H2D "\" fill-opacity=\"0.15\" stroke=\"none\"");
        step_path(o, &f, v, v->mem_max[MEM_RES], v->mem_known,
                  "fill=\"none\" stroke=\"" C_H2D "\" stroke-width=\"1.5\"");
        step_path(o, &f, v, v->mem_max[MEM_HOST], v->mem_known,
                  "fill=\"none\" stroke=\"" C_HOST "\" stroke-width=\"2\" stroke-dasharray=\"6 3\"");
    } else {
        fprintf(o, "<text x=\"%.1f\" y=\"%.1f\" text-anchor=\"middle\" fill=\"#666\">"
                   "no memory counters in the timeline</text>\n", f.x0 + f.w / 2, f.y0 + f.h / 2);
    }
    snprintf(label, sizeof label, "resident (peak %s)", fmt_bytes(b1, sizeof b1, r->mem_peak[MEM_RES]));
    double lx = legend_item(o, PLOT_X, y + 36, C_H2D, NULL, "#a6c8e0", label);
    lx = legend_item(o, lx, y + 36, C_H2D, NULL, "#dae8f2", "its range within a bin");
    snprintf(label, sizeof label, "host (peak %s)", fmt_bytes(b1, sizeof b1, r->mem_peak[MEM_HOST]));
    lx = legend_item(o, lx, y + 36, C_HOST, "6 3", NULL, label);
    if (r->device_limit > 0) {
        double ly = fy(&f, r->device_limit);
        fprintf(o, "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"#000\" "
                   "stroke-width=\"1.5\" stroke-dasharray=\"2 3\"/>\n", f.x0, ly, f.x0 + f.w, ly);
        snprintf(label, sizeof label, "device limit %s (%s)",
                 fmt_bytes(b1, sizeof b1, r->device_limit), fmt_size(b2, sizeof b2, r->device_limit));
        legend_item(o, lx, y + 36, "#000", "2 3", NULL, label);
    } else {
        legend_item(o, lx, y + 36, "#000", "2 3", NULL,
                    r->finished ? "device limit: not written" : "device limit: unknown (run did not finish)");
    }
    time_axis(o, &f, v);
    fprintf(o, "</g>\n");
}

/* Bytes of the copy spans per bin over the bin's length, each way, with
 * what the link offers as dashed lines. */
static void chart_link(FILE *o, const report_t *r, const view_t *v, double y)
{
    frame_t f = {PLOT_X, y + 44, PLOT_W, 190, v->run_us, 0};
    double *h2d = malloc(v->nb * sizeof(double)), *d2h = malloc(v->nb * sizeof(double));
    if (h2d == NULL || d2h == NULL)
        die_oom();
    double peak_h2d = 0, peak_d2h = 0;
    for (size_t b = 0; b < v->nb; b++) {
        double s = bin_span(v, b) / 1e6;
        h2d[b] = s > 0 ? v->sum[SUM_H2D_BYTES][b] / s : 0; /* bytes/s */
        d2h[b] = s > 0 ? v->sum[SUM_D2H_BYTES][b] / s : 0;
        peak_h2d = fmax(peak_h2d, h2d[b]);
        peak_d2h = fmax(peak_d2h, d2h[b]);
    }
    double top = fmax(fmax(peak_h2d, peak_d2h), 1e9 * fmax(r->h2d_gbps, r->d2h_gbps));
    const char *unit = "GB/s";
    double scale = 1e9;
    if (top < 1e9) {
        unit = "MB/s";
        scale = 1e6;
    }
    f.ymax = top > 0 ? top * 1.1 : scale;
    char label[200], b1[32];
    fprintf(o, "<g id=\"chart-link\" data-peak-h2d-bps=\"%.0f\" data-peak-d2h-bps=\"%.0f\">\n",
            peak_h2d, peak_d2h);
    snprintf(label, sizeof label, "Link: bandwidth the copies used, averaged over %s",
             fmt_duration(b1, sizeof b1, v->bin_us));
    chart_title(o, y + 16, label);
    value_axis(o, &f, scale, unit);
    step_path(o, &f, v, h2d, NULL, "fill=\"none\" stroke=\"" C_H2D "\" stroke-width=\"1.5\"");
    step_path(o, &f, v, d2h, NULL,
              "fill=\"none\" stroke=\"" C_D2H "\" stroke-width=\"1.5\" stroke-dasharray=\"5 2\"");
    snprintf(label, sizeof label, "H2D, fetches (peak %.2f %s)", peak_h2d / scale, unit);
    double lx = legend_item(o, PLOT_X, y + 36, C_H2D, NULL, NULL, label);
    snprintf(label, sizeof label, "D2H, evictions (peak %.2f %s)", peak_d2h / scale, unit);
    lx = legend_item(o, lx, y + 36, C_D2H, "5 2", NULL, label);
    /* what the link offers */
    const char *src = r->link_source;
    if (!r->has_link) {
        legend_item(o, lx, y + 36, "#444", "8 4", NULL,
                    r->finished ? "available: not written" : "available: unknown (run did not finish)");
    } else if (r->h2d_gbps <= 0 && r->d2h_gbps <= 0) {
        snprintf(label, sizeof label, "available: not measured%s%s%s", src[0] ? " (" : "", src,
                 src[0] ? ")" : "");
        legend_item(o, lx, y + 36, "#444", "8 4", NULL, label);
    } else {
        struct { double gbps; const char *dir, *colour; } av[2] = {
            {r->h2d_gbps, "H2D", C_H2D}, {r->d2h_gbps, "D2H", C_D2H}};
        bool same = r->h2d_gbps == r->d2h_gbps;
        for (int i = 0; i < (same ? 1 : 2); i++) {
            const char *colour = same ? "#444" : av[i].colour;
            if (av[i].gbps <= 0) {
                snprintf(label, sizeof label, "available %s: not measured", av[i].dir);
                lx = legend_item(o, lx, y + 36, colour, "8 4", NULL, label);
                continue;
            }
            double ly = fy(&f, av[i].gbps * 1e9);
            fprintf(o, "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"%s\" "
                       "stroke-width=\"1.5\" stroke-dasharray=\"8 4\"/>\n",
                    f.x0, ly, f.x0 + f.w, ly, colour);
            snprintf(label, sizeof label, "available %s %g GB/s%s%s%s", same ? "each way" : av[i].dir,
                     av[i].gbps, src[0] ? " (" : "", src, src[0] ? ")" : "");
            fprintf(o, "<text x=\"%.1f\" y=\"%.1f\" text-anchor=\"end\" fill=\"%s\">",
                    f.x0 + f.w - 4, ly - 5 + (i == 1 ? 16 : 0), colour);
            put_escaped(o, label);
            fputs("</text>\n", o);
        }
    }
    time_axis(o, &f, v);
    fprintf(o, "</g>\n");
    free(h2d);
    free(d2h);
}

/* Four lanes of bars, each bar as tall as the share of its bin that the
 * lane was busy (neighbours of the same height drawn as one), and the
 * iteration marks as ticks above them. */
static void chart_strip(FILE *o, const report_t *r, const view_t *v, double y)
{
    static const struct { int sum; const char *label, *colour; } lanes[] = {
        {SUM_BUSY_COMPUTE, "compute", C_COMPUTE},
        {SUM_BUSY_H2D, "H2D copies", C_H2D},
        {SUM_BUSY_D2H, "D2H copies", C_D2H},
        {SUM_BUSY_STALL, "stalls", C_STALL},
    };
    const double lane_h = 20, bar_h = 16, top = y + 44;
    frame_t f = {PLOT_X, top, PLOT_W, lane_h * 4, v->run_us, 1};
    fprintf(o, "<g id=\"chart-strip\" data-bins=\"%zu\">\n", v->nb);
    chart_title(o, y + 16, "Activity: how much of each bin was busy");
    for (int l = 0; l < 4; l++) {
        double ly = top + lane_h * l;
        fprintf(o, "<rect x=\"%.1f\" y=\"%.1f\" width=\"%.1f\" height=\"%.1f\" fill=\"%s\"/>\n",
                f.x0, ly, f.w, lane_h, l % 2 ? "#ffffff" : "#f0f0f0");
        fprintf(o, "<text x=\"%.1f\" y=\"%.1f\" text-anchor=\"end\">%s</text>\n", f.x0 - 6,
                ly + 14, lanes[l].label);
        const double *busy = v->sum[lanes[l].sum];
        for (size_t b = 0; b < v->nb;) {
            double span = bin_span(v, b);
            double h = span > 0 ? round(2 * bar_h * fmin(1, busy[b] / span)) / 2 : 0;
            size_t e = b + 1;
            while (e < v->nb && bin_span(v, e) > 0 &&
                   round(2 * bar_h * fmin(1, busy[e] / bin_span(v, e))) / 2 == h)
                e++;
            if (h > 0) {
                double x0 = fx(&f, (double)b * v->bin_us);
                double x1 = fx(&f, (double)(e - 1) * v->bin_us + bin_span(v, e - 1));
                fprintf(o, "<rect x=\"%.1f\" y=\"%.1f\" width=\"%.1f\" height=\"%.1f\" "
                           "fill=\"%s\"/>\n", x0, ly + lane_h - 2 - h, fmax(x1 - x0, 0.5), h,
                        lanes[l].colour);
            }
            b = e;
        }
    }
    /* the marks: a tick above the lanes per pixel column that has one; a
     * line through the lanes too and the mark's number while they are few */
    bool few = r->nmarks <= 40;
    long last_px = -1;
    double labelled_x = -1e9;
    for (size_t i = 0; i < r->nmarks; i++) {
        double x = fx(&f, fmin(r->marks[i].ts, v->run_us));
        if ((long)x == last_px)
            continue;
        last_px = (long)x;
        fprintf(o, "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"#000\"/>\n", x,
                top - 8, x, few ? top + f.h : top);
        if (few && x - labelled_x > 30) {
            fprintf(o, "<text x=\"%.1f\" y=\"%.1f\" font-size=\"10\" text-anchor=\"middle\">%lld"
                       "</text>\n", x, top - 10, r->marks[i].n);
            labelled_x = x;
        }
    }
    if (r->nmarks > 0)
        fprintf(o, "<text x=\"%.1f\" y=\"%.1f\" text-anchor=\"end\" font-size=\"10\">"
                   "iterations</text>\n", f.x0 - 6, top - 2);
    time_axis(o, &f, v);
    fprintf(o, "</g>\n");
}

#define SVG_H 740

/* Note [The SVG on its own]
 * ~~~~~~~~~~~~~~~~~~~~~~~~~
 * With --svg the charts are a file of their own, the picture a README shows
 * (make demo-svg copies make demo's to docs/demo.svg). Seen without the page,
 * it must say itself what it is of: a heading names the timeline, the
 * backend and device it was made on, the limits, how long the run was and
 * whether it finished, and a caption line what the caller adds (make demo:
 * the command, the date and the host's CPU, which the timeline does not
 * hold). Where it is shown matters too: GitHub shows an SVG as an image,
 * which runs no script and loads nothing, so the file is plain SVG 1.1 with
 * presentation attributes (no <style>, no <script>, no links, no fonts but
 * the system's sans-serif) on a white background (a dark theme would show
 * black text on black otherwise). The data-* attributes that tests read are
 * ones every renderer ignores.
 */

#define HEAD_H 70.0    /* the heading's height, the caption line not counted */
#define CAPTION_H 18.0 /* the caption's */

/* The standalone SVG's heading (Note [The SVG on its own]), at the top. */
static void svg_heading(FILE *o, const report_t *r, const view_t *v, const char *base)
{
    char backend_buf[64], b1[32], b2[32], b3[32], runs[64];
    const char *backend = report_backend(r, backend_buf, sizeof backend_buf);
    fprintf(o, "<g id=\"heading\">\n<text id=\"run-title\" x=\"%.1f\" y=\"24\" font-size=\"17\" "
               "font-weight=\"bold\">lms timeline: ", PLOT_X);
    put_escaped(o, base);
    fprintf(o, "</text>\n<text id=\"run-machine\" x=\"%.1f\" y=\"44\" font-size=\"13\">backend ",
            PLOT_X);
    put_escaped(o, backend[0] ? backend : "unknown");
    fputs(", device ", o);
    put_escaped(o, r->device[0] ? r->device : "unknown");
    if (r->has_link && r->h2d_gbps > 0) {
        fprintf(o, ", link %s/s", fmt_bytes(b1, sizeof b1, r->h2d_gbps * 1e9));
        if (r->d2h_gbps != r->h2d_gbps)
            fprintf(o, " H2D, %s/s D2H", fmt_bytes(b1, sizeof b1, r->d2h_gbps * 1e9));
        if (r->link_source[0]) {
            fputs(" (", o);
            put_escaped(o, r->link_source);
            fputs(")", o);
        }
    }
    if (r->nmarks > 0)
        snprintf(runs, sizeof runs, "%zu iteration%s in %s", r->nmarks, r->nmarks == 1 ? "" : "s",
                 fmt_duration(b3, sizeof b3, v->run_us));
    else
        snprintf(runs, sizeof runs, "%s long", fmt_duration(b3, sizeof b3, v->run_us));
    fprintf(o, "</text>\n<text id=\"run-limits\" x=\"%.1f\" y=\"62\" font-size=\"13\">"
               "device limit %s, host limit %s; %s; %s</text>\n", PLOT_X,
            r->device_limit > 0 ? fmt_size(b1, sizeof b1, r->device_limit) : "unknown",
            r->host_limit > 0 ? fmt_size(b2, sizeof b2, r->host_limit) : "unknown", runs,
            r->finished ? "finished" : "the run did not finish");
    if (r->caption != NULL) {
        fprintf(o, "<text id=\"run-caption\" x=\"%.1f\" y=\"%.1f\" font-size=\"12\" "
                   "fill=\"#444\">", PLOT_X, 62 + CAPTION_H);
        put_escaped(o, r->caption);
        fputs("</text>\n", o);
    }
    fputs("</g>\n", o);
}

void write_svg(FILE *o, const report_t *r, const view_t *v, bool standalone)
{
    const char *base = strrchr(r->path, '/');
    base = base ? base + 1 : r->path;
    double top = 0; /* where the charts start */
    if (standalone)
        top = HEAD_H + (r->caption != NULL ? CAPTION_H : 0);
    fprintf(o, "<svg xmlns=\"http://www.w3.org/2000/svg\" version=\"1.1\" id=\"charts\" "
               "width=\"%.0f\" height=\"%.0f\" viewBox=\"0 0 %.0f %.0f\" " FONT " font-size=\"12\" "
               "data-bin-us=\"%.3f\">\n", SVG_W, SVG_H + top, SVG_W, SVG_H + top, v->bin_us);
    fputs("<title>lms timeline: ", o);
    put_escaped(o, base);
    fputs("</title>\n", o);
    if (standalone) {
        fputs("<desc>Written by lms-report from the LMS_TRACE timeline ", o);
        put_escaped(o, base);
        fputs(": memory on the device and in host memory, the link's bandwidth each way, and "
              "what was busy, over the run.</desc>\n", o);
        fprintf(o, "<rect width=\"100%%\" height=\"100%%\" fill=\"#fff\"/>\n");
        svg_heading(o, r, v, base);
    }
    chart_memory(o, r, v, top);
    chart_link(o, r, v, top + 285);
    chart_strip(o, r, v, top + 570);
    fputs("</svg>\n", o);
}
