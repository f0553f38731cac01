// model.c: the host model (model.h): the flat parameter table and its views, and the
// forward/backward of a micro-batch on the CPU backend through model/graph.c, the graph
// every backend shares, at the model's own matmul precision (model_set_precision).
#include "model/model.h"

#include <stdlib.h>
#include <string.h>

#include "util/common.h"


size_t model_activation_bytes(const ModelConfig *cfg, int B, int T, int lm_chunk) {
    if (lm_chunk <= 0) lm_chunk = CPU_LM_CHUNK;
    return graph_plan_bytes(cfg, B, T, DT_F32, 0) + sizeof(float) * (size_t)lm_chunk * cfg->padded_vocab +
           sizeof(int32_t) * 2 * (size_t)B * T;
}

size_t model_eval_activation_bytes(const ModelConfig *cfg, int B, int T) {
    return graph_plan_bytes(cfg, B, T, DT_F32, GRAPH_FORWARD_ONLY);
}

void model_create_lazy(Model *m, const ModelConfig *cfg, int max_B, int max_T) {
    memset(m, 0, sizeof *m);
    m->cfg = *cfg;
    model_config_derive(&m->cfg);
    param_table_build(&m->table, &m->cfg);
    m->params = xmalloc_aligned(sizeof(float) * m->table.total);
    model_view(&m->w, &m->table, &m->cfg, m->params);
    m->max_B = max_B;
    m->max_T = max_T;
}

OpsBackend *model_backend(Model *m) {
    if (!m->be) m->be = ops_cpu_create(m->prec);
    return m->be;
}

static void alloc_activations(Model *m) {
    if (graph_init(&m->graph, model_backend(m), &m->cfg, &m->table, m->max_B, m->max_T,
                   m->forward_only ? GRAPH_FORWARD_ONLY : 0))
        die("model: out of memory for the activations of (B=%d, T=%d)", m->max_B, m->max_T);
}

void model_set_precision(Model *m, Precision p) {
    m->prec = p;
    if (m->be) m->be->prec = p;
}

void model_create(Model *m, const ModelConfig *cfg, int max_B, int max_T) {
    model_create_lazy(m, cfg, max_B, max_T);
    alloc_activations(m);
}

void model_create_eval(Model *m, const ModelConfig *cfg, int max_B, int max_T, const StoredTensor *ten) {
    memset(m, 0, sizeof *m);
    m->cfg = *cfg;
    model_config_derive(&m->cfg);
    param_table_build(&m->table, &m->cfg);
    m->max_B = max_B;
    m->max_T = max_T;
    m->forward_only = 1;
    if (ten) {
        m->stored = stored_create(&m->cfg, &m->table, ten);
        if (!m->stored)
            die("model: out of memory for the fp32 scratch of one part (%zu floats)", stored_scratch_floats(&m->cfg));
    } else {
        m->params = xmalloc_aligned(sizeof(float) * m->table.total);
        model_view(&m->w, &m->table, &m->cfg, m->params);
    }
    alloc_activations(m);
}

void model_destroy(Model *m) {
    stored_free(m->stored);
    m->stored = NULL;
    graph_free(&m->graph);
    ops_destroy(m->be);
    m->be = NULL;
    free(m->params);
    m->params = NULL;
    param_table_free(&m->table);
}

Graph *model_graph(Model *m, float *grads, GraphParams *p) {
    if (!m->graph.be) alloc_activations(m);   // model_create_lazy: on first use
    // On the CPU the compute weights are the fp32 parameters themselves, norms included.
    *p = (GraphParams){m->params, &m->w, grads, 0, NULL, NULL, NULL, NULL};
    if (m->forward_only && grads) die("model: a forward-only model (olmo eval, generate) has no backward");
    if (m->stored) stored_bind(m->stored, p);   // the hook upcasts each part as the graph reaches it
    return &m->graph;
}

LossSums model_forward_backward(Model *m, const int32_t *inputs, const int32_t *targets, int B, int T,
                                float z_coef, float inv_count, float *grads, float *logits_out,
                                float *tok_ce) {
    if (B > m->max_B || T > m->max_T) die("model_forward_backward: (B=%d, T=%d) exceeds the allocated (%d, %d)", B, T, m->max_B, m->max_T);
    GraphParams p;
    Graph *g = model_graph(m, grads, &p);
    return graph_forward_backward(g, &p, inputs, targets, B, T, z_coef, inv_count, logits_out, tok_ce);
}
