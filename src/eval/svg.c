// svg.c: inline-SVG line and bar charts (see svg.h).
#include "eval/svg.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

// Series with more points than this are thinned (every k-th point, the last kept): a chart
// 500 pixels wide shows no more, and a 100k-step run stays a small file.
#define MAX_POINTS 1500

void html_escape(FILE *f, const char *s) {
    for (; s && *s; s++) {
        switch (*s) {
            case '&': fputs("&amp;", f); break;
            case '<': fputs("&lt;", f); break;
            case '>': fputs("&gt;", f); break;
            case '"': fputs("&quot;", f); break;
            case '\'': fputs("&#39;", f); break;
            default: fputc(*s, f);
        }
    }
}

const char *svg_color(int i) {
    static const char *pal[] = {"#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd",
                                "#8c564b", "#e377c2", "#17becf", "#7f7f7f", "#bcbd22"};
    return pal[(i % 10 + 10) % 10];
}

// A tick step of 1, 2 or 5 times a power of ten giving about `want` intervals.
static double nice_step(double range, int want) {
    double raw = range / want, p = pow(10, floor(log10(raw))), m = raw / p;
    return (m < 1.5 ? 1 : m < 3.5 ? 2 : m < 7.5 ? 5 : 10) * p;
}

static void tick_label(char *buf, size_t n, double v, double step) {
    if (fabs(v) < step * 1e-9) v = 0;   // -0 and rounding noise at zero
    double a = fabs(v);
    if (a >= 1e5 || (a > 0 && a < 1e-3)) snprintf(buf, n, "%.3g", v);
    else {
        int dec = step >= 1 ? 0 : (int)ceil(-log10(step) - 1e-9);
        snprintf(buf, n, "%.*f", dec > 6 ? 6 : dec, v);
    }
}

// Range of the finite values; pads a degenerate range so a flat line sits mid-chart.
static void range_of(const SvgSeries *s, int ns, int use_x, double *lo, double *hi) {
    *lo = INFINITY;
    *hi = -INFINITY;
    for (int i = 0; i < ns; i++)
        for (int j = 0; j < s[i].n; j++) {
            double v = use_x ? s[i].x[j] : s[i].y[j];
            if (!isfinite(s[i].x[j]) || !isfinite(s[i].y[j])) continue;
            if (v < *lo) *lo = v;
            if (v > *hi) *hi = v;
        }
    if (!(*lo <= *hi)) { *lo = 0; *hi = 1; return; }
    if (*hi - *lo < 1e-12 * (fabs(*hi) + 1e-300) || *hi == *lo) {
        double d = fabs(*lo) > 0 ? fabs(*lo) * 0.05 : 1;
        *lo -= d;
        *hi += d;
    }
}

static void chart_lin(FILE *f, const SvgChart *c, const SvgSeries *s, int ns);

// A log y axis: the series drawn with log10(y), ticks labelled with y.
void svg_chart(FILE *f, const SvgChart *c, const SvgSeries *s, int ns) {
    if (!c->logy) { chart_lin(f, c, s, ns); return; }
    SvgSeries *t = malloc(sizeof(SvgSeries) * (size_t)(ns ? ns : 1));
    double **ys = malloc(sizeof(double *) * (size_t)(ns ? ns : 1));
    for (int i = 0; i < ns; i++) {
        t[i] = s[i];
        ys[i] = malloc(sizeof(double) * (size_t)(s[i].n ? s[i].n : 1));
        for (int j = 0; j < s[i].n; j++) ys[i][j] = s[i].y[j] > 0 ? log10(s[i].y[j]) : NAN;
        t[i].y = ys[i];
    }
    chart_lin(f, c, t, ns);
    for (int i = 0; i < ns; i++) free(ys[i]);
    free(ys);
    free(t);
}

