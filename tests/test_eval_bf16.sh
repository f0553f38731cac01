#!/usr/bin/env bash
# test_eval_bf16.sh: `olmo eval` and `olmo generate` keep a checkpoint's bf16 weights in bf16
# (model/stored.h: mapped from the safetensors file, upcast to fp32 a part at a time; issue
# 50 item 1 and 7), on an HF directory of BF16 shards (F32 norm weights, as some exports
# mix them; vocab 1000 stored trimmed, padded to 1024 in the model: 19.9M parameters,
# 80 MB in fp32, 40 MB as stored) whose fp32 weights exceed an OLMO_MEM_LIMIT that its bf16
# weights fit in:
#  (a) eval and generate under that limit run on the stored weights and say so; the same
#      commands with --weights fp32 are refused there (exit 2); without the limit generate's
#      default (--weights auto) loads fp32, eval's (stored) keeps bf16;
#  (b) their results equal the fp32 path (--weights fp32, no limit) on the same weights
#      bit for bit: eval's --json, generate's --dump-logits and its greedy tokens (upcasting
#      bf16 is exact, the fp32 maths is the same), also with tied embeddings (the head is
#      the embedding's stored data); --check-kv passes on the stored weights;
#  (c) an independent float64 forward (tests/ref/olmo_ref.py) on the bf16 values gives
#      generate's logits within 1e-5 of max |logit| per position (test_hf.sh's bound) and
#      eval's CE within 2e-5 x max |logit| (per-token CE moves by at most twice the largest
#      logit error: log-softmax is 1-Lipschitz in each of its two terms);
#  (d) a limit below the bf16 need: refused, exit 2, naming the bf16 figure;
#  (e) peak resident memory: the stored path's is below the fp32 path's by at least half of
#      what it saves (it holds 40 MB of mapped bf16 + a 9 MB part, not 80 MB of fp32).
cd "$(dirname "$0")/.."
source tests/resume_lib.sh
M=$TMP/m
$PY - $M $TMP <<'PY' || fail "make the model"
import json, os, struct, sys; sys.path.insert(0, 'tests/ref')
import numpy as np, torch, hf_random, olmo_ref, safetensors_io as st
out, tmp = sys.argv[1:3]; os.makedirs(out)
L, C, H, KV, D, M, V, VP = 8, 512, 8, 4, 64, 1024, 1000, 1024
types = (['sliding_attention'] * 3 + ['full_attention']) * (L // 4)
json.dump(dict(architectures=['Olmo3ForCausalLM'], model_type='olmo3', vocab_size=V, hidden_size=C, intermediate_size=M,
               num_hidden_layers=L, num_attention_heads=H, num_key_value_heads=KV, head_dim=D, rope_theta=500000,
               rms_norm_eps=1e-6, sliding_window=8, max_position_embeddings=64, tie_word_embeddings=False,
               layer_types=types), open(f'{out}/config.json', 'w'))
rng = np.random.default_rng(0)
bf = lambda a: st.bf16_bits_to_f32(st.f32_to_bf16_bits(a)).reshape(a.shape)   # the values the file holds
r = lambda *s: bf(rng.standard_normal(s, dtype=np.float32) * 0.05)
nrm = lambda k: (1 + 0.2 * rng.standard_normal(k)).astype(np.float32)         # F32 in the file
parts = hf_random.olmo3_parts(L, C, H, KV, D, M, V, r, nrm)
wm = {}
for i, d in enumerate(parts):
    f = f'model-0000{i + 1}-of-00002.safetensors'
    st.write(f'{out}/{f}', d, dtypes={n: 'BF16' for n in d if 'norm' not in n}); wm.update({n: f for n in d})
json.dump({'metadata': {}, 'weight_map': wm}, open(f'{out}/model.safetensors.index.json', 'w'))
# the eval set: 4 documents of 20-40 tokens, EOS 999; the generate prompt: 24 tokens
docs = [[int(x) for x in rng.integers(0, 999, n)] + [999] for n in (20, 33, 27, 40)]
open(f'{tmp}/set.npy', 'wb').write(struct.pack('<%dI' % sum(map(len, docs)), *sum(docs, [])))
prompt = [int(x) for x in rng.integers(0, 999, 24)]
open(f'{tmp}/prompt', 'w').write(','.join(map(str, prompt)))
# float64 reference on the same values (vocab tensors zero-padded to the model's 1024 rows)
P = {}
for d in parts:
    for n, a in d.items():
        a = torch.from_numpy(a).double()
        P[n] = torch.cat([a, a.new_zeros(VP - V, C)]) if a.shape[0] == V and a.ndim == 2 else a
cfg = olmo_ref.Config(n_heads=H, n_kv_heads=KV, head_dim=D, rms_eps=1e-6, rope_theta=500000, n_layers=L,
                      layer_types=types, sliding_window=8)
np.save(f'{tmp}/ref_logits.npy', olmo_ref.forward(P, cfg, torch.tensor([prompt]))[0].numpy()[:, :V])
ce, n, top = 0.0, 0, 0.0
for doc in docs:   # eval scores each document's tokens 1.. (the EOS included) from the tokens before
    lg = olmo_ref.forward(P, cfg, torch.tensor([doc[:-1]]))[0]
    ce += float((torch.logsumexp(lg, -1) - lg.gather(-1, torch.tensor(doc[1:]).unsqueeze(-1)).squeeze(-1)).sum())
    n += len(doc) - 1; top = max(top, float(lg.abs().max()))
json.dump({'ce': ce / n, 'max_logit': top}, open(f'{tmp}/ref_ce.json', 'w'))
PY
set +e
EV=(eval $M --set s=$TMP/set.npy eval.eos_id=999 --json)
GEN=(generate $M --tokens $(cat $TMP/prompt) --max-new 6 --greedy --eos -1)
params=$("$OLMO" info $M | sed -n 's/^parameters: \([0-9]*\) total.*/\1/p')
[ "$params" = 19937792 ] || fail "olmo info: $params parameters, want 8 x 2,361,088 + 2 x 1024 x 512 + 512"
fp32_bytes=$((params * 4))
# the stored path's need, from eval's memory line, must be under the fp32 weights alone
"$OLMO" "${EV[@]}" >$TMP/ev.json 2>$TMP/ev.err || fail "eval: $(cat $TMP/ev.err)"
need=$(sed -n 's/^eval: memory [^,]*, \([0-9]*\) bytes.*/\1/p' $TMP/ev.err)
[ -n "$need" ] && [ "$need" -lt "$fp32_bytes" ] || fail "eval's need '$need' is not under the fp32 weights ($fp32_bytes): $(cat $TMP/ev.err)"
grep -q "^eval: weights kept as stored (58 of 91 tensors bf16): 38.01 MiB mapped from the file" $TMP/ev.err \
  || fail "eval does not say it keeps the bf16 weights: $(cat $TMP/ev.err)"

# (a) under a limit the fp32 weights exceed: eval and generate run as stored; --weights fp32 refused
LIM=$((need + 4 * 1024 * 1024))   # + the generate KV cache and logits, a few hundred KiB here
OLMO_MEM_LIMIT=$LIM "$OLMO" "${EV[@]}" >$TMP/ev1.json 2>$TMP/ev1.err || fail "eval under the limit: $(cat $TMP/ev1.err)"
OLMO_MEM_LIMIT=$LIM "$OLMO" "${GEN[@]}" --dump-logits $TMP/l1.st >$TMP/g1 2>$TMP/g1.err || fail "generate under the limit: $(cat $TMP/g1.err)"
grep -q "^generate: weights kept as stored" $TMP/g1.err || fail "generate does not say it keeps bf16: $(cat $TMP/g1.err)"
for c in "${EV[*]}" "${GEN[*]}"; do
  OLMO_MEM_LIMIT=$LIM "$OLMO" $c --weights fp32 >/dev/null 2>$TMP/err; rc=$?
  [ $rc = 2 ] && grep -qF "of fp32 weights" $TMP/err || fail "${c%% *} --weights fp32 under the limit: exit $rc: $(cat $TMP/err)"
done
echo "under OLMO_MEM_LIMIT=$LIM (fp32 weights alone: $fp32_bytes bytes): eval and generate run as stored, --weights fp32 refused"

# (b) bitwise the fp32 path on the same weights
"$OLMO" "${EV[@]}" --weights fp32 >$TMP/ev2.json 2>$TMP/ev2.err || fail "eval fp32: $(cat $TMP/ev2.err)"
grep -q "^eval: weights fp32, .*(--weights fp32)" $TMP/ev2.err || fail "eval fp32 line: $(cat $TMP/ev2.err)"
"$OLMO" "${GEN[@]}" --weights fp32 --dump-logits $TMP/l2.st >$TMP/g2 2>$TMP/g2.err || fail "generate fp32: $(cat $TMP/g2.err)"
strip() { $PY -c 'import json,sys; d=json.load(open(sys.argv[1])); d.pop("eval/seconds", None); print(json.dumps(d, sort_keys=True))' $1; }
[ "$(strip $TMP/ev1.json)" = "$(strip $TMP/ev2.json)" ] || fail "eval stored != fp32: $(strip $TMP/ev1.json) vs $(strip $TMP/ev2.json)"
cmp -s $TMP/l1.st $TMP/l2.st || fail "generate's prompt logits: stored != fp32"
cmp -s $TMP/g1 $TMP/g2 || fail "generate's tokens: stored $(cat $TMP/g1) != fp32 $(cat $TMP/g2)"
"$OLMO" "${GEN[@]}" --weights stored --check-kv >/dev/null 2>$TMP/err || fail "generate --check-kv on stored weights: $(cat $TMP/err)"
# generate's default (--weights auto) loads fp32 where it fits: a token upcasts every weight again as stored
"$OLMO" "${GEN[@]}" >$TMP/g3 2>$TMP/err && grep -qF "fp32, 76.06 MiB (--weights auto: the bf16 weights in fp32 fit" $TMP/err \
  && cmp -s $TMP/g1 $TMP/g3 || fail "generate --weights auto without a limit: $(cat $TMP/err)"
# tied embeddings (no lm_head tensor: the head reads the embedding's stored data, its bytes
# counted once: 37.03 MiB, the untied 38.01 less the 1000 x 512 bf16 head)
mkdir $TMP/tied && cp $M/model-00001-of-00002.safetensors $TMP/tied/
$PY - $M $TMP/tied <<'PY' || fail "make the tied model"
import json, sys; sys.path.insert(0, 'tests/ref')
import safetensors_io as st
m, t = sys.argv[1:3]
c = json.load(open(f'{m}/config.json')); c['tie_word_embeddings'] = True; json.dump(c, open(f'{t}/config.json', 'w'))
f = f'{m}/model-00002-of-00002.safetensors'
d, hdr = st.read(f, raw_bf16=True), st.read_header(f)[0]
del d['lm_head.weight']
st.write(f'{t}/model-00002-of-00002.safetensors', d, dtypes={n: hdr[n]['dtype'] for n in d})
ix = json.load(open(f'{m}/model.safetensors.index.json')); del ix['weight_map']['lm_head.weight']
json.dump(ix, open(f'{t}/model.safetensors.index.json', 'w'))
PY
for w in stored fp32; do
  "$OLMO" generate $TMP/tied --tokens $(cat $TMP/prompt) --max-new 0 --weights $w --dump-logits $TMP/t-$w.st >/dev/null \
    2>$TMP/err-$w || fail "generate tied --weights $w: $(cat $TMP/err-$w)"
done
grep -qF "(58 of 91 tensors bf16): 37.03 MiB mapped" $TMP/err-stored || fail "tied: $(cat $TMP/err-stored)"
cmp -s $TMP/t-stored.st $TMP/t-fp32.st || fail "tied embeddings: stored logits != fp32"
echo "bitwise: eval's metrics, generate's logits and tokens equal the fp32 path's (also with tied embeddings); --check-kv passes as stored; generate's auto: fp32 where it fits"

# (c) the float64 reference
$PY - $TMP <<'PY' || fail "float64 reference"
import json, sys; sys.path.insert(0, 'tests/ref')
import numpy as np, safetensors_io as st
t = sys.argv[1]
ref, ours = np.load(f'{t}/ref_logits.npy'), st.read(f'{t}/l1.st')['logits'].astype(np.float64)
rel = (np.abs(ours - ref).max(axis=1) / np.abs(ref).max(axis=1)).max()
r, ce = json.load(open(f'{t}/ref_ce.json')), json.load(open(f'{t}/ev1.json'))['eval/s/ce']
tol = 2e-5 * r['max_logit']
print(f'generate logits: max rel err {rel:.3g} (tolerance 1e-5); eval ce {ce:.9f} vs float64 {r["ce"]:.9f}, '
      f'|diff| {abs(ce - r["ce"]):.3g} (tolerance {tol:.3g})')
assert rel <= 1e-5 and abs(ce - r['ce']) <= tol
PY

# (d) below the bf16 need: refused, naming the bf16 weights
OLMO_MEM_LIMIT=$((need - 1)) "$OLMO" "${EV[@]}" >/dev/null 2>$TMP/err; rc=$?
[ $rc = 2 ] && grep -qF "eval needs about" $TMP/err && grep -qF "of bf16 (as stored" $TMP/err || fail "eval below the bf16 need: exit $rc: $(cat $TMP/err)"
OLMO_MEM_LIMIT=1000000 "$OLMO" "${GEN[@]}" >/dev/null 2>$TMP/err; rc=$?
[ $rc = 2 ] && grep -qF "The bf16 weights alone exceed" $TMP/err || fail "generate below the bf16 weights: exit $rc: $(cat $TMP/err)"
echo "below the bf16 need: eval and generate refused (exit 2), naming the bf16 weights"

# (e) peak resident memory
rss() { /usr/bin/time -f %M -o $TMP/rss "$@" >/dev/null 2>$TMP/err || fail "$*: $(cat $TMP/err)"; cat $TMP/rss; }
# The fp32 path holds the fp32 weights; the stored path the mapped file (39,856,128 bytes:
# the bf16 tensors and the F32 norms) + the scratch of its largest part (a block,
# 2,361,088 + 16 floats): they differ by 30,450,624 bytes, 29,736 KiB. Peak RSS (ru_maxrss)
# of this binary also holds short-lived peaks besides the weights (VmRSS sampled every 20
# ms: the two differ by about 32 MB while they run, their ru_maxrss by 21-22 MB), so half
# of the saving is required; a stored path that copied its weights to fp32 saves nothing.
s=$(rss "$OLMO" "${EV[@]}") f=$(rss "$OLMO" "${EV[@]}" --weights fp32)
want=$(((fp32_bytes - 39856128 - 4 * 2361104) / 1024))
[ $((f - s)) -ge $((want / 2)) ] || fail "peak RSS: stored $s KiB, fp32 $f KiB: not half of $want KiB apart"
echo "peak RSS of eval: as stored $s KiB, --weights fp32 $f KiB: $((f - s)) KiB apart (expected $want KiB)"
echo "test_eval_bf16: all checks passed"
