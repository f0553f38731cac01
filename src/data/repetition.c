// repetition.c: see repetition.h. Row r of period p holds tok[r p .. r p + p); the padded
// tail (value -1 in OLMo-core, never a token here either: ids are >= 0) is modelled by
// `at` returning -1 past n; row 0 is compared with the last row, as np.roll does (which never
// holds: the last row always has a padded cell).
#include "data/repetition.h"

static int32_t at(const int32_t *tok, int n, long i) { return i < n ? tok[i] : -1; }

// Cell c of row r equals cell c of the row before it (of the last row for row 0, as np.roll).
static int eq(const int32_t *tok, int n, int p, long rows, long r, int c) {
    const long prev = r == 0 ? rows - 1 : r - 1;
    return at(tok, n, r * p + c) == at(tok, n, prev * p + c);
}

static int row_equal(const int32_t *tok, int n, int p, long rows, long r) {
    for (int c = 0; c < p; c++)
        if (!eq(tok, n, p, rows, r, c)) return 0;
    return 1;
}

int repetition_max_times(const int32_t *tok, int n, int min_period, int max_period) {
    if (max_period > n / 3) max_period = n / 3;
    int best = 0;
    for (int p = min_period < 1 ? 1 : min_period; p <= max_period; p++) {
        const long rows = (n + (p - n % p)) / p;   // np.pad adds p - n % p cells (a whole row when p divides n)
        for (long r = 1; r < rows; r++) {
            if (!row_equal(tok, n, p, rows, r)) continue;
            long e = r;
            while (e + 1 < rows && row_equal(tok, n, p, rows, e + 1)) e++;
            // trailing equal cells of the row before the group, leading ones of the row after
            int start_off = 0, end_off = 0;
            while (start_off < p && eq(tok, n, p, rows, r - 1, p - 1 - start_off)) start_off++;
            if (e + 1 < rows)
                while (end_off < p && eq(tok, n, p, rows, e + 1, end_off)) end_off++;
            const long start = (r - 1) * p - start_off, end = (e + 1) * p + end_off;
            const int times = (int)((end - start) / p);
            if (times > 2 && times > best) best = times;
            r = e;
        }
    }
    return best;
}

int repetition_filtered(const int32_t *tok, int n, const RepetitionFilter *f) {
    return repetition_max_times(tok, n, f->min_period, f->max_period) >= f->max_count;
}
