// metrics.h: RUN_DIR/metrics.jsonl, one JSON object per line (step, eval, alarm records).
// Each line is written whole and flushed, so a killed run leaves only complete lines.
#ifndef OLMO_METRICS_H
#define OLMO_METRICS_H

typedef struct cJSON cJSON;

typedef struct {
    void *fp;   // FILE*
    void *tb;   // TfEvents* (tfevents.h) or NULL
} MetricsLog;

// mode "w" starts a new log, "a" appends (resume).
void metrics_open(MetricsLog *m, const char *run_dir, const char *mode);
// Also write every record's numbers as TensorBoard scalars into RUN_DIR/tb (a new event file
// per run segment; tag "<kind>/<key>", or the key itself when it has a '/'), at its "step".
void metrics_open_tensorboard(MetricsLog *m, const char *run_dir);
void metrics_write(MetricsLog *m, cJSON *obj);   // does not free obj
void metrics_close(MetricsLog *m);

// Read RUN_DIR/metrics.jsonl: `fn` gets each line's JSON object (and owns it). A torn last
// line (a run killed mid-write) is skipped with a warning; any other bad line is bad input
// (exit 2, "who: path:line"). A run directory that does not exist or has no metrics file:
// exit 2 naming it.
typedef void (*MetricsLineFn)(cJSON *obj, void *ctx);
void metrics_read(const char *run_dir, const char *who, MetricsLineFn fn, void *ctx);

// RUN_DIR/evals.jsonl: evaluations attached to a run afterwards (`olmo eval RUN --attach`),
// one record per line, beside the trainer's own metrics.jsonl (which a resume rewrites).
#define METRICS_ATTACHED "evals.jsonl"
// Append obj as one line to RUN_DIR/evals.jsonl (created), flushed and fsync'd.
void metrics_append(const char *run_dir, cJSON *obj);
// Read RUN_DIR/evals.jsonl as metrics_read reads metrics.jsonl; a missing file has no lines.
void metrics_read_attached(const char *run_dir, const char *who, MetricsLineFn fn, void *ctx);

// "1h02m03s" style duration into buf.
void format_duration(char *buf, int len, double seconds);

#endif
