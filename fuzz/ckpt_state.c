// Fuzz the train_state.json parser of checkpoints (state_from_json, static in
// checkpoint.c, hence the #include) against a fixed tiny model config.
#include "util.c"
#include "train/checkpoint.c"

int LLVMFuzzerTestOneInput(const uint8_t *d, size_t n) {
    char *txt = fz_str(d, n);
    ModelConfig cfg;
    memset(&cfg, 0, sizeof cfg);
    cfg.vocab_size = 100; cfg.d_model = 16; cfg.n_layers = 2; cfg.n_heads = 2; cfg.n_kv_heads = 1;
    cfg.head_dim = 8; cfg.mlp_hidden = 32; cfg.rope_theta = 500000; cfg.rms_eps = 1e-6;
    cfg.sliding_window = 4; cfg.full_attn_every = 4;
    model_config_derive(&cfg);
    TrainState st;
    char err[2048];
    if (state_from_json("train_state.json", txt, &st, &cfg, err, sizeof err) == 0) ckpt_state_free(&st);
    free(txt);
    return 0;
}
