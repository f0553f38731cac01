#!/usr/bin/env bash
# test_olmo3_32b.sh: the OLMo 3 32B (preset olmo3-32b, configs/olmo3-32b-stage1.yml):
#  (a) `olmo info` gives OLMo-core's TransformerConfig.olmo3_32B parameter count,
#      32,234,279,936 (d 5120, 64 layers, 40 heads / 8 kv heads, SwiGLU 27648, vocab padded
#      to 100352), and the recipe's LR at the warmup's end and the last step;
#  (b) a scaled-down model with the 32B's shape rules (GQA 40:8, so k_proj / v_proj / k_norm
#      are n_kv_heads x head_dim = 1/5 of q's width; SwiGLU 27648/5120 = 5.4 x d) trained a
#      few steps, exported to HF: config.json and every tensor's shape as Olmo3ForCausalLM
#      has them, the float64 PyTorch reference (tests/ref/olmo_ref.py) on the export gives
#      our logits within 1e-5 relative (the bound of test_hf.sh), and import(export(x)) == x
#      bit for bit.
cd "$(dirname "$0")/.."
source tests/resume_lib.sh

out=$("$OLMO" info olmo3-32b)
echo "$out" | grep -q "32234279936 total" || fail "32B parameter count: $out"
out=$("$OLMO" info configs/olmo3-32b-stage1.yml --world 1024 --lr-at 2000,679000)
echo "$out" | grep -q "lr at step 2000: 0.0005999999" || fail "32B recipe: peak LR 6e-4 at the end of warmup: $out"
echo "$out" | grep -q "lr at step 679000: 5.99999999" || fail "32B recipe: alpha_f 0.1 at the last step: $out"
echo "info: 32,234,279,936 parameters; lr 6e-4 after 2000 warmup steps, 6e-5 at step 679000"

# d 320 = 40 heads x head_dim 8, 8 kv heads, mlp 5.4 x 320 = 1728, 4 layers (3 sliding, 1 full)
R=$TMP/run32 HF=$TMP/hf32 IMP=$TMP/imp32
SHAPE="model.d_model=320 model.n_heads=40 model.n_kv_heads=8 model.head_dim=8 model.mlp_hidden=1728 train.max_steps=3"
train $R $SHAPE || fail "train: $(tail -5 $R.log)"
"$OLMO" export-hf $R $HF 2>$TMP/exp.log || fail "export-hf: $(cat $TMP/exp.log)"
"$OLMO" import-hf $HF $IMP 2>$TMP/imp.log || fail "import-hf: $(cat $TMP/imp.log)"
TOKS=$($PY -c 'import random; random.seed(5); print(",".join(str(random.randrange(1000)) for _ in range(20)))')
"$OLMO" generate $HF --tokens $TOKS --max-new 0 --dump-logits $TMP/l32.st >/dev/null 2>$TMP/gen.log || fail "generate: $(cat $TMP/gen.log)"
$PY - $HF $TMP/l32.st $TOKS $R/model.safetensors $IMP/model.safetensors <<'PY' || fail "32B shape rules"
import json, sys
import numpy as np, torch
sys.path.insert(0, 'tests/ref')
import olmo_ref, safetensors_io as st
hf, logits, toks, orig, imp = sys.argv[1], sys.argv[2], [int(t) for t in sys.argv[3].split(',')], sys.argv[4], sys.argv[5]
c = json.load(open(f'{hf}/config.json'))
want = dict(model_type='olmo3', hidden_size=320, intermediate_size=1728, num_hidden_layers=4, num_attention_heads=40,
            num_key_value_heads=8, head_dim=8, layer_types=['sliding_attention'] * 3 + ['full_attention'])
for k, v in want.items():
    assert c.get(k) == v, f'config.json {k}: {c.get(k)!r}, want {v!r}'
P = st.read(f'{hf}/model.safetensors')
shapes = {'self_attn.q_proj.weight': (320, 320), 'self_attn.k_proj.weight': (64, 320), 'self_attn.v_proj.weight': (64, 320),
          'self_attn.o_proj.weight': (320, 320), 'self_attn.q_norm.weight': (320,), 'self_attn.k_norm.weight': (64,),
          'mlp.gate_proj.weight': (1728, 320), 'mlp.up_proj.weight': (1728, 320), 'mlp.down_proj.weight': (320, 1728),
          'post_attention_layernorm.weight': (320,), 'post_feedforward_layernorm.weight': (320,)}
for l in range(4):
    for k, s in shapes.items():
        t = P[f'model.layers.{l}.{k}']
        assert t.shape == s, (l, k, t.shape, s)
Pd = {k: torch.from_numpy(v).double() for k, v in P.items()}
cfg = olmo_ref.Config(n_heads=40, n_kv_heads=8, head_dim=8, rms_eps=c['rms_norm_eps'], rope_theta=c['rope_theta'],
                      n_layers=4, layer_types=c['layer_types'], sliding_window=c['sliding_window'])
ref = olmo_ref.forward(Pd, cfg, torch.tensor([toks]))[0].numpy()[:, :1000]
ours = st.read(logits)['logits'].astype(np.float64)
assert ours.shape == ref.shape, (ours.shape, ref.shape)
rel = (np.abs(ours - ref).max(axis=1) / np.abs(ref).max(axis=1)).max()
assert rel <= 1e-5, f'logits vs float64 reference: {rel}'
x, y = st.read(orig), st.read(imp)
assert sorted(x) == sorted(y)
for k in x:
    assert np.array_equal(x[k].view(np.uint32), y[k].view(np.uint32)), k
print(f'32B shape rules: config.json and {len(P)} tensor shapes as Olmo3ForCausalLM, logits vs float64 reference '
      f'{rel:.2g} (tolerance 1e-5), import(export(x)) bit-equal')
PY
echo "test_olmo3_32b: ok"
