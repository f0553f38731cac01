// tokenizer.h: byte-level BPE tokenizer loaded from a Hugging Face tokenizer.json
// (dolma2 = cl100k_base + OLMo special tokens). Pre-tokenization runs the Split regex
// of the file on PCRE2 (UTF + JIT). Encoding is thread-safe: many threads may encode
// with one Tokenizer at once.
#ifndef OLMO_TOKENIZER_H
#define OLMO_TOKENIZER_H

#include <stddef.h>
#include <stdint.h>

typedef struct Tokenizer Tokenizer;

// Default tokenizer: the dolma2 tokenizer.json that ships in the repository
// (tokenizers/NOTICE says where it comes from), relative to the repository root.
// Overridable by --tokenizer or env OLMO_TOKENIZER.
#define TOKENIZER_DEFAULT_PATH "tokenizers/dolma2-tokenizer.json"

// Load a tokenizer.json. On a missing, truncated or malformed file: a clear error naming
// the file and the field, exit status 2.
Tokenizer *tokenizer_load(const char *path);
void tokenizer_free(Tokenizer *tok);

// Encode UTF-8 text of `len` bytes. Token ids are appended to the growable array
// (*ids, *cap) starting at index *n, which is advanced. With allow_special != 0,
// special-token strings in the text (e.g. "<|endoftext|>") become their ids (like
// tiktoken's allowed_special="all"); otherwise they are encoded as ordinary text.
// Returns 0, or -1 if the text is not valid UTF-8 (nothing appended then).
int tokenizer_encode(const Tokenizer *tok, const char *text, size_t len, int allow_special,
                     uint32_t **ids, size_t *n, size_t *cap);

// Decode ids to bytes (malloc'd, NUL-terminated, length in *len_out). Returns NULL if
// an id is out of range.
char *tokenizer_decode(const Tokenizer *tok, const uint32_t *ids, size_t n, size_t *len_out);

uint32_t tokenizer_vocab_size(const Tokenizer *tok);   // highest id + 1 (100278 for dolma2)
uint32_t tokenizer_eos_id(const Tokenizer *tok);       // 100257 for dolma2
uint32_t tokenizer_pad_id(const Tokenizer *tok);       // 100277 for dolma2
// Fingerprint: hex sha256 of the tokenizer.json bytes (65 bytes incl. NUL).
const char *tokenizer_fingerprint(const Tokenizer *tok);

// Byte offset of the first invalid UTF-8 byte in text (strict: no overlong forms, no
// surrogates, nothing above U+10FFFF), or len if the whole text is valid. Lets callers
// report where tokenizer_encode's -1 came from.
size_t tokenizer_utf8_error_offset(const char *text, size_t len);

// The tokenizer.json to use: `cli_path` if not NULL, else env OLMO_TOKENIZER, else
// TOKENIZER_DEFAULT_PATH relative to the working directory, else relative to the
// repository the running binary was built in (<exe dir>/../, <exe dir>/../../).
// Returns a malloc'd path (which may not exist; tokenizer_load reports that).
char *tokenizer_resolve_path(const char *cli_path);

#endif
