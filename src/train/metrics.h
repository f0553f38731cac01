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

// "1h02m03s" style duration into buf.
void format_duration(char *buf, int len, double seconds);

#endif
