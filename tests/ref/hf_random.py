"""The tensors of a random OLMo 3 model in Hugging Face names, split over two shards the
way the tests that need a model of some size (tests/test_load_memory.sh,
tests/test_eval_bf16.sh) write them: shard 1 the embedding and the first half of the
blocks, shard 2 the rest, the final norm and the LM head.

mat(*shape) makes a weight matrix, norm(n) a norm weight vector (the caller's values and
dtype); vocab rows V as given (the real vocabulary for a trimmed export).
"""


def olmo3_parts(L, C, H, KV, D, M, V, mat, norm):
    parts = [{'model.embed_tokens.weight': mat(V, C)}, {'model.norm.weight': norm(C), 'lm_head.weight': mat(V, C)}]
    for l in range(L):
        p, d = f'model.layers.{l}.', parts[l * 2 // L]
        for n, s in [('self_attn.q_proj', (H * D, C)), ('self_attn.k_proj', (KV * D, C)), ('self_attn.v_proj', (KV * D, C)),
                     ('self_attn.o_proj', (C, H * D)), ('mlp.gate_proj', (M, C)), ('mlp.up_proj', (M, C)),
                     ('mlp.down_proj', (C, M))]:
            d[p + n + '.weight'] = mat(*s)
        for n, k in [('self_attn.q_norm', H * D), ('self_attn.k_norm', KV * D), ('post_attention_layernorm', C),
                     ('post_feedforward_layernorm', C)]:
            d[p + n + '.weight'] = norm(k)
    return parts
