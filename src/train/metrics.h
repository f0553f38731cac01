// metrics.h: RUN_DIR/metrics.jsonl, one JSON object per line (step, eval, alarm records).
// Each line is written whole and flushed, so a killed run leaves only complete lines.
#ifndef OLMO_METRICS_H
#define OLMO_METRICS_H

typedef struct cJSON cJSON;

typedef struct {
    void *fp;   // FILE*
} MetricsLog;

// mode "w" starts a new log, "a" appends (resume).
void metrics_open(MetricsLog *m, const char *run_dir, const char *mode);
void metrics_write(MetricsLog *m, cJSON *obj);   // does not free obj
void metrics_close(MetricsLog *m);

// Read RUN_DIR/metrics.jsonl: `fn` gets each line's JSON object (and owns it). A torn last
// line (a run killed mid-write) is skipped with a warning; any other bad line is bad input
// (exit 2, "who: path:line"). A run directory that does not exist or has no metrics file:
// exit 2 naming it.
typedef void (*MetricsLineFn)(cJSON *obj, void *ctx);
void metrics_read(const char *run_dir, const char *who, MetricsLineFn fn, void *ctx);

// "1h02m03s" style duration into buf.
void format_duration(char *buf, int len, double seconds);

#endif
