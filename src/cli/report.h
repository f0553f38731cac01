// report.h: what the two files of `olmo report` share (cmd_report.c: arguments, runs,
// charts, summary; report_panels.c: the alarms panel, the held-out sets legend and the
// downstream results): a run's records as read from RUN_DIR/metrics.jsonl, and the small
// table helpers both write with. Internal to src/cli; docs/report.md says what the page holds.
#ifndef OLMO_CLI_REPORT_H
#define OLMO_CLI_REPORT_H

#include <stdio.h>

#include "eval/alarm.h"
#include "recipe/recipe.h"
#include "train/history.h"

typedef struct cJSON cJSON;

typedef struct {
    int n, cap;
    cJSON **r;
} RecList;

// The alarms of a run as the report sees them (report_alarm_views): the memorization alarm
// recomputed from the records with the trainer's inputs (src/eval/alarm.h), and the loader's
// accounting alarms (repeats within an epoch, rank overlaps, off-batch, resume position)
// summed over the train records.
typedef struct {
    char set[160];          // the watched key, "eval/<set>/ce"
    int k;                  // the alarm's window (alarm.memo_k)
    double drop, ratio;     // alarm.memo_drop, alarm.memo_ratio
    int inputs;             // evaluations with a finite training loss and watched CE
    long fired, first_fired;   // recomputed firings, the first one's step (-1: none)
    MemoAlarm last;         // the alarm after the last evaluation (its window's numbers)
    long recorded;          // memorization alarm records the trainer wrote
    double loader_alarms;   // sum of the train records' loader_alarms
    long loader_first;      // step of the first loader alarm (-1: none)
    char loader_msg[512];   // the last loader_alarm message
    double loader_epoch, loader_coverage, loader_repeats;   // the last train record's
    // packed instances (data.packing: packed), the last train record's; NAN when absent
    double docs_whole, docs_fragmented, docs_truncated, tokens_dropped, padding_frac;
} AlarmView;

typedef struct {
    const char *dir;
    char label[256];
    RecList train, eval, alarms;
    RecList attached;   // RUN_DIR/evals.jsonl: `olmo eval RUN --attach` records
    Recipe *recipe;     // NULL when RUN_DIR/recipe.yml is missing (else the newest segment's)
    HistorySegment *segs;   // the recipes it trained under (src/train/history.h)
    int nsegs;
    double tok_off, step_off;   // where it starts on the report's axis: a stage that starts from an
                                // earlier run's weights (train.load_path) continues that run's axis
    int seq_len;                // its recipe's train.seq_len (0: no recipe): held-out charts group by it
    AlarmView av;
} Run;

// Names in first-appearance order (sets, tasks, metric keys).
typedef struct {
    int n;
    char **name;
} Names;

void report_names_add(Names *ns, const char *s, size_t len);
void report_names_free(Names *ns);

// The number at `key` of a record, NAN when absent or not a number.
double report_num(const cJSON *o, const char *key);
// The last record of l that has a number at key, or NULL.
const cJSON *report_last_with(const RecList *l, const char *key);
// A <td> with v in fmt, or an en dash when v is not finite.
void report_cell(FILE *f, double v, const char *fmt);
// A column head naming run r in its color (the swatch), then suffix.
void report_run_th(FILE *f, const Run *runs, int r, const char *suffix);
// A record's row of a table: <tr>, the run, the record's step, `text` in a cell of class `cls`.
void report_row_begin(FILE *f, const char *label, const cJSON *o, const char *cls, const char *text);

// Fill each run's AlarmView and add the alarm's inputs to its eval records (in memory, for
// the charts): "alarm/train_loss", "alarm/heldout_ce", "alarm/gap" (held-out - training).
void report_alarm_views(Run *runs, int nruns);
// The alarms panel: per run and alarm, what it compares, its latest window and whether it
// fired; then every alarm record.
void report_alarms_panel(FILE *f, const Run *runs, int nruns);
// What each held-out set is (file, documents, tokens, length, role: in-domain, out of domain,
// a concatenation of held-out splits and of which sources), and its final CE / PPL / BPB.
void report_sets_table(FILE *f, const Run *runs, int nruns);
// A short role of set `name` for chart titles ("in-domain", "out of domain", "partly in-domain"
// when the runs agree, "" when they differ or no recipe names it), into buf.
const char *report_set_tag(const Run *runs, int nruns, const char *name, char *buf, size_t n);
// Downstream tasks: one bar chart (acc per task and run, chance marked) and one table
// (a row per task: examples, chance, then per run acc, acc - chance and len_norm).
void report_tasks(FILE *f, const Run *runs, int nruns, const Names *tasks);
// OLMo 3's suite (eval.downstream, downstream/<label>/<metric>): a label's primary metric,
// the first of len_norm_v1, acc_v1, bpb_v1, ce_loss_v1 any run records (OLMo-core's
// "length-normalized accuracy", "accuracy", "BPB", "CE loss"), its key into key; NULL: none.
const char *report_suite_primary(const Run *runs, int nruns, const char *label, char *key, size_t n);
// downstream/<label>/chance of the runs' last records (acc / len_norm tasks), NAN when absent.
double report_suite_chance(const Run *runs, int nruns, const char *label);
// The suite's table: a row per label (metric, chance, per run its last value and step).
void report_suite_table(FILE *f, const Run *runs, int nruns, const Names *suite);

#endif
