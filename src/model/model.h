// model.h: the OLMo 3 model on the host: its parameters (the flat table) and the forward
// and backward of one micro-batch on the CPU backend, through the graph every backend
// shares (model/graph.h). Activations are allocated once for a maximum (B, T) and saved
// per layer only as backward needs them; attention keeps its lse, not (T, T).
#ifndef OLMO_MODEL_H
#define OLMO_MODEL_H

#include <stdint.h>

#include "kernels/ops.h"
#include "model/config.h"
#include "model/graph.h"
#include "model/params.h"
#include "model/stored.h"

typedef struct {
    ModelConfig cfg;
    ParamTable table;
    float *params;      // flat (table.total)
    ModelView w;        // views into params
    int max_B, max_T;
    Precision prec;   // the matmuls' precision (fp32 unless model_set_precision says bf16)
    OpsBackend *be;     // the CPU backend, at prec
    Graph graph;        // activations for (max_B, max_T); graph.be == NULL until allocated
    int forward_only;   // model_create_eval: one block's activations, reused by every layer
    StoredWeights *stored;   // model_create_eval with stored weights (params NULL), else NULL
} Model;

// Allocate parameters (uninitialized), activations for (max_B, max_T) and scratch.
void model_create(Model *m, const ModelConfig *cfg, int max_B, int max_T);
// As model_create, but activations and scratch are allocated by the first
// model_forward_backward: for a trainer whose step runs on another backend (CUDA), where
// this host copy serves checkpoints and evaluation and may never run a forward.
void model_create_lazy(Model *m, const ModelConfig *cfg, int max_B, int max_T);
void model_destroy(Model *m);
// `olmo eval` and `olmo generate`: a model that only runs forwards, so its activations are
// one block's buffers reused by every layer and two residual slots (GRAPH_FORWARD_ONLY; the
// forward is the same ops on the same values, bitwise what model_create's gives), whose weights are
// either the fp32 table (ten NULL: params allocated, the caller loads them) or kept as
// stored (ten: one StoredTensor per table row, model/stored.h; params NULL). Out of memory:
// an error naming what did not fit, exit 1.
void model_create_eval(Model *m, const ModelConfig *cfg, int max_B, int max_T, const StoredTensor *ten);
// The precision of this model's matmuls (linear layers and the LM head, forward and
// backward): PRECISION_BF16 rounds their operands to bf16 (kernels.h); everything else stays
// fp32. A model starts in fp32; the trainer sets the run's precision and evaluates in fp32.
void model_set_precision(Model *m, Precision p);
// The CPU op table the model runs on (created on first use, also for a model_create_lazy
// one: the host's optimizer runs on it, train/devstate.h).
OpsBackend *model_backend(Model *m);
// Bytes of activations + scratch for (B, T) (what model_create allocates besides params).
size_t model_activation_bytes(const ModelConfig *cfg, int B, int T, int lm_chunk);
// What model_create_eval allocates besides the weights: the forward-only activations.
size_t model_eval_activation_bytes(const ModelConfig *cfg, int B, int T);

// Forward one micro-batch: inputs, targets (B, T), targets < 0 masked. Returns the loss
// sums. With grads != NULL also the backward of loss = (ce + z_coef * z) * inv_count,
// writing (overwriting) every parameter's gradient into the flat buffer `grads`.
// logits_out (B, T, Vp) and tok_ce (B, T) are optional outputs.
LossSums model_forward_backward(Model *m, const int32_t *inputs, const int32_t *targets, int B, int T,
                                float z_coef, float inv_count, float *grads, float *logits_out,
                                float *tok_ce);
// The graph of m (its activations allocated on first use) and, in p, the parameters it
// reads with grads as the gradient to write: for a caller that runs graph.h's
// graph_forward_backward itself (the CPU backend's micro-batches, one call fewer per op).
Graph *model_graph(Model *m, float *grads, GraphParams *p);

#endif