static void chart_lin(FILE *f, const SvgChart *c, const SvgSeries *s, int ns) {
    int W = c->width, H = c->height;
    int nleg_rows = 1, leg_x = 20;
    for (int i = 0; i < ns; i++) {   // legend entries flow in rows across the top (as drawn below)
        int w = 26 + 7 * (int)strlen(s[i].label);
        if (leg_x + w > W - 20 && leg_x > 20) { nleg_rows++; leg_x = 20; }
        leg_x += w;
    }
    double ml = 64, mr = 16, mt = 30 + 16 * nleg_rows, mb = 44;
    double pw = W - ml - mr, ph = H - mt - mb;
    double x0, x1, y0, y1;
    range_of(s, ns, 1, &x0, &x1);
    range_of(s, ns, 0, &y0, &y1);
    double xs = nice_step(x1 - x0, 6), ys = nice_step(y1 - y0, 5);
    // Y axis from tick to tick so the curves never touch the frame; x as the data.
    y0 = floor(y0 / ys) * ys;
    y1 = ceil(y1 / ys) * ys;
#define PX(v) (ml + ((v) - x0) / (x1 - x0) * pw)
#define PY(v) (mt + ph - ((v) - y0) / (y1 - y0) * ph)
    fprintf(f, "<svg class=\"chart\" width=\"%d\" height=\"%d\" viewBox=\"0 0 %d %d\" role=\"img\" aria-label=\"", W, H, W, H);
    html_escape(f, c->title);
    fprintf(f, "\">\n<rect x=\"0\" y=\"0\" width=\"%d\" height=\"%d\" fill=\"#ffffff\"/>\n", W, H);
    fprintf(f, "<text x=\"%d\" y=\"18\" text-anchor=\"middle\" font-size=\"14\" font-weight=\"bold\">", W / 2);
    html_escape(f, c->title);
    fprintf(f, "</text>\n");
    // Grid and tick labels.
    char lab[64];
    fprintf(f, "<g font-size=\"11\" fill=\"#333\">\n");
    for (double v = ceil(x0 / xs) * xs; v <= x1 + xs * 1e-9; v += xs) {
        double px = PX(v);
        tick_label(lab, sizeof lab, v, xs);
        fprintf(f, "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"#e4e4e4\"/>", px, mt, px, mt + ph);
        fprintf(f, "<text x=\"%.1f\" y=\"%.1f\" text-anchor=\"middle\">%s</text>\n", px, mt + ph + 15, lab);
    }
    for (double v = y0; v <= y1 + ys * 1e-9; v += ys) {
        double py = PY(v);
        if (c->logy) snprintf(lab, sizeof lab, "%.4g", pow(10, v));
        else tick_label(lab, sizeof lab, v, ys);
        fprintf(f, "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"#e4e4e4\"/>", ml, py, ml + pw, py);
        fprintf(f, "<text x=\"%.1f\" y=\"%.1f\" text-anchor=\"end\">%s</text>\n", ml - 5, py + 4, lab);
    }
    fprintf(f, "</g>\n<rect x=\"%.1f\" y=\"%.1f\" width=\"%.1f\" height=\"%.1f\" fill=\"none\" stroke=\"#888\"/>\n", ml, mt,
            pw, ph);
    fprintf(f, "<text x=\"%.1f\" y=\"%d\" text-anchor=\"middle\" font-size=\"12\">", ml + pw / 2, H - 8);
    html_escape(f, c->xlabel);
    fprintf(f, "</text>\n<text x=\"14\" y=\"%.1f\" text-anchor=\"middle\" font-size=\"12\" transform=\"rotate(-90 14 %.1f)\">",
            mt + ph / 2, mt + ph / 2);
    html_escape(f, c->ylabel);
    fprintf(f, "</text>\n");
    // Vertical markers (stage boundaries) inside the x range.
    for (int i = 0; i < c->nvlines; i++) {
        double v = c->vlines[i];
        if (!(v >= x0 && v <= x1)) continue;
        fprintf(f, "<g class=\"vline\"><line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"#777\" "
                "stroke-dasharray=\"3 3\"/><text x=\"%.1f\" y=\"%.1f\" font-size=\"10\" fill=\"#555\">", PX(v), mt, PX(v),
                mt + ph, PX(v) + 3, mt + 11);
        html_escape(f, c->vlabels ? c->vlabels[i] : "");
        fprintf(f, "</text></g>\n");
    }
    // Series.
    fprintf(f, "<g fill=\"none\" stroke-width=\"1.6\" stroke-linejoin=\"round\">\n");
    for (int i = 0; i < ns; i++) {
        const SvgSeries *q = &s[i];
        int stride = q->n > MAX_POINTS ? (q->n + MAX_POINTS - 1) / MAX_POINTS : 1;
        fprintf(f, "<path data-series=\"");
        html_escape(f, q->id);
        fprintf(f, "\" stroke=\"%s\"%s d=\"", q->color, q->dashed ? " stroke-dasharray=\"6 3\"" : "");
        int pen = 0, any = 0;
        for (int j = 0; j < q->n; j++) {
            if (j % stride && j != q->n - 1) continue;
            if (!isfinite(q->x[j]) || !isfinite(q->y[j])) { pen = 0; continue; }
            fprintf(f, "%s%.1f %.1f", pen ? " L" : (any ? " M" : "M"), PX(q->x[j]), PY(q->y[j]));
            pen = any = 1;
        }
        if (!any) fprintf(f, "M0 0");   // keep the element (and its data-series) valid
        fprintf(f, "\"/>\n");
        if (q->markers)
            for (int j = 0; j < q->n; j++)
                if (isfinite(q->x[j]) && isfinite(q->y[j]))
                    fprintf(f, "<circle cx=\"%.1f\" cy=\"%.1f\" r=\"2.6\" fill=\"%s\" stroke=\"none\"/>", PX(q->x[j]),
                            PY(q->y[j]), q->color);
        if (q->markers) fprintf(f, "\n");
    }
    fprintf(f, "</g>\n");
    // Legend.
    fprintf(f, "<g font-size=\"11\">\n");
    int lx = 20, ly = 34;
    for (int i = 0; i < ns; i++) {
        int w = 26 + 7 * (int)strlen(s[i].label);
        if (lx + w > W - 20 && lx > 20) { lx = 20; ly += 16; }
        fprintf(f, "<line x1=\"%d\" y1=\"%d\" x2=\"%d\" y2=\"%d\" stroke=\"%s\" stroke-width=\"2.5\"%s/>", lx, ly - 4,
                lx + 18, ly - 4, s[i].color, s[i].dashed ? " stroke-dasharray=\"5 2\"" : "");
        fprintf(f, "<text x=\"%d\" y=\"%d\">", lx + 22, ly);
        html_escape(f, s[i].label);
        fprintf(f, "</text>\n");
        lx += w;
    }
    fprintf(f, "</g>\n</svg>\n");
#undef PX
#undef PY
}

void svg_bars(FILE *f, const SvgBars *b) {
    const int W = b->width, bar = 12, gap = 10, ml = 150, mr = 56, mt = 46, mb = 40;
    const int pw = W - ml - mr, gh = b->nseries * bar + gap;
    const int H = mt + b->ngroups * gh + mb;
#define BX(v) (ml + (v) * pw)
    fprintf(f, "<svg class=\"chart bars\" width=\"%d\" height=\"%d\" viewBox=\"0 0 %d %d\" role=\"img\" aria-label=\"", W, H,
            W, H);
    html_escape(f, b->title);
    fprintf(f, "\">\n<rect x=\"0\" y=\"0\" width=\"%d\" height=\"%d\" fill=\"#ffffff\"/>\n", W, H);
    fprintf(f, "<text x=\"%d\" y=\"18\" text-anchor=\"middle\" font-size=\"14\" font-weight=\"bold\">", W / 2);
    html_escape(f, b->title);
    fprintf(f, "</text>\n<g font-size=\"11\">\n");
    for (int s = 0, lx = 20; s < b->nseries; s++) {   // legend: one row, as many as fit
        fprintf(f, "<rect x=\"%d\" y=\"28\" width=\"12\" height=\"10\" fill=\"%s\"/><text x=\"%d\" y=\"37\">", lx,
                b->colors[s], lx + 16);
        html_escape(f, b->labels[s]);
        fprintf(f, "</text>\n");
        lx += 30 + 7 * (int)strlen(b->labels[s]);
    }
    for (int t = 0; t <= 4; t++)   // grid at 0, 0.25, .., 1
        fprintf(f, "<line x1=\"%.1f\" y1=\"%d\" x2=\"%.1f\" y2=\"%d\" stroke=\"#e4e4e4\"/><text x=\"%.1f\" y=\"%d\" "
                   "text-anchor=\"middle\" fill=\"#333\">%.2f</text>\n", BX(t / 4.0), mt, BX(t / 4.0), H - mb,
                BX(t / 4.0), H - mb + 15, t / 4.0);
    for (int g = 0; g < b->ngroups; g++) {
        const int y0 = mt + g * gh + gap / 2;
        fprintf(f, "<text x=\"%d\" y=\"%d\" text-anchor=\"end\">", ml - 6, y0 + b->nseries * bar / 2 + 4);
        html_escape(f, b->groups[g]);
        fprintf(f, "</text>\n");
        for (int s = 0; s < b->nseries; s++) {
            const double v = b->v[g * b->nseries + s];
            if (!isfinite(v)) continue;
            const double c = v < 0 ? 0 : v > 1 ? 1 : v;
            fprintf(f, "<rect data-series=\"");
            html_escape(f, b->ids[g * b->nseries + s]);
            fprintf(f, "\" x=\"%d\" y=\"%d\" width=\"%.1f\" height=\"%d\" fill=\"%s\"/><text x=\"%.1f\" y=\"%d\" "
                       "fill=\"#333\">%.3f</text>\n", ml, y0 + s * bar, c * pw, bar - 2, b->colors[s], BX(c) + 4,
                    y0 + s * bar + bar - 3, v);
        }
        if (isfinite(b->ref[g]))
            fprintf(f, "<line class=\"ref\" x1=\"%.1f\" y1=\"%d\" x2=\"%.1f\" y2=\"%d\" stroke=\"#000\" "
                       "stroke-width=\"2\"/>\n", BX(b->ref[g]), y0 - 3, BX(b->ref[g]), y0 + b->nseries * bar + 1);
    }
    fprintf(f, "</g>\n<rect x=\"%d\" y=\"%d\" width=\"%d\" height=\"%d\" fill=\"none\" stroke=\"#888\"/>\n", ml, mt, pw,
            H - mt - mb);
    fprintf(f, "<text x=\"%.1f\" y=\"%d\" text-anchor=\"middle\" font-size=\"12\">", ml + pw / 2.0, H - 8);
    html_escape(f, b->xlabel);
    fprintf(f, "</text>\n</svg>\n");
#undef BX
}
