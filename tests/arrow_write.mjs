// arrow_write.mjs: writes Arrow IPC files with Apache Arrow's own JavaScript writer
// (npm apache-arrow), so that olmo.c's reader (src/eval/arrow_ipc.c) is checked against
// files it did not write. Used by tests/test_olmes.py (MMLU-form folders).
//   node tests/arrow_write.mjs SPEC.json
// SPEC: [{"path": P, "format": "stream" | "file", "batches": [[row, ...], ...]}, ...], a row
// {"question": str, "subject": str, "choices": [str, ...], "answer": int}: the columns
// of an HF-saved MMLU split (utf8, utf8, list<utf8>, int64), one record batch per batch.
import { readFileSync, writeFileSync } from "node:fs";
import { Field, Int64, List, RecordBatch, Table, Utf8, makeData, Schema, Struct, tableToIPC, vectorFromArray } from "apache-arrow";

const schema = new Schema([
  new Field("question", new Utf8(), true),
  new Field("subject", new Utf8(), true),
  new Field("choices", new List(new Field("item", new Utf8(), true)), true),
  new Field("answer", new Int64(), true),
]);

function batch(rows) {
  const cols = {
    question: vectorFromArray(rows.map((r) => r.question), new Utf8()),
    subject: vectorFromArray(rows.map((r) => r.subject), new Utf8()),
    choices: vectorFromArray(rows.map((r) => r.choices), schema.fields[2].type),
    answer: vectorFromArray(rows.map((r) => BigInt(r.answer)), new Int64()),
  };
  const children = schema.fields.map((f) => cols[f.name].data[0]);
  const data = makeData({ type: new Struct(schema.fields), length: rows.length, nullCount: 0, children });
  return new RecordBatch(schema, data);
}

for (const f of JSON.parse(readFileSync(process.argv[2], "utf8"))) {
  const table = new Table(schema, f.batches.map(batch));
  writeFileSync(f.path, tableToIPC(table, f.format));
}
