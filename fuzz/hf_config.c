// Fuzz the HF config.json reader (hf_config_read, static in hf.c, hence the #include) and
// the reader of the "olmo_config" JSON of a safetensors' metadata (model_config_from_json,
// src/model/config_json.c).
#include "util.c"
#include "io/hf.c"

static char dir[256];

int LLVMFuzzerTestOneInput(const uint8_t *d, size_t n) {
    if (!dir[0]) {
        snprintf(dir, sizeof dir, "%s", fz_path("hfdir"));
        mkdir(dir, 0755);
    }
    char path[300];
    snprintf(path, sizeof path, "%s/config.json", dir);
    FILE *f = fopen(path, "wb");
    if (!f) abort();
    if (n) fwrite(d, 1, n, f);
    fclose(f);
    static ModelSource s;
    char err[1024];
    memset(&s, 0, sizeof s);
    (void)hf_config_read(dir, &s, err, sizeof err);
    char *txt = fz_str(d, n);
    cJSON *o = cJSON_Parse(txt);
    if (o) {
        ModelConfig c;
        int seq = 0;
        (void)model_config_from_json(o, &c, &seq, "olmo_config", err, sizeof err);
        cJSON_Delete(o);
    }
    free(txt);
    return 0;
}
