// tfevents.h: TensorBoard event files, written natively (no TensorFlow, no protobuf library):
// `tensorboard --logdir RUN_DIR/tb` and `wandb sync RUN_DIR/tb` show a run live. A file is a
// sequence of records (TensorFlow's TFRecord framing): uint64 length, uint32 masked CRC-32C
// of those 8 bytes, the data, uint32 masked CRC-32C of the data (masked = ((crc >> 15) |
// (crc << 17)) + 0xa282ead8), all little-endian. Each record's data is an Event protobuf:
// wall_time (field 1, double), step (2, int64) and either file_version (3, "brain.Event:2",
// the first record) or a Summary (5) of Values {tag (1, string), simple_value (2, float)}.
// tests/test_tensorboard.py decodes every record and checks every CRC and value.
#ifndef OLMO_TFEVENTS_H
#define OLMO_TFEVENTS_H

typedef struct TfEvents TfEvents;

// DIR/events.out.tfevents.<unix time>.<host>.<pid> (DIR created), TensorBoard's naming: one
// file per run segment (a resume starts a new one; TensorBoard reads them all). NULL + a
// warning when it cannot be created (TensorBoard output is never worth a failed run).
TfEvents *tfevents_open(const char *dir);
// n scalars at step (tag[i], value[i]) as one Event, flushed once (a live view).
void tfevents_scalars(TfEvents *t, long step, int n, const char *const *tag, const double *value);
void tfevents_close(TfEvents *t);

#endif
