// svg.h: line and bar charts as inline SVG for `olmo report` (no JavaScript, no network, no
// xmlns URL: HTML5 parses inline <svg> without one). One chart = axes with "nice" tick
// labels (1-2-5 steps), a title, axis titles, a legend, and one <path> per series with a
// data-series attribute naming it, so tests (and people) can find a series in the file.
#ifndef OLMO_SVG_H
#define OLMO_SVG_H

#include <stdio.h>

typedef struct {
    const char *id;       // data-series attribute, e.g. "run-a:eval/macro/ce"
    const char *label;    // legend text
    const char *color;    // CSS color
    const double *x, *y;  // n points; non-finite y breaks the line
    int n;
    int dashed;           // dashed stroke (e.g. held-out next to training loss)
    int markers;          // a dot at every point (sparse series such as evals)
} SvgSeries;

typedef struct {
    const char *title, *xlabel, *ylabel;
    int width, height;    // pixels (the viewBox; the page may scale the chart)
    int logy;             // log10 y axis (ticks at 1, 2, 5 x powers of ten); values <= 0 are not drawn
    const double *vlines; // x positions of labelled vertical dashed lines (e.g. stage boundaries)
    const char *const *vlabels;
    int nvlines;
} SvgChart;

// Write one <svg> element. Series with no finite point are listed in the legend only.
void svg_chart(FILE *f, const SvgChart *c, const SvgSeries *s, int ns);

// Horizontal bars on a 0..1 axis (accuracies): a group of bars per group (one per series,
// its color; <rect data-series="ids[g * nseries + s]">), a dark tick at ref[g] (chance;
// <line class="ref">, not drawn when not finite), the value at each bar's end; height
// follows the number of bars. Non-finite values draw no bar.
typedef struct {
    const char *title, *xlabel;
    int width;
    int ngroups;
    const char *const *groups;   // group labels (task names)
    const double *ref;           // ngroups reference values (chance)
    int nseries;
    const char *const *labels;   // legend text per series (runs)
    const char *const *colors;
    const char *const *ids;      // ngroups * nseries data-series attributes
    const double *v;             // ngroups * nseries values, group-major
} SvgBars;
void svg_bars(FILE *f, const SvgBars *b);
// Write s with &, <, >, " and ' escaped (text and attribute values).
void html_escape(FILE *f, const char *s);
// The i-th color of a palette of distinguishable colors (cycles).
const char *svg_color(int i);

#endif
