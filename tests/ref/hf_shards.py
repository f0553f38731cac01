"""hf_shards.py SRC_HF_DIR DST_DIR: the HF directory SRC (config.json + model.safetensors)
rewritten as AI2 publishes its checkpoints: config.json, two BF16 shards
model-0000{1,2}-of-00002.safetensors without an olmo_config, and
model.safetensors.index.json (tests/test_hf.sh, tests/test_load_memory.sh)."""
import json, os, shutil, sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import safetensors_io as st

src, sh = sys.argv[1:3]
x = st.read(f'{src}/model.safetensors')
os.makedirs(sh)
shutil.copy(f'{src}/config.json', sh)
names = list(x)
half = len(names) // 2
parts = {'model-00001-of-00002.safetensors': names[:half], 'model-00002-of-00002.safetensors': names[half:]}
for f, ns in parts.items():
    st.write(f'{sh}/{f}', {n: x[n] for n in ns}, dtypes={n: 'BF16' for n in ns})
json.dump({'metadata': {}, 'weight_map': {n: f for f, ns in parts.items() for n in ns}},
          open(f'{sh}/model.safetensors.index.json', 'w'))
